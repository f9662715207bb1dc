// The first line of a small text file: /etc/nvme/hostnqn and hostid, sysfs attributes.
#pragma once

#include <optional>
#include <string>

namespace rdmablk::initiator {

// Without the line end and trailing blanks (sysfs pads some attributes with spaces); nullopt when the
// file cannot be read or the line is empty.
std::optional<std::string> read_first_line(const std::string& path);

}  // namespace rdmablk::initiator

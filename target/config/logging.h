// Log levels as the config names them (its log_level key, --log-level) and the logger the daemon installs:
// spdlog to stderr (journald adds timestamps under systemd). Here, beside the config reader, because the
// config library parses the level and must not depend on the daemon library.
#pragma once

#include <spdlog/common.h>

#include <string_view>

#include "protocol/result.h"

namespace rdmablk::target {

// "trace" | "debug" | "info" | "warn" | "error" | "critical" | "off"
Result<spdlog::level::level_enum> parse_log_level(std::string_view name);

// Installs the default logger. `timestamps` is off under systemd, whose journal stamps every line.
void setup_logging(spdlog::level::level_enum level, bool timestamps);

}  // namespace rdmablk::target

// Reading a fio job file: sections of (key, value) lines, with ${VAR} expansion and `include FILE`.
// What the keys mean is the option table's business (job_options.h). Internal to the job file parser.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "protocol/result.h"

namespace rdmablk::initiator::bench::detail {

struct RawOption {
  std::string key;    // lower case, as written
  std::string value;  // after ${VAR} expansion
  bool bare = false;  // no '='
  std::string where;  // file:line
};

struct Section {
  std::string name;
  bool global = false;
  std::string where;
  std::vector<RawOption> options;
};

// The sections of `text` in file order; `file` names it in messages and is where includes are looked
// up relative to.
Result<std::vector<Section>> read_sections(std::string_view text, const std::string& file);

Result<std::string> read_whole_file(const std::string& path);

}  // namespace rdmablk::initiator::bench::detail

// The option table of fio job files: every key rdmablk knows, with what it does to a job draft (implemented),
// or why it does nothing (noted) or is refused (unsupported). Internal to the job file parser.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "initiator/bench/job_file.h"
#include "protocol/result.h"

namespace rdmablk::initiator::bench::detail {

// A JobSpec plus what fio resolves after all of a job's options are in (which of bs, bsrange and bssplit
// wins does not depend on their order, verify_pattern implies verify=pattern unless verify is set, ...).
struct Draft {
  JobSpec spec;
  std::string section;   // the section name (fio names log files and checks wait_for by it)
  unsigned kb_base = 1024;
  std::array<std::optional<uint64_t>, kDdirs> bs{};
  std::array<std::optional<std::pair<uint64_t, uint64_t>>, kDdirs> bsrange{};
  std::array<std::vector<BlockSizeSpec::Split>, kDdirs> bssplit{};
  std::array<uint64_t, kDdirs> ba{};
  bool verify_set = false;
  bool randseed_set = false;
  bool end_fsync = false;
  bool fsync_on_close = false;
  std::chrono::nanoseconds startdelay_high{0};  // startdelay=LOW-HIGH: each copy picks a value in [LOW, HIGH]
  std::optional<std::string> lat_log, bw_log, iops_log;  // "" = named after the job
};

using Handler = Result<void> (*)(Draft&, std::string_view);

enum class Kind : uint8_t { implemented, noted, unsupported };

struct OptionDef {
  std::string_view name;
  std::string_view alias;
  Kind kind;
  bool bare_ok;             // the key alone is valid (fio's flags; "1" or, for logs, the job name)
  Handler handle;           // implemented
  std::string_view reason;  // noted / unsupported
};

// By name or alias (lower case); nullptr for a key fio does not have or rdmablk does not know.
const OptionDef* find_option(std::string_view key);
// The options fio has that rdmablk accepts without effect or refuses (job_options_ignored.cpp).
std::span<const OptionDef> ignored_options();

// fio applies a few options before the others of a section whatever their order (parse.c sort_options,
// by option priority): kb_base must be known before any size is read.
int option_priority(std::string_view canonical);

// tcp:// and rdma:// name a namespace (a malformed one is an error); anything else is a local path
// or another program's URI.
bool is_namespace_uri(std::string_view v);

}  // namespace rdmablk::initiator::bench::detail

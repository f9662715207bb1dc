// fio job files for `rdmablk bench`: an ini file of [global] and job sections, with fio's key names and
// value syntax (sizes with k/m/g suffixes in base 1024, times in seconds unless a unit is given).
//
// Supported keys: name, rw (read|write|randread|randwrite|rw|readwrite|randrw), rwmixread, rwmixwrite,
// bs/blocksize, iodepth, numjobs, size, offset, offset_increment, runtime, time_based, ramp_time,
// namespace (NSID), verify (crc32c|0|none), filename (tcp://ADDR:PORT/NQN[/NSID]); accepted and ignored
// for compatibility with existing job files: ioengine, direct, thread. Anything else is an error naming
// the file, the line and the key.
//
// Like fio, a [global] section applies to the job sections after it; numjobs=N expands a job into N
// copies with the same name (copy i starts at offset + i * offset_increment).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "initiator/namespace_uri.h"
#include "protocol/result.h"

namespace rdmablk::initiator::bench {

enum class RwMode : uint8_t { read, write, randread, randwrite, rw, randrw };

constexpr bool is_random(RwMode m) noexcept { return m == RwMode::randread || m == RwMode::randwrite || m == RwMode::randrw; }
constexpr bool does_reads(RwMode m) noexcept { return m != RwMode::write && m != RwMode::randwrite; }
constexpr bool does_writes(RwMode m) noexcept { return m != RwMode::read && m != RwMode::randread; }
const char* rw_name(RwMode m) noexcept;

using Options = std::vector<std::pair<std::string, std::string>>;  // key, value as written (in order)

struct JobSpec {
  std::string name;
  RwMode rw = RwMode::read;
  unsigned rwmixread = 50;           // percent of reads for rw/randrw
  uint64_t bs = 4096;                // bytes per I/O
  unsigned iodepth = 1;
  unsigned numjobs = 1;
  uint64_t size = 0;                 // bytes of the region; 0 = up to the end of the namespace
  uint64_t offset = 0;               // start of the region, bytes
  uint64_t offset_increment = 0;
  std::chrono::nanoseconds runtime{0};    // 0 = no limit
  bool time_based = false;           // run for `runtime`, wrapping around the region
  std::chrono::nanoseconds ramp_time{0};  // I/O before the statistics start
  uint32_t nsid = 0;                 // 0 = the filename's NSID, else 1
  bool verify = false;               // verify=crc32c
  std::optional<NamespaceUri> filename;
  unsigned clone = 0;                // which of the numjobs copies
  Options options;                   // the job section's own options (fio's "job options")
  std::string where;                 // "file:line" of the section header
};

struct JobFile {
  Options global_options;  // every [global] key (last value wins), fio's "global options"
  std::vector<JobSpec> jobs;  // numjobs already expanded
};

// "4096", "4k", "4K", "4KiB", "1m", "2g" -> bytes (base 1024 as fio's default kb_base).
Result<uint64_t> parse_size(std::string_view s);
// "30" (seconds), "500ms", "10s", "2m", "1h", "250us" -> duration.
Result<std::chrono::nanoseconds> parse_duration(std::string_view s);

Result<JobFile> parse_job_text(std::string_view text, std::string_view file_name);
Result<JobFile> parse_job_file(const std::string& path);

}  // namespace rdmablk::initiator::bench

// fio job files for `rdmablk bench`: an ini file of [global] and job sections, with fio's key names,
// value syntax and meaning (sizes with k/m/g suffixes in base 1024, times in seconds unless a unit is
// given, per-direction values as "read,write,trim", ${ENV} expansion).
//
// Three kinds of keys:
//   - implemented with fio's meaning (the fields of JobSpec below; the list is in
//     docs/benchmarking.md#options-rdmablk-bench-implements-with-fios-meaning);
//   - accepted and ignored because they only make sense for local files or fio's own engines
//     (directory, ioengine, direct, invalidate, fadvise_hint, thread, create_serialize, io_submit_mode,
//     random_generator, ...; and filename when it is not an rdmablk URI): each is reported once in
//     JobFile::notes ("FILE:LINE: option 'directory' has no effect on NVMe-oF namespaces");
//   - anything else is an error naming the file, the line and the key.
//
// Like fio, a [global] section applies to the job sections after it; numjobs=N expands a job into N
// copies with the same name (copy i starts at offset + i * offset_increment). Jobs form groups: a job
// with stonewall (wait_for_previous) or new_group starts a new group; groups run one after the other,
// the jobs of one group in parallel; wait_for=NAME makes a job start when the job NAME has finished.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "initiator/host/namespace_uri.h"
#include "protocol/result.h"

namespace rdmablk::initiator::bench {

enum class RwMode : uint8_t { read, write, trim, randread, randwrite, randtrim, rw, randrw };

// fio's data directions, also the index of per-direction arrays ("bs=4k,8k,16k" = read, write, trim).
enum Ddir : uint8_t { kRead = 0, kWrite = 1, kTrim = 2 };
inline constexpr std::size_t kDdirs = 3;
const char* ddir_name(Ddir d) noexcept;  // "read", "write", "trim"

constexpr bool is_random(RwMode m) noexcept {
  return m == RwMode::randread || m == RwMode::randwrite || m == RwMode::randtrim || m == RwMode::randrw;
}
constexpr bool does_reads(RwMode m) noexcept { return m == RwMode::read || m == RwMode::randread || m == RwMode::rw || m == RwMode::randrw; }
constexpr bool does_writes(RwMode m) noexcept { return m == RwMode::write || m == RwMode::randwrite || m == RwMode::rw || m == RwMode::randrw; }
constexpr bool does_trims(RwMode m) noexcept { return m == RwMode::trim || m == RwMode::randtrim; }
const char* rw_name(RwMode m) noexcept;

using Options = std::vector<std::pair<std::string, std::string>>;  // key, value as written (in order)

// One direction's block sizes: bs / bsrange (min..max, chosen uniformly in blockalign steps) or bssplit
// (weighted list; a weight of 0 entries share what the others leave, as fio).
struct BlockSizeSpec {
  uint64_t min = 4096;
  uint64_t max = 4096;
  struct Split {
    uint64_t bs = 0;
    unsigned percent = 0;
  };
  std::vector<Split> split;  // non-empty = bssplit wins over min/max
  uint64_t align = 0;        // blockalign: offsets are multiples of this; 0 = the smallest block size
};

enum class Distribution : uint8_t { random, zipf, pareto, normal, zoned, zoned_abs };
struct DistributionSpec {
  Distribution kind = Distribution::random;
  double param = 0;  // zipf theta, pareto h, normal sigma (percent of the region)
  struct Zone {
    double access_percent = 0;  // share of I/Os
    double size = 0;            // zoned: percent of the region; zoned_abs: bytes
  };
  std::vector<Zone> zones;  // zoned / zoned_abs, in order from the start of the region
};

enum class VerifyKind : uint8_t { none, crc32c, md5, sha1, sha256, pattern, meta };
enum class RateProcess : uint8_t { linear, poisson };
enum class UnifiedRw : uint8_t { none, mixed, both };

struct JobSpec {
  std::string name;
  std::string description;
  RwMode rw = RwMode::read;
  // rw=read:8k / rw=read:-8k (sequential: bytes added to the next offset after each I/O, negative goes
  // backwards and wraps at the start); rw=randread:8 (random: a new random offset every 8 I/Os, the ones
  // between are sequential). fio's rw_sequencer=identical is not supported.
  int64_t seq_skip = 0;
  unsigned random_nr = 1;
  unsigned rwmixread = 50;           // percent of reads for rw/randrw
  std::array<BlockSizeSpec, kDdirs> bs{};
  unsigned iodepth = 1;
  unsigned iodepth_batch_submit = 1;          // iodepth_batch / iodepth_batch_submit: submit at least this many at once (the parser makes 0 or > iodepth = iodepth, as fio)
  unsigned iodepth_batch_complete_min = 1;    // reap at least this many before submitting again
  unsigned iodepth_low = 0;                   // refill only when in flight drops to this (0 = iodepth, fio's default)
  unsigned numjobs = 1;
  uint64_t size = 0;                 // bytes of the region; 0 = up to the end of the namespace
  unsigned size_percent = 0;         // size=N%: N percent of the namespace (after offset), overrides size
  bool fill_device = false;          // region = the whole namespace from offset
  uint64_t offset = 0;               // start of the region, bytes
  unsigned offset_percent = 0;       // offset=N%
  uint64_t offset_increment = 0;
  uint64_t io_size = 0;              // io_size / io_limit: bytes to transfer per loop, 0 = size
  uint64_t number_ios = 0;           // stop after this many I/Os (per loop), 0 = no limit
  unsigned loops = 1;                // repeat the job this many times
  std::chrono::nanoseconds runtime{0};    // runtime / timeout; 0 = no limit
  bool time_based = false;           // run for `runtime`, wrapping around the region
  std::chrono::nanoseconds ramp_time{0};  // I/O before the statistics start
  std::chrono::nanoseconds startdelay{0};
  // hipri: poll the I/O queue for completions without sleeping while the job runs (fio's polled I/O;
  // what spdk_nvme_perf always does). Off: busy-poll 50 us after each progress, then sleep.
  bool hipri = false;
  // Random offsets.
  DistributionSpec distribution{};
  bool norandommap = false;          // random offsets may repeat within a pass
  bool randrepeat = true;            // seed from randseed (repeatable); false = a random seed per run
  uint64_t randseed = 0x89;          // fio's default seed
  // Rate limits per direction (0 = none): bytes/s and I/Os per second.
  std::array<uint64_t, kDdirs> rate{};
  std::array<uint64_t, kDdirs> rate_iops{};
  RateProcess rate_process = RateProcess::linear;
  // Think time after I/O: wait `thinktime` (spinning `thinktime_spin` of it) after every
  // `thinktime_blocks` I/Os (default 1).
  std::chrono::nanoseconds thinktime{0};
  std::chrono::nanoseconds thinktime_spin{0};
  unsigned thinktime_blocks = 1;
  // Flow control between jobs (fio's flow, flow_id, flow_sleep): jobs sharing flow_id keep their I/O
  // counts in the ratio of their flow weights; 0 = off.
  int flow = 0;
  unsigned flow_id = 0;
  std::chrono::nanoseconds flow_sleep{0};
  // latency_target: find the highest queue depth whose latency_percentile (default 100) completion
  // latency over latency_window stays under latency_target, then run at that depth.
  std::chrono::nanoseconds latency_target{0};
  std::chrono::nanoseconds latency_window{0};
  double latency_percentile = 100.0;
  // Verification.
  VerifyKind verify = VerifyKind::none;
  bool do_verify = true;             // write jobs read back what they wrote (false: only write the pattern)
  bool verify_only = false;          // do not write; read and check what an earlier run wrote
  unsigned verify_backlog = 0;       // verify after every N blocks written instead of at the end
  std::vector<uint8_t> verify_pattern;  // verify_pattern=0xaa555aa5 / "text" / 123 (repeated)
  uint64_t verify_interval = 0;      // verify in chunks of this many bytes (0 = the block size)
  bool verify_fatal = false;         // stop at the first mismatch (we always stop; kept for output)
  // Flush: a Flush command after every `fsync` writes (fsync and fdatasync are the same here), and
  // once at the end with end_fsync.
  unsigned fsync = 0;
  bool end_fsync = false;
  // Write buffer contents.
  bool zero_buffers = false;
  bool refill_buffers = false;       // new random data for every write
  bool scramble_buffers = true;      // fio's default: cheap per-write scrambling
  unsigned buffer_compress_percentage = 0;
  uint64_t buffer_compress_chunk = 512;
  std::vector<uint8_t> buffer_pattern;
  // Placement and reporting.
  std::vector<unsigned> cpus_allowed;  // empty = any; cpus_allowed_policy=split gives copy i cpus_allowed[i % n]
  bool cpus_allowed_split = false;
  bool group_reporting = false;
  std::vector<double> percentile_list;  // empty = fio's default list
  bool lat_percentiles = false;      // percentiles of total latency (= completion latency here)
  bool clat_percentiles = true;
  UnifiedRw unified_rw_reporting = UnifiedRw::none;
  // Logs in fio's format (FILE_TYPE.LOG_INDEX.log, see log.h); empty = off.
  std::string write_lat_log, write_bw_log, write_iops_log;
  std::chrono::milliseconds log_avg_msec{0};
  bool log_offset = false;
  bool per_job_logs = true;
  // Groups: stonewall / wait_for_previous and new_group start a new group; wait_for names a job.
  bool stonewall = false;
  bool new_group = false;
  std::string wait_for;
  unsigned groupid = 0;              // set by the parser: 0, 1, ... in file order
  // Target.
  uint32_t nsid = 0;                 // `namespace`; 0 = the filename's NSID, else 1
  std::optional<NamespaceUri> filename;
  unsigned clone = 0;                // which of the numjobs copies
  Options options;                   // the job section's own options (fio's "job options")
  std::string where;                 // "file:line" of the section header

  uint64_t max_bs() const noexcept;  // the largest block size of any direction this job uses
  uint64_t min_bs() const noexcept;  // the smallest
};

struct JobFile {
  Options global_options;  // every [global] key (last value wins), fio's "global options"
  std::vector<JobSpec> jobs;  // numjobs already expanded, groupid set
  std::vector<std::string> notes;  // options accepted without effect, one line each (printed once)
};

// "4096", "4k", "4K", "4KiB", "1m", "2g" -> bytes (base 1024 as fio's default kb_base).
Result<uint64_t> parse_size(std::string_view s);
// "30" (seconds), "500ms", "10s", "2m", "1h", "250us" -> duration.
Result<std::chrono::nanoseconds> parse_duration(std::string_view s);

Result<JobFile> parse_job_text(std::string_view text, std::string_view file_name);
Result<JobFile> parse_job_file(const std::string& path);

}  // namespace rdmablk::initiator::bench

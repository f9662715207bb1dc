// The value syntax of fio job files (fio's parse.c and friends): numbers, sizes with k/m/g units, times,
// booleans, per-direction lists, block size splits, zones, patterns and CPU lists. Internal to the job
// file parser (job_file.cpp, job_options.cpp, job_builder.cpp); messages say what was expected, the
// caller adds the file, line and key.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "initiator/bench/job_file.h"
#include "protocol/result.h"

namespace rdmablk::initiator::bench::detail {

inline constexpr uint64_t kNsPerUs = 1000;
inline constexpr uint64_t kNsPerSec = 1000000000;

std::string_view trim(std::string_view s);
std::string lower(std::string_view s);
std::vector<std::string_view> split(std::string_view s, char sep);

// A whole number (decimal, or hexadecimal after 0x as fio's str_to_decimal) in [min, max].
Result<uint64_t> parse_uint(std::string_view s, uint64_t min, uint64_t max);
Result<double> parse_double(std::string_view s);
// fio's booleans are integers (non-zero = true); a bare key means 1. The words are ours.
Result<bool> parse_bool(std::string_view s);

// A size: "4096", "4k", "0x1000", "1g" in units of kb_base; "N%" when `percent` is given (then
// *percent = true and the value is N, 1..100).
Result<uint64_t> size_value(std::string_view s, unsigned kb_base, bool* percent = nullptr);
// A size that may be negative (rw=read:-8k).
Result<int64_t> signed_size_value(std::string_view s, unsigned kb_base);
// A time: a number with an optional unit (us, ms, s, m, h, d); without a unit it counts `default_ns`
// (fio: seconds for runtime/ramp_time/startdelay, microseconds for thinktime/latency_target/...).
Result<std::chrono::nanoseconds> duration_value(std::string_view s, uint64_t default_ns);
// A block size: a multiple of 512 up to 1g.
Result<uint64_t> block_size_value(std::string_view s, unsigned kb_base);

// fio's pattern syntax (lib/pattern.c) for verify_pattern and buffer_pattern: 0xHEX, int32 numbers,
// "text" and 'file' in any mix.
Result<std::vector<uint8_t>> parse_pattern(std::string_view in);
// "0,5,8-15" -> sorted CPU numbers.
Result<std::vector<unsigned>> parse_cpu_list(std::string_view v);
// One direction of bssplit: "4k/10:64k/50:32k/".
Result<std::vector<BlockSizeSpec::Split>> parse_bssplit_list(std::string_view v, unsigned kb_base);
// One direction of zoned / zoned_abs: "60/10:30/20:10/" (ACCESS%/SIZE[%]).
Result<std::vector<DistributionSpec::Zone>> parse_zone_list(std::string_view v, bool absolute, unsigned kb_base);

// A value per data direction, fio's "read,write,trim" (bs, rate, bssplit, ...): an empty item keeps
// that direction as it is, and a last item not followed by a comma also applies to the directions
// after it ("bs=4k,8k" = read 4k, write and trim 8k; "bs=4k,8k," leaves trim alone).
template <typename F>
Result<void> per_ddir(std::string_view v, F&& set) {
  auto parts = split(trim(v), ',');
  if (parts.size() > kDdirs) return make_error("at most three values (read,write,trim)");
  bool any = false;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    auto p = trim(parts[i]);
    if (p.empty()) continue;
    any = true;
    if (auto r = set(static_cast<Ddir>(i), p); !r) return r;
  }
  if (!any) return make_error("expected a value");
  auto last = trim(parts.back());
  if (!last.empty()) {
    for (std::size_t i = parts.size(); i < kDdirs; ++i) {
      if (auto r = set(static_cast<Ddir>(i), last); !r) return r;
    }
  }
  return {};
}

}  // namespace rdmablk::initiator::bench::detail

#include "initiator/bench/job_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

namespace rdmablk::initiator::bench {

namespace detail {

using std::chrono::nanoseconds;

namespace {

constexpr uint64_t kMaxBs = uint64_t{1} << 30;
constexpr std::size_t kMaxPatternBytes = 512;   // fio's MAX_PATTERN_SIZE
constexpr std::size_t kMaxBssplit = 64;         // fio's BSSPLIT_MAX
constexpr std::size_t kMaxZones = 256;          // fio's ZONESPLIT_MAX
constexpr unsigned kMaxCpus = 1024;             // CPU_SETSIZE

bool mul_overflows(uint64_t a, uint64_t b, uint64_t& out) { return __builtin_mul_overflow(a, b, &out); }

// Leading number of `s` (decimal, or hexadecimal after 0x as fio's str_to_decimal) and the rest in
// `suffix`.
bool split_number(std::string_view s, uint64_t& value, std::string_view& suffix) {
  s = trim(s);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
  if (ec != std::errc() || end == s.data()) return false;
  suffix = trim(std::string_view(end, static_cast<std::size_t>(s.data() + s.size() - end)));
  return true;
}

// fio's size units (parse.c __get_mult_bytes): k/m/g/t/p with an optional b are powers of kb_base;
// with kb_base=1024 (the default, "compatibility mode") the IEC forms kib/mib/... are powers of 1000,
// with kb_base=1000 they are powers of 1024. A bare b is bytes.
Result<uint64_t> unit_multiplier(std::string_view suffix, unsigned kb_base) {
  std::string u = lower(suffix);
  if (u.empty() || u == "b") return uint64_t{1};
  static constexpr std::string_view kPrefixes = "kmgtp";
  auto power = kPrefixes.find(u[0]);
  std::string_view rest = std::string_view(u).substr(1);
  bool iec = rest == "ib";
  if (power == std::string_view::npos || !(rest.empty() || rest == "b" || iec)) {
    return make_error(fmt::format("unknown size unit '{}' (use k, m, g, t or p)", suffix));
  }
  uint64_t base = iec ? (kb_base == 1000 ? 1024 : 1000) : kb_base;
  uint64_t m = 1;
  for (std::size_t i = 0; i <= power; ++i) m *= base;
  return m;
}

}  // namespace

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (true) {
    auto next = s.find(sep, pos);
    out.push_back(s.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos));
    if (next == std::string_view::npos) break;
    pos = next + 1;
  }
  return out;
}

Result<uint64_t> parse_uint(std::string_view s, uint64_t min, uint64_t max) {
  uint64_t v = 0;
  std::string_view suffix;
  if (!split_number(s, v, suffix) || !suffix.empty()) return make_error("expected a whole number");
  if (v < min || v > max) return make_error(fmt::format("must be between {} and {}", min, max));
  return v;
}

Result<double> parse_double(std::string_view s) {
  s = trim(s);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) {
    return make_error(fmt::format("'{}' is not a number", s));
  }
  return v;
}

// fio's booleans are integers (non-zero = true); a bare key means 1. The words are ours.
Result<bool> parse_bool(std::string_view s) {
  std::string v = lower(trim(s));
  if (v.empty() || v == "true" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "no" || v == "off") return false;
  uint64_t n = 0;
  std::string_view suffix;
  if (split_number(v, n, suffix) && suffix.empty()) return n != 0;
  return make_error("expected 0 or 1");
}

// A size: "4096", "4k", "0x1000", "1g"; "N%" when `percent` is given (then *percent = true and the
// value is N, 1..100).
Result<uint64_t> size_value(std::string_view s, unsigned kb_base, bool* percent) {
  uint64_t v = 0;
  std::string_view suffix;
  if (!split_number(s, v, suffix)) return make_error("expected a size like 4096, 4k, 1m or 2g");
  if (percent) *percent = false;
  if (suffix == "%") {
    if (!percent) return make_error("a percentage is not allowed here");
    if (v < 1 || v > 100) return make_error("a percentage must be between 1 and 100");
    *percent = true;
    return v;
  }
  auto m = unit_multiplier(suffix, kb_base);
  if (!m) return tl::unexpected(m.error());
  uint64_t out = 0;
  if (mul_overflows(v, *m, out)) return make_error("size too large");
  return out;
}

// A size that may be negative (rw=read:-8k).
Result<int64_t> signed_size_value(std::string_view s, unsigned kb_base) {
  s = trim(s);
  bool negative = false;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  auto v = size_value(s, kb_base);
  if (!v) return tl::unexpected(v.error());
  if (*v > uint64_t(INT64_MAX)) return make_error("size too large");
  return negative ? -static_cast<int64_t>(*v) : static_cast<int64_t>(*v);
}

// A time: a number with an optional unit (us, ms, s, m, h, d); without a unit it counts `default_ns`
// (fio: seconds for runtime/ramp_time/startdelay, microseconds for thinktime/latency_target/...).
Result<nanoseconds> duration_value(std::string_view s, uint64_t default_ns) {
  uint64_t v = 0;
  std::string_view suffix;
  if (!split_number(s, v, suffix)) return make_error("expected a time like 30, 500ms, 10s or 2m");
  std::string u = lower(suffix);
  uint64_t ns_per = 0;
  if (u.empty()) ns_per = default_ns;
  else if (u == "s" || u == "sec") ns_per = kNsPerSec;
  else if (u == "ms" || u == "msec") ns_per = 1000000ull;
  else if (u == "us" || u == "usec") ns_per = kNsPerUs;
  else if (u == "m" || u == "min") ns_per = 60ull * kNsPerSec;
  else if (u == "h" || u == "hr") ns_per = 3600ull * kNsPerSec;
  else if (u == "d") ns_per = 86400ull * kNsPerSec;
  else return make_error(fmt::format("unknown time unit '{}' (use us, ms, s, m, h or d)", suffix));
  uint64_t out = 0;
  if (mul_overflows(v, ns_per, out) || out > uint64_t(INT64_MAX)) return make_error("time too large");
  return nanoseconds(static_cast<int64_t>(out));
}

// fio's pattern syntax (lib/pattern.c) for verify_pattern and buffer_pattern, any mix of:
//   0xHEX        bytes in the order written (an odd digit count pads the first nibble: 0xabc = 0a bc)
//   DECIMAL      an int32, little-endian, as few bytes as it needs (-1024 = 00 fc ff ff, 66 = 42, 0 = 00)
//   "text"       the bytes between the quotes (no escapes)
//   'file'       the first bytes of a file
// e.g. 0xaa"abc"-12. A decimal stops where "0x" starts ("-100xab" = -10 then 0xab), a hex run gives
// its last 0 to a following 0x ("0xff0x14" = ff 14). fio's %o (the block offset) is not supported.
Result<std::vector<uint8_t>> parse_pattern(std::string_view in) {
  in = trim(in);
  if (in.empty()) return make_error("expected a pattern (0xHEX, a number or \"text\")");
  std::vector<uint8_t> out;
  auto is_hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  auto nibble = [](char c) {
    return static_cast<uint8_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10);
  };
  auto is_x = [](char c) { return c == 'x' || c == 'X'; };
  std::size_t i = 0;
  while (i < in.size()) {
    const char c = in[i];
    if (c == '"' || c == '\'') {
      auto end = in.find(c, i + 1);
      if (end == std::string_view::npos) return make_error(c == '"' ? "unterminated string in the pattern" : "unterminated file name in the pattern");
      std::string_view body = in.substr(i + 1, end - i - 1);
      if (c == '"') {
        out.insert(out.end(), body.begin(), body.end());
      } else {
        // Like fio: as much of the file as fits.
        std::ifstream f{std::string(body), std::ios::binary};
        if (!f) return make_error(fmt::format("cannot open pattern file '{}': {}", body, std::strerror(errno)));
        std::vector<char> buf(kMaxPatternBytes - std::min(out.size(), kMaxPatternBytes));
        f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        auto n = static_cast<std::size_t>(f.gcount());
        if (n == 0) return make_error(fmt::format("pattern file '{}' is empty", body));
        out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
      }
      i = end + 1;
    } else if (c == '%') {
      return make_error("%o (block offset) patterns are not supported");
    } else if (c == '0' && i + 2 < in.size() && is_x(in[i + 1]) && is_hex(in[i + 2])) {
      std::size_t j = i + 2;
      while (j < in.size() && is_hex(in[j])) ++j;
      // "0xff0x14": the 0 before the next x starts the next number.
      if (j < in.size() && is_x(in[j]) && in[j - 1] == '0' && j - 1 > i + 2) --j;
      std::string_view digits = in.substr(i + 2, j - i - 2);
      std::size_t k = 0;
      if (digits.size() % 2) out.push_back(nibble(digits[k++]));
      for (; k < digits.size(); k += 2) out.push_back(static_cast<uint8_t>(nibble(digits[k]) << 4 | nibble(digits[k + 1])));
      i = j;
    } else if (c == '-' || c == '+' || std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t j = i + 1;
      // A decimal ends where "0x" starts: "-100xab" = -10, 0xab.
      while (j < in.size() && std::isdigit(static_cast<unsigned char>(in[j])) && !(in[j] == '0' && j + 1 < in.size() && is_x(in[j + 1]))) ++j;
      std::size_t from = c == '+' ? i + 1 : i;
      std::string_view num = in.substr(from, j - from);
      long long v = 0;
      auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
      if (num.empty() || ec != std::errc() || end != num.data() + num.size() || v < INT_MIN || v > INT_MAX) {
        return make_error(fmt::format("'{}' in the pattern is not an int32 number", in.substr(i, std::max(j - i, std::size_t{1}))));
      }
      auto u = static_cast<uint32_t>(static_cast<int32_t>(v));
      if (u == 0) out.push_back(0);
      for (; u; u >>= 8) out.push_back(static_cast<uint8_t>(u & 0xff));
      i = j;
    } else {
      return make_error(fmt::format("unexpected '{}' in the pattern (use 0xHEX, numbers and \"text\")", c));
    }
    if (out.size() > kMaxPatternBytes) return make_error(fmt::format("a pattern holds at most {} bytes", kMaxPatternBytes));
  }
  if (out.empty()) return make_error("the pattern is empty");
  return out;
}

// "0,5,8-15" -> sorted CPU numbers.
Result<std::vector<unsigned>> parse_cpu_list(std::string_view v) {
  std::set<unsigned> cpus;
  for (auto part : split(trim(v), ',')) {
    part = trim(part);
    if (part.empty()) continue;
    auto dash = part.find('-');
    auto lo = parse_uint(part.substr(0, dash), 0, kMaxCpus - 1);
    if (!lo) return make_error(fmt::format("'{}': CPU numbers are 0 to {}", part, kMaxCpus - 1));
    uint64_t hi = *lo;
    if (dash != std::string_view::npos) {
      auto h = parse_uint(part.substr(dash + 1), 0, kMaxCpus - 1);
      if (!h) return make_error(fmt::format("'{}': CPU numbers are 0 to {}", part, kMaxCpus - 1));
      hi = *h;
      if (hi < *lo) return make_error(fmt::format("'{}': the range goes backwards", part));
    }
    for (uint64_t c = *lo; c <= hi; ++c) cpus.insert(static_cast<unsigned>(c));
  }
  if (cpus.empty()) return make_error("expected CPUs like 0,5,8-15");
  return std::vector<unsigned>(cpus.begin(), cpus.end());
}

Result<uint64_t> block_size_value(std::string_view s, unsigned kb_base) {
  auto v = size_value(s, kb_base);
  if (!v) return v;
  if (*v < 512 || *v % 512 || *v > kMaxBs) return make_error("must be a multiple of 512 up to 1g");
  return v;
}

// One direction of bssplit: "4k/10:64k/50:32k/" (an entry without a percentage, or with 0, shares
// what the others leave, as fio).
Result<std::vector<BlockSizeSpec::Split>> parse_bssplit_list(std::string_view v, unsigned kb_base) {
  std::vector<BlockSizeSpec::Split> out;
  std::vector<bool> missing;
  unsigned sum = 0;
  for (auto entry : split(v, ':')) {
    entry = trim(entry);
    if (entry.empty()) return make_error("empty entry (expected SIZE/PERCENT:SIZE/PERCENT...)");
    auto slash = entry.find('/');
    auto bs = block_size_value(entry.substr(0, slash), kb_base);
    if (!bs) return make_error(fmt::format("'{}': block size {}", entry.substr(0, slash), bs.error().message));
    unsigned perc = 0;
    if (slash != std::string_view::npos && !trim(entry.substr(slash + 1)).empty()) {
      auto p = parse_uint(entry.substr(slash + 1), 0, 100);
      if (!p) return make_error(fmt::format("'{}': percentage {}", entry, p.error().message));
      perc = static_cast<unsigned>(*p);
    }
    out.push_back({*bs, perc});
    missing.push_back(perc == 0);
    sum += perc;
    if (out.size() > kMaxBssplit) return make_error(fmt::format("at most {} block sizes", kMaxBssplit));
  }
  auto n_missing = static_cast<unsigned>(std::count(missing.begin(), missing.end(), true));
  if (sum > 100) return make_error(fmt::format("the percentages add up to {}, more than 100", sum));
  if (n_missing == 0 && sum != 100) return make_error(fmt::format("the percentages add up to {}, not 100", sum));
  // The rest is shared evenly; what an even split leaves over goes to the first ones (fio drops it).
  unsigned share = n_missing ? (100 - sum) / n_missing : 0, extra = n_missing ? (100 - sum) % n_missing : 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!missing[i]) continue;
    out[i].percent = share + (extra ? 1 : 0);
    if (extra) --extra;
  }
  return out;
}

// One direction of zoned / zoned_abs: "60/10:30/20:10/" (ACCESS%/SIZE[%]).
Result<std::vector<DistributionSpec::Zone>> parse_zone_list(std::string_view v, bool absolute, unsigned kb_base) {
  std::vector<DistributionSpec::Zone> out;
  std::vector<bool> missing;
  uint64_t access_sum = 0;
  double size_sum = 0;
  for (auto entry : split(v, ':')) {
    entry = trim(entry);
    if (entry.empty()) return make_error("empty zone (expected ACCESS/SIZE:ACCESS/SIZE...)");
    auto slash = entry.find('/');
    auto access = parse_uint(entry.substr(0, slash), 0, 100);
    if (!access) return make_error(fmt::format("'{}': access percentage {}", entry, access.error().message));
    DistributionSpec::Zone z;
    z.access_percent = static_cast<double>(*access);
    access_sum += *access;
    std::string_view size = slash == std::string_view::npos ? std::string_view{} : trim(entry.substr(slash + 1));
    bool miss = size.empty();
    if (!miss && absolute) {
      auto s = size_value(size, kb_base);
      if (!s) return make_error(fmt::format("'{}': zone size {}", entry, s.error().message));
      if (*s == 0) return make_error(fmt::format("'{}': a zone needs a size", entry));
      z.size = static_cast<double>(*s);
    } else if (!miss) {
      auto s = parse_uint(size, 0, 100);
      if (!s) return make_error(fmt::format("'{}': zone size percentage {}", entry, s.error().message));
      miss = *s == 0;
      z.size = static_cast<double>(*s);
      size_sum += z.size;
    }
    if (miss && absolute) return make_error(fmt::format("'{}': a zone needs a size", entry));
    out.push_back(z);
    missing.push_back(miss);
    if (out.size() > kMaxZones) return make_error(fmt::format("at most {} zones", kMaxZones));
  }
  if (access_sum != 100) return make_error(fmt::format("the access percentages add up to {}, not 100", access_sum));
  if (size_sum > 100) return make_error(fmt::format("the zone sizes add up to {}%, more than 100", size_sum));
  auto n_missing = static_cast<double>(std::count(missing.begin(), missing.end(), true));
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (missing[i]) out[i].size = std::floor((100.0 - size_sum) / n_missing);
  }
  return out;
}

}  // namespace detail

Result<uint64_t> parse_size(std::string_view s) { return detail::size_value(s, 1024); }

Result<std::chrono::nanoseconds> parse_duration(std::string_view s) {
  return detail::duration_value(s, detail::kNsPerSec);
}

}  // namespace rdmablk::initiator::bench

#include "initiator/bench/job_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

namespace rdmablk::initiator::bench {

const char* rw_name(RwMode m) noexcept {
  switch (m) {
    case RwMode::read: return "read";
    case RwMode::write: return "write";
    case RwMode::randread: return "randread";
    case RwMode::randwrite: return "randwrite";
    case RwMode::trim: return "trim";
    case RwMode::randtrim: return "randtrim";
    case RwMode::rw: return "rw";
    case RwMode::randrw: return "randrw";
  }
  return "?";
}

const char* ddir_name(Ddir d) noexcept {
  switch (d) {
    case kRead: return "read";
    case kWrite: return "write";
    case kTrim: return "trim";
  }
  return "?";
}

uint64_t JobSpec::max_bs() const noexcept {
  uint64_t m = 0;
  for (std::size_t d = 0; d < kDdirs; ++d) {
    const auto& b = bs[d];
    m = std::max(m, b.max);
    for (const auto& s : b.split) m = std::max(m, s.bs);
  }
  return m;
}

uint64_t JobSpec::min_bs() const noexcept {
  uint64_t m = UINT64_MAX;
  for (std::size_t d = 0; d < kDdirs; ++d) {
    const auto& b = bs[d];
    if (b.split.empty()) m = std::min(m, b.min);
    for (const auto& s : b.split) m = std::min(m, s.bs);
  }
  return m;
}

namespace {

using std::chrono::nanoseconds;

constexpr uint64_t kNsPerUs = 1000;
constexpr uint64_t kNsPerSec = 1000000000;
constexpr uint64_t kMaxBs = uint64_t{1} << 30;
constexpr std::size_t kMaxPatternBytes = 512;   // fio's MAX_PATTERN_SIZE
constexpr std::size_t kMaxPercentiles = 20;     // fio's FIO_IO_U_LIST_MAX_LEN
constexpr std::size_t kMaxBssplit = 64;         // fio's BSSPLIT_MAX
constexpr std::size_t kMaxZones = 256;          // fio's ZONESPLIT_MAX
constexpr unsigned kMaxCpus = 1024;             // CPU_SETSIZE
constexpr int kMaxIncludeDepth = 16;

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

// A size: "4096", "4k", "0x1000", "1g"; "N%" when `percent` is given (then *percent = true and the
// value is N, 1..100).
Result<uint64_t> size_value(std::string_view s, unsigned kb_base, bool* percent = nullptr) {
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

}  // namespace

Result<uint64_t> parse_size(std::string_view s) { return size_value(s, 1024); }

Result<nanoseconds> parse_duration(std::string_view s) { return duration_value(s, kNsPerSec); }

namespace {

// ---------------------------------------------------------------------------------------------------
// Values with structure.

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

// ---------------------------------------------------------------------------------------------------
// Job drafts: a JobSpec plus what fio resolves after all of a job's options are in (which of bs,
// bsrange and bssplit wins does not depend on their order, verify_pattern implies verify=pattern
// unless verify is set, ...).

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
  nanoseconds startdelay_high{0};  // startdelay=LOW-HIGH: each copy picks a value in [LOW, HIGH]
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

template <typename T>
Result<void> store(Result<T> r, T& dst) {
  if (!r) return tl::unexpected(r.error());
  dst = *r;
  return {};
}

template <typename T>
Result<void> store_uint(std::string_view v, T& dst, uint64_t min, uint64_t max) {
  auto r = parse_uint(v, min, max);
  if (!r) return tl::unexpected(r.error());
  dst = static_cast<T>(*r);
  return {};
}

Result<void> set_rw(Draft& d, std::string_view v) {
  auto colon = v.find(':');
  std::string mode = lower(trim(v.substr(0, colon)));
  RwMode m;
  if (mode == "read") m = RwMode::read;
  else if (mode == "write") m = RwMode::write;
  else if (mode == "trim") m = RwMode::trim;
  else if (mode == "randread") m = RwMode::randread;
  else if (mode == "randwrite") m = RwMode::randwrite;
  else if (mode == "randtrim") m = RwMode::randtrim;
  else if (mode == "rw" || mode == "readwrite") m = RwMode::rw;
  else if (mode == "randrw") m = RwMode::randrw;
  else if (mode == "trimwrite" || mode == "randtrimwrite") return make_error(fmt::format("rw={} is not supported", mode));
  else return make_error("expected read, write, trim, randread, randwrite, randtrim, rw, readwrite or randrw");
  d.spec.rw = m;
  d.spec.seq_skip = 0;
  d.spec.random_nr = 1;
  if (colon == std::string_view::npos) return {};
  std::string_view modifier = trim(v.substr(colon + 1));
  if (is_random(m)) {
    // rw=randread:8: a new random offset every 8 I/Os.
    auto n = parse_uint(modifier, 1, UINT32_MAX);
    if (!n) return make_error(fmt::format("':{}': the number of I/Os per random offset {}", modifier, n.error().message));
    d.spec.random_nr = static_cast<unsigned>(*n);
  } else {
    // rw=read:8k: skip 8k after each I/O; rw=read:-8k goes backwards.
    auto n = signed_size_value(modifier, d.kb_base);
    if (!n) return make_error(fmt::format("':{}': {}", modifier, n.error().message));
    if (*n % 512) return make_error(fmt::format("':{}': the offset step must be a multiple of 512", modifier));
    d.spec.seq_skip = *n;
  }
  return {};
}

Result<void> set_distribution(Draft& d, std::string_view v) {
  v = trim(v);
  auto colon = v.find(':');
  std::string kind = lower(trim(v.substr(0, colon)));
  std::string_view rest = colon == std::string_view::npos ? std::string_view{} : trim(v.substr(colon + 1));
  DistributionSpec spec;
  if (kind == "random") {
    if (colon != std::string_view::npos) return make_error("random takes no parameter");
  } else if (kind == "zipf" || kind == "pareto" || kind == "normal" || kind == "gauss") {
    spec.kind = kind == "zipf" ? Distribution::zipf : kind == "pareto" ? Distribution::pareto : Distribution::normal;
    spec.param = kind == "zipf" ? 1.1 : kind == "pareto" ? 0.2 : 0.0;  // fio's defaults
    if (!rest.empty()) {
      if (rest.find(':') != std::string_view::npos) return make_error("a distribution center (zipf:THETA:CENTER) is not supported");
      auto p = parse_double(rest);
      if (!p) return tl::unexpected(p.error());
      spec.param = *p;
    }
    if (spec.kind == Distribution::zipf && (spec.param <= 0 || spec.param == 1.0)) {
      return make_error("zipf theta must be above 0 and not 1");
    }
    if (spec.kind == Distribution::pareto && (spec.param <= 0 || spec.param >= 1)) {
      return make_error("pareto h must be between 0 and 1 (exclusive)");
    }
    if (spec.kind == Distribution::normal && (spec.param < 0 || spec.param >= 100)) {
      return make_error("the normal deviation must be at least 0 and below 100");
    }
  } else if (kind == "zoned" || kind == "zoned_abs") {
    bool absolute = kind == "zoned_abs";
    spec.kind = absolute ? Distribution::zoned_abs : Distribution::zoned;
    if (rest.empty()) return make_error(fmt::format("expected {}:ACCESS/SIZE:ACCESS/SIZE...", kind));
    std::array<std::optional<std::vector<DistributionSpec::Zone>>, kDdirs> lists;
    auto r = per_ddir(rest, [&](Ddir dd, std::string_view list) -> Result<void> {
      auto z = parse_zone_list(list, absolute, d.kb_base);
      if (!z) return tl::unexpected(z.error());
      lists[dd] = std::move(*z);
      return {};
    });
    if (!r) return r;
    const std::vector<DistributionSpec::Zone>* first = nullptr;
    for (const auto& l : lists) {
      if (!l) continue;
      if (first && (first->size() != l->size() ||
                    !std::equal(first->begin(), first->end(), l->begin(), [](const auto& a, const auto& b) {
                      return a.access_percent == b.access_percent && a.size == b.size;
                    }))) {
        return make_error("separate zones for reads, writes and trims are not supported");
      }
      if (!first) first = &*l;
    }
    spec.zones = *first;
  } else {
    return make_error("expected random, zipf[:THETA], pareto[:H], normal[:DEV], zoned:... or zoned_abs:...");
  }
  d.spec.distribution = std::move(spec);
  return {};
}

Result<void> set_verify(Draft& d, std::string_view v) {
  std::string k = lower(trim(v));
  VerifyKind kind;
  if (k == "0" || k == "none" || k == "null") kind = VerifyKind::none;
  else if (k == "crc32c" || k == "crc32c-intel") kind = VerifyKind::crc32c;
  else if (k == "md5") kind = VerifyKind::md5;
  else if (k == "sha1") kind = VerifyKind::sha1;
  else if (k == "sha256") kind = VerifyKind::sha256;
  else if (k == "pattern") kind = VerifyKind::pattern;
  else if (k == "meta") kind = VerifyKind::meta;
  else return make_error("supported: crc32c (crc32c-intel), md5, sha1, sha256, meta, pattern, 0 (none, null)");
  d.spec.verify = kind;
  d.verify_set = true;
  return {};
}

Result<void> set_filename(Draft& d, std::string_view v) {
  // Only an rdmablk URI names a namespace; a local path is noted by the caller.
  auto u = parse_namespace_uri(trim(v));
  if (!u) return tl::unexpected(u.error());
  d.spec.filename = *u;
  return {};
}

// tcp:// and rdma:// name a namespace (a malformed one is an error); anything else is a local path
// or another program's URI.
bool is_namespace_uri(std::string_view v) {
  std::string l = lower(trim(v));
  return l.rfind("tcp://", 0) == 0 || l.rfind("rdma://", 0) == 0;
}

Result<void> set_log(std::optional<std::string>& dst, std::string_view v) {
  dst = std::string(trim(v));
  return {};
}

Result<void> set_percentile_list(Draft& d, std::string_view v) {
  std::vector<double> list;
  for (auto item : split(trim(v), ':')) {
    auto p = parse_double(item);
    if (!p) return tl::unexpected(p.error());
    if (*p <= 0 || *p > 100) return make_error(fmt::format("{} is not a percentile (0 < p <= 100)", trim(item)));
    list.push_back(*p);
  }
  if (list.size() > kMaxPercentiles) return make_error(fmt::format("at most {} percentiles", kMaxPercentiles));
  d.spec.percentile_list = std::move(list);
  return {};
}

Result<void> set_startdelay(Draft& d, std::string_view v) {
  v = trim(v);
  auto dash = v.find('-', 1);
  auto lo = duration_value(v.substr(0, dash), kNsPerSec);
  if (!lo) return tl::unexpected(lo.error());
  nanoseconds hi{0};
  if (dash != std::string_view::npos) {
    auto h = duration_value(v.substr(dash + 1), kNsPerSec);
    if (!h) return tl::unexpected(h.error());
    if (*h < *lo) return make_error("the range goes backwards");
    hi = *h;
  }
  d.spec.startdelay = *lo;
  d.startdelay_high = hi;
  return {};
}

// Reasons for options that are accepted and do nothing.
constexpr std::string_view kLocalFiles = "it applies to local files";
constexpr std::string_view kEngine = "I/O goes through rdmablk's own NVMe-oF queues";
constexpr std::string_view kBuffers = "I/O buffers are rdmablk's own";
constexpr std::string_view kProcess = "jobs are threads of one rdmablk process";
constexpr std::string_view kAlwaysMeasured = "rdmablk always measures completion latency and bandwidth";

#define IMPL(NAME, ALIAS, BARE, ...)                                                                  \
  OptionDef {                                                                                          \
    NAME, ALIAS, Kind::implemented, BARE,                                                              \
        []([[maybe_unused]] Draft& d, [[maybe_unused]] std::string_view v) -> Result<void> __VA_ARGS__, {} \
  }
#define NOTED(NAME, REASON) \
  OptionDef { NAME, {}, Kind::noted, true, nullptr, REASON }
#define UNSUPPORTED(NAME, REASON) \
  OptionDef { NAME, {}, Kind::unsupported, true, nullptr, REASON }

const std::vector<OptionDef>& option_table() {
  static const std::vector<OptionDef> table = {
      // Job identity and data direction.
      IMPL("name", {}, false, {
        if (trim(v).empty()) return make_error("must not be empty");
        d.spec.name = std::string(trim(v));
        return {};
      }),
      IMPL("description", {}, false, {
        d.spec.description = std::string(trim(v));
        return {};
      }),
      IMPL("rw", "readwrite", false, { return set_rw(d, v); }),
      IMPL("rw_sequencer", {}, false, {
        std::string s = lower(trim(v));
        if (s == "sequential") return {};
        if (s == "identical") return make_error("rw_sequencer=identical is not supported");
        return make_error("expected sequential");
      }),
      IMPL("rwmixread", {}, false, {
        auto r = parse_uint(v, 0, 100);
        if (!r) return tl::unexpected(r.error());
        d.spec.rwmixread = static_cast<unsigned>(*r);
        return {};
      }),
      IMPL("rwmixwrite", {}, false, {
        auto r = parse_uint(v, 0, 100);
        if (!r) return tl::unexpected(r.error());
        d.spec.rwmixread = static_cast<unsigned>(100 - *r);
        return {};
      }),
      // Block sizes.
      IMPL("bs", "blocksize", false, {
        return per_ddir(v, [&](Ddir dd, std::string_view s) -> Result<void> {
          auto b = block_size_value(s, d.kb_base);
          if (!b) return tl::unexpected(b.error());
          d.bs[dd] = *b;
          return {};
        });
      }),
      IMPL("bsrange", "blocksize_range", false, {
        return per_ddir(v, [&](Ddir dd, std::string_view s) -> Result<void> {
          auto sep = s.find('-');
          if (sep == std::string_view::npos) sep = s.find(':');
          if (sep == std::string_view::npos) return make_error(fmt::format("'{}': expected MIN-MAX", s));
          auto lo = block_size_value(s.substr(0, sep), d.kb_base);
          if (!lo) return make_error(fmt::format("'{}': {}", s, lo.error().message));
          auto hi = block_size_value(s.substr(sep + 1), d.kb_base);
          if (!hi) return make_error(fmt::format("'{}': {}", s, hi.error().message));
          d.bsrange[dd] = std::minmax(*lo, *hi);  // fio swaps a range given backwards
          return {};
        });
      }),
      IMPL("bssplit", {}, false, {
        return per_ddir(v, [&](Ddir dd, std::string_view s) -> Result<void> {
          auto l = parse_bssplit_list(s, d.kb_base);
          if (!l) return tl::unexpected(l.error());
          d.bssplit[dd] = std::move(*l);
          return {};
        });
      }),
      IMPL("ba", "blockalign", false, {
        return per_ddir(v, [&](Ddir dd, std::string_view s) -> Result<void> {
          auto b = block_size_value(s, d.kb_base);
          if (!b) return tl::unexpected(b.error());
          d.ba[dd] = *b;
          return {};
        });
      }),
      // Queue depth.
      IMPL("iodepth", {}, false, { return store_uint(v, d.spec.iodepth, 1, 4096); }),
      IMPL("iodepth_batch", "iodepth_batch_submit", false, { return store_uint(v, d.spec.iodepth_batch_submit, 0, 4096); }),
      IMPL("iodepth_batch_complete_min", "iodepth_batch_complete", false,
           { return store_uint(v, d.spec.iodepth_batch_complete_min, 0, 4096); }),
      IMPL("iodepth_low", {}, false, { return store_uint(v, d.spec.iodepth_low, 0, 4096); }),
      IMPL("numjobs", {}, false, { return store_uint(v, d.spec.numjobs, 1, 256); }),
      // Region and amount.
      IMPL("size", {}, false, {
        bool percent = false;
        auto s = size_value(v, d.kb_base, &percent);
        if (!s) return tl::unexpected(s.error());
        d.spec.size = percent ? 0 : *s;
        d.spec.size_percent = percent ? static_cast<unsigned>(*s) : 0;
        return {};
      }),
      IMPL("fill_device", "fill_fs", true, { return store(parse_bool(v), d.spec.fill_device); }),
      IMPL("offset", "fileoffset", false, {
        bool percent = false;
        auto s = size_value(v, d.kb_base, &percent);
        if (!s) return tl::unexpected(s.error());
        d.spec.offset = percent ? 0 : *s;
        d.spec.offset_percent = percent ? static_cast<unsigned>(*s) : 0;
        return {};
      }),
      IMPL("offset_increment", {}, false, {
        bool percent = false;
        auto s = size_value(v, d.kb_base, &percent);
        if (!s) return tl::unexpected(s.error());
        if (percent) return make_error("a percentage is not supported for offset_increment");
        d.spec.offset_increment = *s;
        return {};
      }),
      IMPL("io_size", "io_limit", false, {
        bool percent = false;
        auto s = size_value(v, d.kb_base, &percent);
        if (!s) return tl::unexpected(s.error());
        if (percent) return make_error("a percentage is not supported for io_size");
        d.spec.io_size = *s;
        return {};
      }),
      IMPL("number_ios", {}, false, { return store(size_value(v, d.kb_base), d.spec.number_ios); }),
      IMPL("loops", {}, false, {
        auto r = parse_uint(v, 0, UINT32_MAX);
        if (!r) return tl::unexpected(r.error());
        d.spec.loops = *r ? static_cast<unsigned>(*r) : 1;  // fio: 0 = 1
        return {};
      }),
      // Time.
      IMPL("runtime", "timeout", false, { return store(duration_value(v, kNsPerSec), d.spec.runtime); }),
      IMPL("time_based", {}, true, { return store(parse_bool(v), d.spec.time_based); }),
      IMPL("ramp_time", {}, false, { return store(duration_value(v, kNsPerSec), d.spec.ramp_time); }),
      IMPL("startdelay", {}, false, { return set_startdelay(d, v); }),
      // Random offsets.
      IMPL("random_distribution", {}, false, { return set_distribution(d, v); }),
      IMPL("norandommap", {}, true, { return store(parse_bool(v), d.spec.norandommap); }),
      IMPL("randrepeat", {}, true, { return store(parse_bool(v), d.spec.randrepeat); }),
      IMPL("allrandrepeat", {}, true, {
        auto b = parse_bool(v);
        if (!b) return tl::unexpected(b.error());
        if (*b) d.spec.randrepeat = true;  // we have one generator family: randrepeat covers all
        return {};
      }),
      IMPL("randseed", {}, false, {
        auto s = size_value(v, d.kb_base);
        if (!s) return tl::unexpected(s.error());
        d.spec.randseed = *s;
        d.randseed_set = true;
        return {};
      }),
      // Rates and pacing.
      IMPL("rate", {}, false, {
        return per_ddir(v, [&](Ddir dd, std::string_view s) { return store(size_value(s, d.kb_base), d.spec.rate[dd]); });
      }),
      IMPL("rate_iops", {}, false, {
        return per_ddir(v, [&](Ddir dd, std::string_view s) { return store(size_value(s, d.kb_base), d.spec.rate_iops[dd]); });
      }),
      IMPL("rate_process", {}, false, {
        std::string s = lower(trim(v));
        if (s == "linear") d.spec.rate_process = RateProcess::linear;
        else if (s == "poisson") d.spec.rate_process = RateProcess::poisson;
        else return make_error("expected linear or poisson");
        return {};
      }),
      IMPL("thinktime", {}, false, { return store(duration_value(v, kNsPerUs), d.spec.thinktime); }),
      IMPL("thinktime_spin", {}, false, { return store(duration_value(v, kNsPerUs), d.spec.thinktime_spin); }),
      IMPL("thinktime_blocks", {}, false, {
        auto r = parse_uint(v, 0, UINT32_MAX);
        if (!r) return tl::unexpected(r.error());
        d.spec.thinktime_blocks = *r ? static_cast<unsigned>(*r) : 1;
        return {};
      }),
      IMPL("flow", {}, false, { return store_uint(v, d.spec.flow, 0, 1000); }),
      IMPL("flow_id", {}, false, { return store_uint(v, d.spec.flow_id, 0, UINT32_MAX); }),
      IMPL("flow_sleep", {}, false, { return store(duration_value(v, kNsPerUs), d.spec.flow_sleep); }),
      IMPL("latency_target", {}, false, { return store(duration_value(v, kNsPerUs), d.spec.latency_target); }),
      IMPL("latency_window", {}, false, { return store(duration_value(v, kNsPerUs), d.spec.latency_window); }),
      IMPL("latency_percentile", {}, false, {
        auto p = parse_double(v);
        if (!p) return tl::unexpected(p.error());
        if (*p <= 0 || *p > 100) return make_error("must be above 0 and at most 100");
        d.spec.latency_percentile = *p;
        return {};
      }),
      // Verification.
      IMPL("verify", {}, false, { return set_verify(d, v); }),
      IMPL("do_verify", {}, true, { return store(parse_bool(v), d.spec.do_verify); }),
      IMPL("verify_only", {}, true, { return store(parse_bool(v), d.spec.verify_only); }),
      IMPL("verify_backlog", {}, false, {
        auto r = size_value(v, d.kb_base);
        if (!r) return tl::unexpected(r.error());
        if (*r > UINT32_MAX) return make_error("too large");
        d.spec.verify_backlog = static_cast<unsigned>(*r);
        return {};
      }),
      IMPL("verify_pattern", {}, false, { return store(parse_pattern(v), d.spec.verify_pattern); }),
      IMPL("verify_interval", {}, false, {
        auto r = size_value(v, d.kb_base);
        if (!r) return tl::unexpected(r.error());
        if (*r == 0) return make_error("must not be 0");
        d.spec.verify_interval = *r;
        return {};
      }),
      IMPL("verify_fatal", {}, true, { return store(parse_bool(v), d.spec.verify_fatal); }),
      // Flushes.
      IMPL("fsync", {}, false, { return store_uint(v, d.spec.fsync, 0, UINT32_MAX); }),
      IMPL("fdatasync", {}, false, { return store_uint(v, d.spec.fsync, 0, UINT32_MAX); }),
      IMPL("end_fsync", {}, true, { return store(parse_bool(v), d.end_fsync); }),
      IMPL("fsync_on_close", {}, true, { return store(parse_bool(v), d.fsync_on_close); }),
      // Buffer contents.
      IMPL("zero_buffers", {}, true, { return store(parse_bool(v), d.spec.zero_buffers); }),
      IMPL("refill_buffers", {}, true, { return store(parse_bool(v), d.spec.refill_buffers); }),
      IMPL("scramble_buffers", {}, true, { return store(parse_bool(v), d.spec.scramble_buffers); }),
      IMPL("buffer_compress_percentage", {}, false, { return store_uint(v, d.spec.buffer_compress_percentage, 0, 100); }),
      IMPL("buffer_compress_chunk", {}, false, { return store(size_value(v, d.kb_base), d.spec.buffer_compress_chunk); }),
      IMPL("buffer_pattern", {}, false, { return store(parse_pattern(v), d.spec.buffer_pattern); }),
      // CPUs.
      IMPL("cpus_allowed", {}, false, { return store(parse_cpu_list(v), d.spec.cpus_allowed); }),
      IMPL("cpumask", {}, false, {
        auto m = parse_uint(v, 1, UINT64_MAX);
        if (!m) return make_error("expected a CPU bit mask (1 << cpu | ...)");
        d.spec.cpus_allowed.clear();
        for (unsigned c = 0; c < 64; ++c) {
          if (*m >> c & 1) d.spec.cpus_allowed.push_back(c);
        }
        return {};
      }),
      IMPL("cpus_allowed_policy", {}, false, {
        std::string s = lower(trim(v));
        if (s == "shared") d.spec.cpus_allowed_split = false;
        else if (s == "split") d.spec.cpus_allowed_split = true;
        else return make_error("expected shared or split");
        return {};
      }),
      // Reporting.
      IMPL("group_reporting", {}, true, { return store(parse_bool(v), d.spec.group_reporting); }),
      IMPL("percentile_list", {}, false, { return set_percentile_list(d, v); }),
      IMPL("lat_percentiles", {}, true, { return store(parse_bool(v), d.spec.lat_percentiles); }),
      IMPL("clat_percentiles", {}, true, { return store(parse_bool(v), d.spec.clat_percentiles); }),
      IMPL("unified_rw_reporting", {}, false, {
        std::string s = lower(trim(v));
        if (s == "none" || s == "0") d.spec.unified_rw_reporting = UnifiedRw::none;
        else if (s == "mixed" || s == "1") d.spec.unified_rw_reporting = UnifiedRw::mixed;
        else if (s == "both" || s == "2") d.spec.unified_rw_reporting = UnifiedRw::both;
        else return make_error("expected none (0), mixed (1) or both (2)");
        return {};
      }),
      IMPL("kb_base", {}, false, {
        std::string s(trim(v));
        if (s == "1024") d.kb_base = 1024;
        else if (s == "1000") d.kb_base = 1000;
        else return make_error("expected 1024 or 1000");
        return {};
      }),
      IMPL("unit_base", {}, false, {
        std::string s(trim(v));
        if (s == "0" || s == "1") return {};
        if (s == "8") return make_error("bit-based output is not supported");
        return make_error("expected 0 or 1");
      }),
      // Logs.
      IMPL("write_lat_log", {}, true, { return set_log(d.lat_log, v); }),
      IMPL("write_bw_log", {}, true, { return set_log(d.bw_log, v); }),
      IMPL("write_iops_log", {}, true, { return set_log(d.iops_log, v); }),
      IMPL("log_avg_msec", {}, false, {
        auto r = parse_uint(v, 0, UINT32_MAX);
        if (!r) return tl::unexpected(r.error());
        d.spec.log_avg_msec = std::chrono::milliseconds(*r);
        return {};
      }),
      IMPL("log_offset", {}, true, { return store(parse_bool(v), d.spec.log_offset); }),
      IMPL("per_job_logs", {}, true, { return store(parse_bool(v), d.spec.per_job_logs); }),
      // Groups.
      IMPL("stonewall", "wait_for_previous", true, { return store(parse_bool(v), d.spec.stonewall); }),
      IMPL("new_group", {}, true, { return store(parse_bool(v), d.spec.new_group); }),
      IMPL("wait_for", {}, false, {
        if (trim(v).empty()) return make_error("must name a job");
        d.spec.wait_for = std::string(trim(v));
        return {};
      }),
      // Target.
      IMPL("namespace", {}, false, { return store_uint(v, d.spec.nsid, 1, 0xFFFFFFFEu); }),
      IMPL("filename", {}, false, { return set_filename(d, v); }),  // a local path is noted (see apply)

      // Accepted, noted once, no effect.
      NOTED("directory", kLocalFiles), NOTED("filename_format", kLocalFiles), NOTED("unique_filename", kLocalFiles),
      NOTED("opendir", kLocalFiles), NOTED("lockfile", kLocalFiles), NOTED("nrfiles", kLocalFiles),
      NOTED("nr_files", kLocalFiles), NOTED("openfiles", kLocalFiles), NOTED("file_service_type", kLocalFiles),
      NOTED("create_serialize", kLocalFiles), NOTED("create_fsync", kLocalFiles), NOTED("create_on_open", kLocalFiles),
      NOTED("allow_file_create", kLocalFiles), NOTED("allow_mounted_write", kLocalFiles), NOTED("fallocate", kLocalFiles),
      NOTED("unlink", kLocalFiles), NOTED("unlink_each_loop", kLocalFiles), NOTED("overwrite", kLocalFiles),
      NOTED("invalidate", "there is no local page cache"), NOTED("fadvise_hint", "there is no local page cache"),
      NOTED("pre_read", "there is no local page cache"), NOTED("sync_file_range", kLocalFiles),
      NOTED("ioscheduler", "there is no local block device"), NOTED("disk_util", "there is no local block device"),
      NOTED("ioengine", kEngine), NOTED("direct", kEngine), NOTED("buffered", kEngine), NOTED("atomic", kEngine),
      NOTED("sync", kEngine), NOTED("io_submit_mode", kEngine), NOTED("userspace_reap", kEngine),
      NOTED("hipri", kEngine), NOTED("fixedbufs", kEngine), NOTED("registerfiles", kEngine),
      NOTED("sqthread_poll", kEngine), NOTED("sqthread_poll_cpu", kEngine), NOTED("nonvectored", kEngine),
      NOTED("uncached", kEngine), NOTED("force_async", kEngine), NOTED("cmdprio_percentage", kEngine),
      NOTED("cmdprio_class", kEngine), NOTED("cmdprio", kEngine), NOTED("cmdprio_bssplit", kEngine),
      NOTED("write_hint", kEngine), NOTED("serialize_overlap", kEngine),
      NOTED("random_generator", "rdmablk has one random generator"),
      NOTED("softrandommap", "the random map always fits in memory"),
      NOTED("iomem", kBuffers), NOTED("mem", kBuffers), NOTED("iomem_align", kBuffers), NOTED("mem_align", kBuffers),
      NOTED("hugepage-size", kBuffers), NOTED("lockmem", kBuffers),
      NOTED("thread", kProcess), NOTED("nice", kProcess), NOTED("prio", kProcess), NOTED("prioclass", kProcess),
      NOTED("cgroup", kProcess), NOTED("cgroup_weight", kProcess), NOTED("cgroup_nodelete", kProcess),
      NOTED("uid", kProcess), NOTED("gid", kProcess), NOTED("numa_cpu_nodes", kProcess),
      NOTED("numa_mem_policy", kProcess), NOTED("exitall", kProcess), NOTED("exit_what", kProcess),
      NOTED("exitall_on_error", kProcess), NOTED("gtod_cpu", kProcess),
      NOTED("continue_on_error", "an I/O error always ends the job"),
      NOTED("error_dump", "errors are always reported"),
      NOTED("gtod_reduce", kAlwaysMeasured), NOTED("disable_lat", kAlwaysMeasured),
      NOTED("disable_clat", kAlwaysMeasured), NOTED("disable_slat", kAlwaysMeasured),
      NOTED("disable_bw_measurement", kAlwaysMeasured), NOTED("disable_bw", kAlwaysMeasured),
      NOTED("clocksource", "rdmablk uses CLOCK_MONOTONIC"), NOTED("stats", kAlwaysMeasured),
      NOTED("bwavgtime", "bandwidth samples are not reported"), NOTED("iopsavgtime", "IOPS samples are not reported"),
      NOTED("slat_percentiles", "submission latency is not measured separately"),
      NOTED("significant_figures", "output uses fio's default of 4"),
      NOTED("verify_async", "verification runs in the job's thread"),
      NOTED("verify_async_cpus", "verification runs in the job's thread"),
      NOTED("verify_dump", "mismatches are reported with their offset"),
      NOTED("verify_state_save", "verify state is not saved"), NOTED("verify_state_load", "verify state is not saved"),
      NOTED("verifysort", "deprecated in fio"), NOTED("verifysort_nr", "deprecated in fio"),
      NOTED("rwmixcycle", "deprecated in fio"), NOTED("flow_watermark", "deprecated in fio"),
      NOTED("write_hist_log", "histogram logs are not written"), NOTED("log_hist_msec", "histogram logs are not written"),
      NOTED("log_hist_coarseness", "histogram logs are not written"),
      NOTED("log_max_value", "logs hold averages"), NOTED("log_entries", "log memory grows as needed"),
      NOTED("log_compression", "logs are not compressed"), NOTED("log_compression_cpus", "logs are not compressed"),
      NOTED("log_store_compressed", "logs are not compressed"),

      // Known and refused: they would change the result in a way rdmablk does not reproduce.
      UNSUPPORTED("rate_min", "minimum rates are not enforced"), UNSUPPORTED("ratemin", "minimum rates are not enforced"),
      UNSUPPORTED("rate_iops_min", "minimum rates are not enforced"),
      UNSUPPORTED("rate_cycle", "minimum rates are not enforced"), UNSUPPORTED("ratecycle", "minimum rates are not enforced"),
      UNSUPPORTED("rate_ignore_thinktime", "rates always include think time"),
      UNSUPPORTED("max_latency", "latency limits are not enforced"),
      UNSUPPORTED("latency_run", "use latency_target"),
      UNSUPPORTED("thinktime_blocks_type", "think time counts completed blocks"),
      UNSUPPORTED("thinktime_iotime", "think time counts completed blocks"),
      UNSUPPORTED("iodepth_batch_complete_max", "completions are reaped as they come"),
      UNSUPPORTED("zonemode", "zoned I/O is not implemented"), UNSUPPORTED("zonesize", "zoned I/O is not implemented"),
      UNSUPPORTED("zonecapacity", "zoned I/O is not implemented"), UNSUPPORTED("zonerange", "zoned I/O is not implemented"),
      UNSUPPORTED("zoneskip", "zoned I/O is not implemented"), UNSUPPORTED("read_beyond_wp", "zoned I/O is not implemented"),
      UNSUPPORTED("max_open_zones", "zoned I/O is not implemented"),
      UNSUPPORTED("job_max_open_zones", "zoned I/O is not implemented"),
      UNSUPPORTED("ignore_zone_limits", "zoned I/O is not implemented"),
      UNSUPPORTED("zone_reset_threshold", "zoned I/O is not implemented"),
      UNSUPPORTED("zone_reset_frequency", "zoned I/O is not implemented"),
      UNSUPPORTED("trim_percentage", "trims are only issued by rw=trim|randtrim"),
      UNSUPPORTED("trim_verify_zero", "trims are only issued by rw=trim|randtrim"),
      UNSUPPORTED("trim_backlog", "trims are only issued by rw=trim|randtrim"),
      UNSUPPORTED("trim_backlog_batch", "trims are only issued by rw=trim|randtrim"),
      UNSUPPORTED("verify_offset", "the verify header is always at the start of the block"),
      UNSUPPORTED("verify_backlog_batch", "verify_backlog checks every block it holds"),
      UNSUPPORTED("experimental_verify", "not implemented"),
      UNSUPPORTED("dedupe_percentage", "dedupable buffers are not generated"),
      UNSUPPORTED("dedupe_global", "dedupable buffers are not generated"),
      UNSUPPORTED("dedupe_mode", "dedupable buffers are not generated"),
      UNSUPPORTED("dedupe_working_set_percentage", "dedupable buffers are not generated"),
      UNSUPPORTED("percentage_random", "a job is either sequential or random"),
      UNSUPPORTED("percentage_sequential", "a job is either sequential or random"),
      UNSUPPORTED("bs_unaligned", "block sizes are multiples of the smallest one"),
      UNSUPPORTED("blocksize_unaligned", "block sizes are multiples of the smallest one"),
      UNSUPPORTED("bs_is_seq_rand", "bs values are per data direction"),
      UNSUPPORTED("offset_align", "offsets are aligned to the block size"),
      UNSUPPORTED("filesize", "the region is set by size and offset"),
      UNSUPPORTED("file_append", "the region is set by size and offset"),
      UNSUPPORTED("create_only", "jobs always do I/O"),
      UNSUPPORTED("read_iolog", "I/O logs are not replayed"), UNSUPPORTED("write_iolog", "I/O logs are not written"),
      UNSUPPORTED("read_iolog_chunked", "I/O logs are not replayed"),
      UNSUPPORTED("replay_no_stall", "I/O logs are not replayed"), UNSUPPORTED("replay_redirect", "I/O logs are not replayed"),
      UNSUPPORTED("replay_scale", "I/O logs are not replayed"), UNSUPPORTED("replay_align", "I/O logs are not replayed"),
      UNSUPPORTED("replay_time_scale", "I/O logs are not replayed"), UNSUPPORTED("replay_skip", "I/O logs are not replayed"),
      UNSUPPORTED("merge_blktrace_file", "I/O logs are not replayed"),
      UNSUPPORTED("exec_prerun", "rdmablk does not run commands"), UNSUPPORTED("exec_postrun", "rdmablk does not run commands"),
      UNSUPPORTED("steadystate", "jobs end by size, number_ios or runtime"),
      UNSUPPORTED("ss", "jobs end by size, number_ios or runtime"),
      UNSUPPORTED("ss_dur", "jobs end by size, number_ios or runtime"),
      UNSUPPORTED("ss_ramp", "jobs end by size, number_ios or runtime"),
      UNSUPPORTED("write_barrier", "writes are plain NVMe Writes"),
      UNSUPPORTED("ignore_error", "an I/O error always ends the job"),
      UNSUPPORTED("block_error_percentiles", "trim errors are not tracked"),
      UNSUPPORTED("log_unix_epoch", "log times count from the job's start"),
      UNSUPPORTED("log_alternate_epoch", "log times count from the job's start"),
      UNSUPPORTED("log_alternate_epoch_clock_id", "log times count from the job's start"),
      UNSUPPORTED("log_prio", "logs do not hold priorities"),
      UNSUPPORTED("profile", "fio's built-in profiles are not available"),
  };
  return table;
}

#undef IMPL
#undef NOTED
#undef UNSUPPORTED

const OptionDef* find_option(std::string_view key) {
  for (const auto& o : option_table()) {
    if (o.name == key || (!o.alias.empty() && o.alias == key)) return &o;
  }
  return nullptr;
}

// fio applies a few options before the others of a section whatever their order (parse.c sort_options,
// by option priority): kb_base must be known before any size is read.
int option_priority(std::string_view canonical) { return canonical == "kb_base" ? 1 : 0; }

// ---------------------------------------------------------------------------------------------------
// Reading the file: sections of (key, value) lines, with ${VAR} expansion and `include FILE`.

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

long mb_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<long>(static_cast<unsigned long long>(pages) * static_cast<unsigned long long>(page) >> 20) : 0;
}

// fio's substitutions: ${VAR} from the environment (fio leaves an unset one empty; we refuse it) and
// the keywords $pagesize, $mb_memory and $ncpus (without fio's arithmetic on them).
Result<std::string> expand(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '$' && i + 1 < s.size() && s[i + 1] == '{') {
      auto close = s.find('}', i + 2);
      if (close != std::string_view::npos && close > i + 2) {
        std::string name(s.substr(i + 2, close - i - 2));
        const char* value = std::getenv(name.c_str());
        if (!value) return make_error(fmt::format("environment variable '{}' is not set", name));
        out += value;
        i = close + 1;
        continue;
      }
    }
    if (s[i] == '$') {
      struct Keyword {
        std::string_view word;
        long value;
      };
      const Keyword keywords[] = {{"$pagesize", ::sysconf(_SC_PAGESIZE)},
                                  {"$mb_memory", mb_memory()},
                                  {"$ncpus", ::sysconf(_SC_NPROCESSORS_CONF)}};
      bool replaced = false;
      for (const auto& k : keywords) {
        if (s.substr(i, k.word.size()) == k.word) {
          out += std::to_string(k.value);
          i += k.word.size();
          replaced = true;
          break;
        }
      }
      if (replaced) continue;
    }
    out += s[i++];
  }
  return out;
}

// fio ends a line at the first ';' or '#' (we keep those inside double quotes, for patterns).
std::string_view strip_comment(std::string_view line) {
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"') quoted = !quoted;
    if (!quoted && (line[i] == ';' || line[i] == '#')) return trim(line.substr(0, i));
  }
  return trim(line);
}

Result<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("cannot open job file '{}': {}", path, std::strerror(errno)), errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Reader {
 public:
  std::vector<Section> sections;

  // `nested`: an included file, which adds options to the current section only.
  Result<void> read(std::string_view text, const std::string& file, int depth) {
    const bool nested = depth > 0;
    unsigned line_no = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t nl = text.find('\n', pos);
      std::string_view raw = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
      pos = nl == std::string_view::npos ? text.size() : nl + 1;
      ++line_no;
      std::string_view line = strip_comment(raw);
      if (line.empty()) continue;
      auto where = fmt::format("{}:{}", file, line_no);
      if (line.front() == '[') {
        if (nested) return make_error(where + ": no sections in an included file");
        if (line.back() != ']') return make_error(where + ": unterminated section header '" + std::string(line) + "'");
        std::string name(trim(line.substr(1, line.size() - 2)));
        if (name.empty()) return make_error(where + ": empty section name");
        // fio: any section whose name starts with "global" is a global section.
        sections.push_back(Section{name, name.rfind("global", 0) == 0, where, {}});
        continue;
      }
      if (sections.empty()) return make_error(where + ": option '" + std::string(line) + "' outside of a [section]");
      if (line.size() > 8 && line.substr(0, 7) == "include" && std::isspace(static_cast<unsigned char>(line[7]))) {
        if (auto r = include(std::string(trim(line.substr(8))), file, depth, where); !r) return r;
        continue;
      }
      auto expanded = expand(line);
      if (!expanded) return make_error(fmt::format("{}: {}", where, expanded.error().message));
      std::string_view l = *expanded;
      auto eq = l.find('=');
      RawOption o;
      o.key = lower(trim(l.substr(0, eq)));
      o.value = eq == std::string_view::npos ? std::string() : std::string(trim(l.substr(eq + 1)));
      o.bare = eq == std::string_view::npos;
      o.where = where;
      if (o.key.empty()) return make_error(where + ": missing option name");
      sections.back().options.push_back(std::move(o));
    }
    return {};
  }

 private:
  Result<void> include(std::string path, const std::string& from, int depth, const std::string& where) {
    if (path.empty()) return make_error(where + ": include needs a file name");
    if (depth >= kMaxIncludeDepth) return make_error(where + ": includes nested too deeply");
    // fio: a relative name that does not exist as given is looked up next to the including file.
    if (path.front() != '/' && ::access(path.c_str(), F_OK) != 0) {
      auto slash = from.rfind('/');
      if (slash != std::string::npos) path = from.substr(0, slash + 1) + path;
    }
    auto text = read_whole_file(path);
    if (!text) return make_error(fmt::format("{}: {}", where, text.error().message));
    return read(*text, path, depth + 1);
  }
};

// ---------------------------------------------------------------------------------------------------
// From drafts to jobs.

class Builder {
 public:
  explicit Builder(std::vector<std::string>& notes) : notes_(notes) {}

  // Applies a section's options to `d`, recording them in `record` (fio's job/global options).
  Result<void> apply(Draft& d, const Section& s, Options& record) {
    std::vector<const RawOption*> order;
    for (const auto& o : s.options) order.push_back(&o);
    std::stable_sort(order.begin(), order.end(), [](const RawOption* a, const RawOption* b) {
      const OptionDef* da = find_option(a->key);
      const OptionDef* db = find_option(b->key);
      return option_priority(da ? da->name : "") > option_priority(db ? db->name : "");
    });
    for (const RawOption* o : order) {
      const OptionDef* def = find_option(o->key);
      if (!def) return make_error(fmt::format("{}: unknown option '{}'", o->where, o->key));
      if (def->kind == Kind::unsupported) {
        return make_error(fmt::format("{}: option '{}' is not supported ({})", o->where, o->key, def->reason));
      }
      if (o->bare && !def->bare_ok) {
        return make_error(fmt::format("{}: option '{}' needs a value ({}=...)", o->where, o->key, o->key));
      }
      if (def->kind == Kind::noted) {
        note(*o, def->reason);
      } else if (def->name == "filename" && !is_namespace_uri(o->value)) {
        note(*o, "it is not an rdmablk URI tcp://ADDR:PORT/NQN[/NSID]; the namespace comes from -t/-a/-s/-n");
        d.spec.filename.reset();
      } else if (auto r = def->handle(d, o->value); !r) {
        return make_error(fmt::format("{}: invalid value '{}' for '{}': {}", o->where, o->value, o->key, r.error().message));
      }
      std::string key(def->name);
      auto it = std::find_if(record.begin(), record.end(), [&](const auto& kv) { return kv.first == key; });
      if (it != record.end()) it->second = o->value;
      else record.emplace_back(key, o->value);
    }
    return {};
  }

  Result<JobSpec> finish(Draft& d) {
    JobSpec& j = d.spec;
    auto fail = [&](const std::string& m) { return make_error(fmt::format("{}: job '{}': {}", j.where, j.name, m)); };
    const bool random = is_random(j.rw);

    // Block sizes: bssplit wins over bsrange, which wins over bs (fio, whatever the order).
    for (std::size_t dd = 0; dd < kDdirs; ++dd) {
      BlockSizeSpec& b = j.bs[dd];
      if (!d.bssplit[dd].empty()) {
        b.split = d.bssplit[dd];
        auto [lo, hi] = std::minmax_element(b.split.begin(), b.split.end(), [](const auto& x, const auto& y) { return x.bs < y.bs; });
        b.min = lo->bs;
        b.max = hi->bs;
      } else if (d.bsrange[dd]) {
        b.split.clear();
        std::tie(b.min, b.max) = *d.bsrange[dd];
      } else if (d.bs[dd]) {
        b.split.clear();
        b.min = b.max = *d.bs[dd];
      }
      // blockalign only matters for random offsets; any alignment but the block size turns the random
      // map off (fio).
      b.align = random ? d.ba[dd] : 0;
      if (b.align && b.align != b.min) j.norandommap = true;
    }
    std::array<bool, kDdirs> used{does_reads(j.rw) || (j.verify != VerifyKind::none), does_writes(j.rw), does_trims(j.rw)};
    uint64_t min_used = UINT64_MAX, max_write = 0, min_write = UINT64_MAX;
    for (std::size_t dd = 0; dd < kDdirs; ++dd) {
      if (used[dd]) min_used = std::min(min_used, j.bs[dd].min);
    }
    min_write = j.bs[kWrite].min;
    max_write = j.bs[kWrite].max;

    // Verification.
    if (!d.verify_set && !j.verify_pattern.empty()) j.verify = VerifyKind::pattern;  // fio: the pattern implies it
    if (j.verify == VerifyKind::pattern && j.verify_pattern.empty()) return fail("verify=pattern needs a verify_pattern");
    if (j.verify != VerifyKind::none) {
      if (does_trims(j.rw)) return fail(fmt::format("verify does not work with rw={} (trimmed blocks hold no data)", rw_name(j.rw)));
      if (j.verify_only && j.time_based) return fail("verify_only does not work with time_based");
      if (j.numjobs > 1 && does_writes(j.rw) && (j.size == 0 || j.offset_increment < j.size)) {
        return fail("numjobs > 1 with verify needs size and offset_increment >= size, so copies do not "
                    "overwrite each other's blocks");
      }
      // fio: the verify interval divides the write block sizes and is at most the smallest.
      if (does_writes(j.rw)) {
        if (!j.verify_interval && min_write != max_write) j.verify_interval = min_write;
        if (j.verify_interval > min_write) j.verify_interval = min_write;
        if (j.verify_interval && (min_write % j.verify_interval || max_write % j.verify_interval)) {
          j.verify_interval = std::gcd(min_write, max_write);
        }
      } else if (j.verify_interval > j.bs[kRead].min) {
        j.verify_interval = j.bs[kRead].min;
      }
      if (does_writes(j.rw) && !does_reads(j.rw) && j.do_verify && j.time_based && j.runtime.count() && !j.verify_backlog &&
          !j.verify_only) {
        notes_.push_back(fmt::format("{}: job '{}': the verify phase never starts: the writes use all of runtime "
                                     "(use verify_backlog, or drop time_based)", j.where, j.name));
      }
    }

    // Times and rates.
    if (j.time_based && j.runtime.count() == 0) return fail("time_based needs a runtime");
    if (j.thinktime_spin > j.thinktime) j.thinktime_spin = j.thinktime;
    bool any_rate = std::any_of(j.rate.begin(), j.rate.end(), [](uint64_t r) { return r != 0; });
    bool any_iops = std::any_of(j.rate_iops.begin(), j.rate_iops.end(), [](uint64_t r) { return r != 0; });
    if (any_rate && any_iops) return fail("rate and rate_iops are mutually exclusive");

    // Queue depth (fio's fixups).
    if (j.iodepth_low == 0 || j.iodepth_low > j.iodepth) j.iodepth_low = j.iodepth;
    if (j.iodepth_batch_submit == 0 || j.iodepth_batch_submit > j.iodepth) j.iodepth_batch_submit = j.iodepth;
    if (j.iodepth_batch_complete_min > j.iodepth) j.iodepth_batch_complete_min = j.iodepth;

    // Random offsets.
    if (j.distribution.kind != Distribution::random) j.norandommap = true;  // fio: no random map for skewed offsets
    if (d.randseed_set) j.randrepeat = true;  // an explicit seed is repeatable
    if (j.distribution.kind == Distribution::zoned_abs && j.distribution.zones.empty()) return fail("zoned_abs needs zones");

    // Buffers: 100% compressible = zeros (fio).
    if (j.buffer_compress_percentage == 100) {
      j.zero_buffers = true;
      j.buffer_compress_percentage = 0;
    }
    j.end_fsync = d.end_fsync || d.fsync_on_close;

    // Logs: a bare write_*_log names the files after the job (fio uses the section name).
    auto log_name = [&](const std::optional<std::string>& l) { return !l ? std::string() : l->empty() ? d.section : *l; };
    j.write_lat_log = log_name(d.lat_log);
    j.write_bw_log = log_name(d.bw_log);
    j.write_iops_log = log_name(d.iops_log);

    // Region.
    if (j.size && min_used != UINT64_MAX && j.size < min_used) {
      return fail(fmt::format("size ({}) is smaller than bs ({})", j.size, min_used));
    }
    if (j.offset % 512) return fail("offset must be a multiple of 512");
    if (j.offset_increment % 512) return fail("offset_increment must be a multiple of 512");
    return j;
  }

 private:
  void note(const RawOption& o, std::string_view reason) {
    if (!noted_.insert(o.key).second) return;
    notes_.push_back(fmt::format("{}: option '{}' has no effect on NVMe-oF namespaces ({})", o.where, o.key, reason));
  }

  std::vector<std::string>& notes_;
  std::set<std::string> noted_;
};

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

Result<JobFile> parse_job_text(std::string_view text, std::string_view file_name) {
  Reader reader;
  if (auto r = reader.read(text, std::string(file_name), 0); !r) return tl::unexpected(r.error());

  JobFile out;
  Builder builder(out.notes);
  Draft global;
  std::vector<Draft> drafts;
  for (const auto& s : reader.sections) {
    if (s.global) {
      if (auto r = builder.apply(global, s, out.global_options); !r) return tl::unexpected(r.error());
      continue;
    }
    Draft d = global;  // a job starts from the [global] options seen so far
    d.section = s.name;
    d.spec.name = s.name;
    d.spec.where = s.where;
    d.spec.options.clear();
    if (auto r = builder.apply(d, s, d.spec.options); !r) return tl::unexpected(r.error());
    drafts.push_back(std::move(d));
  }
  if (drafts.empty()) return make_error(fmt::format("{}: no job sections (only [global])", file_name));

  std::vector<JobSpec> specs;
  for (auto& d : drafts) {
    auto j = builder.finish(d);
    if (!j) return tl::unexpected(j.error());
    specs.push_back(std::move(*j));
  }

  // Groups (fio init.c add_job): a job with stonewall or new_group starts the next group unless no job
  // came before it.
  unsigned group = 0;
  bool group_has_jobs = false;
  for (auto& j : specs) {
    if ((j.stonewall || j.new_group) && group_has_jobs) ++group;
    j.groupid = group;
    group_has_jobs = true;
  }
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const JobSpec& j = specs[i];
    auto fail = [&](const std::string& m) { return make_error(fmt::format("{}: job '{}': {}", j.where, j.name, m)); };
    // fio: group_reporting merges a group's latencies, so its jobs agree on lat_percentiles.
    for (std::size_t k = 0; k < i; ++k) {
      if (specs[k].groupid == j.groupid && j.group_reporting && specs[k].lat_percentiles != j.lat_percentiles) {
        return fail(fmt::format("lat_percentiles differs from job '{}' of the same group", specs[k].name));
      }
    }
    if (j.wait_for.empty()) continue;
    if (j.wait_for == drafts[i].section || j.wait_for == j.name) return fail("a job cannot wait for itself");
    auto n = std::count_if(specs.begin(), specs.begin() + static_cast<std::ptrdiff_t>(i),
                           [&](const JobSpec& e) { return e.name == j.wait_for; });
    if (n == 0) return fail(fmt::format("wait_for='{}' names no job before this one", j.wait_for));
    if (n > 1) return fail(fmt::format("wait_for='{}' is ambiguous: {} jobs have that name", j.wait_for, n));
  }

  // numjobs copies: same group, offset + i * offset_increment; stonewall and new_group stay with the
  // first copy (fio). startdelay=LOW-HIGH: each copy picks its own delay.
  std::random_device entropy;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const JobSpec& s = specs[i];
    const Draft& d = drafts[i];
    for (unsigned c = 0; c < s.numjobs; ++c) {
      JobSpec copy = s;
      copy.clone = c;
      copy.offset = s.offset + uint64_t{c} * s.offset_increment;
      if (c > 0) copy.stonewall = copy.new_group = false;
      if (d.startdelay_high > s.startdelay) {
        uint64_t r = s.randrepeat ? splitmix64(s.randseed ^ (uint64_t{i} << 32) ^ c) : (uint64_t{entropy()} << 32 | entropy());
        auto span = static_cast<uint64_t>((d.startdelay_high - s.startdelay).count()) + 1;
        copy.startdelay = s.startdelay + nanoseconds(static_cast<int64_t>(r % span));
      }
      out.jobs.push_back(std::move(copy));
    }
  }
  return out;
}

Result<JobFile> parse_job_file(const std::string& path) {
  auto text = read_whole_file(path);
  if (!text) return tl::unexpected(text.error());
  return parse_job_text(*text, path);
}

}  // namespace rdmablk::initiator::bench

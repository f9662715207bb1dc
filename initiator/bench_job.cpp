#include "initiator/bench_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
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

// Leading decimal digits of `s` as a number; the rest in `suffix`.
bool split_number(std::string_view s, uint64_t& value, std::string_view& suffix) {
  s = trim(s);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end == s.data()) return false;
  suffix = trim(std::string_view(end, static_cast<std::size_t>(s.data() + s.size() - end)));
  return true;
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t& out) { return __builtin_mul_overflow(a, b, &out); }

Result<uint64_t> parse_uint(std::string_view s, uint64_t min, uint64_t max) {
  uint64_t v = 0;
  std::string_view suffix;
  if (!split_number(s, v, suffix) || !suffix.empty()) return make_error("expected a whole number");
  if (v < min || v > max) return make_error(fmt::format("must be between {} and {}", min, max));
  return v;
}

Result<bool> parse_bool(std::string_view s) {
  std::string v = lower(trim(s));
  if (v.empty() || v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return make_error("expected 0 or 1");
}

}  // namespace

Result<uint64_t> parse_size(std::string_view s) {
  uint64_t v = 0;
  std::string_view suffix;
  if (!split_number(s, v, suffix)) return make_error("expected a size like 4096, 4k, 1m or 2g");
  std::string u = lower(suffix);
  if (!u.empty() && u.back() == 'b') u.pop_back();  // "kb", "kib", "b"
  if (!u.empty() && u.back() == 'i') u.pop_back();  // "ki"
  unsigned shift = 0;
  if (u.empty()) shift = 0;
  else if (u == "k") shift = 10;
  else if (u == "m") shift = 20;
  else if (u == "g") shift = 30;
  else if (u == "t") shift = 40;
  else if (u == "p") shift = 50;
  else return make_error(fmt::format("unknown size unit '{}' (use k, m, g, t or p)", suffix));
  uint64_t out = 0;
  if (mul_overflows(v, uint64_t{1} << shift, out)) return make_error("size too large");
  return out;
}

Result<std::chrono::nanoseconds> parse_duration(std::string_view s) {
  uint64_t v = 0;
  std::string_view suffix;
  if (!split_number(s, v, suffix)) return make_error("expected a time like 30, 500ms, 10s or 2m");
  std::string u = lower(suffix);
  uint64_t ns_per = 0;
  if (u.empty() || u == "s" || u == "sec") ns_per = 1000000000ull;
  else if (u == "ms" || u == "msec") ns_per = 1000000ull;
  else if (u == "us" || u == "usec") ns_per = 1000ull;
  else if (u == "m" || u == "min") ns_per = 60ull * 1000000000ull;
  else if (u == "h" || u == "hr") ns_per = 3600ull * 1000000000ull;
  else if (u == "d") ns_per = 86400ull * 1000000000ull;
  else return make_error(fmt::format("unknown time unit '{}' (use us, ms, s, m, h or d)", suffix));
  uint64_t out = 0;
  if (mul_overflows(v, ns_per, out) || out > uint64_t(INT64_MAX)) return make_error("time too large");
  return std::chrono::nanoseconds(static_cast<int64_t>(out));
}

namespace {

// Applies one key to `job`. Errors are just the reason; the caller adds file:line and the key.
Result<void> apply(JobSpec& job, const std::string& key, std::string_view value) {
  auto to_void = [](auto r) -> Result<void> {
    if (!r) return tl::unexpected(r.error());
    return {};
  };
  if (key == "name") {
    if (trim(value).empty()) return make_error("must not be empty");
    job.name = std::string(trim(value));
    return {};
  }
  if (key == "rw" || key == "readwrite") {
    std::string v = lower(trim(value));
    if (v == "read") job.rw = RwMode::read;
    else if (v == "write") job.rw = RwMode::write;
    else if (v == "randread") job.rw = RwMode::randread;
    else if (v == "randwrite") job.rw = RwMode::randwrite;
    else if (v == "rw" || v == "readwrite") job.rw = RwMode::rw;
    else if (v == "randrw") job.rw = RwMode::randrw;
    else return make_error("expected read, write, randread, randwrite, rw, readwrite or randrw");
    return {};
  }
  if (key == "rwmixread" || key == "rwmixwrite") {
    auto v = parse_uint(value, 0, 100);
    if (!v) return to_void(v);
    job.rwmixread = static_cast<unsigned>(key == "rwmixread" ? *v : 100 - *v);
    return {};
  }
  if (key == "bs" || key == "blocksize") {
    if (value.find(',') != std::string_view::npos) return make_error("separate read,write block sizes are not supported");
    auto v = parse_size(value);
    if (!v) return to_void(v);
    if (*v < 512 || *v % 512 || *v > (uint64_t{1} << 30)) return make_error("must be a multiple of 512 up to 1g");
    for (auto& b : job.bs) b.min = b.max = *v;
    return {};
  }
  if (key == "iodepth") {
    auto v = parse_uint(value, 1, 4096);
    if (!v) return to_void(v);
    job.iodepth = static_cast<unsigned>(*v);
    return {};
  }
  if (key == "numjobs") {
    auto v = parse_uint(value, 1, 256);
    if (!v) return to_void(v);
    job.numjobs = static_cast<unsigned>(*v);
    return {};
  }
  if (key == "size" || key == "offset" || key == "offset_increment") {
    auto v = parse_size(value);
    if (!v) return to_void(v);
    (key == "size" ? job.size : key == "offset" ? job.offset : job.offset_increment) = *v;
    return {};
  }
  if (key == "runtime" || key == "ramp_time") {
    auto v = parse_duration(value);
    if (!v) return to_void(v);
    (key == "runtime" ? job.runtime : job.ramp_time) = *v;
    return {};
  }
  if (key == "time_based") {
    auto v = parse_bool(value);
    if (!v) return to_void(v);
    job.time_based = *v;
    return {};
  }
  if (key == "namespace") {
    auto v = parse_uint(value, 1, 0xFFFFFFFEu);
    if (!v) return to_void(v);
    job.nsid = static_cast<uint32_t>(*v);
    return {};
  }
  if (key == "verify") {
    std::string v = lower(trim(value));
    if (v == "crc32c") job.verify = VerifyKind::crc32c;
    else if (v == "0" || v == "none") job.verify = VerifyKind::none;
    else return make_error("only verify=crc32c (or 0/none) is supported");
    return {};
  }
  if (key == "filename") {
    auto u = parse_namespace_uri(trim(value));
    if (!u) return to_void(u);
    job.filename = *u;
    return {};
  }
  if (key == "ioengine" || key == "direct" || key == "thread") return {};  // fio compatibility, no effect here
  return make_error("unknown option");
}

bool known_key(const std::string& key) {
  static constexpr std::string_view kKeys[] = {
      "name",   "rw",       "readwrite",        "rwmixread", "rwmixwrite", "bs",        "blocksize",
      "iodepth", "numjobs", "size",             "offset",    "offset_increment", "runtime", "ramp_time",
      "time_based", "namespace", "verify",      "filename",  "ioengine",   "direct",    "thread"};
  return std::find(std::begin(kKeys), std::end(kKeys), key) != std::end(kKeys);
}

Result<void> validate(const JobSpec& j) {
  if (j.time_based && j.runtime.count() == 0) return make_error("time_based needs a runtime");
  if (j.verify != VerifyKind::none && (j.rw == RwMode::rw || j.rw == RwMode::randrw)) {
    return make_error("verify=crc32c works with rw=write|randwrite (write, then verify) or read|randread");
  }
  if (j.verify != VerifyKind::none && j.numjobs > 1 && does_writes(j.rw) && (j.size == 0 || j.offset_increment < j.size)) {
    return make_error("numjobs > 1 with verify needs size and offset_increment >= size, so copies do not "
                      "overwrite each other's blocks");
  }
  if (j.size && j.size < j.max_bs()) return make_error(fmt::format("size ({}) is smaller than bs ({})", j.size, j.max_bs()));
  if (j.offset % 512) return make_error("offset must be a multiple of 512");
  return {};
}

}  // namespace

Result<JobFile> parse_job_text(std::string_view text, std::string_view file_name) {
  JobFile out;
  JobSpec global;
  Options global_opts;
  std::vector<JobSpec> sections;
  JobSpec* current = nullptr;
  bool in_global = false;
  unsigned line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    line = trim(line);
    if (line.empty() || line.front() == ';' || line.front() == '#') continue;
    // Trailing comments: ';' or '#' after whitespace.
    for (std::size_t i = 1; i < line.size(); ++i) {
      if ((line[i] == ';' || line[i] == '#') && std::isspace(static_cast<unsigned char>(line[i - 1]))) {
        line = trim(line.substr(0, i));
        break;
      }
    }
    auto where = fmt::format("{}:{}", file_name, line_no);
    if (line.front() == '[') {
      if (line.back() != ']') return make_error(where + ": unterminated section header '" + std::string(line) + "'");
      std::string name(trim(line.substr(1, line.size() - 2)));
      if (name.empty()) return make_error(where + ": empty section name");
      if (name == "global") {
        in_global = true;
        current = &global;
      } else {
        in_global = false;
        sections.push_back(global);  // a job starts from the [global] options seen so far
        current = &sections.back();
        current->name = name;
        current->options.clear();
        current->where = where;
      }
      continue;
    }
    if (!current) return make_error(where + ": option '" + std::string(line) + "' outside of a [section]");
    auto eq = line.find('=');
    std::string key = lower(trim(line.substr(0, eq)));
    std::string_view value = eq == std::string_view::npos ? std::string_view{} : trim(line.substr(eq + 1));
    if (key.empty()) return make_error(where + ": missing option name");
    if (!known_key(key)) return make_error(fmt::format("{}: unknown option '{}'", where, key));
    if (eq == std::string_view::npos && key != "time_based" && key != "thread") {
      return make_error(fmt::format("{}: option '{}' needs a value ({}=...)", where, key, key));
    }
    if (auto r = apply(*current, key, value); !r) {
      return make_error(fmt::format("{}: invalid value '{}' for '{}': {}", where, value, key, r.error().message));
    }
    Options& opts = in_global ? global_opts : current->options;
    auto it = std::find_if(opts.begin(), opts.end(), [&](const auto& kv) { return kv.first == key; });
    if (it != opts.end()) it->second = std::string(value);
    else opts.emplace_back(key, std::string(value));
  }
  if (sections.empty()) return make_error(fmt::format("{}: no job sections (only [global])", file_name));
  for (const auto& s : sections) {
    if (auto r = validate(s); !r) return make_error(fmt::format("{}: job '{}': {}", s.where, s.name, r.error().message));
    for (unsigned i = 0; i < s.numjobs; ++i) {
      JobSpec copy = s;
      copy.clone = i;
      copy.offset = s.offset + uint64_t{i} * s.offset_increment;
      out.jobs.push_back(std::move(copy));
    }
  }
  out.global_options = std::move(global_opts);
  return out;
}

Result<JobFile> parse_job_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("cannot open job file '{}': {}", path, std::strerror(errno)), errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_job_text(ss.str(), path);
}

}  // namespace rdmablk::initiator::bench

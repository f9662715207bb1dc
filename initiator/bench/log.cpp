#include "initiator/bench/log.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <new>
#include <string_view>

namespace rdmablk::initiator::bench {

const char* log_kind_name(LogKind k) noexcept {
  switch (k) {
    case LogKind::clat: return "clat";
    case LogKind::slat: return "slat";
    case LogKind::lat: return "lat";
    case LogKind::bw: return "bw";
    case LogKind::iops: return "iops";
  }
  return "?";
}

std::string fio_log_name(const std::string& prefix, LogKind kind, unsigned job_number, bool per_job_logs) {
  if (per_job_logs) return fmt::format("{}_{}.{}.log", prefix, log_kind_name(kind), job_number);
  return fmt::format("{}_{}.log", prefix, log_kind_name(kind));
}

namespace {

// fio's flush_samples() formats: "%lu, %" PRId64 ", %u, %llu, %u\n", with "%llu, " for the offset.
void append_line(fmt::memory_buffer& out, const LogSample& s, bool log_offset) {
  if (log_offset)
    fmt::format_to(std::back_inserter(out), "{}, {}, {}, {}, {}, {}\n", s.t_ms, s.value, static_cast<unsigned>(s.ddir),
                   s.bs, s.offset, s.prio);
  else
    fmt::format_to(std::back_inserter(out), "{}, {}, {}, {}, {}\n", s.t_ms, s.value, static_cast<unsigned>(s.ddir), s.bs,
                   s.prio);
}

std::string_view trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r')) v.remove_suffix(1);
  return v;
}

template <typename T>
bool parse_number(std::string_view v, T& out) {
  int base = 10;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    v.remove_prefix(2);
    base = 16;
  }
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out, base);
  return ec == std::errc() && p == v.data() + v.size() && !v.empty();
}

// fio's LOG_MSEC_SLACK (stat.c): how early a bw/iops averaging window may close.
constexpr uint64_t kLogMsecSlack = 1;

// One completed I/O, kept for per-I/O logs (log_avg_msec=0); every per-I/O log is derived from it.
struct IoRecord {
  uint64_t lat_ns;
  uint64_t offset;
  uint32_t t_ms;  // saturates after 49 days
  uint32_t bs;
  Ddir ddir;
};
static_assert(sizeof(IoRecord) == 32);

// Append-only storage in fixed chunks: growing never copies what was recorded (no latency spike on the
// data path when a big vector would double), and the chunk pointers grow rarely.
class IoRecords {
 public:
  static constexpr std::size_t kChunk = 16384;  // 512 KiB

  bool reserve_first() noexcept { return grow(); }
  bool push(const IoRecord& r) noexcept {
    if (n_ == chunks_.size() * kChunk && !grow()) return false;
    chunks_[n_ / kChunk][n_ % kChunk] = r;
    ++n_;
    return true;
  }
  std::size_t size() const noexcept { return n_; }
  template <typename F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < n_; ++i) f(chunks_[i / kChunk][i % kChunk]);
  }

 private:
  bool grow() noexcept {
    try {
      if (chunks_.size() == chunks_.capacity()) chunks_.reserve(std::max<std::size_t>(64, chunks_.size() * 2));
      chunks_.push_back(std::make_unique_for_overwrite<IoRecord[]>(kChunk));
      return true;
    } catch (const std::bad_alloc&) {
      return false;
    }
  }
  std::vector<std::unique_ptr<IoRecord[]>> chunks_;
  std::size_t n_ = 0;
};

// fio's struct io_stat as far as a log window uses it (stat.c add_stat_sample: running mean, max).
struct Window {
  uint64_t samples = 0;
  double mean = 0;
  uint64_t max = 0;
  void add(uint64_t v) noexcept {
    max = std::max(max, v);
    double val = static_cast<double>(v);
    double delta = val - mean;
    if (delta != 0) mean += delta / (static_cast<double>(samples) + 1.0);
    ++samples;
  }
};

// One averaged log: per direction an open window and its start (fio's io_log avg_window / avg_last).
struct AvgLog {
  std::array<Window, kDdirs> window{};
  std::array<uint64_t, kDdirs> last{};
  std::vector<LogSample> out;
  bool dropped = false;

  // stat.c add_log_sample() with avg_msec set; inline_log: latency logs close a window exactly at
  // avg_msec, bw/iops logs up to kLogMsecSlack early.
  void add(uint64_t t, Ddir d, uint64_t v, uint64_t avg_ms, bool inline_log, bool log_max) noexcept {
    window[d].add(v);
    if (t < last[d]) return;
    uint64_t this_window = t - last[d];
    if (this_window < avg_ms && (inline_log || avg_ms - this_window > kLogMsecSlack)) return;
    close(t, d, log_max);
    last[d] = t - t % avg_ms;
  }
  // stat.c __add_stat_to_log(): a line only for a window with samples; bs and offset 0.
  void close(uint64_t t, Ddir d, bool log_max) noexcept {
    Window& w = window[d];
    if (w.samples) {
      uint64_t v = log_max ? w.max : static_cast<uint64_t>(w.mean + 0.50);
      try {
        out.push_back(LogSample{t, static_cast<int64_t>(v), d, 0, 0, 0});
      } catch (const std::bad_alloc&) {
        dropped = true;
      }
    }
    w = Window{};
  }
  void close_all(uint64_t t, bool log_max) noexcept {
    for (std::size_t d = 0; d < kDdirs; ++d) close(t, static_cast<Ddir>(d), log_max);
  }
};

}  // namespace

std::string format_log_line(const LogSample& s, bool log_offset) {
  fmt::memory_buffer out;
  append_line(out, s, log_offset);
  return fmt::to_string(out);
}

Result<std::vector<LogSample>> read_fio_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: {}", path, std::strerror(errno)), errno);
  std::vector<LogSample> samples;
  std::string line;
  unsigned line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view rest = trim(line);
    if (rest.empty()) continue;
    std::array<std::string_view, 6> f{};
    std::size_t n = 0;
    while (true) {
      std::size_t comma = rest.find(',');
      if (n == f.size()) return make_error(fmt::format("{}:{}: more than 6 columns", path, line_no), EINVAL);
      f[n++] = trim(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (n < 4) return make_error(fmt::format("{}:{}: {} columns, a fio log has 4 to 6", path, line_no, n), EINVAL);
    LogSample s;
    unsigned ddir = 0;
    bool ok = parse_number(f[0], s.t_ms) && parse_number(f[1], s.value) && parse_number(f[2], ddir) && ddir < kDdirs &&
              parse_number(f[3], s.bs);
    s.ddir = static_cast<Ddir>(ddir);
    if (ok && n == 5) ok = parse_number(f[4], s.prio);
    if (ok && n == 6) ok = parse_number(f[4], s.offset) && parse_number(f[5], s.prio);
    if (!ok) return make_error(fmt::format("{}:{}: not a fio log line: '{}'", path, line_no, line), EINVAL);
    samples.push_back(s);
  }
  if (in.bad()) return make_error(fmt::format("{}: read error", path), EIO);
  return samples;
}

struct JobLogs::State {
  std::string lat_prefix, bw_prefix, iops_prefix;
  unsigned job_number = 1;
  bool per_job_logs = true;
  bool log_offset = false;
  bool log_max = false;
  uint64_t avg_ms = 0;
  uint64_t ramp_ms = 0;
  bool finished = false;
  bool dropped = false;

  // log_avg_msec=0: every I/O.
  IoRecords ios;
  // log_avg_msec>0: latency windows (clat; lat is the same without slat), bw/iops samples.
  AvgLog lat, bw, iops;
  uint64_t sample_time = 0;  // fio's bw_sample_time / iops_sample_time (both move together here)
  std::array<uint64_t, kDdirs> bytes{}, bytes_sampled{}, count{}, count_sampled{};

  bool has(LogKind k) const noexcept {
    switch (k) {
      case LogKind::clat:
      case LogKind::slat:
      case LogKind::lat: return !lat_prefix.empty();
      case LogKind::bw: return !bw_prefix.empty();
      case LogKind::iops: return !iops_prefix.empty();
    }
    return false;
  }
  const std::string& prefix(LogKind k) const noexcept {
    return k == LogKind::bw ? bw_prefix : k == LogKind::iops ? iops_prefix : lat_prefix;
  }

  // Calls f(const LogSample&) for every line of log k, in file order.
  template <typename F>
  void for_each_sample(LogKind k, F&& f) const {
    if (!has(k) || k == LogKind::slat) return;
    if (avg_ms == 0) {
      ios.for_each([&](const IoRecord& r) {
        int64_t value = 0;
        switch (k) {
          case LogKind::clat:
          case LogKind::lat: value = static_cast<int64_t>(r.lat_ns); break;
          case LogKind::bw:  // stat.c add_bw_sample: bytes * 1000000 / spent (spent = clat in ns)
            value = r.lat_ns ? static_cast<int64_t>(uint64_t{r.bs} * 1000000ull / r.lat_ns) : 0;
            break;
          case LogKind::iops: value = 1; break;
          case LogKind::slat: break;
        }
        f(LogSample{r.t_ms, value, r.ddir, r.bs, r.offset, 0});
      });
      return;
    }
    const AvgLog& log = k == LogKind::bw ? bw : k == LogKind::iops ? iops : lat;
    for (const LogSample& s : log.out) f(s);
  }
};

JobLogs::JobLogs(const JobSpec& spec, unsigned job_number, bool log_max_value) : s_(std::make_unique<State>()) {
  s_->lat_prefix = spec.write_lat_log;
  s_->bw_prefix = spec.write_bw_log;
  s_->iops_prefix = spec.write_iops_log;
  s_->job_number = job_number;
  s_->per_job_logs = spec.per_job_logs;
  s_->log_offset = spec.log_offset;
  s_->log_max = log_max_value;
  s_->avg_ms = static_cast<uint64_t>(std::max<int64_t>(0, spec.log_avg_msec.count()));
  s_->ramp_ms = static_cast<uint64_t>(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(spec.ramp_time).count()));
  if (!enabled()) return;
  // Allocate up front what the first I/Os need, so that recording starts without allocating.
  if (s_->avg_ms == 0) {
    s_->ios.reserve_first();
  } else {
    for (AvgLog* l : {&s_->lat, &s_->bw, &s_->iops}) l->out.reserve(256);
  }
}

JobLogs::~JobLogs() = default;
JobLogs::JobLogs(JobLogs&&) noexcept = default;
JobLogs& JobLogs::operator=(JobLogs&&) noexcept = default;

bool JobLogs::enabled() const noexcept {
  return s_ && (!s_->lat_prefix.empty() || !s_->bw_prefix.empty() || !s_->iops_prefix.empty());
}
bool JobLogs::logs(LogKind k) const noexcept { return s_ && s_->has(k); }
bool JobLogs::averaged() const noexcept { return s_ && s_->avg_ms > 0; }

void JobLogs::on_io(uint64_t t_ms, Ddir d, uint64_t lat_ns, uint64_t len, uint64_t offset) noexcept {
  if (!enabled() || s_->finished || d >= kDdirs || t_ms < s_->ramp_ms) return;
  State& s = *s_;
  uint64_t t = t_ms - s.ramp_ms;
  if (s.avg_ms == 0) {
    constexpr uint64_t kU32 = std::numeric_limits<uint32_t>::max();
    IoRecord r{lat_ns, offset, static_cast<uint32_t>(std::min(t, kU32)), static_cast<uint32_t>(std::min(len, kU32)), d};
    if (!s.ios.push(r)) s.dropped = true;
    return;
  }
  if (!s.lat_prefix.empty()) s.lat.add(t, d, lat_ns, s.avg_ms, /*inline_log=*/true, s.log_max);
  s.bytes[d] += len;
  s.count[d] += 1;
}

uint64_t JobLogs::next_tick_ms() const noexcept {
  if (!enabled() || s_->finished || s_->avg_ms == 0 || (s_->bw_prefix.empty() && s_->iops_prefix.empty()))
    return UINT64_MAX;
  return s_->ramp_ms + s_->sample_time + s_->avg_ms;
}

void JobLogs::tick(uint64_t t_ms) noexcept {
  if (t_ms < next_tick_ms()) return;
  State& s = *s_;
  uint64_t t = t_ms - s.ramp_ms;
  uint64_t spent = t - s.sample_time;
  // stat.c __add_samples(): per direction that moved data since the last sample.
  for (std::size_t i = 0; i < kDdirs; ++i) {
    Ddir d = static_cast<Ddir>(i);
    if (!s.bw_prefix.empty() && s.bytes[d] != s.bytes_sampled[d]) {
      uint64_t delta = s.bytes[d] - s.bytes_sampled[d];
      s.bw.add(t, d, delta * 1000 / spent / 1024, s.avg_ms, /*inline_log=*/false, s.log_max);  // KiB/s
    }
    if (!s.iops_prefix.empty() && s.count[d] != s.count_sampled[d]) {
      uint64_t delta = s.count[d] - s.count_sampled[d];
      s.iops.add(t, d, delta * 1000 / spent, s.avg_ms, /*inline_log=*/false, s.log_max);
    }
  }
  s.bytes_sampled = s.bytes;
  s.count_sampled = s.count;
  s.sample_time = t;
}

void JobLogs::finish(uint64_t t_ms) noexcept {
  if (!enabled() || s_->finished) return;
  State& s = *s_;
  s.finished = true;
  if (s.avg_ms == 0) return;
  // stat.c finalize_logs(): close the open windows (bw/iops windows are empty unless a sample came
  // within the slack); the partial bw/iops interval since the last sample is not logged.
  uint64_t t = t_ms > s.ramp_ms ? t_ms - s.ramp_ms : 0;
  s.lat.close_all(t, s.log_max);
  s.bw.close_all(t, s.log_max);
  s.iops.close_all(t, s.log_max);
}

std::vector<LogSample> JobLogs::samples(LogKind k) const {
  std::vector<LogSample> out;
  if (s_) s_->for_each_sample(k, [&](const LogSample& x) { out.push_back(x); });
  return out;
}

std::vector<std::string> JobLogs::paths() const {
  std::vector<std::string> out;
  if (!s_) return out;
  for (LogKind k : {LogKind::lat, LogKind::slat, LogKind::clat, LogKind::bw, LogKind::iops})
    if (s_->has(k)) out.push_back(fio_log_name(s_->prefix(k), k, s_->job_number, s_->per_job_logs));
  return out;
}

Result<std::vector<std::string>> JobLogs::write() const {
  std::vector<std::string> written;
  if (!enabled()) return written;
  for (LogKind k : {LogKind::lat, LogKind::slat, LogKind::clat, LogKind::bw, LogKind::iops}) {
    if (!s_->has(k)) continue;
    std::string path = fio_log_name(s_->prefix(k), k, s_->job_number, s_->per_job_logs);
    std::FILE* f = std::fopen(path.c_str(), s_->per_job_logs ? "w" : "a");
    if (!f) return make_error(fmt::format("cannot write log {}: {}", path, std::strerror(errno)), errno);
    fmt::memory_buffer buf;
    bool ok = true;
    auto flush = [&] {
      if (buf.size() && std::fwrite(buf.data(), 1, buf.size(), f) != buf.size()) ok = false;
      buf.clear();
    };
    s_->for_each_sample(k, [&](const LogSample& x) {
      append_line(buf, x, s_->log_offset);
      if (buf.size() >= (1u << 20)) flush();
    });
    flush();
    int err = ok ? 0 : errno;
    if (std::fclose(f) != 0 && ok) {
      ok = false;
      err = errno;
    }
    if (!ok) return make_error(fmt::format("cannot write log {}: {}", path, std::strerror(err)), err);
    written.push_back(std::move(path));
  }
  return written;
}

bool JobLogs::dropped() const noexcept {
  return s_ && (s_->dropped || s_->lat.dropped || s_->bw.dropped || s_->iops.dropped);
}

}  // namespace rdmablk::initiator::bench

#include "initiator/bench/report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>

namespace rdmablk::initiator::bench {

std::string num2str(uint64_t num, int maxdigits, int base, bool pow2, N2sUnit unit) {
  static const char* const si[] = {"", "k", "M", "G", "T", "P"};
  static const char* const iec[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
  const char* unit_str = "";
  switch (unit) {
    case N2sUnit::none: unit_str = ""; break;
    case N2sUnit::per_sec: unit_str = "/s"; break;
    case N2sUnit::byte: unit_str = "B"; break;
    case N2sUnit::byte_per_sec: unit_str = "B/s"; break;
  }
  const char* const* prefix = pow2 ? iec : si;
  const unsigned thousand = pow2 ? 1024 : 1000;
  int post = 0;
  for (; base > 1; ++post) base /= static_cast<int>(thousand);
  bool have_modulo = false;
  unsigned modulo = 0;
  bool carry = false;
  while (post < 6) {
    if (static_cast<int>(std::to_string(num).size()) <= maxdigits) break;
    modulo = static_cast<unsigned>(num % thousand);
    num /= thousand;
    carry = modulo >= thousand / 2;
    have_modulo = true;
    ++post;
  }
  if (post >= 6) post = 0;
  if (!have_modulo) return fmt::format("{}{}{}", num, prefix[post], unit_str);
  int len = static_cast<int>(std::to_string(num).size());
  if (maxdigits - len <= 1) {
    if (carry) ++num;
    return fmt::format("{}{}{}", num, prefix[post], unit_str);
  }
  std::string frac = fmt::format("{:.{}f}", static_cast<double>(modulo) / thousand, maxdigits - len - 1);
  if (frac[0] == '1') ++num;
  return fmt::format("{}.{}{}{}", num, frac.substr(2), prefix[post], unit_str);
}

namespace {

using ojson = nlohmann::ordered_json;

// What fio reports as one job (its thread_stat): a job, or with group_reporting the consecutive jobs
// of a group merged (stat.c __show_run_stats: name, description and group from the first member,
// percentile settings and job options from the last, latencies merged, bytes and I/Os added, each
// direction's runtime the longest, CPU time and context switches added, the first error).
struct Entry {
  const JobSpec* first = nullptr;
  const JobSpec* last = nullptr;
  unsigned members = 0;
  int error = 0;
  std::string error_message;
  std::array<DirectionStats, kDdirs> dirs{};
  uint64_t job_start_ms = UINT64_MAX;
  uint64_t job_runtime_ms = 0;  // summed over the members, as fio's total_run_time
  uint64_t elapsed_ms = 0;      // the longest member
  double usr_ms = 0, sys_ms = 0;
  uint64_t ctx = 0, majf = 0, minf = 0;

  UnifiedRw unified() const { return first->unified_rw_reporting; }
  double usr_cpu() const { return job_runtime_ms ? 100.0 * usr_ms / static_cast<double>(job_runtime_ms) : 0.0; }
  double sys_cpu() const { return job_runtime_ms ? 100.0 * sys_ms / static_cast<double>(job_runtime_ms) : 0.0; }
  uint64_t ios() const { return dirs[kRead].ios + dirs[kWrite].ios + dirs[kTrim].ios; }
  double cpu_us_per_io() const {
    return ios() ? (usr_ms + sys_ms) * 1000.0 / static_cast<double>(ios()) : 0.0;
  }
  // unified_rw_reporting's "mixed" direction: reads, writes and trims as one (fio sum_thread_stats
  // with UNIFIED_MIXED).
  DirectionStats mixed() const {
    DirectionStats m;
    for (const auto& d : dirs) m.merge(d);
    return m;
  }
};

std::vector<Entry> entries(const std::vector<JobResult>& results) {
  std::vector<Entry> out;
  const JobResult* prev = nullptr;
  for (const auto& r : results) {
    // fio: a job joins the entry before it when it has group_reporting and the same group.
    if (!prev || !r.spec.group_reporting || prev->spec.groupid != r.spec.groupid) out.emplace_back();
    prev = &r;
    Entry& e = out.back();
    if (!e.first) e.first = &r.spec;
    e.last = &r.spec;
    ++e.members;
    if (!e.error && r.error) {
      e.error = r.error;
      e.error_message = r.error_message;
    }
    e.dirs[kRead].merge(r.read);
    e.dirs[kWrite].merge(r.write);
    e.dirs[kTrim].merge(r.trim);
    e.job_start_ms = std::min(e.job_start_ms, r.job_start_ms);
    e.job_runtime_ms += r.job_runtime_ms;
    e.elapsed_ms = std::max(e.elapsed_ms, r.job_runtime_ms);
    e.usr_ms += r.usr_cpu / 100.0 * static_cast<double>(r.job_runtime_ms);
    e.sys_ms += r.sys_cpu / 100.0 * static_cast<double>(r.job_runtime_ms);
    e.ctx += r.ctx;
    e.majf += r.majf;
    e.minf += r.minf;
  }
  return out;
}

// The job's percentile list, sorted (fio sorts it), and the decimals fio prints them with (the most
// any value in the list needs; 2 for the default list).
struct Percentiles {
  std::vector<double> list;
  int precision = 2;
};

Percentiles percentiles_of(const JobSpec& spec) {
  Percentiles p;
  if (spec.percentile_list.empty()) {
    p.list.assign(kFioPercentiles.begin(), kFioPercentiles.end());
    return p;
  }
  p.list = spec.percentile_list;
  std::sort(p.list.begin(), p.list.end());
  p.precision = 0;
  for (double v : p.list) {
    std::string s = fmt::format("{:.6f}", v);
    while (s.back() == '0') s.pop_back();
    p.precision = std::max(p.precision, static_cast<int>(s.size() - s.find('.') - 1));
  }
  return p;
}

void display_lat(std::string& out, const char* name, const LatencyHistogram& h) {
  uint64_t min = h.min(), max = h.max();
  double mean = h.mean(), dev = h.stddev();
  const char* base = "(nsec)";
  if (min > 2000000 && max > 99999999ull && dev > 1000000.0) {
    base = "(msec)";
    min /= 1000000;
    max /= 1000000;
    mean /= 1e6;
    dev /= 1e6;
  } else if (min > 2000 && max > 99999 && dev > 1000.0) {
    base = "(usec)";
    min /= 1000;
    max /= 1000;
    mean /= 1e3;
    dev /= 1e3;
  }
  out += fmt::format("    {} {}: min={}, max={}, avg={:5.02f}, stdev={:5.02f}\n", name, base,
                     num2str(min, 6, 1, false, N2sUnit::none), num2str(max, 6, 1, false, N2sUnit::none), mean, dev);
}

// fio's show_clat_percentiles: "    clat percentiles (usec):" then the list, as many per line as fit
// in 80 columns.
void show_percentiles(std::string& out, const char* name, const LatencyHistogram& h, const Percentiles& p) {
  if (h.count() == 0 || p.list.empty()) return;
  std::vector<uint64_t> vals;
  for (double q : p.list) vals.push_back(h.percentile(q));
  uint64_t minv = *std::min_element(vals.begin(), vals.end()), maxv = *std::max_element(vals.begin(), vals.end());
  int scale = 0;
  uint64_t divisor = 1;
  const char* unit = "nsec";
  if (minv > 2000000 && maxv > 99999999ull) {
    scale = 2;
    divisor = 1000000;
    unit = "msec";
  } else if (minv > 2000 && maxv > 99999) {
    scale = 1;
    divisor = 1000;
    unit = "usec";
  }
  out += fmt::format("    {} percentiles ({}):\n     |", name, unit);
  int width = std::max(5, static_cast<int>(std::log10(static_cast<double>(std::max<uint64_t>(maxv / divisor, 1))) + 1));
  const std::size_t per_line = static_cast<std::size_t>((80 - 7) / (p.precision + 10 + width));
  for (std::size_t j = 0; j < vals.size(); ++j) {
    if (j != 0 && j % per_line == 0) out += "     |";
    bool last = j == vals.size() - 1;
    uint64_t v = vals[j];
    for (int i = 0; i < scale; ++i) v = (v + 999) / 1000;
    out += fmt::format(" {:{}.{}f}th=[{:{}}]{}", p.list[j], p.precision + 3, p.precision, v, width, last ? '\n' : ',');
    if (last) break;
    if (j % per_line == per_line - 1) out += "\n";
  }
}

void show_ddir(std::string& out, const char* dir, const DirectionStats& d, const JobSpec& spec) {
  uint64_t runt = d.runtime_ms();
  uint64_t bw = d.bw_bytes();
  uint64_t iops = runt ? 1000 * d.ios / runt : 0;
  out += fmt::format("  {}: IOPS={}, BW={} ({})({}/{}msec)\n", dir, num2str(iops, 4, 1, false, N2sUnit::none),
                     num2str(bw, 4, 1, true, N2sUnit::byte_per_sec), num2str(bw, 4, 1, false, N2sUnit::byte_per_sec),
                     num2str(d.bytes, 4, 1, true, N2sUnit::byte), runt);
  if (d.clat.count() == 0) return;
  display_lat(out, "clat", d.clat);
  // We time each I/O from submission to completion, so total latency ("lat") is the completion latency.
  display_lat(out, " lat", d.clat);
  const Percentiles p = percentiles_of(spec);
  if (spec.clat_percentiles) show_percentiles(out, "clat", d.clat, p);
  if (spec.lat_percentiles) show_percentiles(out, "lat", d.clat, p);
}

std::string ctime_string(uint64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  char buf[64] = {};
  ctime_r(&t, buf);
  std::string s(buf);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// fio's group_run_stats for one direction of one group.
struct GroupDir {
  uint64_t bytes = 0, min_run = UINT64_MAX, max_run = 0, min_bw = UINT64_MAX, max_bw = 0;
  bool any = false;
  uint64_t agg() const { return max_run ? 1000 * bytes / max_run : 0; }
  void add(const DirectionStats& d) {
    if (d.ios == 0) return;
    any = true;
    bytes += d.bytes;
    min_run = std::min(min_run, d.runtime_ms());
    max_run = std::max(max_run, d.runtime_ms());
    min_bw = std::min(min_bw, d.bw_bytes());
    max_bw = std::max(max_bw, d.bw_bytes());
  }
};

void group_line(std::string& out, const char* dir, uint64_t bytes, uint64_t agg, uint64_t min_bw, uint64_t max_bw,
                uint64_t min_run, uint64_t max_run) {
  out += fmt::format("{}: bw={} ({}), {}-{} ({}-{}), io={} ({}), run={}-{}msec\n", dir,
                     num2str(agg, 4, 1, true, N2sUnit::byte_per_sec), num2str(agg, 4, 1, false, N2sUnit::byte_per_sec),
                     num2str(min_bw, 4, 1, true, N2sUnit::byte_per_sec), num2str(max_bw, 4, 1, true, N2sUnit::byte_per_sec),
                     num2str(min_bw, 4, 1, false, N2sUnit::byte_per_sec), num2str(max_bw, 4, 1, false, N2sUnit::byte_per_sec),
                     num2str(bytes, 4, 1, true, N2sUnit::byte), num2str(bytes, 4, 1, false, N2sUnit::byte), min_run, max_run);
}

// "Run status group N (all jobs):" and a line per direction (fio show_group_stats), from the reported
// entries: with group_reporting one merged entry, so min and max are the same.
void group_stats(std::string& out, unsigned groupid, const std::vector<Entry>& all) {
  out += fmt::format("Run status group {} (all jobs):\n", groupid);
  std::array<GroupDir, kDdirs> g{};
  unsigned unified = 0;  // fio ORs the entries' unified_rw_reporting
  for (const auto& e : all) {
    if (e.first->groupid != groupid) continue;
    unified |= static_cast<unsigned>(e.unified());
    if (e.unified() == UnifiedRw::mixed) {
      g[kRead].add(e.mixed());  // fio folds a mixed entry into its first direction
    } else {
      for (std::size_t d = 0; d < kDdirs; ++d) g[d].add(e.dirs[d]);
    }
  }
  static const char* const labels[] = {"   READ", "  WRITE", "   TRIM"};
  for (std::size_t d = 0; d < kDdirs; ++d) {
    if (!g[d].any) continue;
    group_line(out, unified == static_cast<unsigned>(UnifiedRw::mixed) ? "  MIXED" : labels[d], g[d].bytes, g[d].agg(),
               g[d].min_bw, g[d].max_bw, g[d].min_run, g[d].max_run);
  }
  if (unified == static_cast<unsigned>(UnifiedRw::both)) {
    // fio show_mixed_group_stats: the directions' sums and extremes.
    uint64_t bytes = 0, agg = 0, min_bw = UINT64_MAX, max_bw = 0, min_run = UINT64_MAX, max_run = 0;
    bool any = false;
    for (const auto& d : g) {
      if (!d.any) continue;
      any = true;
      bytes += d.bytes;
      agg += d.agg();
      min_bw = std::min(min_bw, d.min_bw);
      max_bw = std::max(max_bw, d.max_bw);
      min_run = std::min(min_run, d.min_run);
      max_run = std::max(max_run, d.max_run);
    }
    if (any) group_line(out, "  MIXED", bytes, agg, min_bw, max_bw, min_run, max_run);
  }
}

}  // namespace

// The client's CPU time per completed I/O (usr + sys over the whole job, setup and ramp included, divided
// by the I/Os counted): what the initiator itself costs, to compare clients by.
double cpu_us_per_io(const JobResult& r) noexcept {
  const uint64_t ios = r.read.ios + r.write.ios + r.trim.ios;
  if (ios == 0) return 0.0;
  const double cpu_us = (r.usr_cpu + r.sys_cpu) / 100.0 * static_cast<double>(r.job_runtime_ms) * 1000.0;
  return cpu_us / static_cast<double>(ios);
}

std::string text_report(const std::vector<JobResult>& results) {
  std::string out;
  const auto all = entries(results);
  std::vector<unsigned> groups;
  for (const auto& e : all) {
    const JobSpec& s = *e.first;
    out += fmt::format("{}: (groupid={}, jobs={}): err={:2}: pid={}: {}\n", s.name, s.groupid, e.members, e.error, ::getpid(),
                       ctime_string(e.job_start_ms));
    if (!s.description.empty()) out += fmt::format("  Description  : [{}]\n", s.description);
    if (e.error) out += fmt::format("  error: {}\n", e.error_message);
    const JobSpec& settings = *e.last;
    if (e.unified() == UnifiedRw::mixed) {
      show_ddir(out, "mixed", e.mixed(), settings);
    } else {
      if (e.dirs[kRead].ios || does_reads(s.rw) || (s.verify != VerifyKind::none && s.do_verify)) show_ddir(out, "read", e.dirs[kRead], settings);
      if (e.dirs[kWrite].ios || does_writes(s.rw)) show_ddir(out, "write", e.dirs[kWrite], settings);
      if (e.dirs[kTrim].ios || does_trims(s.rw)) show_ddir(out, "trim", e.dirs[kTrim], settings);
      if (e.unified() == UnifiedRw::both) show_ddir(out, "mixed", e.mixed(), settings);
    }
    out += fmt::format("  cpu          : usr={:.2f}%, sys={:.2f}%, ctx={}, majf={}, minf={}\n", e.usr_cpu(), e.sys_cpu(),
                       e.ctx, e.majf, e.minf);
    if (e.ios() != 0) out += fmt::format("  cpu per I/O  : {:.2f} us\n", e.cpu_us_per_io());
    out += "\n";
    if (std::find(groups.begin(), groups.end(), s.groupid) == groups.end()) groups.push_back(s.groupid);
  }
  std::sort(groups.begin(), groups.end());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (i) out += "\n";
    group_stats(out, groups[i], all);
  }
  return out;
}

namespace {

ojson lat_json(const LatencyHistogram& h, const Percentiles* p) {
  ojson o;
  o["min"] = h.min();
  o["max"] = h.max();
  o["mean"] = h.mean();
  o["stddev"] = h.stddev();
  o["N"] = h.count();
  if (p && h.count()) {
    ojson pct = ojson::object();
    for (double v : p->list) pct[fmt::format("{:f}", v)] = h.percentile(v);
    o["percentile"] = pct;
  }
  return o;
}

ojson ddir_json(const DirectionStats& d, const JobSpec& spec) {
  const Percentiles p = percentiles_of(spec);
  ojson o;
  o["io_bytes"] = d.bytes;
  o["io_kbytes"] = d.bytes >> 10;
  o["bw_bytes"] = d.bw_bytes();
  o["bw"] = d.bw_bytes() / 1024;
  o["iops"] = d.iops();
  o["runtime"] = d.runtime_ms();
  o["total_ios"] = d.ios;
  o["short_ios"] = 0;
  o["drop_ios"] = 0;
  o["slat_ns"] = lat_json(LatencyHistogram{}, nullptr);
  o["clat_ns"] = lat_json(d.clat, spec.clat_percentiles ? &p : nullptr);
  // Submission to completion is all we time: total latency is the completion latency.
  o["lat_ns"] = lat_json(d.clat, spec.lat_percentiles ? &p : nullptr);
  return o;
}

// Share of I/Os (percent) with latency in fio's ranges: latency_ns <=2,4,10,...,1000 ns etc.
void add_latency_distribution(ojson& root, const Entry& e) {
  LatencyHistogram all;
  for (const auto& d : e.dirs) all.merge(d.clat);
  static const uint64_t edges[] = {2, 4, 10, 20, 50, 100, 250, 500, 750, 1000};
  static const char* const names[] = {"2", "4", "10", "20", "50", "100", "250", "500", "750", "1000"};
  static const uint64_t ms_edges[] = {2, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000};
  static const char* const ms_names[] = {"2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000"};
  double n = static_cast<double>(all.count());
  std::vector<double> ns(10, 0), us(10, 0), ms(12, 0);
  auto buckets = all.buckets();
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    if (!buckets[i]) continue;
    uint64_t v = LatencyHistogram::bucket_low(i) + (LatencyHistogram::bucket_high(i) - LatencyHistogram::bucket_low(i)) / 2;
    double share = 100.0 * static_cast<double>(buckets[i]) / n;
    auto place = [&](std::vector<double>& dst, const uint64_t* e_, std::size_t count, uint64_t x) {
      for (std::size_t k = 0; k < count; ++k) {
        if (x < e_[k]) {  // fio's ranges: key N holds [previous key, N)
          dst[k] += share;
          return true;
        }
      }
      return false;
    };
    if (v < 1000) {
      place(ns, edges, 10, v);
    } else if (v < 1000000) {
      place(us, edges, 10, v / 1000);
    } else if (!place(ms, ms_edges, 11, v / 1000000)) {
      ms[11] += share;
    }
  }
  ojson a, b, c;
  for (std::size_t k = 0; k < 10; ++k) a[names[k]] = ns[k];
  for (std::size_t k = 0; k < 10; ++k) b[names[k]] = us[k];
  for (std::size_t k = 0; k < 12; ++k) c[ms_names[k]] = ms[k];
  root["latency_ns"] = a;
  root["latency_us"] = b;
  root["latency_ms"] = c;
}

}  // namespace

nlohmann::ordered_json json_report(const Options& global_options, const std::vector<JobResult>& results,
                                   std::chrono::system_clock::time_point when) {
  ojson root;
  auto ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count());
  root["fio version"] = kFioVersion;
  root["timestamp"] = ms / 1000;
  root["timestamp_ms"] = ms;
  root["time"] = ctime_string(ms);
  if (!global_options.empty()) {
    ojson g = ojson::object();
    for (const auto& [k, v] : global_options) g[k] = v;
    root["global options"] = g;
  }
  ojson jobs = ojson::array();
  for (const auto& e : entries(results)) {
    const JobSpec& s = *e.first;
    const JobSpec& settings = *e.last;
    ojson j;
    j["jobname"] = s.name;
    j["groupid"] = s.groupid;
    j["job_start"] = e.job_start_ms;
    j["error"] = e.error;
    j["eta"] = 0;
    j["elapsed"] = (e.elapsed_ms + 999) / 1000;
    if (!settings.options.empty()) {
      ojson o = ojson::object();
      for (const auto& [k, v] : settings.options) o[k] = v;
      j["job options"] = o;
    }
    if (e.unified() == UnifiedRw::mixed) {
      j["mixed"] = ddir_json(e.mixed(), settings);  // fio: "mixed" instead of read, write and trim
    } else {
      j["read"] = ddir_json(e.dirs[kRead], settings);
      j["write"] = ddir_json(e.dirs[kWrite], settings);
      j["trim"] = ddir_json(e.dirs[kTrim], settings);
      if (e.unified() == UnifiedRw::both) j["mixed"] = ddir_json(e.mixed(), settings);
    }
    j["job_runtime"] = e.job_runtime_ms;
    j["usr_cpu"] = e.usr_cpu();
    j["sys_cpu"] = e.sys_cpu();
    j["cpu_us_per_io"] = e.cpu_us_per_io();  // ours, not fio's
    j["ctx"] = e.ctx;
    j["majf"] = e.majf;
    j["minf"] = e.minf;
    add_latency_distribution(j, e);
    if (!s.description.empty()) j["desc"] = s.description;
    if (e.error) j["error_message"] = e.error_message;  // ours: fio prints it on stderr only
    jobs.push_back(std::move(j));
  }
  root["jobs"] = jobs;
  return root;
}

}  // namespace rdmablk::initiator::bench

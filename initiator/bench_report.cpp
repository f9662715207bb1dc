#include "initiator/bench_report.h"

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

void show_percentiles(std::string& out, const LatencyHistogram& h) {
  if (h.count() == 0) return;
  std::vector<uint64_t> vals;
  for (double p : kFioPercentiles) vals.push_back(h.percentile(p));
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
  out += fmt::format("    clat percentiles ({}):\n     |", unit);
  int width = std::max(5, static_cast<int>(std::log10(static_cast<double>(std::max<uint64_t>(maxv / divisor, 1))) + 1));
  constexpr std::size_t kPerLine = 4;
  for (std::size_t j = 0; j < vals.size(); ++j) {
    if (j != 0 && j % kPerLine == 0) out += "     |";
    bool last = j == vals.size() - 1;
    uint64_t v = vals[j];
    for (int i = 0; i < scale; ++i) v = (v + 999) / 1000;
    out += fmt::format(" {:5.2f}th=[{:{}}]{}", kFioPercentiles[j], v, width, last ? '\n' : ',');
    if (last) break;
    if (j % kPerLine == kPerLine - 1) out += "\n";
  }
}

void show_ddir(std::string& out, const char* dir, const DirectionStats& d) {
  uint64_t runt = d.runtime_ms();
  uint64_t bw = d.bw_bytes();
  uint64_t iops = runt ? 1000 * d.ios / runt : 0;
  out += fmt::format("  {}: IOPS={}, BW={} ({})({}/{}msec)\n", dir, num2str(iops, 4, 1, false, N2sUnit::none),
                     num2str(bw, 4, 1, true, N2sUnit::byte_per_sec), num2str(bw, 4, 1, false, N2sUnit::byte_per_sec),
                     num2str(d.bytes, 4, 1, true, N2sUnit::byte), runt);
  if (d.clat.count() == 0) return;
  display_lat(out, "clat", d.clat);
  display_lat(out, " lat", d.clat);
  show_percentiles(out, d.clat);
}

std::string ctime_string(uint64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  char buf[64] = {};
  ctime_r(&t, buf);
  std::string s(buf);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

void group_line(std::string& out, const char* dir, const std::vector<JobResult>& results, bool write) {
  uint64_t bytes = 0, min_run = UINT64_MAX, max_run = 0, min_bw = UINT64_MAX, max_bw = 0;
  bool any = false;
  for (const auto& r : results) {
    const DirectionStats& d = write ? r.write : r.read;
    if (d.ios == 0) continue;
    any = true;
    bytes += d.bytes;
    min_run = std::min(min_run, d.runtime_ms());
    max_run = std::max(max_run, d.runtime_ms());
    min_bw = std::min(min_bw, d.bw_bytes());
    max_bw = std::max(max_bw, d.bw_bytes());
  }
  if (!any) return;
  uint64_t agg = max_run ? 1000 * bytes / max_run : 0;
  out += fmt::format("{}: bw={} ({}), {}-{} ({}-{}), io={} ({}), run={}-{}msec\n", dir,
                     num2str(agg, 4, 1, true, N2sUnit::byte_per_sec), num2str(agg, 4, 1, false, N2sUnit::byte_per_sec),
                     num2str(min_bw, 4, 1, true, N2sUnit::byte_per_sec), num2str(max_bw, 4, 1, true, N2sUnit::byte_per_sec),
                     num2str(min_bw, 4, 1, false, N2sUnit::byte_per_sec), num2str(max_bw, 4, 1, false, N2sUnit::byte_per_sec),
                     num2str(bytes, 4, 1, true, N2sUnit::byte), num2str(bytes, 4, 1, false, N2sUnit::byte), min_run,
                     max_run);
}

}  // namespace

// The client's CPU time per completed I/O (usr + sys over the whole job, setup and ramp included, divided
// by the I/Os counted): what the initiator itself costs, to compare clients by.
double cpu_us_per_io(const JobResult& r) noexcept {
  const uint64_t ios = r.read.ios + r.write.ios;
  if (ios == 0) return 0.0;
  const double cpu_us = (r.usr_cpu + r.sys_cpu) / 100.0 * static_cast<double>(r.job_runtime_ms) * 1000.0;
  return cpu_us / static_cast<double>(ios);
}

std::string text_report(const std::vector<JobResult>& results) {
  std::string out;
  for (const auto& r : results) {
    out += fmt::format("{}: (groupid=0, jobs=1): err={:2}: pid={}: {}\n", r.spec.name, r.error, ::getpid(),
                       ctime_string(r.job_start_ms));
    if (r.error) out += fmt::format("  error: {}\n", r.error_message);
    if (r.read.ios || does_reads(r.spec.rw) || r.spec.verify != VerifyKind::none) show_ddir(out, "read", r.read);
    if (r.write.ios || does_writes(r.spec.rw)) show_ddir(out, "write", r.write);
    out += fmt::format("  cpu          : usr={:.2f}%, sys={:.2f}%, ctx={}, majf={}, minf={}\n", r.usr_cpu, r.sys_cpu,
                       r.ctx, r.majf, r.minf);
    if (r.read.ios + r.write.ios != 0) out += fmt::format("  cpu per I/O  : {:.2f} us\n", cpu_us_per_io(r));
    out += "\n";
  }
  out += "Run status group 0 (all jobs):\n";
  group_line(out, "   READ", results, false);
  group_line(out, "  WRITE", results, true);
  return out;
}

namespace {

using ojson = nlohmann::ordered_json;

ojson lat_json(const LatencyHistogram& h, bool percentiles) {
  ojson o;
  o["min"] = h.min();
  o["max"] = h.max();
  o["mean"] = h.mean();
  o["stddev"] = h.stddev();
  o["N"] = h.count();
  if (percentiles && h.count()) {
    ojson p = ojson::object();
    for (double v : kFioPercentiles) p[fmt::format("{:f}", v)] = h.percentile(v);
    o["percentile"] = p;
  }
  return o;
}

ojson ddir_json(const DirectionStats& d) {
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
  o["slat_ns"] = lat_json(LatencyHistogram{}, false);
  o["clat_ns"] = lat_json(d.clat, true);
  o["lat_ns"] = lat_json(d.clat, false);
  return o;
}

// Share of I/Os (percent) with latency in fio's ranges: latency_ns <=2,4,10,...,1000 ns etc.
void add_latency_distribution(ojson& root, const JobResult& r) {
  LatencyHistogram all(r.read.clat);
  all.merge(r.write.clat);
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
    auto place = [&](std::vector<double>& dst, const uint64_t* e, std::size_t count, uint64_t x) {
      for (std::size_t k = 0; k < count; ++k) {
        if (x < e[k]) {  // fio's ranges: key N holds [previous key, N)
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
  for (const auto& r : results) {
    ojson j;
    j["jobname"] = r.spec.name;
    j["groupid"] = 0;
    j["job_start"] = r.job_start_ms;
    j["error"] = r.error;
    j["eta"] = 0;
    j["elapsed"] = (r.job_runtime_ms + 999) / 1000;
    if (!r.spec.options.empty()) {
      ojson o = ojson::object();
      for (const auto& [k, v] : r.spec.options) o[k] = v;
      j["job options"] = o;
    }
    j["read"] = ddir_json(r.read);
    j["write"] = ddir_json(r.write);
    j["trim"] = ddir_json(DirectionStats{});
    j["job_runtime"] = r.job_runtime_ms;
    j["usr_cpu"] = r.usr_cpu;
    j["sys_cpu"] = r.sys_cpu;
    j["cpu_us_per_io"] = cpu_us_per_io(r);  // ours, not fio's
    j["ctx"] = r.ctx;
    j["majf"] = r.majf;
    j["minf"] = r.minf;
    add_latency_distribution(j, r);
    if (r.error) j["error_message"] = r.error_message;  // ours: fio prints it on stderr only
    jobs.push_back(std::move(j));
  }
  root["jobs"] = jobs;
  return root;
}

}  // namespace rdmablk::initiator::bench

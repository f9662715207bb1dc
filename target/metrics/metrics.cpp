#include "target/metrics/metrics.h"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "protocol/fabrics.h"

namespace rdmablk::target {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

constexpr stats::OpClass kOps[] = {stats::OpClass::read, stats::OpClass::write, stats::OpClass::other};
constexpr stats::OpClass kDataOps[] = {stats::OpClass::read, stats::OpClass::write};

double seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }
double as_double(uint64_t v) { return static_cast<double>(v); }  // exact below 2^53

Labels with(Labels labels, std::string name, std::string value) {
  labels.push_back({std::move(name), std::move(value)});
  return labels;
}

// Collects families in the order they are named (a deque: references stay valid while samples are
// added); the serializer writes each with its samples together, as the text format requires.
class Families {
 public:
  MetricFamily& family(const char* name, const char* help, MetricType type) {
    families_.push_back(MetricFamily{name, help, type, {}});
    return families_.back();
  }
  std::vector<MetricFamily> take() {
    return {std::make_move_iterator(families_.begin()), std::make_move_iterator(families_.end())};
  }

 private:
  std::deque<MetricFamily> families_;
};

void add_gauge(MetricFamily& f, Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  f.metric.push_back(std::move(m));
}

void add_counter(MetricFamily& f, Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  f.metric.push_back(std::move(m));
}

void add_histogram(MetricFamily& f, Labels labels, const stats::HistogramSnapshot& h) {
  ClientMetric m;
  m.label = std::move(labels);
  // Count and buckets come from the same bucket array: the +Inf bucket (the count) is never below the last
  // finite one, even in a snapshot taken while commands complete.
  uint64_t total = 0;
  for (uint64_t b : h.buckets) total += b;
  m.histogram.sample_count = total;
  m.histogram.sample_sum = seconds(h.sum_ns);
  m.histogram.bucket.reserve(kLatencyBucketBoundsNs.size());
  for (uint64_t bound : kLatencyBucketBoundsNs) {
    m.histogram.bucket.push_back({h.count_below(bound), seconds(bound)});
  }
  f.metric.push_back(std::move(m));
}

// Prometheus refuses a whole scrape over one label value that is not UTF-8; names from hosts (a hostnqn)
// or the file system (a path) may not be. Invalid bytes become U+FFFD.
std::string valid_utf8(const std::string& s) {
  auto cont = [&](std::size_t i) { return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; };
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      len = 1;
      cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07u;
    }
    bool ok = len != 0;
    for (std::size_t k = 1; ok && k < len; ++k) {
      ok = cont(i + k);
      if (ok) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
    }
    // No overlong forms, no surrogates, nothing past U+10FFFF.
    if (ok) {
      ok = (len == 1) || (len == 2 && cp >= 0x80) || (len == 3 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ||
           (len == 4 && cp >= 0x10000 && cp <= 0x10FFFF);
    }
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// Errors by status name (distinct keys could share a name, which must not make two equal series).
std::map<std::string, uint64_t> errors_by_name(const stats::IoStatsSnapshot& io) {
  std::map<std::string, uint64_t> out;
  for (const auto& [field, n] : io.errors) out[stats::status_field_name(field)] += n;
  return out;
}

// Counters of one IoStatsSnapshot (commands, bytes, errors) under `labels`.
struct IoFamilies {
  MetricFamily* commands;
  MetricFamily* bytes;
  MetricFamily* errors;

  void add(const Labels& labels, const stats::IoStatsSnapshot& io) const {
    for (stats::OpClass op : kOps) {
      add_counter(*commands, with(labels, "op", stats::op_class_name(op)), as_double(io.op(op).commands));
    }
    for (stats::OpClass op : kDataOps) {
      add_counter(*bytes, with(labels, "op", stats::op_class_name(op)), as_double(io.op(op).bytes));
    }
    for (const auto& [name, n] : errors_by_name(io)) add_counter(*errors, with(labels, "status", name), as_double(n));
  }
};

void target_families(Families& out, const TargetStatus& st) {
  add_gauge(out.family("rdmablk_target_info", "rdmablk-target build information (value 1)", MetricType::Gauge),
            {{"version", st.version}}, 1);
  add_gauge(out.family("rdmablk_target_uptime_seconds", "Time since rdmablk-target started", MetricType::Gauge), {},
            st.uptime_s);
  if (st.config_loaded_unix_ms != 0) {
    add_gauge(out.family("rdmablk_target_config_last_reload_timestamp_seconds",
                         "Unix time the configuration was last loaded", MetricType::Gauge),
              {}, static_cast<double>(st.config_loaded_unix_ms) / 1e3);
  }
  // Prometheus' standard process metrics (the names its client libraries' process collectors use).
  const ProcessStatus& p = st.process;
  if (p.start_time_unix_s > 0) {
    add_counter(out.family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds",
                           MetricType::Counter),
                {}, p.cpu_seconds);
    add_gauge(out.family("process_resident_memory_bytes", "Resident memory size in bytes", MetricType::Gauge), {},
              as_double(p.resident_bytes));
    add_gauge(out.family("process_virtual_memory_bytes", "Virtual memory size in bytes", MetricType::Gauge), {},
              as_double(p.virtual_bytes));
    add_gauge(out.family("process_open_fds", "Number of open file descriptors", MetricType::Gauge), {},
              as_double(p.open_fds));
    if (p.max_fds != 0)
      add_gauge(out.family("process_max_fds", "Maximum number of open file descriptors", MetricType::Gauge), {},
                as_double(p.max_fds));
    add_gauge(out.family("process_start_time_seconds", "Start time of the process since unix epoch in seconds",
                         MetricType::Gauge),
              {}, p.start_time_unix_s);
    add_gauge(out.family("process_threads", "Number of OS threads in the process", MetricType::Gauge), {},
              as_double(p.threads));
  }
  auto& listeners = out.family("rdmablk_listener_info", "A listening address (value 1)", MetricType::Gauge);
  for (const auto& l : st.listeners) {
    add_gauge(listeners,
              {{"transport", l.transport}, {"address", l.address}, {"port", std::to_string(l.port)}, {"role", l.role}},
              1);
  }

  size_t namespaces = 0;
  for (const auto& s : st.subsystems) namespaces += s.namespaces.size();
  add_gauge(out.family("rdmablk_subsystems", "Configured NVM subsystems", MetricType::Gauge), {},
            static_cast<double>(st.subsystems.size()));
  add_gauge(out.family("rdmablk_namespaces", "Configured namespaces over all subsystems", MetricType::Gauge), {},
            static_cast<double>(namespaces));

  // Connected controllers; every configured subsystem reachable over a listener's transport shows up with 0
  // rather than being absent.
  std::map<std::pair<std::string, std::string>, uint64_t> controllers;
  std::set<std::string> transports;
  for (const auto& l : st.listeners) transports.insert(l.transport);
  for (const auto& s : st.subsystems) {
    for (const auto& t : transports) controllers[{s.nqn, t}] = 0;
  }
  for (const auto& c : st.controllers) ++controllers[{c.subsystem, c.transport}];
  auto& ctrl = out.family("rdmablk_controllers", "Connected controllers (discovery ones under the discovery NQN)",
                          MetricType::Gauge);
  for (const auto& [key, n] : controllers) {
    add_gauge(ctrl, {{"subsystem", key.first}, {"transport", key.second}}, as_double(n));
  }
}

// QoS (docs/operations.md#qos): per namespace with limits, its own (no host label) and each limited host's.
void qos_families(Families& out, const TargetStatus& st) {
  if (std::none_of(st.namespace_stats.begin(), st.namespace_stats.end(), [](const auto& n) { return !n.qos.empty(); }))
    return;  // no empty families
  auto& limit = out.family("rdmablk_namespace_qos_limit",
                           "A configured QoS limit (kind iops: commands/s; mbps, read_mbps, write_mbps: 10^6 B/s)",
                           MetricType::Gauge);
  auto& throttled = out.family("rdmablk_namespace_qos_throttled_total",
                               "Read and write commands that waited for their QoS budget", MetricType::Counter);
  auto& seconds_total = out.family("rdmablk_namespace_qos_throttled_seconds_total",
                                   "Time read and write commands waited for their QoS budget, summed",
                                   MetricType::Counter);
  for (const auto& ns : st.namespace_stats) {
    for (const auto& q : ns.qos) {
      Labels id{{"subsystem", ns.subsystem}, {"nsid", std::to_string(ns.nsid)}};
      if (!q.host.empty()) id.push_back({"hostnqn", q.host});
      const std::pair<const char*, uint64_t> kinds[] = {
          {"iops", q.iops}, {"mbps", q.mbps}, {"read_mbps", q.read_mbps}, {"write_mbps", q.write_mbps}};
      for (const auto& [kind, value] : kinds)
        if (value != 0) add_gauge(limit, with(id, "kind", kind), as_double(value));
      add_counter(throttled, id, as_double(q.throttled_commands));
      add_counter(seconds_total, id, seconds(q.throttled_ns));
    }
  }
}

void namespace_families(Families& out, const TargetStatus& st) {
  auto& info = out.family("rdmablk_namespace_info", "An exported namespace (value 1)", MetricType::Gauge);
  auto& size = out.family("rdmablk_namespace_size_bytes", "Namespace capacity", MetricType::Gauge);
  auto& block = out.family("rdmablk_namespace_block_size_bytes", "Namespace logical block size", MetricType::Gauge);
  for (const auto& s : st.subsystems) {
    for (const auto& ns : s.namespaces) {
      const Labels id{{"subsystem", ns.subsystem}, {"nsid", std::to_string(ns.nsid)}};
      Labels l = id;
      l.push_back({"backend", ns.backend});
      l.push_back({"path", ns.path});
      l.push_back({"uuid", ns.uuid});
      l.push_back({"read_only", ns.read_only ? "true" : "false"});
      add_gauge(info, std::move(l), 1);
      add_gauge(size, id, as_double(ns.size_bytes));
      add_gauge(block, id, as_double(ns.block_size));
    }
  }

  const IoFamilies io{
      &out.family("rdmablk_namespace_commands_total", "Completed commands by class (errors included)",
                  MetricType::Counter),
      &out.family("rdmablk_namespace_bytes_total", "Data moved by successful read and write commands",
                  MetricType::Counter),
      &out.family("rdmablk_namespace_errors_total", "Commands completed with an error status, by status",
                  MetricType::Counter)};
  auto& latency = out.family("rdmablk_namespace_latency_seconds",
                             "Command latency from arrival to completion, by class", MetricType::Histogram);
  for (const auto& ns : st.namespace_stats) {
    const Labels id{{"subsystem", ns.subsystem}, {"nsid", std::to_string(ns.nsid)}};
    io.add(id, ns.io);
    for (stats::OpClass op : kOps) add_histogram(latency, with(id, "op", stats::op_class_name(op)), ns.io.op(op).latency);
  }
  qos_families(out, st);
}

void controller_families(Families& out, const TargetStatus& st) {
  const IoFamilies io{
      &out.family("rdmablk_controller_commands_total", "Completed commands of an I/O controller by class",
                  MetricType::Counter),
      &out.family("rdmablk_controller_bytes_total", "Data moved by an I/O controller's read and write commands",
                  MetricType::Counter),
      &out.family("rdmablk_controller_errors_total", "Commands of an I/O controller completed with an error status",
                  MetricType::Counter)};
  for (const auto& c : st.controller_stats) {
    io.add({{"subsystem", c.subsystem}, {"cntlid", std::to_string(c.cntlid)}, {"hostnqn", c.hostnqn}}, c.io);
  }
}

void reactor_families(Families& out, const TargetStatus& st) {
  auto& info = out.family("rdmablk_reactor_info", "A reactor thread and the CPU it is pinned to (value 1)",
                          MetricType::Gauge);
  auto& busy = out.family("rdmablk_reactor_busy_seconds_total",
                          "Time a reactor spent working (not sleeping, not polling idle)", MetricType::Counter);
  auto& buffers = out.family("rdmablk_buffer_pool_buffers", "Registered I/O buffers of a reactor's pool by state",
                             MetricType::Gauge);
  auto& pool_bytes = out.family("rdmablk_buffer_pool_bytes", "Registered memory of a reactor's buffer pool",
                                MetricType::Gauge);
  for (const auto& r : st.reactors) {
    const Labels id{{"reactor", std::to_string(r.index)}};
    add_gauge(info, with(id, "cpu", r.cpu < 0 ? std::string("none") : std::to_string(r.cpu)), 1);
    add_counter(busy, id, seconds(r.busy_ns));
    const uint64_t in_use = std::min(r.buffers_in_use, r.buffers_total);
    add_gauge(buffers, with(id, "state", "free"), as_double(r.buffers_total - in_use));
    add_gauge(buffers, with(id, "state", "in_use"), as_double(in_use));
    add_gauge(pool_bytes, id, as_double(r.buffer_bytes));
  }
}

}  // namespace

std::string render_prometheus(const TargetStatus& status, const MetricsOptions& options) {
  Families f;
  target_families(f, status);
  namespace_families(f, status);
  if (options.per_controller) controller_families(f, status);
  reactor_families(f, status);
  std::vector<MetricFamily> families = f.take();
  // A family without samples says nothing; leave it out (e.g. no errors yet).
  std::erase_if(families, [](const MetricFamily& m) { return m.metric.empty(); });
  for (auto& family : families) {
    for (auto& metric : family.metric) {
      for (auto& label : metric.label) label.value = valid_utf8(label.value);
    }
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace rdmablk::target

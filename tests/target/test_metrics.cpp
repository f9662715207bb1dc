// render_prometheus: a hand-made TargetStatus renders the expected series and values (the text is parsed
// back, escapes included), and Prometheus' own checker (promtool check metrics) accepts the text.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "protocol/fabrics.h"
#include "protocol/status.h"
#include "support/promtool.h"
#include "target/metrics/metrics.h"

namespace {

using namespace rdmablk::target;
namespace st = rdmablk::protocol::status;
using Labels = std::map<std::string, std::string>;

// One sample line of the text format, labels unescaped.
struct Sample {
  std::string name;
  Labels labels;
  double value = 0;
};

// Parses the text format 0.0.4 as Prometheus reads it (enough of it for these tests): comment lines,
// `name{label="value",...} value`, escapes \\ \" \n in label values. A malformed line fails the test.
std::vector<Sample> parse(const std::string& text) {
  std::vector<Sample> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    EXPECT_NE(eol, std::string::npos) << "the text must end with a newline";
    if (eol == std::string::npos) eol = text.size();
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name += line[i++];
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const std::size_t eq = line.find('=', i);
        EXPECT_NE(eq, std::string::npos) << line;
        if (eq == std::string::npos) return out;
        const std::string key = line.substr(i, eq - i);
        EXPECT_EQ(line[eq + 1], '"') << line;
        i = eq + 2;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            ++i;
            EXPECT_LT(i, line.size()) << line;
            if (i >= line.size()) return out;
            if (line[i] == 'n') {
              value += '\n';
            } else {
              EXPECT_TRUE(line[i] == '\\' || line[i] == '"') << "bad escape in " << line;
              value += line[i];
            }
          } else {
            value += line[i];
          }
          ++i;
        }
        ++i;  // closing quote
        EXPECT_TRUE(s.labels.emplace(key, value).second) << "label twice: " << line;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // '}'
    }
    EXPECT_EQ(line[i], ' ') << line;
    const std::string v = line.substr(i + 1);
    EXPECT_EQ(v.find(' '), std::string::npos) << "no timestamps expected: " << line;
    if (v == "+Inf") {
      s.value = INFINITY;
    } else {
      char* end = nullptr;
      s.value = std::strtod(v.c_str(), &end);
      EXPECT_EQ(*end, '\0') << line;
    }
    out.push_back(std::move(s));
  }
  return out;
}

class Scrape {
 public:
  explicit Scrape(const std::string& text) : text_(text), samples_(parse(text)) {}

  // The value of the series with exactly these labels; fails the test when it is absent or there twice.
  double value(const std::string& name, const Labels& labels) const {
    std::optional<double> found;
    for (const auto& s : samples_) {
      if (s.name != name || s.labels != labels) continue;
      EXPECT_FALSE(found) << "series twice: " << name;
      found = s.value;
    }
    EXPECT_TRUE(found) << "no series " << name << describe(labels) << " in\n" << text_;
    return found.value_or(NAN);
  }
  bool has(const std::string& name, const Labels& labels) const {
    for (const auto& s : samples_)
      if (s.name == name && s.labels == labels) return true;
    return false;
  }
  std::size_t count(const std::string& name) const {
    std::size_t n = 0;
    for (const auto& s : samples_) n += s.name == name;
    return n;
  }
  const std::vector<Sample>& samples() const { return samples_; }

 private:
  static std::string describe(const Labels& labels) {
    std::string d = "{";
    for (const auto& [k, v] : labels) d += k + "=" + v + ",";
    return d + "}";
  }
  std::string text_;
  std::vector<Sample> samples_;
};

Labels plus(Labels l, const std::string& k, const std::string& v) {
  l[k] = v;
  return l;
}

// A subsystem NQN with a double quote and a backslash: the serializer must escape both.
const std::string kNqnA = R"(nqn.2024-01.io.rdmablk:a"quote\back)";
const std::string kNqnB = "nqn.2024-01.io.rdmablk:b";

constexpr uint64_t kReadLatenciesNs[] = {1'000, 4'095, 4'096, 5'000, 100'000, 3'000'000, 20'000'000'000};
constexpr uint64_t kWriteLatenciesNs[] = {50'000, 60'000};

TargetStatus sample_status() {
  TargetStatus s;
  s.version = "0.1.0-test";
  s.pid = 4242;
  s.uptime_s = 12.5;
  s.config_path = "/etc/rdmablk/target.yaml";
  s.config_loaded_unix_ms = 1'700'000'000'123;
  s.process = read_process_status(1'700'000'000.0);
  s.listeners = {{"tcp", "127.0.0.1", 4420, "io"}, {"tcp", "::1", 8009, "discovery"}, {"rdma", "10.0.0.1", 4420, "io"}};

  SubsystemStatus a;
  a.nqn = kNqnA;
  NamespaceStatus ns1;
  ns1.subsystem = kNqnA;
  ns1.nsid = 1;
  ns1.backend = "file";
  ns1.path = "/srv/vol1.img";
  ns1.size_bytes = 1ull << 30;
  ns1.block_size = 512;
  ns1.uuid = "6f1c2a9e-0c4e-4f7a-9d55-1e0f6b3a2c11";
  a.namespaces.push_back(ns1);
  SubsystemStatus b;
  b.nqn = kNqnB;
  NamespaceStatus ns2;
  ns2.subsystem = kNqnB;
  ns2.nsid = 7;
  ns2.backend = "ram";
  ns2.size_bytes = 64ull << 20;
  ns2.block_size = 4096;
  ns2.read_only = true;
  b.namespaces.push_back(ns2);
  s.subsystems = {a, b};

  ControllerStatus c1;
  c1.cntlid = 1;
  c1.subsystem = kNqnA;
  c1.hostnqn = "nqn.2014-08.org.nvmexpress:uuid:host-1";
  c1.transport = "tcp";
  ControllerStatus c2 = c1;
  c2.cntlid = 2;
  ControllerStatus d;
  d.cntlid = 3;
  d.discovery = true;
  d.subsystem = std::string(rdmablk::protocol::kDiscoveryNqn);
  d.hostnqn = c1.hostnqn;
  d.transport = "tcp";
  s.controllers = {c1, c2, d};

  // Namespace 1: reads with known latencies, two writes, errors of two kinds.
  stats::IoStats live;
  for (uint64_t ns : kReadLatenciesNs) live.record(stats::OpClass::read, 4096, ns, 0);
  for (uint64_t ns : kWriteLatenciesNs) live.record(stats::OpClass::write, 8192, ns, 0);
  live.record(stats::OpClass::read, 0, 2'000, st::lba_out_of_range.field());
  live.record(stats::OpClass::read, 0, 2'000, st::lba_out_of_range.field());
  live.record(stats::OpClass::other, 0, 3'000, st::invalid_field.field());
  live.record(stats::OpClass::other, 0, 9'000, 0);
  live.record_throttled(1'500'000'000);
  stats::NamespaceStats n1{kNqnA, 1, {}, {}};
  n1.io.add(live);
  n1.qos = {{"", 5000, 0, 0, 50, 1, 1'500'000'000}, {"nqn.h1", 1000, 0, 0, 0, 3, 250'000'000}};
  stats::NamespaceStats n2{kNqnB, 7, {}, {}};  // no I/O yet
  s.namespace_stats = {n1, n2};

  stats::ControllerStats cs{1, kNqnA, c1.hostnqn, n1.io};
  s.controller_stats = {cs};

  s.reactors = {{.index = 0, .cpu = 1, .busy_ns = 2'500'000'000, .uptime_ns = 12'000'000'000, .buffers_total = 256,
                 .buffers_in_use = 10, .buffer_bytes = 256 * 131072},
                {.index = 1, .cpu = -1, .busy_ns = 750'000'000, .uptime_ns = 12'000'000'000, .buffers_total = 256,
                 .buffers_in_use = 0, .buffer_bytes = 256 * 131072}};
  return s;
}

using rdmablk::test_support::promtool_check;

TEST(Metrics, TargetSeries) {
  const std::string text = render_prometheus(sample_status());
  const Scrape m(text);
  EXPECT_EQ(m.value("rdmablk_target_info", {{"version", "0.1.0-test"}}), 1);
  EXPECT_EQ(m.value("rdmablk_target_uptime_seconds", {}), 12.5);
  EXPECT_DOUBLE_EQ(m.value("rdmablk_target_config_last_reload_timestamp_seconds", {}), 1'700'000'000.123);
  EXPECT_EQ(m.value("rdmablk_subsystems", {}), 2);
  EXPECT_EQ(m.value("rdmablk_namespaces", {}), 2);
  EXPECT_EQ(m.value("rdmablk_listener_info", {{"transport", "tcp"}, {"address", "::1"}, {"port", "8009"}, {"role", "discovery"}}), 1);
  EXPECT_EQ(m.count("rdmablk_listener_info"), 3u);

  // Connected controllers per subsystem and transport, 0 for the configured ones nobody is connected to.
  EXPECT_EQ(m.value("rdmablk_controllers", {{"subsystem", kNqnA}, {"transport", "tcp"}}), 2);
  EXPECT_EQ(m.value("rdmablk_controllers", {{"subsystem", kNqnA}, {"transport", "rdma"}}), 0);
  EXPECT_EQ(m.value("rdmablk_controllers", {{"subsystem", kNqnB}, {"transport", "tcp"}}), 0);
  EXPECT_EQ(m.value("rdmablk_controllers", {{"subsystem", std::string(rdmablk::protocol::kDiscoveryNqn)}, {"transport", "tcp"}}), 1);
  EXPECT_EQ(m.count("rdmablk_controllers"), 5u);
}

TEST(Metrics, LabelValuesAreEscaped) {
  const std::string text = render_prometheus(sample_status());
  // On the wire: \" and \\ (the parser above turned them back into kNqnA for the other tests).
  EXPECT_NE(text.find(R"(rdmablk_namespace_size_bytes{subsystem="nqn.2024-01.io.rdmablk:a\"quote\\back",nsid="1"} 1073741824)"),
            std::string::npos)
      << text;
  // A newline in a label value is escaped as \n.
  TargetStatus s;
  s.version = "1.0\nx";
  const std::string t = render_prometheus(s);
  EXPECT_NE(t.find(R"(rdmablk_target_info{version="1.0\nx"} 1)"), std::string::npos) << t;
  EXPECT_EQ(Scrape(t).value("rdmablk_target_info", {{"version", "1.0\nx"}}), 1);
}

TEST(Metrics, NamespaceSeries) {
  const Scrape m(render_prometheus(sample_status()));
  const Labels n1{{"subsystem", kNqnA}, {"nsid", "1"}};
  const Labels n2{{"subsystem", kNqnB}, {"nsid", "7"}};
  EXPECT_EQ(m.value("rdmablk_namespace_info", {{"subsystem", kNqnA}, {"nsid", "1"}, {"backend", "file"},
                                               {"path", "/srv/vol1.img"}, {"uuid", "6f1c2a9e-0c4e-4f7a-9d55-1e0f6b3a2c11"},
                                               {"read_only", "false"}}),
            1);
  EXPECT_EQ(m.value("rdmablk_namespace_size_bytes", n1), 1073741824);
  EXPECT_EQ(m.value("rdmablk_namespace_block_size_bytes", n2), 4096);

  constexpr double kReads = std::size(kReadLatenciesNs) + 2;  // two failed with LBA Out of Range
  EXPECT_EQ(m.value("rdmablk_namespace_commands_total", plus(n1, "op", "read")), kReads);
  EXPECT_EQ(m.value("rdmablk_namespace_commands_total", plus(n1, "op", "write")), 2);
  EXPECT_EQ(m.value("rdmablk_namespace_commands_total", plus(n1, "op", "other")), 2);
  EXPECT_EQ(m.value("rdmablk_namespace_bytes_total", plus(n1, "op", "read")), 4096.0 * std::size(kReadLatenciesNs));
  EXPECT_EQ(m.value("rdmablk_namespace_bytes_total", plus(n1, "op", "write")), 2 * 8192);
  EXPECT_FALSE(m.has("rdmablk_namespace_bytes_total", plus(n1, "op", "other")));  // other commands move no data
  EXPECT_EQ(m.value("rdmablk_namespace_errors_total", plus(n1, "status", "LBA Out of Range")), 2);
  EXPECT_EQ(m.value("rdmablk_namespace_errors_total",
                    plus(n1, "status", stats::status_field_name(st::invalid_field.field()))),
            1);
  EXPECT_EQ(m.count("rdmablk_namespace_errors_total"), 2u);

  // The namespace without I/O has its series, at 0.
  for (const char* op : {"read", "write", "other"}) {
    EXPECT_EQ(m.value("rdmablk_namespace_commands_total", plus(n2, "op", op)), 0);
    EXPECT_EQ(m.value("rdmablk_namespace_latency_seconds_count", plus(n2, "op", op)), 0);
  }
}

TEST(Metrics, QosSeries) {
  const Scrape m(render_prometheus(sample_status()));
  const Labels n1{{"subsystem", kNqnA}, {"nsid", "1"}};
  EXPECT_EQ(m.value("rdmablk_namespace_qos_limit", plus(n1, "kind", "iops")), 5000);
  EXPECT_EQ(m.value("rdmablk_namespace_qos_limit", plus(n1, "kind", "write_mbps")), 50);
  EXPECT_FALSE(m.has("rdmablk_namespace_qos_limit", plus(n1, "kind", "mbps"))) << "0 = unlimited: no series";
  EXPECT_EQ(m.value("rdmablk_namespace_qos_throttled_total", n1), 1);
  EXPECT_EQ(m.value("rdmablk_namespace_qos_throttled_seconds_total", n1), 1.5);
  const Labels h1 = plus(n1, "hostnqn", "nqn.h1");
  EXPECT_EQ(m.value("rdmablk_namespace_qos_limit", plus(h1, "kind", "iops")), 1000);
  EXPECT_EQ(m.value("rdmablk_namespace_qos_throttled_total", h1), 3);
  EXPECT_EQ(m.value("rdmablk_namespace_qos_throttled_seconds_total", h1), 0.25);
  EXPECT_FALSE(m.has("rdmablk_namespace_qos_throttled_total", {{"subsystem", kNqnB}, {"nsid", "7"}}));
}

TEST(Metrics, LatencyHistogramIsCumulativeAtExactBounds) {
  const Scrape m(render_prometheus(sample_status()));
  const Labels reads{{"subsystem", kNqnA}, {"nsid", "1"}, {"op", "read"}};
  std::vector<uint64_t> latencies(std::begin(kReadLatenciesNs), std::end(kReadLatenciesNs));
  latencies.push_back(2'000);  // the two failed reads
  latencies.push_back(2'000);

  // Every bound is a power of two from 4.096 us to 17.2 s, increasing.
  ASSERT_EQ(kLatencyBucketBoundsNs.front(), 4096u);
  ASSERT_EQ(kLatencyBucketBoundsNs.back(), uint64_t{1} << 34);
  for (std::size_t i = 0; i < kLatencyBucketBoundsNs.size(); ++i) {
    EXPECT_EQ(std::popcount(kLatencyBucketBoundsNs[i]), 1);
    if (i > 0) {
      EXPECT_GT(kLatencyBucketBoundsNs[i], kLatencyBucketBoundsNs[i - 1]);
    }
  }

  std::map<double, double> buckets;  // le -> cumulative count
  for (const auto& s : m.samples()) {
    if (s.name != "rdmablk_namespace_latency_seconds_bucket") continue;
    Labels l = s.labels;
    const std::string le = l["le"];
    l.erase("le");
    if (l != reads) continue;
    buckets[le == "+Inf" ? INFINITY : std::stod(le)] = s.value;
  }
  ASSERT_EQ(buckets.size(), kLatencyBucketBoundsNs.size() + 1);
  std::size_t i = 0;
  for (const auto& [le, count] : buckets) {
    if (i == kLatencyBucketBoundsNs.size()) {
      EXPECT_TRUE(std::isinf(le));
      EXPECT_EQ(count, static_cast<double>(latencies.size()));
      break;
    }
    const uint64_t bound = kLatencyBucketBoundsNs[i++];
    EXPECT_EQ(le, static_cast<double>(bound) / 1e9);  // le in seconds, printed exactly enough to round-trip
    std::size_t expected = 0;
    for (uint64_t ns : latencies) expected += ns < bound;
    EXPECT_EQ(count, static_cast<double>(expected)) << "le=" << le;
  }
  // Spot checks by hand: below 4.096 us: 1000, 4095, 2000, 2000; below 8.192 us also 4096, 5000; below 4.19 ms
  // also 100 us and 3 ms; 20 s only in +Inf. (2^13 ns prints as le="8.192000000000001e-06": prometheus-cpp
  // writes 16 significant digits and no double prints shorter; parsed back it is 8192e-9 exactly.)
  EXPECT_EQ(m.value("rdmablk_namespace_latency_seconds_bucket", plus(reads, "le", "4.096e-06")), 4);
  EXPECT_EQ(buckets.at(8192 / 1e9), 6);
  EXPECT_EQ(m.value("rdmablk_namespace_latency_seconds_bucket", plus(reads, "le", "0.004194304")), 8);
  EXPECT_EQ(m.value("rdmablk_namespace_latency_seconds_bucket", plus(reads, "le", "17.179869184")), 8);
  EXPECT_EQ(m.value("rdmablk_namespace_latency_seconds_bucket", plus(reads, "le", "+Inf")), 9);
  EXPECT_EQ(m.value("rdmablk_namespace_latency_seconds_count", reads), 9);
  uint64_t sum = 0;
  for (uint64_t ns : latencies) sum += ns;
  EXPECT_DOUBLE_EQ(m.value("rdmablk_namespace_latency_seconds_sum", reads), static_cast<double>(sum) / 1e9);
  EXPECT_EQ(m.value("rdmablk_namespace_latency_seconds_count", {{"subsystem", kNqnA}, {"nsid", "1"}, {"op", "write"}}), 2);
}

TEST(Metrics, ReactorSeries) {
  const Scrape m(render_prometheus(sample_status()));
  EXPECT_EQ(m.value("rdmablk_reactor_info", {{"reactor", "0"}, {"cpu", "1"}}), 1);
  EXPECT_EQ(m.value("rdmablk_reactor_info", {{"reactor", "1"}, {"cpu", "none"}}), 1);
  EXPECT_EQ(m.value("rdmablk_reactor_busy_seconds_total", {{"reactor", "0"}}), 2.5);
  EXPECT_EQ(m.value("rdmablk_reactor_busy_seconds_total", {{"reactor", "1"}}), 0.75);
  EXPECT_EQ(m.value("rdmablk_buffer_pool_buffers", {{"reactor", "0"}, {"state", "in_use"}}), 10);
  EXPECT_EQ(m.value("rdmablk_buffer_pool_buffers", {{"reactor", "0"}, {"state", "free"}}), 246);
  EXPECT_EQ(m.value("rdmablk_buffer_pool_buffers", {{"reactor", "1"}, {"state", "free"}}), 256);
  EXPECT_EQ(m.value("rdmablk_buffer_pool_bytes", {{"reactor", "1"}}), 256 * 131072);
}

TEST(Metrics, LabelValuesThatAreNotUtf8AreRepaired) {
  // A host's NQN is peer input; one invalid label value would make Prometheus drop the whole scrape.
  TargetStatus s = sample_status();
  s.controller_stats[0].hostnqn = "host\xff\xc0\x80x\xe2\x82\xac";  // bad byte, overlong NUL, then a valid euro sign
  s.subsystems[0].namespaces[0].path = "/srv/\xed\xa0\x80.img";   // a UTF-16 surrogate
  const std::string text = render_prometheus(s, {.per_controller = true});
  const Scrape m(text);
  const std::string r = "\xef\xbf\xbd";  // U+FFFD
  EXPECT_EQ(m.value("rdmablk_controller_commands_total",
                    {{"subsystem", kNqnA}, {"cntlid", "1"}, {"hostnqn", "host" + r + r + r + "x\xe2\x82\xac"}, {"op", "write"}}),
            2);
  EXPECT_NE(text.find("path=\"/srv/" + r + r + r + ".img\""), std::string::npos);
  const auto [rc, out] = promtool_check(text);
  EXPECT_EQ(rc, 0) << "promtool check metrics said:\n" << out;
}

TEST(Metrics, PerControllerSeriesOnlyWhenAsked) {
  const TargetStatus s = sample_status();
  EXPECT_EQ(Scrape(render_prometheus(s)).count("rdmablk_controller_commands_total"), 0u);
  const Scrape m(render_prometheus(s, MetricsOptions{.per_controller = true}));
  const Labels c1{{"subsystem", kNqnA}, {"cntlid", "1"}, {"hostnqn", "nqn.2014-08.org.nvmexpress:uuid:host-1"}};
  EXPECT_EQ(m.value("rdmablk_controller_commands_total", plus(c1, "op", "read")), std::size(kReadLatenciesNs) + 2);
  EXPECT_EQ(m.value("rdmablk_controller_bytes_total", plus(c1, "op", "write")), 2 * 8192);
  EXPECT_EQ(m.value("rdmablk_controller_errors_total", plus(c1, "status", "LBA Out of Range")), 2);
}

TEST(Metrics, EveryFamilyHasHelpAndTypeAndNoEmptyFamily) {
  const std::string text = render_prometheus(sample_status());
  std::map<std::string, int> help, type;
  std::size_t pos = 0;
  while ((pos = text.find("# ", pos)) != std::string::npos) {
    const std::size_t eol = text.find('\n', pos);
    std::string kind = text.substr(pos + 2, 4);
    const std::size_t name_end = text.find(' ', pos + 7);
    const std::string name = text.substr(pos + 7, name_end - pos - 7);
    (kind == "HELP" ? help : type)[name]++;
    // The next line is a sample of this family (or its TYPE line).
    const std::string next = text.substr(eol + 1, name.size());
    if (kind == "TYPE") {
      EXPECT_EQ(next, name) << "family " << name << " without samples";
    }
    pos = eol;
  }
  EXPECT_EQ(help, type);
  for (const auto& [name, n] : type) EXPECT_EQ(n, 1) << name;
  EXPECT_GE(type.size(), 18u);
}

TEST(Metrics, PromtoolAcceptsTheText) {
  for (bool per_controller : {false, true}) {
    const auto [rc, out] = promtool_check(render_prometheus(sample_status(), {.per_controller = per_controller}));
    EXPECT_EQ(rc, 0) << "promtool check metrics said:\n" << out;
  }
  // Also an idle target: nothing configured, nothing connected.
  TargetStatus empty;
  empty.version = "0.1.0";
  const auto [rc, out] = promtool_check(render_prometheus(empty));
  EXPECT_EQ(rc, 0) << "promtool check metrics said:\n" << out;
}

}  // namespace

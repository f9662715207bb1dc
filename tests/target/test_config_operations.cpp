// The target configuration's operating settings: reactors pinned to CPUs (`reactors: [2, 3, 6-7]`), the
// control socket (`control:`) and the Prometheus endpoint (`metrics:`); their parsing, their checks
// against the machine (with an injected CPU set), and what a reload cannot apply.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/ports.h"
#include "target/config/config.h"

namespace {

using namespace rdmablk::target;

// Test YAML is written from column 1 after a leading newline, so that line 1 is the first line shown.
std::string yaml(std::string_view text) {
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  return std::string(text);
}

// Line 1 of every document below: one listener.
constexpr std::string_view kListener = "listeners: [{address: 127.0.0.1}]\n";

TargetConfig parse_ok(std::string_view text) {
  auto config = parse_config(std::string(kListener) + yaml(text), "t.yaml");
  EXPECT_TRUE(config) << config.error().message;
  return config ? *config : TargetConfig{};
}

std::string parse_error(std::string_view text) {
  auto config = parse_config(std::string(kListener) + yaml(text), "t.yaml");
  EXPECT_FALSE(config) << "parsed unexpectedly";
  return config ? std::string() : config.error().message;
}

std::vector<int> cpus(std::initializer_list<int> list) { return list; }

std::vector<std::pair<int, int>> lines_and_columns(const TargetConfig& c) {
  std::vector<std::pair<int, int>> out;
  for (const auto& at : c.reactor_cpus_at) out.emplace_back(at.line, at.column);
  return out;
}

// --- reactors: a count or CPUs ----------------------------------------------------------------------

TEST(ConfigReactors, ACountPinsNothing) {
  TargetConfig c = parse_ok("reactors: 4\n");
  EXPECT_EQ(c.reactors, 4u);
  EXPECT_TRUE(c.reactor_cpus.empty());
  EXPECT_TRUE(c.reactor_cpus_at.empty());
  EXPECT_EQ(parse_ok("reactors: 0\n").reactors, 0u);
  EXPECT_EQ(parse_ok("reactors: 0x2\n").reactors, 2u);
  EXPECT_EQ(parse_ok("log_level: info\n").reactors, 0u);
}

TEST(ConfigReactors, AFlowListOfCpusAndRanges) {
  TargetConfig c = parse_ok("reactors: [2, 3, 6-7]\n");
  EXPECT_EQ(c.reactor_cpus, cpus({2, 3, 6, 7}));
  EXPECT_EQ(c.reactors, 4u);
  // Each CPU remembers its entry; a range's CPUs share it.
  EXPECT_EQ(lines_and_columns(c), (std::vector<std::pair<int, int>>{{2, 12}, {2, 15}, {2, 18}, {2, 18}}));
}

TEST(ConfigReactors, ABlockListKeepsTheOrderWritten) {
  TargetConfig c = parse_ok(R"(
reactors:
  - 5
  - "0-1"
  - 3
)");
  EXPECT_EQ(c.reactor_cpus, cpus({5, 0, 1, 3}));
  EXPECT_EQ(c.reactors, 4u);
  EXPECT_EQ(lines_and_columns(c), (std::vector<std::pair<int, int>>{{3, 5}, {4, 5}, {4, 5}, {5, 5}}));
  EXPECT_EQ(parse_ok("reactors: [0]\n").reactor_cpus, cpus({0}));  // one reactor on CPU 0 (`0` alone is a count)
}

TEST(ConfigReactors, TheStringFormOfTasksetAndCpuAffinity) {
  TargetConfig quoted = parse_ok("reactors: \"2,3,6-7\"\n");
  EXPECT_EQ(quoted.reactor_cpus, cpus({2, 3, 6, 7}));
  EXPECT_EQ(quoted.reactors, 4u);
  // Each entry's column inside the string (after the opening quote at column 11).
  EXPECT_EQ(lines_and_columns(quoted), (std::vector<std::pair<int, int>>{{2, 12}, {2, 14}, {2, 16}, {2, 16}}));

  TargetConfig plain = parse_ok("reactors: 2, 3 ,6-7\n");
  EXPECT_EQ(plain.reactor_cpus, cpus({2, 3, 6, 7}));
  EXPECT_EQ(lines_and_columns(plain), (std::vector<std::pair<int, int>>{{2, 11}, {2, 14}, {2, 17}, {2, 17}}));

  EXPECT_EQ(parse_ok("reactors: 4-5\n").reactor_cpus, cpus({4, 5}));  // a range alone is a list
  EXPECT_EQ(parse_ok("reactors: '1'\n").reactors, 1u);                // a number alone is a count
  EXPECT_TRUE(parse_ok("reactors: '1'\n").reactor_cpus.empty());
}

TEST(ConfigReactors, DuplicatesPointAtTheSecondEntryAndNameTheFirst) {
  EXPECT_EQ(parse_error("reactors: [2, 3, 1-3]\n"),
            "t.yaml:2:18: reactors: duplicate CPU 2 (first at line 2, column 12)");
  EXPECT_EQ(parse_error("reactors: \"0-3,2\"\n"),
            "t.yaml:2:16: reactors: duplicate CPU 2 (first at line 2, column 12)");
  EXPECT_EQ(parse_error(R"(
reactors:
  - 1
  - 1
)"),
            "t.yaml:4:5: reactors: duplicate CPU 1 (first at line 3, column 5)");
  // An escape makes the string differ from the file's text: the column falls back to the value's start.
  EXPECT_EQ(parse_error("reactors: \"2,\\u0033,3\"\n"),
            "t.yaml:2:11: reactors: duplicate CPU 3 (first at line 2, column 11)");
}

TEST(ConfigReactors, MalformedEntries) {
  EXPECT_EQ(parse_error("reactors: [7-6]\n"), "t.yaml:2:12: reactors: range 7-6 goes backwards (write 6-7)");
  EXPECT_EQ(parse_error("reactors: \"1, 9-8\"\n"), "t.yaml:2:15: reactors: range 9-8 goes backwards (write 8-9)");
  EXPECT_EQ(parse_error("reactors: [0, -1]\n"), "t.yaml:2:15: reactors: CPU numbers must not be negative (got '-1')");
  EXPECT_EQ(parse_error("reactors: [1--3]\n"), "t.yaml:2:12: reactors: CPU numbers must not be negative (got '1--3')");
  EXPECT_EQ(parse_error("reactors: -2\n"), "t.yaml:2:11: reactors: must not be negative (got '-2')");
  EXPECT_EQ(parse_error("reactors: [two]\n"),
            "t.yaml:2:12: reactors: expected a CPU number or a range such as 6-7, got 'two'");
  EXPECT_EQ(parse_error("reactors: [1, 0x2]\n"),
            "t.yaml:2:15: reactors: expected a CPU number or a range such as 6-7, got '0x2'");
  EXPECT_EQ(parse_error("reactors: 1,2-\n"),
            "t.yaml:2:13: reactors: expected a CPU number or a range such as 6-7, got '2-'");
  EXPECT_EQ(parse_error("reactors: [0-7:2]\n"),
            "t.yaml:2:12: reactors: expected a CPU number or a range such as 6-7, got '0-7:2'");
  EXPECT_EQ(parse_error("reactors: many\n"),
            "t.yaml:2:11: reactors: expected a reactor count or a CPU list such as [2, 3, 6-7], got 'many'");
  EXPECT_EQ(parse_error("reactors: 2,,3\n"),
            "t.yaml:2:13: reactors: empty entry (expected a CPU number or a range such as 6-7)");
  EXPECT_EQ(parse_error("reactors: [[1]]\n"),
            "t.yaml:2:12: reactors: expected a CPU number or a range such as 6-7, got a list");
  EXPECT_EQ(parse_error("reactors: [1, ~]\n"),
            "t.yaml:2:11: reactors: missing value (expected a CPU number or a range such as 6-7)");
  EXPECT_EQ(parse_error("reactors: [70000]\n"), "t.yaml:2:12: reactors: CPU 70000 is out of range (expected 0..65535)");
  EXPECT_EQ(parse_error("reactors: 1025\n"), "t.yaml:2:11: reactors: 1025 is out of range (expected 0..1024)");
  EXPECT_EQ(parse_error("reactors: 0-1024\n"),
            "t.yaml:2:11: reactors: more than 1024 CPUs (one reactor each, at most 1024 reactors)");
  EXPECT_EQ(parse_error("reactors:\n"),
            "t.yaml:2:1: reactors: missing value (expected a reactor count or a CPU list "
            "such as [2, 3, 6-7])");
}

TEST(ConfigReactors, AnEmptyListIsAnError) {
  const std::string problem =
      "reactors: an empty CPU list (list the CPUs to pin one reactor each to, or write 0 for one reactor per "
      "online CPU)";
  EXPECT_EQ(parse_error("reactors: []\n"), "t.yaml:2:11: " + problem);
  EXPECT_EQ(parse_error("reactors: \"\"\n"), "t.yaml:2:11: " + problem);
}

// --- the CPU list text ------------------------------------------------------------------------------

TEST(CpuList, ParsesTheKernelsFormat) {
  const std::pair<const char*, std::vector<int>> good[] = {
      {"0-1,4", {0, 1, 4}},
      {"0\n", {0}},  // /sys/devices/system/cpu/online ends with a newline
      {"0-3", {0, 1, 2, 3}},
      {"", {}},  // the kernel's empty mask (/sys/devices/system/cpu/offline)
      {"\n", {}},
      {" 2, 3 ,6-7", {2, 3, 6, 7}},
      {"7,5-6", {7, 5, 6}},  // in the order written
      {"1023", {1023}},
  };
  for (const auto& [text, expected] : good) {
    auto r = parse_cpu_list(text);
    ASSERT_TRUE(r) << text << ": " << r.error().message;
    EXPECT_EQ(*r, expected) << text;
  }
}

TEST(CpuList, RejectsWithTheReason) {
  const std::pair<const char*, const char*> bad[] = {
      {"1,1", "invalid CPU list '1,1': CPU 1 is listed twice"},
      {"0-3,2", "invalid CPU list '0-3,2': CPU 2 is listed twice"},
      {"3-1", "invalid CPU list '3-1': range 3-1 goes backwards (write 1-3)"},
      {"a", "invalid CPU list 'a': expected a CPU number or a range such as 6-7, got 'a'"},
      {"1,,2", "invalid CPU list '1,,2': empty entry (expected a CPU number or a range such as 6-7)"},
      {"1,", "invalid CPU list '1,': empty entry (expected a CPU number or a range such as 6-7)"},
      {"-1", "invalid CPU list '-1': CPU numbers must not be negative (got '-1')"},
      {"0-7:2", "invalid CPU list '0-7:2': expected a CPU number or a range such as 6-7, got '0-7:2'"},
      {"99999999999", "invalid CPU list '99999999999': CPU 99999999999 is out of range (expected 0..65535)"},
  };
  for (auto [text, message] : bad) {
    auto r = parse_cpu_list(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().message, message);
  }
}

TEST(CpuList, FormatsRunsAsRangesInTheGivenOrder) {
  EXPECT_EQ(format_cpu_list(cpus({})), "");
  EXPECT_EQ(format_cpu_list(cpus({5})), "5");
  EXPECT_EQ(format_cpu_list(cpus({0, 1, 2})), "0-2");
  EXPECT_EQ(format_cpu_list(cpus({2, 3, 6, 7})), "2-3,6-7");
  EXPECT_EQ(format_cpu_list(cpus({2, 3, 6, 7, 1})), "2-3,6-7,1");
  EXPECT_EQ(format_cpu_list(cpus({3, 2})), "3,2");
  for (const char* text : {"0-1,4", "0-63", "1,3,5-9,12"}) EXPECT_EQ(format_cpu_list(*parse_cpu_list(text)), text);
}

// --- reactors against the machine -------------------------------------------------------------------

TEST(ConfigReactorsEnvironment, EveryCpuMustBeOnlineAndAllowed) {
  // Online 0-3; the process may run on 0 and 2-3 (as under `taskset -c 0,2-3` or CPUAffinity=0 2 3).
  EnvironmentChecks checks{.ports = false, .cpus = CpuAvailability{.online = {0, 1, 2, 3}, .allowed = {0, 2, 3}}};
  EXPECT_TRUE(validate_environment(parse_ok("reactors: [2, 3]\n"), checks));
  EXPECT_TRUE(validate_environment(parse_ok("reactors: \"3,0\"\n"), checks));

  auto offline = validate_environment(parse_ok("reactors: [3, 5]\n"), checks);
  ASSERT_FALSE(offline);
  EXPECT_EQ(offline.error().message, "t.yaml:2:15: reactors: CPU 5 is not online on this machine (online: 0-3)");
  EXPECT_EQ(offline.error().errno_value, EINVAL);

  auto range = validate_environment(parse_ok("reactors: \"0,2-9\"\n"), checks);
  ASSERT_FALSE(range);
  EXPECT_EQ(range.error().message, "t.yaml:2:14: reactors: CPU 4 is not online on this machine (online: 0-3)");

  auto not_allowed = validate_environment(parse_ok("reactors:\n  - 0\n  - 1\n"), checks);
  ASSERT_FALSE(not_allowed);
  EXPECT_EQ(not_allowed.error().message,
            "t.yaml:4:5: reactors: CPU 1 is outside the CPUs this process may run on (0,2-3: see taskset, systemd's "
            "CPUAffinity= or the cgroup's cpuset)");

  // A CPU taken offline in the middle (echo 0 > /sys/devices/system/cpu/cpu2/online).
  EnvironmentChecks holes{.ports = false, .cpus = CpuAvailability{.online = {0, 1, 3}, .allowed = {0, 1, 3}}};
  auto hole = validate_environment(parse_ok("reactors: [1, 2]\n"), holes);
  ASSERT_FALSE(hole);
  EXPECT_EQ(hole.error().message, "t.yaml:2:15: reactors: CPU 2 is not online on this machine (online: 0-1,3)");

  // A count pins nothing, so there is nothing to check (even against no CPUs at all).
  EXPECT_TRUE(validate_environment(parse_ok("reactors: 64\n"), {.ports = false, .cpus = CpuAvailability{}}));
}

TEST(ConfigReactorsEnvironment, ThisMachine) {
  CpuAvailability machine = machine_cpus();
  ASSERT_FALSE(machine.online.empty());
  ASSERT_FALSE(machine.allowed.empty());
  EXPECT_TRUE(std::is_sorted(machine.online.begin(), machine.online.end()));
  EXPECT_TRUE(std::is_sorted(machine.allowed.begin(), machine.allowed.end()));
  EXPECT_LE(machine.online.size(), static_cast<std::size_t>(::sysconf(_SC_NPROCESSORS_CONF)));

  // Every allowed online CPU is accepted; a CPU beyond the machine is not.
  std::vector<int> usable;
  for (int cpu : machine.allowed) {
    if (std::binary_search(machine.online.begin(), machine.online.end(), cpu)) usable.push_back(cpu);
  }
  ASSERT_FALSE(usable.empty());
  auto ok = validate_environment(parse_ok("reactors: \"" + format_cpu_list(usable) + "\"\n"), {.ports = false});
  EXPECT_TRUE(ok) << ok.error().message;
  auto beyond = validate_environment(parse_ok("reactors: [65535]\n"), {.ports = false});
  ASSERT_FALSE(beyond);
  EXPECT_EQ(beyond.error().message, "t.yaml:2:12: reactors: CPU 65535 is not online on this machine (online: " +
                                        format_cpu_list(machine.online) + ")");
}

// --- control ----------------------------------------------------------------------------------------

TEST(ConfigControl, OnAtTheDefaultPathUnlessSaidOtherwise) {
  TargetConfig absent = parse_ok("log_level: info\n");
  EXPECT_TRUE(absent.control.enabled);
  EXPECT_EQ(absent.control.socket_path, "/run/rdmablk/target.sock");
  EXPECT_EQ(absent.control.socket_path, kDefaultControlSocketPath);
  EXPECT_EQ(absent.control.at.line, 0);

  TargetConfig empty = parse_ok("control:\n");
  EXPECT_TRUE(empty.control.enabled);
  EXPECT_EQ(empty.control.socket_path, kDefaultControlSocketPath);

  TargetConfig moved = parse_ok(R"(
control:
  socket: /var/run/rdmablk-a/ctl.sock
)");
  EXPECT_TRUE(moved.control.enabled);
  EXPECT_EQ(moved.control.socket_path, "/var/run/rdmablk-a/ctl.sock");
  EXPECT_EQ(moved.control.at.line, 3);
  EXPECT_EQ(moved.control.socket_at.line, 3);
  EXPECT_EQ(moved.control.socket_at.column, 11);

  TargetConfig off = parse_ok("control: {enabled: false}\n");
  EXPECT_FALSE(off.control.enabled);
  EXPECT_FALSE(parse_ok("control: {enabled: no, socket: /run/x.sock}\n").control.enabled);
}

TEST(ConfigControl, Errors) {
  EXPECT_EQ(parse_error("control: {socket: run/t.sock}\n"),
            "t.yaml:2:19: control.socket: 'run/t.sock' is not an absolute path (the control socket's path is used as "
            "written, and clients find it by its full path)");
  EXPECT_EQ(parse_error("control: {socket: \"\"}\n"),
            "t.yaml:2:19: control.socket: must not be empty (write enabled: false to turn the control socket off)");
  EXPECT_EQ(parse_error("control: {socket: /run/rdmablk/}\n"),
            "t.yaml:2:19: control.socket: '/run/rdmablk/' names a directory, not a socket file");
  std::string long_path = "/run/" + std::string(103, 'x');  // 108 bytes: no room for sun_path's NUL
  EXPECT_EQ(parse_error("control: {socket: " + long_path + "}\n"),
            "t.yaml:2:19: control.socket: too long for a Unix socket (108 bytes, at most 107)");
  EXPECT_EQ(parse_ok("control: {socket: /" + std::string(106, 'x') + "}\n").control.socket_path.size(), 107u);
  EXPECT_EQ(parse_error("control: {socket:}\n"),
            "t.yaml:2:11: control.socket: missing value (expected the control socket's absolute path)");
  EXPECT_EQ(parse_error("control: {path: /run/x.sock}\n"),
            "t.yaml:2:11: control.path: unknown key (expected one of: enabled, socket)");
  EXPECT_EQ(parse_error("control: {sockets: /run/x.sock}\n"),
            "t.yaml:2:11: control.sockets: unknown key (did you mean 'socket'?)");
  EXPECT_EQ(parse_error("control: {enabled: maybe}\n"),
            "t.yaml:2:20: control.enabled: expected true or false, got 'maybe'");
  EXPECT_EQ(parse_error("control: off\n"),
            "t.yaml:2:10: control: expected a mapping (enabled, socket), got a scalar (write `control: {enabled: "
            "false}` to turn the control socket off)");
  EXPECT_EQ(parse_error("control: [/run/x.sock]\n"),
            "t.yaml:2:10: control: expected a mapping (enabled, socket), got a list (write `control: {enabled: "
            "false}` to turn the control socket off)");
}

// --- metrics ----------------------------------------------------------------------------------------

TEST(ConfigMetrics, OffUnlessAMappingAsksForIt) {
  TargetConfig absent = parse_ok("log_level: info\n");
  EXPECT_FALSE(absent.metrics.enabled);
  EXPECT_EQ(absent.metrics.address, "");
  EXPECT_EQ(absent.metrics.port, 9464);

  TargetConfig loopback = parse_ok("metrics: {address: 127.0.0.1}\n");
  EXPECT_TRUE(loopback.metrics.enabled);
  EXPECT_EQ(loopback.metrics.address, "127.0.0.1");
  EXPECT_EQ(loopback.metrics.port, kDefaultMetricsPort);
  EXPECT_EQ(loopback.metrics.at.line, 2);
  EXPECT_EQ(loopback.metrics.at.column, 10);
  EXPECT_EQ(loopback.metrics.address_at.column, 20);
  EXPECT_EQ(loopback.metrics.port_at.column, 10);  // defaulted: the mapping

  TargetConfig every = parse_ok(R"(
metrics:
  address: "::"
  port: 9100
)");
  EXPECT_TRUE(every.metrics.enabled);
  EXPECT_EQ(every.metrics.address, "::");
  EXPECT_EQ(every.metrics.port, 9100);
  EXPECT_EQ(every.metrics.port_at.line, 4);
  EXPECT_EQ(every.metrics.port_at.column, 9);

  EXPECT_EQ(parse_ok("metrics: {address: \"[::1]\"}\n").metrics.address, "::1");

  TargetConfig off = parse_ok("metrics: {enabled: false}\n");  // no address needed when off
  EXPECT_FALSE(off.metrics.enabled);
  TargetConfig kept = parse_ok("metrics: {enabled: false, address: 0.0.0.0, port: 9100}\n");
  EXPECT_FALSE(kept.metrics.enabled);
  EXPECT_EQ(kept.metrics.port, 9100);
  EXPECT_TRUE(parse_ok("metrics: {enabled: true, address: 10.0.0.1}\n").metrics.enabled);
}

TEST(ConfigMetrics, Errors) {
  const std::string missing_address =
      "metrics.address: missing (required: the address to serve /metrics on: 127.0.0.1, or 0.0.0.0 or :: for every "
      "address)";
  EXPECT_EQ(parse_error("metrics: {port: 9100}\n"), "t.yaml:2:10: " + missing_address);
  EXPECT_EQ(parse_error("metrics:\n"), "t.yaml:2:1: " + missing_address);
  EXPECT_EQ(parse_error("metrics: {address: prometheus.example.com}\n"),
            "t.yaml:2:20: metrics.address: 'prometheus.example.com' is not an IPv4 or IPv6 address (host names are "
            "not resolved here; 0.0.0.0 or \"::\" listens on every address)");
  EXPECT_EQ(parse_error("metrics: {enabled: false, address: localhost}\n"),
            "t.yaml:2:36: metrics.address: 'localhost' is not an IPv4 or IPv6 address (host names are not resolved "
            "here; 0.0.0.0 or \"::\" listens on every address)");
  EXPECT_EQ(parse_error("metrics: {address: 127.0.0.1, port: 0}\n"),
            "t.yaml:2:37: metrics.port: 0 is out of range (expected 1..65535)");
  EXPECT_EQ(parse_error("metrics: {address: 127.0.0.1, port: 65536}\n"),
            "t.yaml:2:37: metrics.port: 65536 is out of range (expected 1..65535)");
  EXPECT_EQ(parse_error("metrics: {address: 127.0.0.1, port: http}\n"),
            "t.yaml:2:37: metrics.port: expected an integer, got 'http'");
  EXPECT_EQ(parse_error("metrics: {adress: 127.0.0.1}\n"),
            "t.yaml:2:11: metrics.adress: unknown key (did you mean 'address'?)");
  EXPECT_EQ(parse_error("metrics: {address: 127.0.0.1, path: /metrics}\n"),
            "t.yaml:2:31: metrics.path: unknown key (expected one of: enabled, address, port)");
  EXPECT_EQ(parse_error("metrics: true\n"),
            "t.yaml:2:10: metrics: expected a mapping (enabled, address, port), got a scalar (write `metrics: "
            "{address: 127.0.0.1, port: 9464}` to serve /metrics)");
}

TEST(ConfigMetrics, NeverSharesATcpListenersPort) {
  auto error = [](std::string_view text) {
    auto c = parse_config(yaml(text), "t.yaml");
    return c ? std::string("(parsed)") : c.error().message;
  };
  // The port is defaulted: the error points at the mapping (as for a listener).
  EXPECT_EQ(error(R"(
listeners:
  - address: 127.0.0.1
  - {address: 0.0.0.0, port: 9464, role: discovery}
metrics:
  address: 127.0.0.1
)"),
            "t.yaml:5:3: metrics.port: 127.0.0.1:9464 collides with listeners[1] (tcp 0.0.0.0:9464 at line 3): the "
            "metrics endpoint needs a port of its own");
  EXPECT_EQ(error(R"(
listeners: [{address: 10.0.0.1, port: 4420}]
metrics: {address: "::", port: 4420}
)"),
            "t.yaml:2:32: metrics.port: [::]:4420 collides with listeners[0] (tcp 10.0.0.1:4420 at line 1): the "
            "metrics endpoint needs a port of its own");
  // Another address, an RDMA listener's port (rdma_cm's port space), or metrics off: no collision.
  EXPECT_EQ(error(R"(
listeners: [{address: 10.0.0.1, port: 4420}, {address: 10.0.0.1, port: 9464, transport: rdma}]
metrics: {address: 10.0.0.2, port: 4420}
)"),
            "(parsed)");
  EXPECT_EQ(error(R"(
listeners: [{address: 10.0.0.1, port: 9464, transport: rdma}]
metrics: {address: 10.0.0.1}
)"),
            "(parsed)");
  EXPECT_EQ(error(R"(
listeners: [{address: 10.0.0.1, port: 9464}]
metrics: {enabled: false, address: 10.0.0.1}
)"),
            "(parsed)");
}

using rdmablk::testing::listen_on_loopback;  // tests/support/ports.h

TEST(ConfigMetricsEnvironment, ThePortMustBeFree) {
  uint16_t port = 0;
  int fd = listen_on_loopback(&port);
  ASSERT_GE(fd, 0);
  TargetConfig c = parse_ok("metrics:\n  address: 127.0.0.1\n  port: " + std::to_string(port) + "\n");
  auto busy = validate_environment(c);
  EXPECT_TRUE(validate_environment(c, {.ports = false}));  // a reload: the daemon holds the port itself
  ::close(fd);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().message,
            "t.yaml:4:9: metrics.port: metrics 127.0.0.1:" + std::to_string(port) + " is already in use");
  EXPECT_EQ(busy.error().errno_value, EADDRINUSE);
  EXPECT_TRUE(validate_environment(c));  // released

  auto foreign = validate_environment(parse_ok("metrics: {address: 192.0.2.1}\n"));
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().message, "t.yaml:2:20: metrics.address: 192.0.2.1 is not an address of this host");

  // Off: never bound, whatever it says.
  EXPECT_TRUE(validate_environment(parse_ok("metrics: {enabled: false, address: 192.0.2.1}\n")));
}

// --- reload and the startup line --------------------------------------------------------------------

TEST(ConfigReload, RestartOnlyChangesAreNamed) {
  TargetConfig base = parse_ok("reactors: 2\n");
  EXPECT_TRUE(restart_only_changes(base, parse_ok("reactors: 2\nlog_level: debug\n")).empty());
  EXPECT_EQ(restart_only_changes(base, parse_ok("reactors: [0, 1]\n")), std::vector<std::string>{"reactors"});
  EXPECT_EQ(restart_only_changes(parse_ok("reactors: [0, 1]\n"), parse_ok("reactors: [1, 0]\n")),
            std::vector<std::string>{"reactors"});
  EXPECT_EQ(restart_only_changes(base, parse_ok("reactors: 2\ncontrol: {socket: /run/other.sock}\n")),
            std::vector<std::string>{"control"});
  // The path of a socket that stays off does not matter.
  EXPECT_TRUE(restart_only_changes(parse_ok("reactors: 2\ncontrol: {enabled: false, socket: /run/a.sock}\n"),
                                   parse_ok("reactors: 2\ncontrol: {enabled: false, socket: /run/b.sock}\n"))
                  .empty());
  EXPECT_EQ(restart_only_changes(base, parse_ok("reactors: 2\nmetrics: {address: 127.0.0.1}\n")),
            std::vector<std::string>{"metrics"});
  EXPECT_EQ(restart_only_changes(parse_ok("metrics: {address: 127.0.0.1}\n"),
                                 parse_ok("metrics: {address: 127.0.0.1, port: 9100}\n")),
            std::vector<std::string>{"metrics"});
  auto all = restart_only_changes(
      base, *parse_config("listeners: [{address: 127.0.0.2}]\nbusy_poll_us: 0\ncontrol: {enabled: false}\n", "t.yaml"));
  EXPECT_EQ(all, (std::vector<std::string>{"reactors", "busy_poll_us", "control"}));  // listeners: live
}

TEST(ConfigDescribe, ShowsTheCpusTheControlSocketAndMetrics) {
  TargetConfig c = parse_ok(R"(
reactors: [2, 3, 6-7, 1]
control: {socket: /tmp/ctl.sock}
metrics: {address: "::1", port: 9100}
)");
  EXPECT_EQ(describe(c),
            "1 listener (tcp 127.0.0.1:4420), 0 subsystems, 0 namespaces, reactors 5 on CPUs 2-3,6-7,1, log info, "
            "queues 64x128, max I/O 1 MiB, inline 8 KiB/16 KiB, "
            "connections 4096/listener 1024/host, Connect within 10000 ms, queue buffers 32 MiB, control /tmp/ctl.sock, metrics "
            "http://[::1]:9100/metrics");
  TargetConfig off = parse_ok("control: {enabled: false}\n");
  EXPECT_NE(describe(off).find(", reactors auto, "), std::string::npos) << describe(off);
  EXPECT_NE(describe(off).find(", control off, metrics off"), std::string::npos) << describe(off);
}

}  // namespace

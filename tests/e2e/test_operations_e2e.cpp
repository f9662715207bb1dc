// End to end, operating the target: every control-socket verb (`rdmablk-target ctl`) against the real daemon
// with hosts connected and I/O running; the statistics agree with what the bench did; the per-namespace
// SMART log; disconnect and reload through the socket; bad clients; who may open the socket.
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <thread>

#include "e2e_common.h"
#include "support/promtool.h"
#include "protocol/command.h"
#include "protocol/log_pages.h"
#include "protocol/status.h"

namespace e2e {
namespace {

using nlohmann::json;
namespace p = rdmablk::protocol;

std::filesystem::path socket_of(const TargetProcess& t) { return t.dir() / "target.sock"; }

json ctl_json(const TargetProcess& t, std::vector<std::string> args) {
  auto r = ctl(t, args);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_status, 0) << r.out << r.err;
  auto j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
  return j;
}

const json* find_namespace(const json& stats, uint32_t nsid) {
  for (const auto& n : stats["namespaces"])
    if (n["nsid"] == nsid) return &n;
  return nullptr;
}

p::SmartLog smart_log(rdmablk::initiator::Controller& c, uint32_t nsid) {
  std::vector<uint8_t> buf(sizeof(p::SmartLog));
  auto r = c.get_log_page(p::LogPageId::smart_health, 0, static_cast<uint32_t>(buf.size()), nsid);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  p::SmartLog log{};
  if (r) std::memcpy(&log, r->data(), sizeof(log));
  return log;
}

const char* const kTwoNamespaces = R"(      - nsid: 1
        backend: ram
        size: 64MiB
      - nsid: 2
        backend: ram
        size: 16MiB
)";

// The bench runs for a few seconds while every read-only verb is asked; then the counters are compared with
// the bench's own report (exact: nothing is in flight once it has exited).
TEST(OperationsE2e, VerbsWhileIoRunsAndStatsMatchTheBench) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kTwoNamespaces)));

  // A second host with a controller of its own, for controllers/disconnect (before the bench starts, so
  // that its steps do not eat into the bench's runtime).
  auto other = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostB), t);
  ASSERT_TRUE(other);
  auto q = io_queue_or_fail(*other, 1);
  ASSERT_TRUE(q);
  std::vector<uint8_t> block(512);
  for (int i = 0; i < 5; ++i) {
    auto r = read_blocks(*q, 2, static_cast<uint64_t>(i), 512, block);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_TRUE(r->get_status().ok()) << rdmablk::initiator::describe_status(r->get_status());
  }
  // One error on namespace 2: LBA out of range.
  auto bad = read_blocks(*q, 2, (16u << 20) / 512, 512, block);
  ASSERT_FALSE(bad);  // a failed status is an error of execute()
  EXPECT_NE(bad.error().message.find("LBA Out of Range"), std::string::npos) << bad.error().message;

  // The bench's runtime only has to cover the wait below (two `ctl` calls once its queue is up).
  const auto job = t.dir() / "mixed.fio";
  write_file(job, "[mixed]\nnamespace=1\nrw=randrw\nrwmixread=60\nbs=4k\niodepth=8\nsize=32m\nruntime=10\ntime_based\n");
  BackgroundProcess bench(bench_argv(t, job.string()), t.dir(), "bench");
  ASSERT_TRUE(bench.started());

  // Wait until the bench's controller is there (an event: it shows in `controllers`, and `status` counts
  // it); what is checked of it below is from these snapshots, taken while it ran.
  json ctrls, status;
  bool bench_seen = false;
  for (const auto deadline = std::chrono::steady_clock::now() + 60s;
       !bench_seen && std::chrono::steady_clock::now() < deadline;) {
    ctrls = ctl_json(t, {"controllers"});
    bool bench_there = false;
    for (const auto& c : ctrls) bench_there |= c["hostnqn"] == kHostA && c["io_queues"].get<int>() > 0;
    if (bench_there) {
      status = ctl_json(t, {"status"});
      bench_seen = status.is_object() && status["totals"]["io_controllers"].is_number() &&
                   status["totals"]["io_controllers"].get<int>() >= 2;
    }
    if (!bench_seen) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(bench_seen) << "the bench's controller did not show in controllers and status within 60 s\n"
                          << ctrls.dump(2) << "\n" << status.dump(2);
  bool saw_a = false, saw_b = false;
  for (const auto& c : ctrls) {
    if (c["discovery"].get<bool>()) continue;
    EXPECT_EQ(c["subsystem"], kSubnqn);
    EXPECT_EQ(c["transport"], "tcp");
    EXPECT_NE(c["peer"].get<std::string>().find("127.0.0.1:"), std::string::npos) << c.dump();
    EXPECT_GT(c["kato_ms"].get<uint32_t>(), 0u);
    EXPECT_FALSE(c["connected_since"].get<std::string>().empty());
    if (c["hostnqn"] == kHostA) {
      saw_a = true;
      EXPECT_GE(c["io_queues"].get<int>(), 1);
      EXPECT_GE(c["io_queue_depth"].get<int>(), 8);
    }
    if (c["hostnqn"] == kHostB) {
      saw_b = true;
      EXPECT_EQ(c["io_queues"], 1);
      EXPECT_EQ(c["in_flight"], 0);
    }
  }
  EXPECT_TRUE(saw_a && saw_b) << ctrls.dump(2);

  EXPECT_EQ(status["pid"], t.pid());
  EXPECT_EQ(status["config"]["path"], t.config_path().string());
  EXPECT_EQ(status["reactors"].size(), 2u);
  EXPECT_EQ(status["listeners"].size(), 2u);
  EXPECT_EQ(status["totals"]["subsystems"], 1);
  EXPECT_EQ(status["totals"]["namespaces"], 2);
  auto subsystems = ctl_json(t, {"subsystems"});
  ASSERT_EQ(subsystems.size(), 1u);
  EXPECT_EQ(subsystems[0]["nqn"], kSubnqn);
  EXPECT_TRUE(subsystems[0]["allow_any_host"].get<bool>());
  EXPECT_EQ(subsystems[0]["namespaces"].size(), 2u);
  auto namespaces = ctl_json(t, {"namespaces"});
  ASSERT_EQ(namespaces.size(), 2u);
  EXPECT_EQ(namespaces[0]["backend"], "ram");
  EXPECT_EQ(namespaces[0]["size_bytes"], 64u << 20);
  EXPECT_EQ(namespaces[1]["size_bytes"], 16u << 20);
  EXPECT_EQ(namespaces[0]["uuid"].get<std::string>().size(), 36u);
  // Tables too (the default output): headers and a row each.
  for (const char* verb : {"status", "subsystems", "namespaces", "controllers", "stats"}) {
    auto r = ctl(t, {verb}, /*as_json=*/false);
    EXPECT_EQ(r.exit_status, 0) << verb << ": " << r.out << r.err;
    EXPECT_FALSE(r.out.empty()) << verb;
  }
  EXPECT_NE(ctl(t, {"controllers"}, false).out.find(kHostB), std::string::npos);

  auto result = bench.wait(60s);
  ASSERT_FALSE(result.timed_out);
  ASSERT_EQ(result.exit_status, 0) << result.out << result.err;
  auto report = json::parse(result.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << result.out;
  const auto& jr = report["jobs"][0];
  const uint64_t bench_reads = jr["read"]["total_ios"], bench_writes = jr["write"]["total_ios"];
  const uint64_t bench_read_bytes = jr["read"]["io_bytes"], bench_write_bytes = jr["write"]["io_bytes"];
  ASSERT_GT(bench_reads, 0u);
  ASSERT_GT(bench_writes, 0u);

  auto stats = ctl_json(t, {"stats"});
  const json* ns1 = find_namespace(stats, 1);
  const json* ns2 = find_namespace(stats, 2);
  ASSERT_TRUE(ns1 && ns2) << stats.dump(2);
  EXPECT_EQ((*ns1)["read"]["commands"], bench_reads);
  EXPECT_EQ((*ns1)["write"]["commands"], bench_writes);
  EXPECT_EQ((*ns1)["read"]["bytes"], bench_read_bytes);
  EXPECT_EQ((*ns1)["write"]["bytes"], bench_write_bytes);
  EXPECT_GT((*ns1)["read"]["latency_us"]["p50"].get<double>(), 0.0);
  EXPECT_GE((*ns1)["read"]["latency_us"]["p99.9"].get<double>(), (*ns1)["read"]["latency_us"]["p50"].get<double>());
  EXPECT_EQ((*ns2)["read"]["commands"], 6);  // 5 good + 1 refused
  EXPECT_EQ((*ns2)["read"]["bytes"], 5 * 512);
  ASSERT_EQ((*ns2)["errors"].size(), 1u);
  EXPECT_EQ((*ns2)["errors"][0]["status"], "LBA Out of Range");
  EXPECT_EQ((*ns2)["errors"][0]["count"], 1);
  // Per controller: host B's did exactly its 6 reads.
  bool found_b = false;
  for (const auto& c : stats["controllers"]) {
    if (c["hostnqn"] != kHostB) continue;
    found_b = true;
    EXPECT_EQ(c["read"]["commands"], 6);
    EXPECT_EQ(c["write"]["commands"], 0);
  }
  EXPECT_TRUE(found_b);
  // Filters: --namespace and --controller.
  auto only2 = ctl_json(t, {"stats", "--namespace", "2"});
  EXPECT_EQ(only2["namespaces"].size(), 1u);
  EXPECT_EQ(only2["controllers"].size(), 0u);
  auto only_ctrl = ctl_json(t, {"stats", "--controller", std::to_string(other->cntlid())});
  EXPECT_EQ(only_ctrl["namespaces"].size(), 0u);
  ASSERT_EQ(only_ctrl["controllers"].size(), 1u);
  EXPECT_EQ(only_ctrl["controllers"][0]["hostnqn"], kHostB);

  // SMART / Health per namespace (the same counters) and per controller.
  auto ns1_smart = smart_log(*other, 1);
  EXPECT_EQ(ns1_smart.host_read_commands.low(), bench_reads);
  EXPECT_EQ(ns1_smart.host_write_commands.low(), bench_writes);
  EXPECT_EQ(ns1_smart.data_units_written.low(), (bench_write_bytes / 512 + 999) / 1000);
  auto ns2_smart = smart_log(*other, 2);
  EXPECT_EQ(ns2_smart.host_read_commands.low(), 6u);
  auto ctrl_smart = smart_log(*other, p::kNsidAll);
  EXPECT_EQ(ctrl_smart.host_read_commands.low(), 6u);  // this controller's own
  std::vector<uint8_t> buf(sizeof(p::SmartLog));
  auto missing = other->get_log_page(p::LogPageId::smart_health, 0, static_cast<uint32_t>(buf.size()), 9);
  EXPECT_FALSE(missing);  // inactive NSID: Invalid Namespace

  // disconnect --host: host B's controller goes, the bench host's is unaffected.
  auto dc = ctl_json(t, {"disconnect", "--host", kHostB});
  EXPECT_EQ(dc["disconnected"], 1);
  for (int i = 0; i < 300; ++i) {
    bool gone = true;
    for (const auto& c : ctl_json(t, {"controllers"})) gone &= c["hostnqn"] != kHostB;
    if (gone) break;
    std::this_thread::sleep_for(100ms);
  }
  for (const auto& c : ctl_json(t, {"controllers"})) EXPECT_NE(c["hostnqn"], kHostB);
  EXPECT_FALSE(read_blocks(*q, 2, 0, 512, block)) << "the disconnected host can still do I/O";
  auto none = ctl(t, {"disconnect", "--controller", "4000"});
  EXPECT_EQ(none.exit_status, 1);
  EXPECT_NE(none.err.find("no controller 4000"), std::string::npos) << none.err;
}

// One HTTP request to 127.0.0.1:port, the whole response (the server closes after it).
std::string http(uint16_t port, const std::string& request) {
  const int fd = raw_connect(port);
  if (fd < 0) return "connect failed";
  (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

// The value of the series whose line starts with `series` (name and labels exactly), or -1.
double metric_value(const std::string& text, const std::string& series) {
  std::size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// The daemon's /metrics: promtool accepts the scrape, the counters are the bench's, the endpoint refuses
// what it should, and the daemon keeps serving.
TEST(OperationsE2e, PrometheusScrapeOfTheRunningDaemon) {
  TargetProcess t;
  const uint16_t metrics_port = pick_free_port();
  ASSERT_TRUE(t.start(config_with_namespaces(kTwoNamespaces, "",
                                             "metrics:\n  address: 127.0.0.1\n  port: " + std::to_string(metrics_port) + "\n")));
  const auto job = t.dir() / "w.fio";
  write_file(job, "[w]\nnamespace=2\nrw=write\nbs=8k\niodepth=4\nsize=4m\n");
  auto r = run_process(bench_argv(t, job.string()), t.dir(), 60s);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  const std::string response = http(metrics_port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response.substr(0, 200);
  EXPECT_NE(response.find("text/plain; version=0.0.4"), std::string::npos);
  const std::string body = response.substr(response.find("\r\n\r\n") + 4);
  const auto [rc, out] = rdmablk::test_support::promtool_check(body);
  EXPECT_EQ(rc, 0) << out;
  const std::string ns2 = std::string("{subsystem=\"") + kSubnqn + "\",nsid=\"2\"";
  EXPECT_EQ(metric_value(body, "rdmablk_namespace_commands_total" + ns2 + ",op=\"write\"}"), 512);
  EXPECT_EQ(metric_value(body, "rdmablk_namespace_bytes_total" + ns2 + ",op=\"write\"}"), 4u << 20);
  EXPECT_EQ(metric_value(body, "rdmablk_namespace_latency_seconds_count" + ns2 + ",op=\"write\"}"), 512);
  EXPECT_EQ(metric_value(body, "rdmablk_namespaces"), 2);
  EXPECT_GT(metric_value(body, "process_open_fds"), 5);  // listeners, rings, eventfds, the socket
  EXPECT_GT(metric_value(body, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(metric_value(body, "process_threads"), 3);  // main + 2 reactors
  EXPECT_GE(metric_value(body, "rdmablk_reactor_busy_seconds_total{reactor=\"0\"}"), 0);
  EXPECT_EQ(http(metrics_port, "GET /other HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(http(metrics_port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(http(metrics_port, "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n").rfind("HTTP/1.1 431", 0), 0u);
  EXPECT_EQ(ctl_json(t, {"status"})["totals"]["write_commands"], 512);
}

// Reactors pinned by `reactors: [CPUs]`: each reactor thread may run only on its CPU, and `ctl status` says so.
TEST(OperationsE2e, ReactorsArePinnedToTheirCpus) {
  // CPUs this process may use (a CI machine may be restricted to some): the second one first, to show that
  // the order is the config's.
  cpu_set_t allowed_set;
  CPU_ZERO(&allowed_set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(allowed_set), &allowed_set), 0);
  std::vector<int> usable;
  for (int c = 0; c < CPU_SETSIZE && usable.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed_set)) usable.push_back(c);
  ASSERT_FALSE(usable.empty());
  const std::vector<int> list = usable.size() >= 2 ? std::vector<int>{usable[1], usable[0]} : usable;
  std::string yaml = config_with_namespaces(kRamNamespace);
  std::string cpu_list;
  for (int c : list) cpu_list += (cpu_list.empty() ? "" : ", ") + std::to_string(c);
  const std::string from = "reactors: 2\n";
  ASSERT_NE(yaml.find(from), std::string::npos);
  yaml.replace(yaml.find(from), from.size(), "reactors: [" + cpu_list + "]\n");
  TargetProcess t;
  ASSERT_TRUE(t.start(yaml));
  auto status = ctl_json(t, {"status"});
  ASSERT_EQ(status["reactors"].size(), list.size());
  for (std::size_t i = 0; i < list.size(); ++i) EXPECT_EQ(status["reactors"][i]["cpu"], list[i]);
  // The threads themselves: /proc/PID/task/*/comm "reactorN", Cpus_allowed_list = its CPU.
  unsigned checked = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(t.pid()) + "/task")) {
    std::string comm = read_file(task.path() / "comm");
    if (comm.rfind("reactor", 0) != 0) continue;
    const int index = std::stoi(comm.substr(7));
    const std::string st = read_file(task.path() / "status");
    const auto at = st.find("Cpus_allowed_list:");
    ASSERT_NE(at, std::string::npos);
    const std::string allowed = st.substr(at + 18, st.find('\n', at) - at - 18);
    EXPECT_EQ(allowed.substr(allowed.find_first_not_of(" \t")), std::to_string(list.at(index))) << comm;
    ++checked;
  }
  EXPECT_EQ(checked, list.size());
}

TEST(OperationsE2e, ReloadThroughTheSocketAppliesOrExplains) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  write_file(t.config_path(), t.render(config_with_namespaces(kTwoNamespaces)));
  auto r = ctl(t, {"reload"}, /*as_json=*/false);
  EXPECT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("namespaces +1"), std::string::npos) << r.out;
  EXPECT_EQ(ctl_json(t, {"namespaces"}).size(), 2u);
  // A broken config: exit 1, the error names the file and line; nothing changed.
  write_file(t.config_path(), t.render(config_with_namespaces("      - nsid: 0\n        backend: ram\n        size: 1MiB\n")));
  auto broken = ctl(t, {"reload"}, false);
  EXPECT_EQ(broken.exit_status, 1) << broken.out << broken.err;
  EXPECT_NE(broken.err.find(t.config_path().string() + ":"), std::string::npos) << broken.err;
  EXPECT_EQ(ctl_json(t, {"namespaces"}).size(), 2u);
  EXPECT_TRUE(t.wait_for_log("reload failed, configuration unchanged"));
}

// Raw clients: garbage, unknown verbs, a request over the bound, one that never finishes its line. Each
// gets an error or a closed socket; the daemon keeps answering.
TEST(OperationsE2e, BadControlClientsDoNotHurtTheDaemon) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  auto raw = [&](const std::string& payload) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_of(t).c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    (void)!::send(fd, payload.data(), payload.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    std::string reply;
    char buf[4096];
    timeval tv{30, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) reply.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    return reply;
  };
  EXPECT_NE(raw("hello\n").find("\"ok\":false"), std::string::npos);
  EXPECT_NE(raw("{\"command\":\"shutdown-everything\"}\n").find("unknown command"), std::string::npos);
  EXPECT_NE(raw(std::string(200'000, '{')).find("longer than"), std::string::npos);
  // Unknown verb at the CLI.
  auto cli = ctl(t, {"frobnicate"});
  EXPECT_NE(cli.exit_status, 0);
  // Still serving.
  EXPECT_EQ(ctl_json(t, {"status"})["totals"]["namespaces"], 1);
}

// The socket is 0600 root: another user cannot connect (setpriv drops to nobody).
TEST(OperationsE2e, OtherUsersCannotOpenTheSocket) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the client as another user";
  if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) not installed";
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  struct stat sb {};
  ASSERT_EQ(::stat(socket_of(t).c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  // The directory must be traversable for the test to reach the permission check on the socket itself.
  std::filesystem::permissions(t.dir(), std::filesystem::perms::others_exec, std::filesystem::perm_options::add);
  auto r = run_process({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", RDMABLK_TARGET_BINARY,
                        "ctl", "--socket", socket_of(t).string(), "status"},
                       t.dir(), 30s);
  EXPECT_EQ(r.exit_status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("permission denied"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace e2e

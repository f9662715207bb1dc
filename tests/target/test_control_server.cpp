// The control socket server and protocol, driven by a poll loop in a thread of the test (the daemon's
// control thread in miniature); clients are raw Unix sockets.
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

#include "target/control/control_api.h"
#include "target/control/control_server.h"

namespace rdmablk::target {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string temp_socket_path() {
  char tmpl[] = "/tmp/rdmablk-ctl-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  EXPECT_NE(dir, nullptr);
  return std::string(dir) + "/sub/target.sock";  // sub/ does not exist yet: the server creates it
}

// Runs a ControlServer in a thread until destroyed.
class ServerThread {
 public:
  ServerThread(const std::string& path, ControlServer::Handler handler, ControlServerLimits limits = {}) {
    auto s = ControlServer::create(path, std::move(handler), limits);
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    if (!s) return;
    server_ = std::move(*s);
    thread_ = std::thread([this] {
      std::vector<pollfd> fds;
      while (!stop_.load()) {
        fds.clear();
        server_->add_pollfds(fds);
        auto now = std::chrono::steady_clock::now();
        int t = server_->poll_timeout_ms(now);
        ::poll(fds.data(), fds.size(), t < 0 || t > 20 ? 20 : t);
        server_->handle(fds, std::chrono::steady_clock::now());
        clients_.store(server_->client_count());
      }
    });
  }
  ~ServerThread() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::size_t clients() const { return clients_.load(); }
  ControlServer* server() { return server_.get(); }

 private:
  std::unique_ptr<ControlServer> server_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> clients_{0};
};

int connect_to(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads one line (or until EOF / 30 s); "" on EOF with nothing read.
std::string read_line(int fd) {
  std::string s;
  char c;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    ssize_t n = ::recv(fd, &c, 1, 0);
    if (n <= 0) return s;
    if (c == '\n') return s;
    s += c;
  }
  ADD_FAILURE() << "no line within 30 s";
  return s;
}

void send_all(int fd, const std::string& s) {
  ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
}

// Waits until the server closed `fd` (EOF), up to 30 s.
bool closed_by_server(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  char buf[256];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
  return false;
}

ControlHooks fake_hooks(std::atomic<int>* reloads = nullptr) {
  ControlHooks h;
  h.status = [] {
    TargetStatus s;
    s.version = "9.9.9";
    s.pid = 42;
    s.config_path = "/etc/rdmablk/target.yaml";
    SubsystemStatus sub;
    sub.nqn = "nqn.test:sub";
    NamespaceStatus ns;
    ns.subsystem = sub.nqn;
    ns.nsid = 1;
    ns.backend = "ram";
    ns.size_bytes = 1 << 20;
    ns.block_size = 512;
    sub.namespaces.push_back(ns);
    s.subsystems.push_back(sub);
    ControllerStatus c;
    c.cntlid = 7;
    c.subsystem = sub.nqn;
    c.hostnqn = "nqn.test:host";
    s.controllers.push_back(c);
    stats::NamespaceStats nst;
    nst.subsystem = sub.nqn;
    nst.nsid = 1;
    stats::IoStats live;
    live.record(stats::OpClass::read, 4096, 20'000, 0);
    nst.io.add(live);
    s.namespace_stats.push_back(nst);
    stats::ControllerStats cst;
    cst.cntlid = 7;
    cst.subsystem = sub.nqn;
    cst.hostnqn = c.hostnqn;
    cst.io = nst.io;
    s.controller_stats.push_back(cst);
    return s;
  };
  h.reload = [reloads]() -> Result<std::string> {
    if (reloads != nullptr) ++*reloads;
    return make_error("/etc/rdmablk/target.yaml:3:5: nsid: bad");
  };
  h.disconnect_host = [](const std::string& host) { return host == "nqn.test:host" ? 1u : 0u; };
  h.disconnect_controller = [](uint16_t id) { return id == 7 ? 1u : 0u; };
  return h;
}

json ask(const ControlHooks& h, const std::string& line) { return json::parse(handle_control_request(h, line)); }

TEST(ControlApi, EveryVerbAnswers) {
  auto h = fake_hooks();
  auto st = ask(h, R"({"command":"status"})");
  ASSERT_TRUE(st["ok"].get<bool>()) << st.dump();
  EXPECT_EQ(st["result"]["version"], "9.9.9");
  EXPECT_EQ(st["result"]["totals"]["read_commands"], 1);
  EXPECT_EQ(st["result"]["totals"]["io_controllers"], 1);
  EXPECT_EQ(ask(h, R"({"command":"subsystems"})")["result"][0]["nqn"], "nqn.test:sub");
  EXPECT_EQ(ask(h, R"({"command":"namespaces"})")["result"][0]["block_size"], 512);
  EXPECT_EQ(ask(h, R"({"command":"controllers"})")["result"][0]["cntlid"], 7);
  auto stats = ask(h, R"({"command":"stats"})")["result"];
  EXPECT_EQ(stats["namespaces"][0]["read"]["commands"], 1);
  EXPECT_EQ(stats["namespaces"][0]["read"]["bytes"], 4096);
  EXPECT_GE(stats["namespaces"][0]["read"]["latency_us"]["p99"].get<double>(), 20.0);
  EXPECT_EQ(stats["controllers"][0]["cntlid"], 7);
  // Filters.
  EXPECT_EQ(ask(h, R"({"command":"stats","nsid":2})")["result"]["namespaces"].size(), 0u);
  EXPECT_EQ(ask(h, R"({"command":"stats","nsid":1})")["result"]["controllers"].size(), 0u);
  EXPECT_EQ(ask(h, R"({"command":"stats","cntlid":7})")["result"]["namespaces"].size(), 0u);
  EXPECT_EQ(ask(h, R"({"command":"stats","cntlid":7})")["result"]["controllers"].size(), 1u);
  EXPECT_EQ(ask(h, R"({"command":"disconnect","cntlid":7})")["result"]["disconnected"], 1);
  EXPECT_EQ(ask(h, R"({"command":"disconnect","host":"nqn.test:host"})")["result"]["disconnected"], 1);
  auto none = ask(h, R"({"command":"disconnect","cntlid":8})");
  EXPECT_FALSE(none["ok"].get<bool>());
  EXPECT_EQ(none["error"], "no controller 8");
  auto reload = ask(h, R"({"command":"reload"})");
  EXPECT_FALSE(reload["ok"].get<bool>());
  EXPECT_EQ(reload["error"], "/etc/rdmablk/target.yaml:3:5: nsid: bad");
}

// The management verbs (namespace_add, ana_set, ...) go to the daemon's manage hook with their parameters, in
// either framing; what they check is tested with the real planner in test_manage.cpp.
TEST(ControlApi, ManagementVerbsReachTheManageHookInBothFramings) {
  auto h = fake_hooks();
  std::vector<std::pair<std::string, json>> seen;
  h.manage = [&](const std::string& verb, const json& params) -> Result<json> {
    seen.emplace_back(verb, params);
    if (params.value("nsid", 0) == 9) return make_error("nsid: no namespace 9 in nqn.test:sub", EINVAL);
    if (params.value("nsid", 0) == 8) return make_error("the overlay could not be saved", EIO);
    return json{{"changed", true}, {"summary", "namespaces +1"}};
  };
  auto plain = ask(h, R"({"command":"namespace_add","subsystem":"nqn.test:sub","nsid":2,"backend":"ram"})");
  ASSERT_TRUE(plain["ok"].get<bool>()) << plain.dump();
  EXPECT_EQ(plain["result"]["changed"], true);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, "namespace_add");
  EXPECT_EQ(seen[0].second, (json{{"subsystem", "nqn.test:sub"}, {"nsid", 2}, {"backend", "ram"}}));  // no "command"

  auto rpc = ask(h, R"({"jsonrpc":"2.0","method":"ana_set","params":{"listener":"10.0.0.1:4420","group":2,)"
                    R"("state":"inaccessible"},"id":"a1"})");
  EXPECT_EQ(rpc["jsonrpc"], "2.0");
  EXPECT_EQ(rpc["id"], "a1");
  EXPECT_EQ(rpc["result"]["changed"], true);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].second["group"], 2);

  auto invalid = ask(h, R"({"jsonrpc":"2.0","method":"namespace_remove","params":{"nsid":9},"id":3})");
  EXPECT_EQ(invalid["error"]["code"], -32602);
  EXPECT_EQ(invalid["error"]["message"], "nsid: no namespace 9 in nqn.test:sub");
  EXPECT_EQ(invalid["id"], 3);
  auto failed = ask(h, R"({"jsonrpc":"2.0","method":"namespace_remove","params":{"nsid":8},"id":4})");
  EXPECT_EQ(failed["error"]["code"], -32000);
  auto plain_error = ask(h, R"({"command":"namespace_remove","nsid":9})");
  EXPECT_FALSE(plain_error["ok"].get<bool>());
  EXPECT_EQ(plain_error["error"], "nsid: no namespace 9 in nqn.test:sub");

  // JSON-RPC's own errors, none of which reaches the hook.
  const std::size_t before = seen.size();
  EXPECT_EQ(ask(h, R"({"jsonrpc":"2.0","method":"format_disk","id":1})")["error"]["code"], -32601);
  EXPECT_EQ(ask(h, R"({"jsonrpc":"2.0","method":"namespace_add","params":[1],"id":1})")["error"]["code"], -32602);
  EXPECT_EQ(ask(h, R"({"jsonrpc":"1.0","method":"status","id":1})")["error"]["code"], -32600);
  EXPECT_EQ(ask(h, R"({"jsonrpc":"2.0","method":"status","id":{"x":1}})")["error"]["code"], -32600);
  EXPECT_EQ(ask(h, R"([{"jsonrpc":"2.0","method":"status","id":1}])")["error"]["code"], -32600);
  EXPECT_EQ(ask(h, R"({"jsonrpc":"2.0","method":)")["error"]["code"], -32700);
  EXPECT_EQ(seen.size(), before);
  // Reading verbs answer in JSON-RPC too.
  auto status = ask(h, R"({"jsonrpc":"2.0","method":"status","id":9})");
  EXPECT_EQ(status["result"]["pid"], 42);
}

TEST(ControlApi, BadRequestsGetErrorReplies) {
  auto h = fake_hooks();
  for (const char* bad : {"not json", "{}", R"({"command":5})", R"({"command":"format-disk"})",
                          R"({"command":"stats","nsid":"one"})", R"({"command":"disconnect"})",
                          R"({"command":"disconnect","host":"a","cntlid":1})", "{\"command\":\"status\""}) {
    auto r = ask(h, bad);
    EXPECT_FALSE(r["ok"].get<bool>()) << bad;
    EXPECT_FALSE(r["error"].get<std::string>().empty()) << bad;
  }
}

TEST(ControlServer, ServesJsonLinesWithMode0600) {
  const std::string path = temp_socket_path();
  std::atomic<int> reloads{0};
  auto hooks = fake_hooks(&reloads);
  ServerThread st(path, [hooks](const std::string& l) { return handle_control_request(hooks, l); });
  struct stat sb {};
  ASSERT_EQ(::stat(path.c_str(), &sb), 0);
  EXPECT_TRUE(S_ISSOCK(sb.st_mode));
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  int fd = connect_to(path);
  ASSERT_GE(fd, 0);
  // Two requests in one write, answered in order.
  send_all(fd, "{\"command\":\"status\"}\n{\"command\":\"reload\"}\n");
  auto a = json::parse(read_line(fd));
  auto b = json::parse(read_line(fd));
  EXPECT_EQ(a["result"]["pid"], 42);
  EXPECT_FALSE(b["ok"].get<bool>());
  EXPECT_EQ(reloads.load(), 1);
  ::close(fd);
}

TEST(ControlServer, OversizedRequestIsRefusedAndClosed) {
  const std::string path = temp_socket_path();
  auto hooks = fake_hooks();
  ControlServerLimits limits;
  limits.max_request_bytes = 1024;
  ServerThread st(path, [hooks](const std::string& l) { return handle_control_request(hooks, l); }, limits);
  int fd = connect_to(path);
  ASSERT_GE(fd, 0);
  send_all(fd, std::string(4096, 'x'));  // no newline, over the bound
  auto r = json::parse(read_line(fd));
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_NE(r["error"].get<std::string>().find("longer than 1024"), std::string::npos);
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
  // The server goes on.
  int fd2 = connect_to(path);
  ASSERT_GE(fd2, 0);
  send_all(fd2, "{\"command\":\"namespaces\"}\n");
  EXPECT_TRUE(json::parse(read_line(fd2))["ok"].get<bool>());
  ::close(fd2);
}

TEST(ControlServer, SilentClientIsClosedAfterTheIdleTimeoutAndOthersAreServedMeanwhile) {
  const std::string path = temp_socket_path();
  auto hooks = fake_hooks();
  ControlServerLimits limits;
  limits.idle_timeout = 2s;  // the other client's request must not come near it on a loaded machine
  ServerThread st(path, [hooks](const std::string& l) { return handle_control_request(hooks, l); }, limits);
  int silent = connect_to(path);
  ASSERT_GE(silent, 0);
  send_all(silent, "{\"command\":");  // half a request, then nothing
  int other = connect_to(path);
  send_all(other, "{\"command\":\"status\"}\n");
  EXPECT_TRUE(json::parse(read_line(other))["ok"].get<bool>());
  EXPECT_TRUE(closed_by_server(silent));
  ::close(silent);
  ::close(other);
}

TEST(ControlServer, ConnectionsAboveTheCapAreRefused) {
  const std::string path = temp_socket_path();
  auto hooks = fake_hooks();
  ControlServerLimits limits;
  limits.max_clients = 2;
  ServerThread st(path, [hooks](const std::string& l) { return handle_control_request(hooks, l); }, limits);
  int a = connect_to(path), b = connect_to(path);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  // Wait until the server holds both (an event, not a sleep).
  for (int i = 0; i < 3000 && st.clients() < 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(st.clients(), 2u);
  int c = connect_to(path);
  ASSERT_GE(c, 0);
  auto r = json::parse(read_line(c));
  EXPECT_EQ(r["error"], "too many control connections");
  EXPECT_TRUE(closed_by_server(c));
  ::close(a);
  ::close(b);
  ::close(c);
}

TEST(ControlServer, StaleSocketFileIsReplacedButALiveOneIsNot) {
  const std::string path = temp_socket_path();
  auto hooks = fake_hooks();
  auto handler = [hooks](const std::string& l) { return handle_control_request(hooks, l); };
  {
    auto first = ControlServer::create(path, handler);
    ASSERT_TRUE(first) << first.error().message;
    auto second = ControlServer::create(path, handler);
    ASSERT_FALSE(second);
    EXPECT_NE(second.error().message.find("in use by another rdmablk-target"), std::string::npos);
  }
  // A socket file nobody listens on (a daemon killed with SIGKILL leaves one).
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  auto third = ControlServer::create(path, handler);
  EXPECT_TRUE(third) << (third ? "" : third.error().message);
  // A regular file is never removed.
  third = tl::unexpected(Error{});
  std::filesystem::remove(path);
  { FILE* f = std::fopen(path.c_str(), "w"); std::fclose(f); }
  auto fourth = ControlServer::create(path, handler);
  ASSERT_FALSE(fourth);
  EXPECT_NE(fourth.error().message.find("not a socket"), std::string::npos);
}

}  // namespace
}  // namespace rdmablk::target

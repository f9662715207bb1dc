// End to end, connection storms (issue 10): many NVMe/TCP connections opened and closed against the
// running rdmablk-target, cleanly and not, while one long-lived connection does verified I/O throughout.
//
// A storm is RDMABLK_STORM_CYCLES cycles (default 1000) spread over RDMABLK_STORM_THREADS threads (default
// 8). Each cycle is one of (by cycle number, out of every 20):
//   12  clean: the initiator library's Controller (admin queue, CC.EN, Identify, Set Features) + an I/O
//       queue, a write read back and compared, Disconnect of the I/O queue, CC.SHN shutdown;
//    1  vanishing host: the same, then the admin and I/O sockets closed with no Disconnect or shutdown;
//    2  RST mid-command, R2T: a library controller, then a raw I/O queue (ICReq, Connect with the
//       controller's CNTLID) that sends a 64 KiB write capsule asking for R2T, waits for the target's R2T
//       (the target now holds a buffer for it) and resets the connection (SO_LINGER {1, 0} + close);
//       the library controller then shuts down cleanly;
//    1  RST mid-command, in-capsule: a raw I/O queue sends a write capsule with 8 KiB of in-capsule data
//       and only half of the data, then resets;
//    1  RST after an admin Connect: a raw admin queue (ICReq + Connect, a controller is created) reset;
//    1  RST with nothing sent;
//    1  ICReq only: the ICResp is read, then the socket is held open saying nothing more;
//    1  silent: a TCP connection that never sends ICReq, held open.
// That is ~1,800 connections and ~850 controllers per 1000 cycles. The test never closes the held sockets:
// the config sets limits.connections.connect_timeout_ms to 1000, and after the storm each must see the
// target close it (EOF or reset) within 61 s, with the target's "closed: no Connect within" log line.
//
// Around the storms: the target's open fds (/proc/PID/fd), threads (/proc/PID/task) and RSS (VmRSS) are
// sampled once the long-lived connection is up (baseline), and after each storm once the target has let go
// of everything (the control socket's `controllers` lists only the long-lived controller, then the fd count
// is back - polled, never a fixed sleep). Fds and threads must equal the baseline exactly after every storm.
// Memory is judged by what malloc has handed out and not had back (`ctl status`: process.heap_in_use_bytes,
// glibc's mallinfo2), not by RSS: glibc keeps what the reactor threads' arenas freed (a connection costs
// ~135 KiB there, mostly its 64 KiB receive buffer and request slots), so RSS climbs to the storm's peak of
// open connections, which depends on the machine's load, and stays. Measured (2026-12-03, 8 storms in a
// row): heap in use 2.77-2.89 MiB after every storm (storm to storm -36..+63 KiB) while ~21 MiB was freed
// but kept and RSS went +20 MiB in storm 1, then -0.8..+1.3 MiB; a clean clone on a loaded machine saw RSS
// +4.5 MiB after the warm-up, which failed the RSS bound this test had before. So RDMABLK_STORM_RUNS storms
// (default 4) run one after the other, 1 and 2 are the warm-up, and the heap in use after the last may be at
// most kHeapBound (1 MiB) above storm 2: a leak of ~300 bytes per connection or ~600 per controller exceeds
// it (a keep-alive timer that kept each torn-down controller's 4.4 KiB for a KATO made +5 MiB per storm).
//
// RDMABLK_STORM_KINDS=clean,rst_r2t,... runs only those kinds (names in kind_name()), to narrow a finding down.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "e2e_common.h"
#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/fabrics.h"
#include "protocol/sgl.h"
#include "protocol/tcp_pdu.h"

namespace e2e {
namespace {

using nlohmann::json;
using rdmablk::initiator::Controller;
namespace fs = std::filesystem;
namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kBlock = 512;
constexpr uint64_t kNamespaceBytes = 8u << 20;
// The long-lived connection's LBAs: the first MiB. Storm cycles write above it.
constexpr uint64_t kLongLivedBytes = 1u << 20;
constexpr uint32_t kLongLivedIo = 16384;
constexpr uint32_t kCycleIo = 8192;
// What storms 3 and 4 may add to the heap in use after storms 1 and 2 (see the top of the file).
constexpr int64_t kHeapBound = 1 << 20;
// AddressSanitizer replaces malloc (the target then reports its allocator's figures, not mallinfo2's) and keeps
// freed memory in a quarantine, so under it the heap is printed, not judged: LeakSanitizer judges leaks at the
// target's exit.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif
// What the target's connect timeout is set to here, and how long a held socket may wait for the target to
// close it beyond that (a loaded 2-core machine with a TCG guest beside it).
constexpr uint32_t kConnectTimeoutMs = 1000;
constexpr auto kCloseMargin = 60s;

unsigned env_unsigned(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  unsigned long n = std::strtoul(v, &end, 10);
  return (end != nullptr && *end == '\0' && n > 0) ? static_cast<unsigned>(n) : fallback;
}

// ---------------------------------------------------------------------------------------------------------
// The target process as /proc sees it
// ---------------------------------------------------------------------------------------------------------

struct ProcSample {
  long fds = -1;
  long threads = -1;
  int64_t rss_bytes = -1;
  // malloc's bytes in use and freed-but-kept, from the control socket's status (settle() fills them).
  int64_t heap_bytes = -1;
  int64_t heap_free_bytes = -1;
  std::string thread_names;  // "rdmablk-target x1, reactor-0 x1, ..." for failure messages
};

ProcSample sample(pid_t pid) {
  ProcSample s;
  const fs::path proc = fs::path("/proc") / std::to_string(pid);
  std::error_code ec;
  s.fds = 0;
  for (auto it = fs::directory_iterator(proc / "fd", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) ++s.fds;
  if (ec) s.fds = -1;
  std::map<std::string, int> names;
  s.threads = 0;
  for (auto it = fs::directory_iterator(proc / "task", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    ++s.threads;
    std::string comm = read_file(it->path() / "comm");
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    ++names[comm];
  }
  if (ec) s.threads = -1;
  for (const auto& [n, c] : names) s.thread_names += (s.thread_names.empty() ? "" : ", ") + n + " x" + std::to_string(c);
  std::istringstream status(read_file(proc / "status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_bytes = std::atoll(line.c_str() + 6) * 1024;  // "VmRSS:  1234 kB"
  }
  return s;
}

std::string mib(int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return b;
}

std::string tail(const std::string& log, std::size_t bytes = 20000) {
  return log.size() > bytes ? log.substr(log.size() - bytes) : log;
}

std::string describe(const ProcSample& s) {
  return "fds " + std::to_string(s.fds) + ", threads " + std::to_string(s.threads) + " (" + s.thread_names +
         "), RSS " + mib(s.rss_bytes);
}

// `rdmablk-target ctl --socket DIR/target.sock -o json controllers`; nullopt when the call failed.
std::optional<json> controllers(const TargetProcess& t) {
  auto r = ctl(t, {"controllers"});
  if (r.timed_out || r.exit_status != 0) return std::nullopt;
  auto j = json::parse(r.out, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return std::nullopt;
  return j;
}

// malloc's bytes in use and freed-but-kept in the target (`ctl -o json status`, "process"); false when the
// call failed.
bool read_heap(const TargetProcess& t, ProcSample& s) {
  auto r = ctl(t, {"status"});
  if (r.timed_out || r.exit_status != 0) return false;
  auto j = json::parse(r.out, nullptr, false);
  if (j.is_discarded() || !j.contains("process")) return false;
  s.heap_bytes = j["process"].value("heap_in_use_bytes", int64_t{-1});
  s.heap_free_bytes = j["process"].value("heap_free_bytes", int64_t{-1});
  return s.heap_bytes > 0;
}

// ---------------------------------------------------------------------------------------------------------
// Raw NVMe/TCP connections (what the library never does: stop half way)
// ---------------------------------------------------------------------------------------------------------

bool send_all(int fd, const void* data, std::size_t n) {
  const auto* b = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, b, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    b += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Exactly `n` bytes within `limit`; false on EOF, error or timeout.
bool recv_exact(int fd, void* data, std::size_t n, std::chrono::milliseconds limit) {
  auto* b = static_cast<uint8_t*>(data);
  const auto deadline = Clock::now() + limit;
  while (n > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t r = ::recv(fd, b, n, 0);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// Close with an RST instead of a FIN.
void reset_close(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  ::close(fd);
}

struct RawQueue {
  int fd = -1;
  pt::TcpSession session{};
  std::string error;  // what went wrong, when a step returned false

  ~RawQueue() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }

  bool fail(std::string what) {
    error = std::move(what);
    return false;
  }

  bool connect_tcp(uint16_t port) {
    fd = raw_connect(port);
    return fd >= 0 || fail(std::string("connect: ") + std::strerror(errno));
  }

  bool icreq() {
    const auto req = pt::build_icreq({});
    if (!send_all(fd, &req, sizeof(req))) return fail("send ICReq");
    std::array<uint8_t, pt::kIcPduLen> resp{};
    if (!recv_exact(fd, resp.data(), resp.size(), 30s)) return fail("no ICResp");
    auto s = pt::host_session(req, p::load<pt::IcRespPdu>(resp.data()));
    if (!s) return fail("bad ICResp");
    session = *s;
    return true;
  }

  // A capsule with `icd` bytes of in-capsule data, of which only `send_bytes` are sent.
  bool send_capsule(const p::Sqe& sqe, std::span<const uint8_t> icd, std::size_t send_bytes) {
    const auto pdu = pt::build_capsule_cmd(p::load<pt::SqeBytes>(&sqe), static_cast<uint32_t>(icd.size()), session);
    if (!send_all(fd, &pdu, sizeof(pdu))) return fail("send capsule");
    const std::size_t pad = icd.empty() ? 0 : pdu.ch.pdo - sizeof(pdu);
    if (pad > 0) {
      std::vector<uint8_t> zeros(pad, 0);
      if (!send_all(fd, zeros.data(), zeros.size())) return fail("send capsule padding");
    }
    if (send_bytes > 0 && !send_all(fd, icd.data(), std::min(send_bytes, icd.size()))) return fail("send data");
    return true;
  }

  // Fabrics Connect (in-capsule Connect data) and its successful response; the CNTLID it returned.
  bool connect_queue(uint16_t qid, uint16_t cntlid, const std::string& hostnqn, uint16_t* cntlid_out = nullptr) {
    std::array<uint8_t, p::kConnectDataSize> data{};
    p::store(data.data(), p::make_connect_data(host_identity(hostnqn).hostid, cntlid, kSubnqn, hostnqn));
    const auto sqe = p::to_sqe(p::make_connect(0, qid, 31, qid == 0 ? 30'000 : 0, p::kConnectDisableSqFlow,
                                               p::make_in_capsule_sgl(0, p::kConnectDataSize)));
    if (!send_capsule(sqe, data, data.size())) return false;
    std::array<uint8_t, sizeof(pt::CapsuleRespPdu)> resp{};
    if (!recv_exact(fd, resp.data(), resp.size(), 30s)) return fail("no Connect response");
    if (resp[0] != static_cast<uint8_t>(pt::PduType::capsule_resp)) return fail("Connect answered by PDU type " + std::to_string(resp[0]));
    const auto cqe = p::load<p::Cqe>(resp.data() + 8);
    if (!cqe.get_status().ok()) return fail("Connect rejected: " + rdmablk::initiator::describe_status(cqe.get_status()));
    if (cntlid_out != nullptr) *cntlid_out = p::connect_result_cntlid(cqe.dw0.get());
    return true;
  }
};

// ---------------------------------------------------------------------------------------------------------
// The long-lived connection: write, read back, compare, over and over, on its own thread
// ---------------------------------------------------------------------------------------------------------

class LongLived {
 public:
  explicit LongLived(uint16_t port) : thread_([this, port] { run(port); }) {}
  ~LongLived() { finish(); }
  // Up and the whole namespace written once (so later RSS is not the RAM backend's pages filling in).
  bool wait_ready(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return ready_ || !error_.empty(); }) && ready_;
  }
  uint64_t rounds() const { return rounds_.load(); }
  std::chrono::microseconds slowest() const { return std::chrono::microseconds(slowest_us_.load()); }
  std::string error() const {
    std::lock_guard lock(mu_);
    return error_;
  }
  // Stops the loop and shuts the controller down; the error, if any.
  std::string finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return error();
  }

 private:
  void set_error(std::string e) {
    std::lock_guard lock(mu_);
    if (error_.empty()) error_ = std::move(e);
    cv_.notify_all();
  }

  void run(uint16_t port) {
    auto c = Controller::connect(controller_options(port, kSubnqn, kHostA, 30'000));
    if (!c) return set_error("connect: " + c.error().message);
    auto q = (*c)->connect_io_queue(1, 32);
    if (!q) return set_error("I/O queue: " + q.error().message);
    // Fill the namespace once.
    std::vector<uint8_t> chunk(65536);
    for (uint64_t off = 0; off < kNamespaceBytes; off += chunk.size()) {
      std::fill(chunk.begin(), chunk.end(), static_cast<uint8_t>(off >> 16));
      if (auto w = write_blocks(**q, 1, off / kBlock, kBlock, chunk); !w) return set_error("fill: " + w.error().message);
    }
    {
      std::lock_guard lock(mu_);
      ready_ = true;
    }
    cv_.notify_all();
    std::vector<uint8_t> back(kLongLivedIo);
    for (uint32_t round = 0; !stop_; ++round) {
      const uint64_t slot = round % (kLongLivedBytes / kLongLivedIo);
      const uint64_t lba = slot * kLongLivedIo / kBlock;
      auto data = pattern(kLongLivedIo, 0x10000000u + round);
      const auto t0 = Clock::now();
      auto w = write_blocks(**q, 1, lba, kBlock, data);
      if (!w) return set_error("round " + std::to_string(round) + ": write: " + w.error().message);
      auto r = read_blocks(**q, 1, lba, kBlock, back);
      if (!r) return set_error("round " + std::to_string(round) + ": read: " + r.error().message);
      if (back != data) return set_error("round " + std::to_string(round) + ": data read back differs from the write");
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
      if (us > slowest_us_.load()) slowest_us_ = us;
      (*c)->service();
      if ((*c)->failed()) return set_error("controller failed: " + (*c)->failure());
      ++rounds_;
    }
    (*q)->disconnect();
    if (auto s = (*c)->shutdown(); !s) set_error("shutdown: " + s.error().message);
  }

  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rounds_{0};
  std::atomic<int64_t> slowest_us_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  std::string error_;
  std::thread thread_;  // last: starts once everything above is constructed
};

// ---------------------------------------------------------------------------------------------------------
// The storm
// ---------------------------------------------------------------------------------------------------------

enum class Kind { clean, vanish, rst_r2t, rst_in_capsule, rst_after_connect, rst_at_once, icreq_only, silent };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::clean: return "clean";
    case Kind::vanish: return "vanish";
    case Kind::rst_r2t: return "rst_r2t";
    case Kind::rst_in_capsule: return "rst_in_capsule";
    case Kind::rst_after_connect: return "rst_after_connect";
    case Kind::rst_at_once: return "rst_at_once";
    case Kind::icreq_only: return "icreq_only";
    case Kind::silent: return "silent";
  }
  return "?";
}

// The mix above, or only the kinds RDMABLK_STORM_KINDS names (comma-separated kind_name()s), to narrow a
// finding down.
Kind kind_of(unsigned cycle) {
  static const std::vector<Kind> only = [] {
    std::vector<Kind> out;
    const char* v = std::getenv("RDMABLK_STORM_KINDS");
    if (v == nullptr) return out;
    const std::string list = std::string(",") + v + ",";
    for (Kind k : {Kind::clean, Kind::vanish, Kind::rst_r2t, Kind::rst_in_capsule, Kind::rst_after_connect,
                   Kind::rst_at_once, Kind::icreq_only, Kind::silent}) {
      if (list.find(std::string(",") + kind_name(k) + ",") != std::string::npos) out.push_back(k);
    }
    return out;
  }();
  if (!only.empty()) return only[cycle % only.size()];
  switch (cycle % 20) {
    case 12: return Kind::vanish;
    case 13: case 14: return Kind::rst_r2t;
    case 15: return Kind::rst_in_capsule;
    case 16: return Kind::rst_after_connect;
    case 17: return Kind::rst_at_once;
    case 18: return Kind::icreq_only;
    case 19: return Kind::silent;
    default: return Kind::clean;
  }
}

struct StormResult {
  unsigned cycles = 0;
  unsigned held = 0;  // sockets left to the target's connect timeout
  std::chrono::milliseconds elapsed{0};
  std::vector<std::string> errors;
};

class Storm {
 public:
  Storm(uint16_t port, unsigned cycles, unsigned threads) : port_(port), cycles_(cycles), threads_(threads) {}

  StormResult run() {
    const auto t0 = Clock::now();
    std::vector<std::thread> workers;
    for (unsigned i = 0; i < threads_; ++i) workers.emplace_back([this] { work(); });
    for (auto& w : workers) w.join();
    result_.cycles = cycles_;
    result_.held = static_cast<unsigned>(held_.size());
    result_.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    return result_;
  }

  // The held sockets: each must see the target close it (EOF or reset) within `limit`, counted from now.
  void expect_target_closes_held(std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    unsigned open = 0;
    for (int fd : held_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (!wait_peer_closed(fd, std::max(left, std::chrono::milliseconds(1)))) ++open;
      ::close(fd);
    }
    EXPECT_EQ(open, 0u) << open << " of " << held_.size()
                        << " sockets that never completed ICReq + Connect were still open "
                        << std::chrono::duration_cast<std::chrono::seconds>(limit).count()
                        << " s after the storm (limits.connections.connect_timeout_ms " << kConnectTimeoutMs << ")";
    held_.clear();
  }

 private:
  void error(unsigned cycle, const std::string& what) {
    std::lock_guard lock(mu_);
    if (result_.errors.size() < 20) result_.errors.push_back("cycle " + std::to_string(cycle) + ": " + what);
  }
  void hold(int fd) {
    std::lock_guard lock(mu_);
    held_.push_back(fd);
  }

  void work() {
    for (unsigned cycle = next_++; cycle < cycles_; cycle = next_++) one(cycle);
  }

  // Storm I/O goes above the long-lived connection's megabyte, a slot per cycle.
  uint64_t cycle_lba(unsigned cycle) const {
    const uint64_t slots = (kNamespaceBytes - kLongLivedBytes) / 65536;
    return (kLongLivedBytes + (cycle % slots) * 65536) / kBlock;
  }

  void one(unsigned cycle) {
    const Kind kind = kind_of(cycle);
    // A host NQN per thread-ish: spreads controllers over hosts as a real storm would.
    const std::string hostnqn = cycle % 2 ? kHostA : kHostB;
    switch (kind) {
      case Kind::clean:
      case Kind::vanish: {
        auto c = Controller::connect(controller_options(port_, kSubnqn, hostnqn, 30'000));
        if (!c) return error(cycle, "connect: " + c.error().message);
        auto q = (*c)->connect_io_queue(1, 16);
        if (!q) return error(cycle, "I/O queue: " + q.error().message);
        auto data = pattern(kCycleIo, cycle);
        std::vector<uint8_t> back(data.size());
        auto w = write_blocks(**q, 1, cycle_lba(cycle), kBlock, data);
        if (!w) return error(cycle, "write: " + w.error().message);
        auto r = read_blocks(**q, 1, cycle_lba(cycle), kBlock, back);
        if (!r) return error(cycle, "read: " + r.error().message);
        if (back != data) return error(cycle, "data read back differs");
        if (kind == Kind::vanish) {
          (*q)->queue().close();
          (*c)->disconnect();
          return;
        }
        (*q)->disconnect();
        if (auto s = (*c)->shutdown(); !s) return error(cycle, "shutdown: " + s.error().message);
        return;
      }
      case Kind::rst_r2t:
      case Kind::rst_in_capsule: {
        auto c = Controller::connect(controller_options(port_, kSubnqn, hostnqn, 30'000));
        if (!c) return error(cycle, "connect: " + c.error().message);
        RawQueue raw;
        if (!raw.connect_tcp(port_) || !raw.icreq() || !raw.connect_queue(1, (*c)->cntlid(), hostnqn)) {
          return error(cycle, "raw I/O queue: " + raw.error);
        }
        if (kind == Kind::rst_r2t) {
          const uint32_t len = 65536;
          auto sqe = p::to_sqe(p::make_write(1, 1, cycle_lba(cycle), len / kBlock, p::make_transport_sgl(len)));
          if (!raw.send_capsule(sqe, {}, 0)) return error(cycle, raw.error);
          std::array<uint8_t, sizeof(pt::R2tPdu)> r2t{};
          if (!recv_exact(raw.fd, r2t.data(), r2t.size(), 30s)) return error(cycle, "no R2T for a 64 KiB write");
          if (r2t[0] != static_cast<uint8_t>(pt::PduType::r2t)) {
            return error(cycle, "expected an R2T, got PDU type " + std::to_string(r2t[0]));
          }
        } else {
          auto data = pattern(kCycleIo, cycle);
          auto sqe = p::to_sqe(p::make_write(1, 1, cycle_lba(cycle), kCycleIo / kBlock, p::make_in_capsule_sgl(0, kCycleIo)));
          if (!raw.send_capsule(sqe, data, data.size() / 2)) return error(cycle, raw.error);
        }
        reset_close(raw.release());
        // The controller is unharmed by its I/O queue going away.
        if (auto s = (*c)->shutdown(); !s) return error(cycle, "shutdown after the I/O queue's reset: " + s.error().message);
        return;
      }
      case Kind::rst_after_connect: {
        RawQueue raw;
        if (!raw.connect_tcp(port_) || !raw.icreq() || !raw.connect_queue(0, p::kCntlidDynamic, hostnqn)) {
          return error(cycle, "raw admin queue: " + raw.error);
        }
        reset_close(raw.release());
        return;
      }
      case Kind::rst_at_once: {
        RawQueue raw;
        if (!raw.connect_tcp(port_)) return error(cycle, raw.error);
        reset_close(raw.release());
        return;
      }
      case Kind::icreq_only: {
        RawQueue raw;
        if (!raw.connect_tcp(port_) || !raw.icreq()) return error(cycle, raw.error);
        hold(raw.release());
        return;
      }
      case Kind::silent: {
        RawQueue raw;
        if (!raw.connect_tcp(port_)) return error(cycle, raw.error);
        hold(raw.release());
        return;
      }
    }
  }

  uint16_t port_;
  unsigned cycles_;
  unsigned threads_;
  std::atomic<unsigned> next_{0};
  std::mutex mu_;
  std::vector<int> held_;
  StormResult result_;
};

// Waits until the target holds only the long-lived controller and its fd count is back to `baseline` (or
// `limit` passes); the last sample either way.
ProcSample settle(const TargetProcess& t, const ProcSample& baseline, std::chrono::milliseconds limit,
                  std::string* why) {
  const auto deadline = Clock::now() + limit;
  std::size_t ctrls = SIZE_MAX;
  while (Clock::now() < deadline) {
    auto j = controllers(t);
    if (j) ctrls = j->size();
    if (ctrls == 1) break;
    std::this_thread::sleep_for(50ms);
  }
  ProcSample s = sample(t.pid());
  while (s.fds != baseline.fds && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    s = sample(t.pid());
  }
  if (ctrls != 1) *why = "the target still lists " + std::to_string(ctrls) + " controllers (want only the long-lived one)";
  if (!read_heap(t, s)) *why += (why->empty() ? "" : "; ") + std::string("ctl status gave no heap figures");
  return s;
}

TEST(StormE2e, ConnectionStormLeavesNoFdsThreadsOrMemoryAndALongLivedConnectionKeepsWorking) {
  const unsigned cycles = env_unsigned("RDMABLK_STORM_CYCLES", 1000);
  const unsigned threads = env_unsigned("RDMABLK_STORM_THREADS", 8);
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(R"(      - nsid: 1
        backend: ram
        size: 8MiB
)",
                                             "", "limits:\n  connections:\n    connect_timeout_ms: " +
                                                     std::to_string(kConnectTimeoutMs) + "\n"),
                      {}, 60s));

  LongLived longlived(t.io_port());
  ASSERT_TRUE(longlived.wait_ready(60s)) << longlived.error() << "\n" << t.log();
  const ProcSample baseline = sample(t.pid());
  ASSERT_GT(baseline.fds, 0);
  ASSERT_GT(baseline.threads, 0);
  ASSERT_GT(baseline.rss_bytes, 0);
  std::printf("[storm] %u cycles per storm on %u threads; baseline: %s\n", cycles, threads, describe(baseline).c_str());
  std::fflush(stdout);

  const int runs = static_cast<int>(std::max(3u, env_unsigned("RDMABLK_STORM_RUNS", 4)));
  std::vector<ProcSample> after;
  for (int run = 1; run <= runs; ++run) {
    SCOPED_TRACE("storm " + std::to_string(run));
    const uint64_t rounds_before = longlived.rounds();
    Storm storm(t.io_port(), cycles, threads);
    const StormResult r = storm.run();
    const uint64_t rounds_during = longlived.rounds() - rounds_before;
    for (const auto& e : r.errors) ADD_FAILURE() << e;
    EXPECT_TRUE(r.errors.empty()) << "\n--- target log (tail) ---\n" << tail(t.log());
    storm.expect_target_closes_held(std::chrono::milliseconds(kConnectTimeoutMs) + kCloseMargin);
    std::string why;
    const ProcSample s = settle(t, baseline, 60s, &why);
    EXPECT_TRUE(why.empty()) << why;
    std::printf("[storm] run %d: %u cycles in %.1f s (%.0f cycles/s), %u sockets without Connect closed by the target; "
                "long-lived: %llu verified rounds during the storm, slowest %lld us; after: %s\n",
                run, r.cycles, static_cast<double>(r.elapsed.count()) / 1000.0,
                r.cycles * 1000.0 / static_cast<double>(std::max<int64_t>(r.elapsed.count(), 1)), r.held,
                static_cast<unsigned long long>(rounds_during), static_cast<long long>(longlived.slowest().count()),
                describe(s).c_str());
    std::fflush(stdout);
    EXPECT_GT(rounds_during, 0u) << "the long-lived connection made no progress during the storm";
    EXPECT_EQ(longlived.error(), "");
    EXPECT_EQ(s.fds, baseline.fds) << "open fds: baseline " << baseline.fds << ", after storm " << run << " " << s.fds;
    EXPECT_EQ(s.threads, baseline.threads) << "threads: baseline " << describe(baseline) << "; after storm " << run
                                           << " " << describe(s);
    after.push_back(s);
  }
  ASSERT_EQ(after.size(), static_cast<std::size_t>(runs));
  for (int run = 1; run <= runs; ++run) {
    const ProcSample& prev = run == 1 ? baseline : after[run - 2];
    const ProcSample& now = after[run - 1];
    std::printf("[storm] after run %d: heap in use %s (%+lld KiB), freed but kept %s; RSS %s (%+lld KiB)\n", run,
                mib(now.heap_bytes).c_str(),
                static_cast<long long>(run == 1 ? 0 : (now.heap_bytes - prev.heap_bytes) / 1024),
                mib(now.heap_free_bytes).c_str(), mib(now.rss_bytes).c_str(),
                static_cast<long long>((now.rss_bytes - prev.rss_bytes) / 1024));
  }
  // Storms 1 and 2 warm up what the target keeps on purpose (per-reactor pools, statistics blocks); what the
  // later ones add to the bytes malloc has handed out and not had back is what they leaked. RSS is printed,
  // not judged: glibc keeps freed memory in its per-thread arenas, so RSS follows the peak of open
  // connections and the machine's load, not leaks.
  const int64_t growth = after[runs - 1].heap_bytes - after[1].heap_bytes;
  std::printf("[storm] heap in use after storm 2 %s, after storm %d %s: %+lld KiB over %d storms (bound %s)\n",
              mib(after[1].heap_bytes).c_str(), runs, mib(after[runs - 1].heap_bytes).c_str(),
              static_cast<long long>(growth / 1024), runs - 2, mib(kHeapBound).c_str());
  std::fflush(stdout);
  if (kSanitized) {
    std::printf("[storm] AddressSanitizer build: heap (ASan's allocator's figures) printed, not judged; "
                "LeakSanitizer judges leaks at the target's exit\n");
  } else {
    EXPECT_LE(growth, kHeapBound) << "storms 3.." << runs << " left " << mib(growth)
                                  << " more allocated in the target than after the warm-up of storms 1 and 2";
  }

  EXPECT_EQ(longlived.finish(), "");
  EXPECT_GT(longlived.rounds(), 0u);
  // Nothing went wrong that the target would call a bug.
  const std::string log = t.log();
  std::map<std::string, int> levels;  // "2026-12-01T22:14:51.056 warning [8246] ..."
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string stamp, level;
    if (words >> stamp >> level) ++levels[level];
  }
  std::string counts;
  for (const auto& [level, n] : levels) counts += " " + level + " " + std::to_string(n);
  std::printf("[storm] target log lines:%s\n", counts.c_str());
  EXPECT_EQ(levels["error"], 0) << tail(log);
  EXPECT_EQ(levels["critical"], 0);
  EXPECT_EQ(log.find("Sanitizer"), std::string::npos);
  EXPECT_NE(log.find("closed: no Connect within " + std::to_string(kConnectTimeoutMs) + " ms"), std::string::npos)
      << "no log line for the held sockets the target closed";
}

}  // namespace
}  // namespace e2e

// Test doubles for the target core: a fake reactor (manual clock, posted tasks, pollers) and a fake
// transport queue that records completions and supplies host data synchronously.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/fabrics.h"
#include "protocol/identify.h"
#include "protocol/log_pages.h"
#include "protocol/properties.h"
#include "protocol/sgl.h"
#include "target/config/config.h"
#include "target/core/core.h"
#include "transport/target_queue_base.h"
#include "target/core/core_reactor.h"
#include "transport/target_queue.h"

namespace rdmablk::target::testing {

namespace p = protocol;
namespace st = protocol::status;
using transport::DataDirection;
using transport::TargetRequest;

class FakeReactor final : public CoreReactor {
 public:
  bool on_thread() const noexcept override { return true; }
  void post(std::function<void()> fn) override { posted_.push_back(std::move(fn)); }
  uint64_t schedule(std::chrono::milliseconds delay, std::function<void()> fn) override {
    timers_.push_back(Timer{++next_id_, now_ + delay, std::move(fn)});
    return next_id_;
  }
  void cancel(uint64_t id) override {
    std::erase_if(timers_, [id](const Timer& t) { return t.id == id; });
  }
  void add_poller(transport::Poller* p) override { pollers_.push_back(p); }
  void remove_poller(transport::Poller* p) override { std::erase(pollers_, p); }
  void watch_fd(int fd, transport::IoOp* op) override { watches_.emplace_back(fd, op); }
  void unwatch_fd(transport::IoOp* op) override {
    std::erase_if(watches_, [op](const auto& w) { return w.second == op; });
  }
  std::span<const iovec> registered_buffers() const noexcept override { return {}; }

  // Like a real reactor asleep: waits up to `timeout` for a watched fd (a backend queue's event_fd()) to
  // poll readable, runs its callback, then run(). False when nothing became ready.
  bool wait_watched(std::chrono::milliseconds timeout) {
    if (watches_.empty()) return false;
    std::vector<pollfd> fds;
    for (const auto& [fd, op] : watches_) fds.push_back(pollfd{fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) <= 0) return false;
    const auto watches = watches_;  // a callback may unwatch
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents != 0) watches[i].second->fn(watches[i].second, fds[i].revents, 0);
    run();
    return true;
  }
  std::size_t watch_count() const { return watches_.size(); }

  // Runs posted tasks and pollers until nothing is left to do.
  void run() {
    for (int rounds = 0; rounds < 2000000; ++rounds) {
      bool work = false;
      while (!posted_.empty()) {
        auto fn = std::move(posted_.front());
        posted_.pop_front();
        fn();
        work = true;
      }
      for (std::size_t i = 0; i < pollers_.size(); ++i) work = pollers_[i]->poll() || work;
      if (!work) return;
    }
    ADD_FAILURE() << "FakeReactor::run did not settle";
  }
  // Moves the clock and fires the timers that are due (in deadline order).
  void advance(std::chrono::milliseconds d) {
    const auto until = now_ + d;
    for (;;) {
      auto it = std::min_element(timers_.begin(), timers_.end(),
                                 [](const Timer& a, const Timer& b) { return a.deadline < b.deadline; });
      if (it == timers_.end() || it->deadline > until) break;
      now_ = it->deadline;
      auto fn = std::move(it->fn);
      timers_.erase(it);
      fn();
      run();
    }
    now_ = until;
    run();
  }
  std::size_t timer_count() const { return timers_.size(); }
  std::size_t poller_count() const { return pollers_.size(); }

 private:
  struct Timer {
    uint64_t id;
    std::chrono::milliseconds deadline;
    std::function<void()> fn;
  };
  std::deque<std::function<void()>> posted_;
  std::vector<Timer> timers_;
  std::vector<transport::Poller*> pollers_;
  std::vector<std::pair<int, transport::IoOp*>> watches_;
  std::chrono::milliseconds now_{0};
  uint64_t next_id_ = 0;
};

struct Completed {
  p::Cqe cqe{};
  std::vector<uint8_t> data;  // controller -> host data sent with the completion
  bool with_data = false;
  p::Status status() const { return cqe.get_status(); }
  uint32_t dw0() const { return cqe.dw0.get(); }
};

class FakeTargetQueue final : public transport::TargetQueue {
 public:
  FakeTargetQueue(transport::TargetQueueHandler& handler, transport::TransportType type, std::string local_addr,
                  uint16_t port)
      : handler_(handler), type_(type) {
    address_.type = type;
    address_.traddr = std::move(local_addr);
    address_.trsvcid = port;
    handler_.on_queue_created(*this);
  }
  ~FakeTargetQueue() override = default;

  // Submits one command as a real queue does: its data SGL is planned by transport::plan_data_transfer (a
  // command it refuses completes with that status and never reaches the core), then host data (host ->
  // controller, given by `host_data`) arrives with the command (in-capsule SGL) or through fetch_data. The
  // capsule carries the whole in-capsule transfer: `host_data` is padded with zeroes to the SGL's length.
  TargetRequest& submit(const p::Sqe& sqe, std::vector<uint8_t> host_data = {}) {
    Slot& s = slots_.emplace_back();
    s.req.sqe = sqe;
    // A command built without a data SGL (the protocol helpers leave it zero) gets the null descriptor a
    // host's transport puts there (Linux: nvme_tcp_set_sg_null, nvme_rdma_set_sg_null).
    if (is_zero(sqe.hdr.dptr))
      s.req.sqe.hdr.dptr = type_ == transport::TransportType::rdma ? p::make_keyed_sgl(0, 0, 0) : p::make_transport_sgl(0);
    s.req.queue = this;
    s.req.tag = static_cast<uint16_t>(slots_.size());
    const bool rdma = type_ == transport::TransportType::rdma;
    transport::BindingLimits lim;
    lim.accept = rdma ? p::SglAccept::rdma : p::SglAccept::tcp;
    lim.in_capsule = 1u << 20;     // the core's own limits are what these tests check
    lim.max_transfer = 1u << 30;
    lim.capsule_declares_data = !rdma;
    uint32_t icd_len = 0;
    if (auto sgl = p::decode_data_sgl(s.req.sqe.hdr.dptr, p::SglAccept::any); sgl && sgl->kind == p::SglKind::in_capsule)
      icd_len = static_cast<uint32_t>(sgl->addr) + sgl->length;
    transport::DataPlan plan;
    if (const p::Status status = transport::plan_data_transfer(s.req.sqe, icd_len, lim, plan); !status.ok()) {
      s.req.cqe.set_status(status);
      complete(s.req, false);
      return s.req;
    }
    if (plan.moves_data()) {
      s.req.direction = plan.direction;
      s.req.data_length = plan.length;
      s.buffer.assign(plan.length, 0);
      if (plan.direction == DataDirection::host_to_controller)
        std::copy_n(host_data.begin(), std::min(host_data.size(), s.buffer.size()), s.buffer.begin());
      s.req.data_in_capsule = plan.kind == p::SglKind::in_capsule;
      s.req.data = s.buffer.data();
    }
    handler_.on_command(s.req);
    return s.req;
  }

  static bool is_zero(const p::SglDescriptor& d) {
    const auto bytes = std::bit_cast<std::array<uint8_t, sizeof(d)>>(d);
    return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
  }

  void fetch_data(TargetRequest& req) noexcept override {
    ++fetches;
    if (hold_fetches) {  // the data is "on the wire" until deliver_held_fetches()
      held_fetches.push_back(&req);
      return;
    }
    handler_.on_data_ready(req, fetch_status);
  }
  // The host data of the fetches held back by hold_fetches arrives now.
  void deliver_held_fetches() {
    auto held = std::move(held_fetches);
    held_fetches.clear();
    for (TargetRequest* r : held) handler_.on_data_ready(*r, fetch_status);
  }
  void complete(TargetRequest& req, bool with_data) noexcept override {
    Completed c;
    c.cqe = req.cqe;
    c.cqe.cid = req.sqe.hdr.cid;
    c.cqe.sqid.set(qid);
    c.with_data = with_data;
    if (with_data) c.data.assign(req.data, req.data + req.data_length);
    by_cid[req.sqe.hdr.cid.get()] = c;
    completions.push_back(std::move(c));
    completed_count.fetch_add(1, std::memory_order_release);
  }
  void release(TargetRequest& req) noexcept override { released.push_back(req.sqe.hdr.cid.get()); }
  void close(const char* reason) noexcept override {
    if (closed) return;
    closed = true;
    close_reason = reason;
    handler_.on_queue_closed(*this);
  }
  void set_connected(uint16_t q, uint16_t entries, bool sq_flow_disabled) noexcept override {
    qid = q;
    sq_entries = entries;
    sq_flow_control_disabled = sq_flow_disabled;
    connected = true;
  }
  transport::TransportType transport_type() const noexcept override { return type_; }
  const transport::TransportAddress& local_address() const noexcept override { return address_; }
  const std::string& peer_name() const noexcept override { return peer_; }
  std::optional<transport::TlsIdentity> tls_identity() const override { return tls; }

  // The completion of the command with this cid (nullopt when it has not completed).
  std::optional<Completed> result(uint16_t cid) const {
    auto it = by_cid.find(cid);
    if (it == by_cid.end()) return std::nullopt;
    return it->second;
  }

  std::vector<Completed> completions;
  std::map<uint16_t, Completed> by_cid;
  // complete() calls so far: another thread may watch it (the rest belongs to the queue's thread).
  std::atomic<unsigned> completed_count{0};
  std::vector<uint16_t> released;
  p::Status fetch_status = st::success;
  int fetches = 0;
  bool hold_fetches = false;  // fetch_data() keeps the request until deliver_held_fetches()
  std::vector<TargetRequest*> held_fetches;
  bool closed = false;
  std::string close_reason;
  bool connected = false;
  bool sq_flow_control_disabled = false;
  std::optional<transport::TlsIdentity> tls;  // as if the connection came over TLS with this identity
  uint16_t qid = 0;
  uint16_t sq_entries = 0;

 private:
  struct Slot {
    TargetRequest req;
    std::vector<uint8_t> buffer;
  };
  transport::TargetQueueHandler& handler_;
  transport::TransportType type_;
  transport::TransportAddress address_;
  std::string peer_ = "10.0.0.2:50000";
  std::list<Slot> slots_;
};

inline constexpr const char* kSub1 = "nqn.2024-01.io.rdmablk:sub1";
inline constexpr const char* kSub2 = "nqn.2024-01.io.rdmablk:restricted";
inline constexpr const char* kHost1 = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
inline constexpr const char* kHost2 = "nqn.2014-08.org.nvmexpress:uuid:99999999-2222-3333-4444-555555555555";
inline const std::array<uint8_t, 16> kHostId1{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
inline const std::array<uint8_t, 16> kHostId2{16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1};

inline NamespaceConfig ram_ns(const std::string& subnqn, uint32_t nsid, uint64_t size, uint32_t block_size = 512,
                              bool read_only = false, BackendKind kind = BackendKind::ram) {
  NamespaceConfig ns;
  ns.nsid = nsid;
  ns.backend = kind;
  ns.size = size;
  ns.block_size = block_size;
  ns.read_only = read_only;
  ns.uuid = derive_uuid(subnqn, nsid);
  ns.nguid = derive_nguid(subnqn, nsid);
  return ns;
}

// sub1: any host, ns 1 (1 MiB, 512 B blocks) and ns 2 (1 MiB, 4 KiB blocks).
// sub2: only kHost1, ns 1 read only.
inline TargetConfig test_config() {
  TargetConfig c;
  c.source = "test";
  ListenerConfig io;
  io.transport = transport::TransportType::tcp;
  io.address = "0.0.0.0";
  io.port = 4420;
  io.role = ListenerRole::io;
  ListenerConfig disc = io;
  disc.address = "10.0.0.1";
  disc.port = 8009;
  disc.role = ListenerRole::discovery;
  c.listeners = {io, disc};
  SubsystemConfig s1;
  s1.nqn = kSub1;
  s1.serial = "SERIAL0001";
  s1.model = "rdmablk test";
  s1.allow_any_host = true;
  s1.namespaces = {ram_ns(kSub1, 1, 1 << 20), ram_ns(kSub1, 2, 1 << 20, 4096)};
  SubsystemConfig s2;
  s2.nqn = kSub2;
  s2.serial = "SERIAL0002";
  s2.hosts = {kHost1};
  s2.namespaces = {ram_ns(kSub2, 1, 1 << 20, 512, true)};
  c.subsystems = {s1, s2};
  c.limits.io_queue_depth = 128;
  c.limits.admin_queue_depth = 32;
  c.limits.max_io_queues = 4;
  c.limits.max_io_size = 1 << 20;
  c.limits.io_inline_data = 16384;
  c.state_dir.clear();  // no reservation state files (the tests that persist it give a directory)
  return c;
}

// test_config() plus sub1 nsid 5: a 4 MiB file namespace (512 B blocks) at `path`.
inline TargetConfig test_config_with_file_ns(const std::string& path, bool direct) {
  auto c = test_config();
  NamespaceConfig ns = ram_ns(kSub1, 5, 4 << 20, 512, false, BackendKind::file);
  ns.path = path;
  ns.direct = direct;
  c.subsystems[0].namespaces.push_back(ns);
  return c;
}

template <typename T>
p::Sqe sqe_of(const T& cmd) {
  return p::to_sqe(cmd);
}

template <typename T>
T from_bytes(const std::vector<uint8_t>& data, std::size_t offset = 0) {
  T out{};
  EXPECT_GE(data.size(), offset + sizeof(T));
  if (data.size() >= offset + sizeof(T)) std::memcpy(&out, data.data() + offset, sizeof(T));
  return out;
}

// Target core + one fake reactor + helpers for the Linux host's bring-up sequence.
class CoreHarness {
 public:
  explicit CoreHarness(TargetConfig config = test_config(), CoreOptions options = {}) : config_(std::move(config)) {
    spdlog::set_level(spdlog::level::err);  // the core logs every connect; keep test output readable
    auto core = TargetCore::create(config_, {&reactor}, std::move(options));
    EXPECT_TRUE(core) << (core ? "" : core.error().message);
    if (core) core_ = std::move(*core);
  }
  TargetCore& core() { return *core_; }
  const TargetConfig& config() const { return config_; }

  std::unique_ptr<FakeTargetQueue> queue(transport::TransportType type = transport::TransportType::tcp,
                                         std::string local = "10.0.0.1", uint16_t port = 4420) {
    return std::make_unique<FakeTargetQueue>(*core_, type, std::move(local), port);
  }

  Completed run(FakeTargetQueue& q, const p::Sqe& sqe, std::vector<uint8_t> host_data = {}) {
    q.submit(sqe, std::move(host_data));
    reactor.run();
    // Backend I/O (file) completes asynchronously: sleep on the backend queues' fds like the real reactor.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a hang, not a delay
    while (!q.result(sqe.hdr.cid.get()) && reactor.watch_count() != 0 && std::chrono::steady_clock::now() < deadline)
      reactor.wait_watched(std::chrono::milliseconds(100));
    auto r = q.result(sqe.hdr.cid.get());
    EXPECT_TRUE(r.has_value()) << "command cid " << sqe.hdr.cid.get() << " did not complete";
    return r.value_or(Completed{});
  }

  Completed connect(FakeTargetQueue& q, uint16_t qid, uint16_t sqsize0, std::string_view subnqn,
                    std::string_view hostnqn, uint16_t cntlid = p::kCntlidDynamic, uint32_t kato = 0,
                    const std::array<uint8_t, 16>& hostid = kHostId1, bool in_capsule = true) {
    auto data = p::make_connect_data(hostid, cntlid, subnqn, hostnqn);
    std::vector<uint8_t> bytes(sizeof(data));
    std::memcpy(bytes.data(), &data, sizeof(data));
    const auto sgl = in_capsule ? p::make_in_capsule_sgl(0, p::kConnectDataSize) : sgl_for(q, p::kConnectDataSize);
    return run(q, sqe_of(p::make_connect(next_cid(), qid, sqsize0, kato, 0, sgl)), bytes);
  }

  Completed prop_get(FakeTargetQueue& q, uint32_t offset, bool eight) {
    return run(q, sqe_of(p::make_property_get(next_cid(), offset, eight)));
  }
  Completed prop_set(FakeTargetQueue& q, uint32_t offset, uint64_t value, bool eight = false) {
    return run(q, sqe_of(p::make_property_set(next_cid(), offset, value, eight)));
  }
  static uint32_t good_cc() {
    return p::Cc{}.set_en(true).set_iosqes(6).set_iocqes(4).value;
  }
  Completed enable(FakeTargetQueue& q) { return prop_set(q, p::property::cc, good_cc()); }

  // Admin queue connected and enabled: returns the cntlid.
  uint16_t bring_up(FakeTargetQueue& admin, std::string_view subnqn = kSub1, std::string_view hostnqn = kHost1,
                    uint32_t kato = 0, const std::array<uint8_t, 16>& hostid = kHostId1) {
    auto c = connect(admin, 0, 31, subnqn, hostnqn, p::kCntlidDynamic, kato, hostid);
    EXPECT_TRUE(c.status().ok()) << p::status_name(c.status());
    auto e = enable(admin);
    EXPECT_TRUE(e.status().ok());
    return p::connect_result_cntlid(c.dw0());
  }
  // An I/O queue of an enabled controller.
  std::unique_ptr<FakeTargetQueue> io_queue(uint16_t cntlid, uint16_t qid, std::string_view subnqn = kSub1,
                                            std::string_view hostnqn = kHost1,
                                            const std::array<uint8_t, 16>& hostid = kHostId1) {
    auto q = queue();
    auto c = connect(*q, qid, 127, subnqn, hostnqn, cntlid, 0, hostid);
    EXPECT_TRUE(c.status().ok()) << p::status_name(c.status());
    return q;
  }

  // The data SGL a host uses on this transport: keyed (RDMA) or transport data block (TCP).
  static p::SglDescriptor sgl_for(const FakeTargetQueue& q, uint32_t len) {
    return q.transport_type() == transport::TransportType::rdma ? p::make_keyed_sgl(0x10000, len, 0x1234)
                                                                : p::make_transport_sgl(len);
  }
  Completed identify(FakeTargetQueue& q, p::Cns cns, uint32_t nsid, uint32_t len = 4096) {
    return run(q, sqe_of(p::make_identify(next_cid(), cns, nsid, sgl_for(q, len))));
  }
  Completed get_log(FakeTargetQueue& q, p::LogPageId lid, uint64_t offset, uint32_t len, bool rae = false) {
    return run(q, sqe_of(p::make_get_log_page(next_cid(), lid, 0xFFFFFFFF, offset, len, sgl_for(q, len), rae)));
  }
  Completed set_feature(FakeTargetQueue& q, p::FeatureId fid, uint32_t value) {
    return run(q, sqe_of(p::make_set_features(next_cid(), fid, value)));
  }
  Completed get_feature(FakeTargetQueue& q, p::FeatureId fid, p::FeatureSelect sel = p::FeatureSelect::current) {
    return run(q, sqe_of(p::make_get_features(next_cid(), fid, sel)));
  }
  // Posts an AER; returns its cid (it completes later, if ever).
  uint16_t post_aer(FakeTargetQueue& q) {
    const uint16_t cid = next_cid();
    q.submit(p::make_async_event_request(cid));
    reactor.run();
    return cid;
  }

  Completed write(FakeTargetQueue& q, uint32_t nsid, uint64_t slba, uint32_t blocks, std::vector<uint8_t> data,
                  bool in_capsule = false) {
    const auto len = static_cast<uint32_t>(data.size());
    const auto sgl = in_capsule ? p::make_in_capsule_sgl(0, len) : sgl_for(q, len);
    return run(q, sqe_of(p::make_write(next_cid(), nsid, slba, blocks, sgl)), std::move(data));
  }
  Completed read(FakeTargetQueue& q, uint32_t nsid, uint64_t slba, uint32_t blocks, uint32_t len) {
    return run(q, sqe_of(p::make_read(next_cid(), nsid, slba, blocks, sgl_for(q, len))));
  }

  uint16_t next_cid() { return ++cid_; }

  FakeReactor reactor;

 private:
  TargetConfig config_;
  std::unique_ptr<TargetCore> core_;
  uint16_t cid_ = 0;
};

inline std::vector<uint8_t> pattern(std::size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 9));
  return v;
}

}  // namespace rdmablk::target::testing

// The target core (target/core.* and its admin / fabrics / discovery / I/O command handlers) fed commands
// with any field values: what a host can send once its capsules are well formed. The core runs on a fake
// reactor (posted tasks, pollers and timers run inline, the clock moves only when the input says so) with
// RAM namespaces; a fake transport queue checks each command's data SGL with the transport's own
// plan_data_transfer (NVMe/TCP limits) as a real queue does, supplies host data from the input at once and
// records completions.
//
// Input: [0] setup, then records until the input runs out.
//   setup bit 0: bring up an admin queue first (Connect to the NVM subsystem, CC.EN = 1), bit 1: and I/O
//   queue 1, bit 2: the admin queue's Connect goes to the discovery subsystem instead, bit 3: the host is
//   one the restricted subsystem does not list.
//   record: [queue: bit 0 I/O queue 1 (else the admin queue), bit 7 advance the clock instead]
//           advance: [ms le16];  command: [64-byte SQE] [n le16] [n bytes of host data (the rest zeroes)].
// Invariants: every command completes exactly once or its queue closes; a completion carries data only for
// a controller-to-host transfer, exactly the planned length; nothing crashes, leaks or reads past a buffer;
// after the queues close and the core goes, nothing is left behind.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/endian.h"
#include "protocol/fabrics.h"
#include "protocol/properties.h"
#include "protocol/sgl.h"
#include "protocol/status.h"
#include "target/config/config.h"
#include "target/core/core.h"
#include "target/core/core_reactor.h"
#include "transport/target_queue.h"
#include "transport/target_queue_base.h"

namespace {

namespace p = rdmablk::protocol;
namespace tr = rdmablk::transport;
namespace tg = rdmablk::target;

constexpr const char* kSub = "nqn.2024-01.io.rdmablk:sub1";
constexpr const char* kRestricted = "nqn.2024-01.io.rdmablk:restricted";
constexpr const char* kHost = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
constexpr const char* kStranger = "nqn.2014-08.org.nvmexpress:uuid:99999999-2222-3333-4444-555555555555";

class FakeReactor final : public tg::CoreReactor {
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
  void add_poller(tr::Poller* p) override { pollers_.push_back(p); }
  void remove_poller(tr::Poller* p) override { std::erase(pollers_, p); }
  void watch_fd(int, tr::IoOp*) override {}  // RAM backends complete on their poller
  void unwatch_fd(tr::IoOp*) override {}
  std::span<const iovec> registered_buffers() const noexcept override { return {}; }

  void run() {
    for (int rounds = 0; rounds < 100000; ++rounds) {
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
    FUZZ_FAIL("the reactor never settles");
  }
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

 private:
  struct Timer {
    uint64_t id;
    std::chrono::milliseconds deadline;
    std::function<void()> fn;
  };
  std::deque<std::function<void()>> posted_;
  std::vector<Timer> timers_;
  std::vector<tr::Poller*> pollers_;
  std::chrono::milliseconds now_{0};
  uint64_t next_id_ = 0;
};

class FakeQueue final : public tr::TargetQueue {
 public:
  FakeQueue(tr::TargetQueueHandler& core, uint16_t admin_in_capsule) : core_(core), admin_in_capsule_(admin_in_capsule) {
    address_.type = tr::TransportType::tcp;
    address_.traddr = "10.0.0.1";
    address_.trsvcid = 4420;
    core_.on_queue_created(*this);
  }

  // One command with `host_data` (as much of its data as the host sent). False when the queue is closed.
  bool submit(const p::Sqe& sqe, std::span<const uint8_t> host_data) {
    if (closed) return false;
    Slot& s = slots_.emplace_back();
    s.req.sqe = sqe;
    s.req.queue = this;
    s.req.tag = static_cast<uint16_t>(slots_.size());
    ++outstanding_;
    tr::BindingLimits lim;
    lim.accept = p::SglAccept::tcp;
    lim.capsule_declares_data = true;
    lim.max_transfer = 1u << 20;
    lim.in_capsule = qid_ == 0 ? admin_in_capsule_ : 16384;
    // In-capsule data is what the capsule carried; anything else arrives later by "R2T".
    auto sgl = p::decode_data_sgl(sqe.hdr.dptr, lim.accept);
    const bool in_capsule = sgl && sgl->kind == p::SglKind::in_capsule;
    const uint32_t icd = in_capsule ? static_cast<uint32_t>(std::min<std::size_t>(host_data.size(), lim.in_capsule)) : 0;
    tr::DataPlan plan;
    const p::Status st = tr::plan_data_transfer(sqe, icd, lim, plan);
    if (!st.ok()) {  // the transport answers it itself
      s.req.cqe.set_status(st);
      complete(s.req, false);
      return true;
    }
    if (plan.moves_data()) {
      s.req.direction = plan.direction;
      s.req.data_length = plan.length;
      s.buffer = std::make_unique<uint8_t[]>(plan.length);  // exactly the length: ASan sees any overrun
      std::memset(s.buffer.get(), 0, plan.length);
      if (plan.direction == tr::DataDirection::host_to_controller) {
        const std::size_t from = plan.kind == p::SglKind::in_capsule ? plan.icd_offset : 0;
        if (host_data.size() > from) {
          std::memcpy(s.buffer.get(), host_data.data() + from, std::min<std::size_t>(host_data.size() - from, plan.length));
        }
        s.req.data_in_capsule = plan.kind == p::SglKind::in_capsule;
      }
      s.req.data = s.buffer.get();
    }
    core_.on_command(s.req);
    return true;
  }

  void fetch_data(tr::TargetRequest& req) noexcept override {
    FUZZ_CHECK(req.direction == tr::DataDirection::host_to_controller && !req.data_in_capsule);
    FUZZ_CHECK(!closed);
    core_.on_data_ready(req, p::status::success);
  }
  void complete(tr::TargetRequest& req, bool with_data) noexcept override {
    FUZZ_CHECK(outstanding_ > 0);
    --outstanding_;
    if (with_data) {
      FUZZ_CHECK(req.direction == tr::DataDirection::controller_to_host);
      FUZZ_CHECK(req.data != nullptr && req.data_length != 0);
      uint64_t sum = 0;  // the transport reads all of it to send it
      for (uint32_t i = 0; i < req.data_length; ++i) sum += req.data[i];
      checksum += sum;
    }
    last_cqe = req.cqe;
    ++completions;
  }
  void release(tr::TargetRequest&) noexcept override {
    FUZZ_CHECK(closed);
    FUZZ_CHECK(outstanding_ > 0);
    --outstanding_;
  }
  void close(const char*) noexcept override {
    if (closed) return;
    closed = true;
    core_.on_queue_closed(*this);
  }
  void set_connected(uint16_t qid, uint16_t entries, bool /*sq_flow_disabled*/) noexcept override {
    qid_ = qid;
    FUZZ_CHECK(entries >= 2);
  }
  tr::TransportType transport_type() const noexcept override { return tr::TransportType::tcp; }
  const tr::TransportAddress& local_address() const noexcept override { return address_; }
  const std::string& peer_name() const noexcept override { return peer_; }

  unsigned outstanding() const { return outstanding_; }
  bool closed = false;
  unsigned completions = 0;
  uint64_t checksum = 0;
  p::Cqe last_cqe{};

 private:
  struct Slot {
    tr::TargetRequest req;
    std::unique_ptr<uint8_t[]> buffer;
  };
  tr::TargetQueueHandler& core_;
  uint16_t admin_in_capsule_;
  tr::TransportAddress address_;
  std::string peer_ = "10.0.0.2:50000";
  std::list<Slot> slots_;
  unsigned outstanding_ = 0;
  uint16_t qid_ = 0;
};

tg::NamespaceConfig ram_ns(const std::string& sub, uint32_t nsid, uint64_t size, uint32_t block_size, bool ro) {
  tg::NamespaceConfig ns;
  ns.nsid = nsid;
  ns.backend = tg::BackendKind::ram;
  ns.size = size;
  ns.block_size = block_size;
  ns.read_only = ro;
  ns.uuid = tg::derive_uuid(sub, nsid);
  ns.nguid = tg::derive_nguid(sub, nsid);
  return ns;
}

const tg::TargetConfig& config() {
  static const tg::TargetConfig c = [] {
    tg::TargetConfig c;
    c.source = "fuzz";
    tg::ListenerConfig io;
    io.transport = tr::TransportType::tcp;
    io.address = "0.0.0.0";
    io.port = 4420;
    io.role = tg::ListenerRole::io;
    tg::ListenerConfig disc = io;
    disc.address = "10.0.0.1";
    disc.port = 8009;
    disc.role = tg::ListenerRole::discovery;
    c.listeners = {io, disc};
    tg::SubsystemConfig s1;
    s1.nqn = kSub;
    s1.serial = "SERIAL0001";
    s1.model = "rdmablk fuzz";
    s1.allow_any_host = true;
    s1.namespaces = {ram_ns(kSub, 1, 256 << 10, 512, false), ram_ns(kSub, 2, 256 << 10, 4096, false)};
    tg::SubsystemConfig s2;
    s2.nqn = kRestricted;
    s2.serial = "SERIAL0002";
    s2.hosts = {kHost};
    s2.namespaces = {ram_ns(kRestricted, 1, 64 << 10, 512, true)};
    c.subsystems = {s1, s2};
    c.limits.io_queue_depth = 128;
    c.limits.admin_queue_depth = 32;
    c.limits.max_io_queues = 4;
    c.limits.max_io_size = 1 << 20;
    c.limits.io_inline_data = 16384;
    // No PTPL: a Register with CPTPL set gets Invalid Field instead of writing state files per input.
    c.state_dir.clear();
    return c;
  }();
  return c;
}

std::vector<uint8_t> connect_data(const char* sub, const char* host, uint16_t cntlid) {
  std::array<uint8_t, 16> hostid{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const auto d = p::make_connect_data(hostid, cntlid, sub, host);
  std::vector<uint8_t> b(sizeof(d));
  p::store(b.data(), d);
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  config();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const uint8_t setup = data[0];
  std::size_t pos = 1;

  FakeReactor reactor;
  auto made = tg::TargetCore::create(config(), {&reactor});
  FUZZ_CHECK(made.has_value());
  std::unique_ptr<tg::TargetCore> core = std::move(*made);
  auto admin = std::make_unique<FakeQueue>(*core, 8192);
  std::unique_ptr<FakeQueue> io;

  const char* host = (setup & 8) != 0 ? kStranger : kHost;
  uint16_t cntlid = 0xFFFF;
  if ((setup & 1) != 0) {
    const bool disc = (setup & 4) != 0;
    const char* sub = disc ? p::kDiscoveryNqn.data() : ((setup & 8) != 0 ? kRestricted : kSub);
    const auto conn = p::to_sqe(p::make_connect(1, 0, 31, 0, 0, p::make_in_capsule_sgl(0, p::kConnectDataSize)));
    admin->submit(conn, connect_data(sub, host, 0xFFFF));
    reactor.run();
    cntlid = p::connect_result_cntlid(admin->last_cqe.dw0.get());
    const auto cc = p::Cc{}.set_en(true).set_iosqes(6).set_iocqes(4).value;
    admin->submit(p::to_sqe(p::make_property_set(2, p::property::cc, cc, false)), {});
    reactor.run();
    if ((setup & 2) != 0 && !disc) {
      io = std::make_unique<FakeQueue>(*core, 8192);
      const auto ioc = p::to_sqe(p::make_connect(1, 1, 127, 0, 0, p::make_in_capsule_sgl(0, p::kConnectDataSize)));
      io->submit(ioc, connect_data(sub, host, cntlid));
      reactor.run();
    }
  }
  if (!io) io = std::make_unique<FakeQueue>(*core, 8192);  // unconnected: its commands must be refused

  while (pos < size) {
    const uint8_t kind = data[pos++];
    if ((kind & 0x80) != 0) {
      if (size - pos < 2) break;
      const unsigned ms = data[pos] | data[pos + 1] << 8;
      pos += 2;
      reactor.advance(std::chrono::milliseconds(ms) * 16);  // up to ~17 minutes: keep-alive expiries
      continue;
    }
    if (size - pos < 64) break;
    const auto sqe = p::load<p::Sqe>(data + pos);
    pos += 64;
    std::size_t n = 0;
    if (size - pos >= 2) {
      n = std::min<std::size_t>(data[pos] | data[pos + 1] << 8, size - pos - 2);
      pos += 2;
    }
    FakeQueue& q = (kind & 1) != 0 ? *io : *admin;
    if (!q.submit(sqe, {data + pos, n})) {
      pos += n;
      continue;
    }
    pos += n;
    reactor.run();
    // Admin and fabrics commands complete inline, I/O on RAM namespaces on the poller; an Asynchronous Event
    // Request stays with the core until an event (or the close).
  }

  // The host goes away: both queues close, the core gives back or completes what it held.
  admin->close("fuzz input done");
  io->close("fuzz input done");
  reactor.run();
  reactor.advance(std::chrono::milliseconds(3600 * 1000));
  FUZZ_CHECK(admin->outstanding() == 0);
  FUZZ_CHECK(io->outstanding() == 0);
  core.reset();
  return 0;
}

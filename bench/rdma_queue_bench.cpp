// rdma_queue_bench: CPU nanoseconds per 4 KiB command on the RDMA target path, without a NIC.
//
// The real code under test: transport::rdma::RdmaTargetQueue (capsule parse, SGL checks, buffer pool,
// send-queue budget, WR chains, slot recycling), target::TargetCore (dispatch, I/O command checks, the
// namespace view, per-reactor backend channel, completion), the `null` backend (backend/memory_backend.cpp:
// validates and queues a completion at submit, handed out at the next reap), and the reactor loop that
// drives it all. What replaces the device is a fake verbs layer (FakeQp: an RdmaQpOps that turns every
// signaled WR into a work completion at once; FakeCq: a transport::Poller standing in for the reactor's
// DeviceCq in transport/rdma/rdma_target.cpp, ibv_poll_cq in batches of 32 and dispatch by wr_id) and a
// host model (writes the 64-byte SQE into the next posted RECV buffer and completes that RECV).
//
// Bring-up goes through the real fabrics path: admin queue (qid 0) Connect with in-capsule Connect data,
// Property Set CC.EN = 1, then I/O queue (qid 1) Connect, all as capsules over RECV completions. Then each
// workload keeps --qd commands in flight on the I/O queue (queue size --queue-size, 128 like the Linux
// host): a SEND completion (the CQE went out) lets the host send its next command, which arrives as a RECV
// completion at the next CQ poll. Per command:
//   read:      RECV wc -> parse (keyed SGL 0x40) -> pool buffer -> core -> null READ submit
//              -> reap (ReactorState::poll) -> finish -> post RDMA WRITE + SEND chain -> SEND wc -> recycle
//   write:     RECV wc -> parse (keyed SGL 0x40) -> pool buffer -> core -> fetch_data -> post RDMA READ
//              -> READ wc -> on_data_ready -> null WRITE submit -> reap -> finish -> post SEND -> SEND wc
//   write-icd: RECV wc carrying 64 + 4096 bytes (in-capsule SGL 0x01) -> parse -> core -> null WRITE
//              submit -> reap -> finish -> RECV repost -> post SEND -> SEND wc -> recycle
//
// Turn: --driver reactor (default) is what the daemon does: transport::Reactor::run_once(false), which runs
// the pollers in registration order (the CQ first, as DeviceCq is added when the listener starts, then the
// core's ReactorState, added when the first I/O opens a backend channel), checks its message queue and
// timers, peeks its io_uring CQ ring and (nothing queued) makes no syscall. --driver pollers calls the
// same two pollers directly (no Reactor), to split out the loop's own cost.
//
// Measured: CLOCK_THREAD_CPUTIME_ID around a loop of --commands commands (after --warmup commands of each
// workload), --rounds rounds interleaved across workloads; median and min ns per command, commands/s =
// 1e9 / median (one CPU). "wall ns" is steady_clock over the same loop: above the CPU figure when something
// else ran on that CPU (then trust neither much; on a shared 2-vCPU VM rounds vary by +-30%).
// Included in that time: everything above, plus the fakes' own share (building ibv_wc entries in a small
// L1-resident ring, the host's 64-byte SQE store into the RECV buffer, copying the CQE out of the SEND's
// buffer to check its status): FakeCq::poll (with the host's refill inlined), FakeQp::post_send/post_recv,
// about 15% of perf samples. The host's SQE store takes the cache miss on the RECV buffer line (128 RECV
// buffers of 64 + 16 KiB each) that the target's parse would take on a real NIC's DMA write.
// NOT included: anything a real device costs the CPU: ibv_post_send/ibv_post_recv in the provider (WQE
// build, doorbell MMIO / BlueFlame write), ibv_poll_cq on a real CQ (reading the CQEs the NIC wrote, misses
// on them), completion-channel events and re-arming, the RDMA CM; the data (null never touches buffers, the
// fakes move no bytes, in-capsule data is not written); the backend's I/O (a file backend adds io_uring
// READ_FIXED/WRITE_FIXED submission and reaping, and syscalls); many queues or reactors competing for caches.
// SPDK's ~730 ns per I/O is all-in on real NICs, so this figure is a lower bound for the daemon's.
//
// Usage (pin it: the numbers are per CPU):
//   taskset -c 1 build/bench/rdma_queue_bench                       # 2,000,000 commands x 5 rounds each
//   taskset -c 1 build/bench/rdma_queue_bench -n 500000 -r 3 --json --workloads read,write
//   taskset -c 1 build/bench/rdma_queue_bench --driver pollers      # without the reactor loop
//   perf record -e cpu-clock -g -- taskset -c 1 build/bench/rdma_queue_bench -n 1000000 -r 1
// Options: -n/--commands, -r/--rounds, --warmup, --qd, --queue-size, --bs (multiple of 4096; write-icd needs
// it <= the I/O in-capsule size, 16 KiB), --workloads (read,write,write-icd), --driver, --invalidate (SGL
// 0x4F: the CQE goes as SEND_WITH_INV), --json. Exit status 1 if any command fails or the queue stalls.
#include <infiniband/verbs.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/fabrics.h"
#include "protocol/properties.h"
#include "protocol/rdma_cm.h"
#include "protocol/sgl.h"
#include "target/config.h"
#include "target/core.h"
#include "target/core_reactor.h"
#include "transport/buffer_pool.h"
#include "transport/rdma/rdma_queue.h"
#include "transport/reactor.h"

namespace {

using namespace rdmablk;
namespace p = rdmablk::protocol;
namespace cm = rdmablk::protocol::rdma_cm;
using transport::rdma::RdmaQpOps;
using transport::rdma::RdmaTargetQueue;
using transport::rdma::WrCtx;

constexpr uint32_t kNsid = 1;
constexpr uint32_t kBlockSize = 4096;
constexpr uint64_t kNsBytes = 1ull << 40;  // null: no memory behind it
constexpr const char* kSubNqn = "nqn.2024-11.io.rdmablk:bench";
constexpr const char* kHostNqn = "nqn.2014-08.org.nvmexpress:uuid:0b1e5a1e-0000-4000-8000-00000000be4c";
constexpr std::array<uint8_t, 16> kHostId{0xb1, 0xe5, 0xa1, 0xe0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0xbe, 0x4c};
constexpr uint32_t kHostKey = 0x1234;
constexpr uint64_t kHostAddr = 0x7f0000000000ull;

enum class Kind : uint8_t { read, write_keyed, write_in_capsule };

struct Workload {
  std::string name;
  Kind kind;
};

struct Config {
  uint64_t commands = 2'000'000;
  unsigned rounds = 5;
  uint64_t warmup = 200'000;
  unsigned qd = 32;
  unsigned queue_size = 128;
  uint32_t bs = 4096;
  std::vector<std::string> workloads{"read", "write", "write-icd"};
  std::string driver = "reactor";
  bool invalidate = false;
  bool json = false;
};

[[noreturn]] void die(const std::string& what) {
  fmt::print(stderr, "rdma_queue_bench: {}\n", what);
  std::exit(1);
}

uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Page-aligned, zeroed memory (the daemon's queue regions and pools are registered, page-aligned memory).
struct AlignedRegion {
  explicit AlignedRegion(std::size_t n) : size((n + 4095) / 4096 * 4096) {
    data = static_cast<uint8_t*>(std::aligned_alloc(4096, size));
    if (data == nullptr) throw std::bad_alloc();
    std::memset(data, 0, size);
  }
  ~AlignedRegion() { std::free(data); }
  AlignedRegion(const AlignedRegion&) = delete;
  AlignedRegion& operator=(const AlignedRegion&) = delete;
  uint8_t* data = nullptr;
  std::size_t size = 0;
};

// ---- the fake device ------------------------------------------------------------------------------------

class Host;

// The reactor's per-device CQ, as DeviceCq::poll does it: up to 32 completions per poll, dispatched to the
// queue named by wr_id. Here the "device" writes completions into a ring when the WR is posted. The ring is
// only as large as what can be outstanding (a few times the queue depth), so that it stays in L1: a real
// CQ (kReactorCqEntries, written by the NIC) costs cache misses that are not this benchmark's to model.
class FakeCq final : public transport::Poller {
 public:
  explicit FakeCq(uint32_t entries) : ring_(entries), mask_(entries - 1) {}
  // The next completion to fill in (zeroed), or a scratch entry when the ring is full (counted: the run fails).
  ibv_wc& push() noexcept {
    if (tail_ - head_ >= ring_.size()) {
      ++overflows;
      return scratch_;
    }
    ibv_wc& wc = ring_[tail_++ & mask_];
    wc = ibv_wc{};
    return wc;
  }
  bool poll() noexcept override;
  bool empty() const noexcept { return head_ == tail_; }

  Host* host = nullptr;
  uint64_t overflows = 0;

 private:
  int poll_cq(int max, ibv_wc* out) noexcept {
    int n = 0;
    while (n < max && head_ != tail_) out[n++] = ring_[head_++ & mask_];
    return n;
  }
  std::vector<ibv_wc> ring_;
  ibv_wc scratch_{};
  uint32_t mask_;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
};

// One QP: every signaled WR completes at once (successfully); RECVs wait in a FIFO for the host's next
// capsule; disconnect() flushes them, like a QP moved to the error state.
class FakeQp final : public RdmaQpOps {
 public:
  struct PostedRecv {
    uint64_t wr_id = 0;
    uint8_t* buf = nullptr;
    uint32_t len = 0;
  };

  // recv_count: the RECVs the queue posts (a power-of-two ring of at least that many).
  FakeQp(FakeCq& cq, uint32_t qp_num, uint32_t recv_count) : cq_(cq), qp_num_(qp_num) {
    std::size_t n = 16;
    while (n < recv_count) n *= 2;
    recvs_.resize(n);
    recv_mask_ = n - 1;
  }

  int post_send(ibv_send_wr* wr) noexcept override {
    ++chains;
    for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
      ibv_wc_opcode opcode = IBV_WC_SEND;
      uint32_t bytes = 0;
      switch (w->opcode) {
        case IBV_WR_RDMA_WRITE:
          ++rdma_writes;
          opcode = IBV_WC_RDMA_WRITE;
          break;
        case IBV_WR_RDMA_READ:
          ++rdma_reads;
          opcode = IBV_WC_RDMA_READ;
          for (int i = 0; i < w->num_sge; ++i) bytes += w->sg_list[i].length;
          break;
        case IBV_WR_SEND:
        case IBV_WR_SEND_WITH_INV: {
          ++sends;
          // The host receives the CQE: check its status as a host would.
          std::memcpy(&last_cqe, reinterpret_cast<const void*>(static_cast<uintptr_t>(w->sg_list[0].addr)),
                      sizeof(last_cqe));
          ++cqes;
          if (!last_cqe.get_status().ok()) ++failed_cqes;
          break;
        }
        default:
          ++unexpected_wrs;
          break;
      }
      if ((w->send_flags & IBV_SEND_SIGNALED) == 0) continue;
      ibv_wc& wc = cq_.push();
      wc.wr_id = w->wr_id;
      wc.status = IBV_WC_SUCCESS;
      wc.opcode = opcode;
      wc.byte_len = bytes;
      wc.qp_num = qp_num_;
    }
    return 0;
  }
  int post_recv(ibv_recv_wr* wr) noexcept override {
    for (ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
      if (recv_tail_ - recv_head_ >= recvs_.size()) return ENOMEM;
      recvs_[recv_tail_++ & recv_mask_] =
          PostedRecv{w->wr_id, reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(w->sg_list[0].addr)),
                     w->sg_list[0].length};
    }
    return 0;
  }
  void disconnect() noexcept override {
    disconnected = true;
    PostedRecv r;
    while (take_recv(r)) {
      ibv_wc& wc = cq_.push();
      wc.wr_id = r.wr_id;
      wc.status = IBV_WC_WR_FLUSH_ERR;
      wc.opcode = IBV_WC_RECV;
      wc.qp_num = qp_num_;
    }
  }
  void destroy() noexcept override { destroyed = true; }

  bool take_recv(PostedRecv& out) noexcept {
    if (recv_head_ == recv_tail_) return false;
    out = recvs_[recv_head_++ & recv_mask_];
    return true;
  }

  // The NIC received a capsule into the oldest posted RECV.
  bool deliver(const p::Sqe& sqe, uint32_t capsule_data_len, std::span<const uint8_t> icd = {}) noexcept {
    PostedRecv r;
    if (!take_recv(r)) return false;
    std::memcpy(r.buf, &sqe, sizeof(sqe));
    if (!icd.empty()) std::memcpy(r.buf + sizeof(sqe), icd.data(), std::min<std::size_t>(icd.size(), r.len - 64));
    complete_recv(r, capsule_data_len);
    return true;
  }
  // The same for an I/O command: `tmpl` with its CID and SLBA patched in place (no in-capsule bytes written:
  // the null backend never reads them).
  bool deliver_io(const p::Sqe& tmpl, uint16_t cid, uint64_t slba, uint32_t capsule_data_len) noexcept {
    PostedRecv r;
    if (!take_recv(r)) return false;
    std::memcpy(r.buf, &tmpl, sizeof(tmpl));
    p::le16 c;
    c.set(cid);
    std::memcpy(r.buf + offsetof(p::SqeHeader, cid), &c, sizeof(c));
    p::le64 lba;
    lba.set(slba);
    std::memcpy(r.buf + offsetof(p::ReadWriteCommand, slba), &lba, sizeof(lba));
    complete_recv(r, capsule_data_len);
    return true;
  }
  void complete_recv(const PostedRecv& r, uint32_t capsule_data_len) noexcept {
    ibv_wc& wc = cq_.push();
    wc.wr_id = r.wr_id;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV;
    wc.byte_len = static_cast<uint32_t>(sizeof(p::Sqe)) + capsule_data_len;
    wc.qp_num = qp_num_;
  }

  void reset_counters() noexcept {
    chains = rdma_writes = rdma_reads = sends = cqes = failed_cqes = unexpected_wrs = 0;
  }

  p::Cqe last_cqe{};
  uint64_t chains = 0;
  uint64_t rdma_writes = 0;
  uint64_t rdma_reads = 0;
  uint64_t sends = 0;
  uint64_t cqes = 0;
  uint64_t failed_cqes = 0;
  uint64_t unexpected_wrs = 0;
  bool disconnected = false;
  bool destroyed = false;

 private:
  FakeCq& cq_;
  uint32_t qp_num_;
  std::vector<PostedRecv> recvs_;
  std::size_t recv_mask_ = 0;
  uint64_t recv_head_ = 0;
  uint64_t recv_tail_ = 0;
};

// The host: keeps `qd` commands in flight on the I/O queue; a SEND completion means a CQE reached it.
class Host {
 public:
  void start(FakeQp& qp, const RdmaTargetQueue* queue, const p::Sqe& tmpl, uint32_t capsule_data_len,
             uint64_t count, unsigned qd, uint64_t lba_mask, uint64_t blocks_per_cmd) noexcept {
    qp_ = &qp;
    queue_ = queue;
    tmpl_ = tmpl;
    capsule_data_len_ = capsule_data_len;
    target_ = count;
    qd_ = qd;
    lba_mask_ = lba_mask;
    blocks_per_cmd_ = blocks_per_cmd;
    issued_ = completed_ = 0;
    outstanding_ = 0;
    active_ = true;
    refill();
  }
  void on_send_done(const RdmaTargetQueue* queue) noexcept {
    if (!active_ || queue != queue_) return;
    ++completed_;
    --outstanding_;
    refill();
  }
  bool finished() const noexcept { return completed_ >= target_; }
  void stop() noexcept { active_ = false; }
  uint64_t completed() const noexcept { return completed_; }
  unsigned outstanding() const noexcept { return outstanding_; }
  bool starved = false;  // no RECV posted when the host had a command to send

 private:
  void refill() noexcept {
    while (outstanding_ < qd_ && issued_ < target_) {
      if (!qp_->deliver_io(tmpl_, static_cast<uint16_t>(issued_), (issued_ * blocks_per_cmd_) & lba_mask_,
                           capsule_data_len_)) {
        starved = true;
        return;
      }
      ++issued_;
      ++outstanding_;
    }
  }

  FakeQp* qp_ = nullptr;
  const RdmaTargetQueue* queue_ = nullptr;
  p::Sqe tmpl_{};
  uint32_t capsule_data_len_ = 0;
  uint64_t target_ = 0;
  uint64_t issued_ = 0;
  uint64_t completed_ = 0;
  uint64_t lba_mask_ = 0;
  uint64_t blocks_per_cmd_ = 1;
  unsigned qd_ = 0;
  unsigned outstanding_ = 0;
  bool active_ = false;
};

bool FakeCq::poll() noexcept {
  constexpr int kPollBatch = 32;  // DeviceCq's
  ibv_wc wcs[kPollBatch];
  const int n = poll_cq(kPollBatch, wcs);
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs[i];
    if (wc.wr_id == 0) continue;  // an unsignaled WR (flushed)
    const auto* ctx = reinterpret_cast<const WrCtx*>(static_cast<uintptr_t>(wc.wr_id));
    RdmaTargetQueue* queue = ctx->queue;
    queue->on_completion(*ctx, wc);
    if (wc.opcode == IBV_WC_SEND && host != nullptr) host->on_send_done(queue);
  }
  return n > 0;
}

// ---- the reactor ----------------------------------------------------------------------------------------

// --driver pollers: the core's reactor interface with nothing behind it but a poller list and a message
// FIFO (the null backend has no fd to watch; nothing in this run sets a timer).
class LoopReactor final : public target::CoreReactor {
 public:
  explicit LoopReactor(const transport::BufferPool& pool) : region_(pool.region()) {}
  bool on_thread() const noexcept override { return true; }
  void post(std::function<void()> fn) override { posted_.push_back(std::move(fn)); }
  uint64_t schedule(std::chrono::milliseconds, std::function<void()>) override { return ++timers_; }
  void cancel(uint64_t) override {}
  void add_poller(transport::Poller* poller) override { pollers_.push_back(poller); }
  void remove_poller(transport::Poller* poller) override { std::erase(pollers_, poller); }
  void watch_fd(int, transport::IoOp*) override {}
  void unwatch_fd(transport::IoOp*) override {}
  std::span<const iovec> registered_buffers() const noexcept override { return {&region_, 1}; }

  bool run_once() {
    bool work = false;
    while (!posted_.empty()) {
      auto fn = std::move(posted_.front());
      posted_.pop_front();
      fn();
      work = true;
    }
    for (std::size_t i = 0; i < pollers_.size(); ++i) work = pollers_[i]->poll() || work;
    return work;
  }

 private:
  iovec region_;
  std::deque<std::function<void()>> posted_;
  std::vector<transport::Poller*> pollers_;
  uint64_t timers_ = 0;
};

class Driver {
 public:
  Driver(const std::string& mode, const transport::BufferPool& pool) {
    if (mode == "reactor") {
      transport::ReactorOptions ro;
      ro.name = "bench-reactor";
      auto r = transport::Reactor::create(ro);
      if (!r) die("cannot create a reactor: " + r.error().message);
      reactor_ = std::move(*r);
      adapter_ = std::make_unique<target::ReactorAdapter>(*reactor_, &pool);
      reactor_->run_once(false);  // binds the reactor to this thread (CoreReactor::on_thread)
    } else {
      loop_ = std::make_unique<LoopReactor>(pool);
    }
  }
  target::CoreReactor& core_reactor() noexcept {
    if (adapter_) return *adapter_;
    return *loop_;
  }
  void turn() {
    if (reactor_) {
      reactor_->run_once(false);
    } else {
      loop_->run_once();
    }
  }

 private:
  std::unique_ptr<transport::Reactor> reactor_;
  std::unique_ptr<target::ReactorAdapter> adapter_;
  std::unique_ptr<LoopReactor> loop_;
};

// ---- set-up -----------------------------------------------------------------------------------------------

target::TargetConfig bench_config(const Config& cfg) {
  target::TargetConfig c;
  c.source = "rdma_queue_bench";
  target::ListenerConfig l;
  l.transport = transport::TransportType::rdma;
  l.address = "0.0.0.0";
  l.port = 4420;
  l.role = target::ListenerRole::io;
  c.listeners = {l};
  target::SubsystemConfig s;
  s.nqn = kSubNqn;
  s.serial = "BENCH0001";
  s.allow_any_host = true;
  target::NamespaceConfig ns;
  ns.nsid = kNsid;
  ns.backend = target::BackendKind::null;
  ns.size = kNsBytes;
  ns.block_size = kBlockSize;
  ns.uuid = target::derive_uuid(kSubNqn, kNsid);
  ns.nguid = target::derive_nguid(kSubNqn, kNsid);
  s.namespaces = {ns};
  c.subsystems = {s};
  c.limits.io_queue_depth = std::max(128u, cfg.queue_size);  // defaults otherwise (16 KiB I/O in-capsule data)
  c.reactors = 1;
  return c;
}

// What the daemon gives each reactor and each RDMA queue (target/daemon.cpp pool_options / rdma_options).
transport::BufferPoolOptions pool_options(const target::QueueLimits& limits) {
  transport::BufferPoolOptions o;
  o.small_size = std::max<std::size_t>(16 * 1024, std::max(limits.admin_inline_data, limits.io_inline_data));
  o.small_count = 1024;
  o.large_size = limits.max_io_size;
  o.large_count = std::max(16u, static_cast<unsigned>((64u << 20) / limits.max_io_size));
  return o;
}

transport::rdma::RdmaTargetOptions rdma_options(const target::QueueLimits& limits) {
  transport::rdma::RdmaTargetOptions o;
  o.admin_in_capsule = limits.admin_inline_data;
  o.io_in_capsule = limits.io_inline_data;
  o.max_queue_depth = static_cast<uint16_t>(std::max(limits.io_queue_depth, limits.admin_queue_depth));
  o.max_data_transfer = limits.max_io_size;
  return o;
}

// A ConnectX-5-like device.
transport::rdma::DeviceLimits device_limits() {
  transport::rdma::DeviceLimits d;
  d.max_qp_wr = 32768;
  d.max_sge = 30;
  d.max_qp_rd_atom = 16;
  d.max_qp_init_rd_atom = 16;
  d.max_msg_size = 1u << 30;
  d.max_cqe = 4194303;
  return d;
}

struct BenchQueue {
  std::unique_ptr<FakeQp> qp;
  std::unique_ptr<AlignedRegion> region;
  std::unique_ptr<RdmaTargetQueue> queue;
};

BenchQueue make_queue(FakeCq& cq, transport::BufferPool& pool, target::TargetCore& core,
                      const transport::rdma::RdmaTargetOptions& opts, uint16_t qid, uint16_t entries,
                      uint16_t cntlid) {
  const cm::ConnectRequest req{qid, entries, static_cast<uint16_t>(entries - 1), cntlid};
  auto sizing = transport::rdma::size_queue(req, 16, 16, device_limits(), opts);
  if (!sizing) die(fmt::format("queue {}: size_queue refused: {}", qid, sizing.error().what));
  BenchQueue b;
  b.qp = std::make_unique<FakeQp>(cq, 0x100u + qid, sizing->recv_count);
  b.region = std::make_unique<AlignedRegion>(transport::rdma::queue_region_bytes(*sizing));
  transport::rdma::RdmaQueueSetup setup;
  setup.sizing = *sizing;
  setup.region = b.region->data;
  setup.recv_lkey = 0x1111;
  setup.pool_lkey = 0x2222;
  setup.max_inline = 64;  // mlx5 grants inline sends: the CQE goes inline
  setup.local = transport::TransportAddress{transport::TransportType::rdma, "192.168.100.10", 4420};
  setup.peer = "192.168.100.20:50000";
  b.queue = std::make_unique<RdmaTargetQueue>(*b.qp, pool, core, opts, setup);
  if (!b.queue->post_initial_recvs()) die("post_initial_recvs failed");
  b.queue->start();
  return b;
}

// One setup command: capsule in, run the reactor until its CQE went out and the CQ is drained.
p::Cqe exchange(Driver& driver, FakeCq& cq, FakeQp& qp, const p::Sqe& sqe, std::span<const uint8_t> icd) {
  const uint64_t before = qp.cqes;
  if (!qp.deliver(sqe, static_cast<uint32_t>(icd.size()), icd)) die("no RECV posted for a setup command");
  for (int i = 0; i < 1'000'000 && (qp.cqes == before || !cq.empty()); ++i) driver.turn();
  if (qp.cqes == before) die(fmt::format("setup command opcode {:#x} got no completion", sqe.hdr.opcode));
  return qp.last_cqe;
}

p::Cqe connect(Driver& driver, FakeCq& cq, FakeQp& qp, uint16_t cid, uint16_t qid, uint16_t sqsize0,
               uint16_t cntlid) {
  const auto data = p::make_connect_data(kHostId, cntlid, kSubNqn, kHostNqn);
  std::vector<uint8_t> bytes(sizeof(data));
  std::memcpy(bytes.data(), &data, sizeof(data));
  const auto sqe = p::to_sqe(p::make_connect(cid, qid, sqsize0, 0, 0, p::make_in_capsule_sgl(0, p::kConnectDataSize)));
  return exchange(driver, cq, qp, sqe, bytes);
}

// ---- measurement --------------------------------------------------------------------------------------

struct WorkloadResult {
  std::string name;
  std::vector<double> ns_per_cmd;     // per round (CPU)
  std::vector<double> wall_ns_per_cmd;
  double median = 0;
  double min = 0;
  double wall_median = 0;
  double rdma_writes = 0;  // WRs per command (last round)
  double rdma_reads = 0;
  double sends = 0;
  double chains = 0;
  double turns = 0;  // reactor turns per command
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Bench {
  Config cfg;
  std::unique_ptr<transport::BufferPool> pool;
  std::unique_ptr<Driver> driver;
  std::unique_ptr<target::TargetCore> core;
  std::unique_ptr<FakeCq> cq;
  Host host;
  BenchQueue admin;
  BenchQueue io;
  uint64_t turns = 0;

  void setup() {
    const auto config = bench_config(cfg);
    auto pl = transport::BufferPool::create(pool_options(config.limits));
    if (!pl) die("buffer pool: " + pl.error().message);
    pool = std::move(*pl);
    driver = std::make_unique<Driver>(cfg.driver, *pool);
    auto c = target::TargetCore::create(config, {&driver->core_reactor()});
    if (!c) die("target core: " + c.error().message);
    core = std::move(*c);
    // Larger than what can be outstanding (RECVs + READ and SEND completions: 3 x QD while running; a queue's
    // flushed RECVs at teardown); an overrun fails the run.
    uint32_t cq_entries = 64;
    while (cq_entries < std::max(3 * cfg.qd, cfg.queue_size + 32) + 32) cq_entries *= 2;
    cq = std::make_unique<FakeCq>(cq_entries);
    cq->host = &host;
    driver->core_reactor().add_poller(cq.get());  // like DeviceCq: registered when the listener starts

    const auto opts = rdma_options(config.limits);
    admin = make_queue(*cq, *pool, *core, opts, 0, 32, 0);
    uint16_t cid = 0;
    auto r = connect(*driver, *cq, *admin.qp, ++cid, 0, 31, p::kCntlidDynamic);
    if (!r.get_status().ok()) die(fmt::format("admin Connect failed: {}", p::status_name(r.get_status())));
    const uint16_t cntlid = p::connect_result_cntlid(r.dw0.get());
    const uint32_t cc = p::Cc{}.set_en(true).set_iosqes(6).set_iocqes(4).value;
    auto prop = p::to_sqe(p::make_property_set(++cid, p::property::cc, cc, false));
    prop.hdr.dptr = p::make_keyed_sgl(0, 0, 0);  // no data: a null keyed SGL, as the Linux host sends
    r = exchange(*driver, *cq, *admin.qp, prop, {});
    if (!r.get_status().ok()) die(fmt::format("Property Set CC failed: {}", p::status_name(r.get_status())));

    const auto entries = static_cast<uint16_t>(cfg.queue_size);
    io = make_queue(*cq, *pool, *core, opts, 1, entries, cntlid);
    r = connect(*driver, *cq, *io.qp, ++cid, 1, static_cast<uint16_t>(entries - 1), cntlid);
    if (!r.get_status().ok()) die(fmt::format("I/O queue Connect failed: {}", p::status_name(r.get_status())));
    if (cfg.bs > io.queue->sizing().in_capsule) {
      for (const auto& w : cfg.workloads)
        if (w == "write-icd")
          die(fmt::format("--bs {} is above the I/O queue's in-capsule size {}", cfg.bs, io.queue->sizing().in_capsule));
    }
  }

  p::Sqe command(Kind kind) const {
    const uint32_t blocks = cfg.bs / kBlockSize;
    const auto keyed = p::make_keyed_sgl(kHostAddr, cfg.bs, kHostKey, cfg.invalidate);
    switch (kind) {
      case Kind::read:
        return p::to_sqe(p::make_read(0, kNsid, 0, blocks, keyed));
      case Kind::write_keyed:
        return p::to_sqe(p::make_write(0, kNsid, 0, blocks, keyed));
      case Kind::write_in_capsule:
        return p::to_sqe(p::make_write(0, kNsid, 0, blocks, p::make_in_capsule_sgl(0, cfg.bs)));
    }
    return {};
  }

  // Runs `count` commands; returns CPU ns and wall ns.
  std::pair<uint64_t, uint64_t> run(Kind kind, uint64_t count) {
    io.qp->reset_counters();
    const uint32_t icd_len = kind == Kind::write_in_capsule ? cfg.bs : 0;
    const uint64_t lba_mask = (kNsBytes / kBlockSize - 1) & ~uint64_t{cfg.bs / kBlockSize - 1};
    const uint64_t limit = count * 64 + 1'000'000;  // turns before we call it a stall
    uint64_t n = 0;
    const auto wall0 = std::chrono::steady_clock::now();
    const uint64_t cpu0 = thread_cpu_ns();
    host.start(*io.qp, io.queue.get(), command(kind), icd_len, count, cfg.qd, lba_mask, cfg.bs / kBlockSize);
    while (!host.finished() && ++n < limit) driver->turn();
    const uint64_t cpu1 = thread_cpu_ns();
    const auto wall1 = std::chrono::steady_clock::now();
    host.stop();
    turns = n;
    for (int i = 0; i < 1000 && !cq->empty(); ++i) driver->turn();  // the last SEND completions
    if (!host.finished()) die(fmt::format("stalled after {} of {} commands ({} in flight)", host.completed(), count,
                                          host.outstanding()));
    if (io.qp->failed_cqes != 0) {
      die(fmt::format("{} commands failed (last status {})", io.qp->failed_cqes,
                      p::status_name(io.qp->last_cqe.get_status())));
    }
    if (host.starved) die("the host found no RECV posted");
    if (cq->overflows != 0) die("completion queue overrun");
    if (io.qp->unexpected_wrs != 0) die("unexpected work request opcode");
    if (io.queue->closing()) die("the queue closed");
    if (io.queue->core_held() != 0 || io.queue->sq_used() != 0) die("requests left in the queue after the run");
    return {cpu1 - cpu0, static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(wall1 - wall0).count())};
  }

  // One timed round of a workload, appended to its result.
  void round(const Workload& w, WorkloadResult& res) {
    const auto [cpu, wall] = run(w.kind, cfg.commands);
    res.ns_per_cmd.push_back(static_cast<double>(cpu) / static_cast<double>(cfg.commands));
    res.wall_ns_per_cmd.push_back(static_cast<double>(wall) / static_cast<double>(cfg.commands));
    const auto per = [&](uint64_t v) { return static_cast<double>(v) / static_cast<double>(cfg.commands); };
    res.rdma_writes = per(io.qp->rdma_writes);
    res.rdma_reads = per(io.qp->rdma_reads);
    res.sends = per(io.qp->sends);
    res.chains = per(io.qp->chains);
    res.turns = per(turns);
  }

  // Warm-up of every workload, then the rounds interleaved (read, write, write-icd, read, ...) so that
  // noise from the rest of the machine spreads over all of them.
  std::vector<WorkloadResult> measure(const std::vector<Workload>& workloads) {
    std::vector<WorkloadResult> results(workloads.size());
    for (std::size_t i = 0; i < workloads.size(); ++i) {
      results[i].name = workloads[i].name;
      if (cfg.warmup > 0) run(workloads[i].kind, cfg.warmup);
    }
    for (unsigned r = 0; r < cfg.rounds; ++r)
      for (std::size_t i = 0; i < workloads.size(); ++i) round(workloads[i], results[i]);
    for (auto& res : results) {
      res.median = median_of(res.ns_per_cmd);
      res.min = *std::min_element(res.ns_per_cmd.begin(), res.ns_per_cmd.end());
      res.wall_median = median_of(res.wall_ns_per_cmd);
    }
    return results;
  }

  // Close both queues the way a disconnect does and wait for the transport to free them.
  void teardown() {
    for (BenchQueue* b : {&io, &admin}) {
      b->queue->close("benchmark done");
      for (int i = 0; i < 100000 && !b->qp->destroyed; ++i) driver->turn();
      if (!b->qp->destroyed) die("a queue did not finish closing");
      b->queue.reset();
    }
    core.reset();
  }
};

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"CPU cost per command of the RDMA target path (RdmaTargetQueue + TargetCore + null backend) over fake verbs"};
  app.add_option("-n,--commands", cfg.commands, "commands per timed round")->check(CLI::Range(uint64_t{1000}, uint64_t{1} << 40));
  app.add_option("-r,--rounds", cfg.rounds, "timed rounds per workload (median and min reported)")->check(CLI::Range(1u, 1000u));
  app.add_option("--warmup", cfg.warmup, "untimed commands before the rounds of each workload");
  app.add_option("--qd", cfg.qd, "commands the host keeps in flight")->check(CLI::Range(1u, 1024u));
  app.add_option("--queue-size", cfg.queue_size, "I/O queue entries (HSQSIZE + 1)")->check(CLI::Range(2u, 1024u));
  app.add_option("--bs", cfg.bs, "bytes per command (a multiple of 4096)")->transform(CLI::AsSizeValue(false));
  app.add_option("--workloads", cfg.workloads, "read, write (keyed SGL, RDMA READ), write-icd (in-capsule data)")
      ->delimiter(',')
      ->check(CLI::IsMember({"read", "write", "write-icd"}));
  app.add_option("--driver", cfg.driver, "reactor: Reactor::run_once(false) per turn (the daemon); pollers: the "
                                          "CQ and backend pollers called directly")
      ->check(CLI::IsMember({"reactor", "pollers"}));
  app.add_flag("--invalidate", cfg.invalidate, "keyed SGL 0x4F (the CQE goes as SEND_WITH_INV)");
  app.add_flag("--json", cfg.json, "print the result as JSON");
  CLI11_PARSE(app, argc, argv);
  if (cfg.bs == 0 || cfg.bs % kBlockSize != 0 || cfg.bs > (1u << 20)) die("--bs must be a multiple of 4096, <= 1 MiB");
  if (cfg.qd > cfg.queue_size) die("--qd must not exceed --queue-size");
  spdlog::set_level(spdlog::level::warn);

  Bench bench;
  bench.cfg = cfg;
  bench.setup();
  std::vector<Workload> workloads;
  for (const auto& name : cfg.workloads) {
    const Kind kind = name == "read" ? Kind::read : name == "write" ? Kind::write_keyed : Kind::write_in_capsule;
    workloads.push_back(Workload{name, kind});
  }
  const auto results = bench.measure(workloads);
  bench.teardown();

  if (cfg.json) {
    nlohmann::json out;
    out["config"] = {{"commands", cfg.commands}, {"rounds", cfg.rounds},         {"warmup", cfg.warmup},
                     {"qd", cfg.qd},             {"queue_size", cfg.queue_size}, {"bs", cfg.bs},
                     {"driver", cfg.driver},     {"invalidate", cfg.invalidate}, {"backend", "null"}};
    out["results"] = nlohmann::json::array();
    for (const auto& r : results) {
      out["results"].push_back({{"workload", r.name},
                                {"ns_per_cmd_median", r.median},
                                {"ns_per_cmd_min", r.min},
                                {"cmds_per_s", 1e9 / r.median},
                                {"ns_per_cmd_rounds", r.ns_per_cmd},
                                {"wall_ns_per_cmd_median", r.wall_median},
                                {"per_cmd", {{"rdma_write_wrs", r.rdma_writes},
                                             {"rdma_read_wrs", r.rdma_reads},
                                             {"send_wrs", r.sends},
                                             {"post_send_calls", r.chains},
                                             {"reactor_turns", r.turns}}}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("RDMA target path over fake verbs, null backend: {} x {} commands per workload (+{} warm-up), "
             "QD {}, queue size {}, {} B, driver {}{}\n",
             cfg.rounds, cfg.commands, cfg.warmup, cfg.qd, cfg.queue_size, cfg.bs, cfg.driver,
             cfg.invalidate ? ", SGL 0x4F" : "");
  fmt::print("{:<10} {:>12} {:>10} {:>12} {:>10}   {}\n", "workload", "median ns", "min ns", "cmds/s", "wall ns",
             "per command: WRs (write/read/send), post_send calls, reactor turns");
  for (const auto& r : results) {
    fmt::print("{:<10} {:>12.1f} {:>10.1f} {:>12.0f} {:>10.1f}   {:.2f}/{:.2f}/{:.2f}, {:.2f}, {:.3f}\n", r.name,
               r.median, r.min, 1e9 / r.median, r.wall_median, r.rdma_writes, r.rdma_reads, r.sends, r.chains, r.turns);
  }
  fmt::print("rounds (CPU ns per command):\n");
  for (const auto& r : results) {
    std::string rounds;
    for (double v : r.ns_per_cmd) rounds += fmt::format(" {:.1f}", v);
    fmt::print("  {:<10}{}\n", r.name, rounds);
  }
  return 0;
}

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
// Property Set CC.EN = 1, then I/O queue Connect, all as capsules over RECV completions. Then each
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
// Reactors: --reactors N runs N reactor threads, each pinned to its own CPU (the i-th CPU the process may
// run on, so `taskset -c 1` still picks CPU 1, or the i-th of --cpus), each with what the daemon gives a
// reactor (transport::Reactor + ReactorAdapter + its own BufferPool, made on the main thread like
// target/daemon/daemon.cpp does; TargetCore::create gets all N, so it keeps one ReactorState per reactor) and its
// own fake CQ, host and QP. Queues are created on their reactor's thread, which is how the core assigns
// them to a reactor (TargetCore::on_queue_created -> CoreReactor::on_thread). --controllers shared
// (default): one controller (admin queue on reactor 0), I/O queue i + 1 on reactor i, as a Linux host
// spreads its I/O queues; per-reactor: each reactor has its own controller (admin queue + I/O queue 1);
// isolated: each reactor also has its own TargetCore (config, subsystem, null backend): nothing of the
// target is shared, the control for the other two (what is left is the machine's and the process's).
// With N > 1 every round of a workload runs first each reactor alone in turn (reactor 0, then 1, ...; the
// others idle, their queues connected: the "1 reactor" figure is then the same CPUs' as the N-reactor one,
// which matters on a VM whose vCPUs run at different speeds), then all N at once, the same --commands on
// each reactor every time: all start together (a spin barrier, not timed) and a reactor that is done keeps
// its host sending, untimed, until every reactor is done, so that each one's timed part runs with all the
// others busy. The point: N reactors with connections on all of them should cost what one costs per
// command (nothing shared on the data path: cache lines, locks, atomics). ratio = aggregate(N) /
// aggregate(1), from the medians over rounds; r(pair) = the median over rounds of each round's ratio (its
// runs ran back to back, which filters slow drifts of the machine). The goal is <= 1.10; above, look with
// `perf record -g` for atomics, locks and written-to shared structures. On a shared 2-vCPU VM the vCPUs'
// speed swings by up to 2x for seconds at a time (other tenants): many short rounds (-n 200000 -r 41),
// r(pair) and r(min) are the figures to trust, and --controllers isolated is the no-sharing control to
// compare with. Found there (2 vCPUs, 14 runs of 41 rounds per mode): r(pair) pooled 1.00-1.03 for
// per-reactor and isolated, 1.03-1.08 for shared (read the highest), r(min) 1.00-1.03 for all; perf finds
// no lock-prefixed instruction, libc/libstdc++/spdlog call or hot line on the data path (queue state is
// allocated on its reactor's thread; the Reactors and BufferPools made on the main thread share no written
// cache line; the shared Controller, Namespace and backend are only read).
//
// Turn: --driver reactor (default) is what the daemon does: transport::Reactor::run_once(false), which runs
// the pollers in registration order (the CQ first, as DeviceCq is added when the listener starts, then the
// core's ReactorState, added when the first I/O opens a backend channel), checks its message queue and
// timers, peeks its io_uring CQ ring and (nothing queued) makes no syscall. --driver pollers calls the
// same two pollers directly (no Reactor), to split out the loop's own cost.
//
// Measured: per reactor thread, CLOCK_THREAD_CPUTIME_ID around a loop that runs until --commands commands
// completed on that reactor (after --warmup commands of each workload on all reactors), --rounds rounds
// interleaved across workloads; ns per command = the thread's CPU delta / the commands it completed (a
// poll batch may end a few past --commands); with N reactors the aggregate is the sum of the threads' CPU
// over the sum of their commands. Median and min over rounds; commands/s = 1e9 / median (per CPU). "wall
// ns" is steady_clock over the same loop(s): above the CPU figure when something else ran on that CPU
// (then trust neither much; on a shared 2-vCPU VM rounds vary by +-30%).
// Included in that time: everything above, plus the fakes' own share (building ibv_wc entries in a small
// L1-resident ring, the host's 64-byte SQE store into the RECV buffer, copying the CQE out of the SEND's
// buffer to check its status): FakeCq::poll (with the host's refill inlined), FakeQp::post_send/post_recv,
// about 15% of perf samples. The host's SQE store takes the cache miss on the RECV buffer line (128 RECV
// buffers of 64 + 16 KiB each) that the target's parse would take on a real NIC's DMA write.
// NOT included: anything a real device costs the CPU: ibv_post_send/ibv_post_recv in the provider (WQE
// build, doorbell MMIO / BlueFlame write), ibv_poll_cq on a real CQ (reading the CQEs the NIC wrote, misses
// on them), completion-channel events and re-arming, the RDMA CM; the data (null never touches buffers, the
// fakes move no bytes, in-capsule data is not written); the backend's I/O (a file backend adds io_uring
// READ_FIXED/WRITE_FIXED submission and reaping, and syscalls); many queues per reactor.
// SPDK's ~730 ns per I/O is all-in on real NICs, so this figure is a lower bound for the daemon's.
//
// Usage (one reactor: pin it, the numbers are per CPU; the bench pins each reactor thread itself):
//   taskset -c 1 build/bench/rdma_queue_bench                       # 2,000,000 commands x 5 rounds each
//   taskset -c 1 build/bench/rdma_queue_bench -n 500000 -r 3 --json --workloads read,write
//   taskset -c 1 build/bench/rdma_queue_bench --driver pollers      # without the reactor loop
//   build/bench/rdma_queue_bench --reactors 2 -n 200000 -r 41       # 1 vs 2 reactors (CPUs 0 and 1), ratio
//   build/bench/rdma_queue_bench --reactors 2 -n 200000 -r 41 --controllers isolated   # the control
//   build/bench/rdma_queue_bench --reactors 2 --cpus 1,0 --controllers per-reactor
//   perf record -e cpu-clock -g -- taskset -c 1 build/bench/rdma_queue_bench -n 1000000 -r 1
// Options: -n/--commands (per reactor), -r/--rounds, --warmup, --qd, --queue-size, --bs (multiple of 4096;
// write-icd needs it <= the I/O in-capsule size, 16 KiB), --workloads (read,write,write-icd), --driver,
// --invalidate (SGL 0x4F: the CQE goes as SEND_WITH_INV), --reactors, --cpus, --controllers, --json.
// Exit status 1 if any command fails or a queue stalls.
#include <infiniband/verbs.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/fabrics.h"
#include "protocol/properties.h"
#include "protocol/rdma_cm.h"
#include "protocol/sgl.h"
#include "target/config/config.h"
#include "target/core/core.h"
#include "target/core/core_reactor.h"
#include "target/daemon/transport_options.h"
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
  unsigned reactors = 1;
  std::vector<int> cpus;  // reactor i runs on cpus[i]; empty: the i-th CPU of the process's affinity mask
  std::string controllers = "shared";  // shared: one controller, I/O queue i + 1 on reactor i; per-reactor;
                                       // isolated (a TargetCore per reactor)
};

[[noreturn]] void die(const std::string& what) {
  fmt::print(stderr, "rdma_queue_bench: {}\n", what);
  std::fflush(nullptr);
  std::_Exit(1);  // also from a reactor thread: no static destructors under the other threads' feet
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
// FIFO (the null backend has no fd to watch; nothing in this run sets a timer). Owned by the thread that
// called bind() last (the core picks a new queue's reactor with on_thread()); post() may come from any thread.
class LoopReactor final : public target::CoreReactor {
 public:
  explicit LoopReactor(const transport::BufferPool& pool) : region_(pool.region()) {}
  void bind() noexcept { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
  bool on_thread() const noexcept override { return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }
  void post(std::function<void()> fn) override {
    std::lock_guard lock(post_mu_);
    posted_.push_back(std::move(fn));
    has_posted_.store(true, std::memory_order_release);
  }
  uint64_t schedule(std::chrono::milliseconds, std::function<void()>) override { return ++timers_; }
  void cancel(uint64_t) override {}
  void add_poller(transport::Poller* poller) override { pollers_.push_back(poller); }
  void remove_poller(transport::Poller* poller) override { std::erase(pollers_, poller); }
  void watch_fd(int, transport::IoOp*) override {}
  void unwatch_fd(transport::IoOp*) override {}
  std::span<const iovec> registered_buffers() const noexcept override { return {&region_, 1}; }

  bool run_once() {
    bool work = false;
    if (has_posted_.load(std::memory_order_acquire)) {
      std::deque<std::function<void()>> run;
      {
        std::lock_guard lock(post_mu_);
        run.swap(posted_);
        has_posted_.store(false, std::memory_order_relaxed);
      }
      for (auto& fn : run) fn();
      work = true;
    }
    for (std::size_t i = 0; i < pollers_.size(); ++i) work = pollers_[i]->poll() || work;
    return work;
  }

 private:
  iovec region_;
  std::atomic<std::thread::id> owner_;
  std::atomic<bool> has_posted_{false};
  std::mutex post_mu_;
  std::deque<std::function<void()>> posted_;
  std::vector<transport::Poller*> pollers_;
  uint64_t timers_ = 0;
};

class Driver {
 public:
  Driver(const std::string& mode, const transport::BufferPool& pool, unsigned index) {
    if (mode == "reactor") {
      transport::ReactorOptions ro;
      ro.name = fmt::format("bench-reactor{}", index);
      auto r = transport::Reactor::create(ro);
      if (!r) die("cannot create a reactor: " + r.error().message);
      reactor_ = std::move(*r);
      // Not run here: the first run_once() binds the reactor (and its io_uring, a single-issuer ring: the
      // kernel refuses submissions from any other thread with EEXIST) to the calling thread, bind()'s.
      adapter_ = std::make_unique<target::ReactorAdapter>(*reactor_, &pool);
    } else {
      loop_ = std::make_unique<LoopReactor>(pool);
    }
  }
  // Makes the calling thread the reactor's (its queues are created and polled there). Once, first thing.
  void bind() {
    if (reactor_) {
      reactor_->run_once(false);
    } else {
      loop_->bind();
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
  c.reactors = cfg.reactors;
  return c;
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

// One reactor's share of one timed run.
struct LaneRun {
  uint64_t cpu_ns = 0;
  uint64_t wall_ns = 0;
  uint64_t commands = 0;  // completed in the timed loop
  uint64_t turns = 0;
  uint64_t rdma_writes = 0;
  uint64_t rdma_reads = 0;
  uint64_t sends = 0;
  uint64_t chains = 0;
};

// One reactor thread and what it owns. Aligned: lanes never share a cache line through the bench itself.
struct alignas(64) Lane {
  unsigned index = 0;
  int cpu = -1;
  uint16_t qid = 1;
  uint16_t cntlid = 0;  // of the controller whose admin queue is on this lane
  uint16_t next_cid = 0;
  std::unique_ptr<transport::BufferPool> pool;
  std::unique_ptr<Driver> driver;
  std::unique_ptr<FakeCq> cq;
  Host host;
  BenchQueue admin;  // empty unless this lane has a controller's admin queue
  BenchQueue io;
  LaneRun last;
  std::thread thread;
};

// What the lanes are told to do; lanes [first, first + lanes) take part.
enum class Op : uint8_t { connect_admin, connect_io, run, close_io, close_admin, exit };
struct Task {
  Op op = Op::exit;
  unsigned lanes = 0;
  unsigned first = 0;
  Kind kind = Kind::read;
  uint64_t count = 0;
};

// One workload at one reactor count: per round, the sum of the reactor threads' CPU over the sum of their
// commands, and each thread's own figure.
struct Series {
  std::vector<double> ns_per_cmd;
  std::vector<double> wall_ns_per_cmd;
  std::vector<std::vector<double>> lane_ns_per_cmd;  // [lane][round]
  double median = 0;
  double min = 0;
  double wall_median = 0;
  std::vector<double> lane_median;
  double rdma_writes = 0;  // WRs per command (last round)
  double rdma_reads = 0;
  double sends = 0;
  double chains = 0;
  double turns = 0;  // reactor turns per command
};

struct WorkloadResult {
  std::string name;
  Series multi;   // --reactors N at once (the only one when N = 1)
  Series single;  // N > 1: each reactor alone in turn, in the same rounds (lane_ns_per_cmd: each one's)
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<unsigned>(cpu), &set);
  if (const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); rc != 0)
    die(fmt::format("cannot pin a reactor thread to CPU {}: {}", cpu, std::strerror(rc)));
}

// The CPUs the reactors run on: --cpus, or the first N the process may run on.
std::vector<int> pick_cpus(const Config& cfg) {
  if (!cfg.cpus.empty()) {
    if (cfg.cpus.size() < cfg.reactors) die(fmt::format("--cpus lists {} CPUs for {} reactors", cfg.cpus.size(), cfg.reactors));
    std::vector<int> cpus(cfg.cpus.begin(), cfg.cpus.begin() + cfg.reactors);
    auto sorted = cpus;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      fmt::print(stderr, "rdma_queue_bench: warning: reactors share a CPU (--cpus): they take turns on it\n");
    return cpus;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) die(fmt::format("sched_getaffinity: {}", std::strerror(errno)));
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < cfg.reactors; ++c)
    if (CPU_ISSET(static_cast<unsigned>(c), &set)) cpus.push_back(c);
  if (cpus.size() < cfg.reactors)
    die(fmt::format("--reactors {}: the process may run on {} CPUs only (taskset?); name them with --cpus", cfg.reactors,
                    cpus.size()));
  return cpus;
}

struct Bench {
  Config cfg;
  target::TargetConfig config;
  std::vector<std::unique_ptr<Lane>> lanes;
  std::vector<std::unique_ptr<target::TargetCore>> cores;  // one; --controllers isolated: one per reactor

  // The lanes' orders: a task per generation; the main thread waits for the taking-part lanes to be done.
  std::mutex mu;
  std::condition_variable task_cv;
  std::condition_variable done_cv;
  uint64_t generation = 0;
  Task task;
  unsigned done = 0;
  alignas(64) std::atomic<unsigned> started{0};   // lanes at the start line of a timed run
  alignas(64) std::atomic<unsigned> finished{0};  // lanes past the end of their timed loop

  bool shared_controller() const noexcept { return cfg.controllers == "shared"; }
  bool isolated() const noexcept { return cfg.controllers == "isolated"; }
  unsigned admin_lanes() const noexcept { return shared_controller() ? 1u : cfg.reactors; }
  target::TargetCore& core_of(const Lane& l) noexcept { return *cores[isolated() ? l.index : 0]; }

  void setup() {
    config = bench_config(cfg);
    const auto cpus = pick_cpus(cfg);
    // Like the daemon (target/daemon/daemon.cpp): the reactors, their adapters and buffer pools are made on the main
    // thread; the core gets all of them.
    std::vector<target::CoreReactor*> reactors;
    for (unsigned i = 0; i < cfg.reactors; ++i) {
      auto lane = std::make_unique<Lane>();
      lane->index = i;
      lane->cpu = cpus[i];
      lane->qid = shared_controller() ? static_cast<uint16_t>(i + 1) : uint16_t{1};
      auto pl = transport::BufferPool::create(target::buffer_pool_options(config.limits));
      if (!pl) die("buffer pool: " + pl.error().message);
      lane->pool = std::move(*pl);
      lane->driver = std::make_unique<Driver>(cfg.driver, *lane->pool, i);
      reactors.push_back(&lane->driver->core_reactor());
      lanes.push_back(std::move(lane));
    }
    if (isolated()) {  // the control: nothing of the target shared between reactors
      auto one = config;
      one.reactors = 1;
      for (auto* r : reactors) {
        auto c = target::TargetCore::create(one, {r});
        if (!c) die("target core: " + c.error().message);
        cores.push_back(std::move(*c));
      }
    } else {
      auto c = target::TargetCore::create(config, reactors);
      if (!c) die("target core: " + c.error().message);
      cores.push_back(std::move(*c));
    }
    for (auto& lane : lanes) lane->thread = std::thread([this, l = lane.get()] { lane_main(*l); });

    run_task(Task{Op::connect_admin, admin_lanes(), 0});
    run_task(Task{Op::connect_io, cfg.reactors, 0});
    const uint32_t icd = lanes[0]->io.queue->sizing().in_capsule;
    if (cfg.bs > icd && std::find(cfg.workloads.begin(), cfg.workloads.end(), "write-icd") != cfg.workloads.end())
      die(fmt::format("--bs {} is above the I/O queue's in-capsule size {}", cfg.bs, icd));
  }

  // Main thread: hands `t` to the lanes and waits until those taking part are done.
  void run_task(const Task& t) {
    {
      std::lock_guard lock(mu);
      task = t;
      done = 0;
      started.store(0, std::memory_order_relaxed);
      finished.store(0, std::memory_order_relaxed);
      ++generation;
    }
    task_cv.notify_all();
    if (t.op == Op::exit) return;
    std::unique_lock lock(mu);
    done_cv.wait(lock, [&] { return done == t.lanes; });
  }

  void lane_main(Lane& l) {
    pthread_setname_np(pthread_self(), fmt::format("bench-r{}", l.index).c_str());  // for perf and top
    pin_to(l.cpu);
    l.driver->bind();
    // Larger than what can be outstanding (RECVs + READ and SEND completions: 3 x QD while running; a queue's
    // flushed RECVs at teardown); an overrun fails the run.
    uint32_t cq_entries = 64;
    while (cq_entries < std::max(3 * cfg.qd, cfg.queue_size + 32) + 32) cq_entries *= 2;
    l.cq = std::make_unique<FakeCq>(cq_entries);
    l.cq->host = &l.host;
    l.driver->core_reactor().add_poller(l.cq.get());  // like DeviceCq: registered when the listener starts
    uint64_t seen = 0;
    for (;;) {
      Task t;
      {
        std::unique_lock lock(mu);
        task_cv.wait(lock, [&] { return generation != seen; });
        seen = generation;
        t = task;
      }
      if (t.op == Op::exit) return;
      if (l.index < t.first || l.index >= t.first + t.lanes) continue;
      perform(l, t);
      {
        std::lock_guard lock(mu);
        ++done;
      }
      done_cv.notify_one();
    }
  }

  void perform(Lane& l, const Task& t) {
    switch (t.op) {
      case Op::connect_admin:
        connect_admin(l);
        break;
      case Op::connect_io:
        connect_io(l);
        break;
      case Op::run:
        l.last = run(l, t.kind, t.count, t.lanes);
        break;
      case Op::close_io:
        close_queue(l, l.io);
        break;
      case Op::close_admin:
        if (l.admin.queue) close_queue(l, l.admin);
        break;
      case Op::exit:
        break;
    }
  }

  void connect_admin(Lane& l) {
    const auto opts = target::rdma_target_options(config.limits);
    l.admin = make_queue(*l.cq, *l.pool, core_of(l), opts, 0, 32, 0);
    auto r = connect(*l.driver, *l.cq, *l.admin.qp, ++l.next_cid, 0, 31, p::kCntlidDynamic);
    if (!r.get_status().ok()) die(fmt::format("admin Connect failed: {}", p::status_name(r.get_status())));
    l.cntlid = p::connect_result_cntlid(r.dw0.get());
    const uint32_t cc = p::Cc{}.set_en(true).set_iosqes(6).set_iocqes(4).value;
    auto prop = p::to_sqe(p::make_property_set(++l.next_cid, p::property::cc, cc, false));
    prop.hdr.dptr = p::make_keyed_sgl(0, 0, 0);  // no data: a null keyed SGL, as the Linux host sends
    r = exchange(*l.driver, *l.cq, *l.admin.qp, prop, {});
    if (!r.get_status().ok()) die(fmt::format("Property Set CC failed: {}", p::status_name(r.get_status())));
  }

  void connect_io(Lane& l) {
    const auto opts = target::rdma_target_options(config.limits);
    // lanes[0]->cntlid was written by lane 0 in an earlier task (ordered by the task mutex).
    const uint16_t cntlid = shared_controller() ? lanes[0]->cntlid : l.cntlid;
    const auto entries = static_cast<uint16_t>(cfg.queue_size);
    l.io = make_queue(*l.cq, *l.pool, core_of(l), opts, l.qid, entries, cntlid);
    auto r = connect(*l.driver, *l.cq, *l.io.qp, ++l.next_cid, l.qid, static_cast<uint16_t>(entries - 1), cntlid);
    if (!r.get_status().ok())
      die(fmt::format("I/O queue {} Connect failed: {}", l.qid, p::status_name(r.get_status())));
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

  // On lane l's thread, one of `running` lanes: times `count` commands (a few more when the last poll batch
  // completes several), then keeps the host sending, untimed, until every lane has timed its share, and
  // drains the queue.
  LaneRun run(Lane& l, Kind kind, uint64_t count, unsigned running) {
    FakeQp& qp = *l.io.qp;
    FakeCq& cq = *l.cq;
    RdmaTargetQueue& queue = *l.io.queue;
    qp.reset_counters();
    const uint32_t icd_len = kind == Kind::write_in_capsule ? cfg.bs : 0;
    const uint64_t lba_mask = (kNsBytes / kBlockSize - 1) & ~uint64_t{cfg.bs / kBlockSize - 1};
    const uint64_t limit = count * 64 + 1'000'000;  // turns before we call it a stall
    constexpr uint64_t kEndless = ~uint64_t{0};     // the host sends until stop()
    const p::Sqe sqe = command(kind);
    started.fetch_add(1, std::memory_order_acq_rel);
    while (started.load(std::memory_order_acquire) < running) cpu_relax();

    uint64_t n = 0;
    const auto wall0 = std::chrono::steady_clock::now();
    const uint64_t cpu0 = thread_cpu_ns();
    l.host.start(qp, &queue, sqe, icd_len, kEndless, cfg.qd, lba_mask, cfg.bs / kBlockSize);
    while (l.host.completed() < count && ++n < limit) l.driver->turn();
    const uint64_t cpu1 = thread_cpu_ns();
    const auto wall1 = std::chrono::steady_clock::now();
    LaneRun out;
    out.cpu_ns = cpu1 - cpu0;
    out.wall_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(wall1 - wall0).count());
    out.commands = l.host.completed();
    out.turns = n;
    out.rdma_writes = qp.rdma_writes;
    out.rdma_reads = qp.rdma_reads;
    out.sends = qp.sends;
    out.chains = qp.chains;
    if (out.commands < count)
      die(fmt::format("reactor {}: stalled after {} of {} commands ({} in flight)", l.index, out.commands, count,
                      l.host.outstanding()));

    finished.fetch_add(1, std::memory_order_acq_rel);
    while (finished.load(std::memory_order_acquire) < running)
      for (int i = 0; i < 64; ++i) l.driver->turn();
    l.host.stop();
    for (int i = 0; i < 1'000'000 && (!cq.empty() || queue.sq_used() != 0 || queue.core_held() != 0); ++i)
      l.driver->turn();  // what was in flight when the host stopped
    if (qp.failed_cqes != 0) {
      die(fmt::format("{} commands failed (last status {})", qp.failed_cqes, p::status_name(qp.last_cqe.get_status())));
    }
    if (l.host.starved) die("the host found no RECV posted");
    if (cq.overflows != 0) die("completion queue overrun");
    if (qp.unexpected_wrs != 0) die("unexpected work request opcode");
    if (queue.closing()) die("the queue closed");
    if (queue.core_held() != 0 || queue.sq_used() != 0) die("requests left in the queue after the run");
    return out;
  }

  // Runs `count` commands on each of lanes [first, first + running) at once; their results.
  std::vector<LaneRun> run_lanes(Kind kind, uint64_t count, unsigned first, unsigned running) {
    run_task(Task{Op::run, running, first, kind, count});
    std::vector<LaneRun> out;
    for (unsigned i = first; i < first + running; ++i) out.push_back(lanes[i]->last);
    return out;
  }

  // Appends one round to `s`: runs[i] is lane i's.
  static void record(Series& s, const std::vector<LaneRun>& runs) {
    s.lane_ns_per_cmd.resize(runs.size());
    LaneRun sum;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const LaneRun& r = runs[i];
      s.lane_ns_per_cmd[i].push_back(static_cast<double>(r.cpu_ns) / static_cast<double>(r.commands));
      sum.cpu_ns += r.cpu_ns;
      sum.wall_ns += r.wall_ns;
      sum.commands += r.commands;
      sum.turns += r.turns;
      sum.rdma_writes += r.rdma_writes;
      sum.rdma_reads += r.rdma_reads;
      sum.sends += r.sends;
      sum.chains += r.chains;
    }
    const auto per = [&](uint64_t v) { return static_cast<double>(v) / static_cast<double>(sum.commands); };
    s.ns_per_cmd.push_back(per(sum.cpu_ns));
    s.wall_ns_per_cmd.push_back(per(sum.wall_ns));
    s.rdma_writes = per(sum.rdma_writes);
    s.rdma_reads = per(sum.rdma_reads);
    s.sends = per(sum.sends);
    s.chains = per(sum.chains);
    s.turns = per(sum.turns);
  }

  static void summarize(Series& s) {
    if (s.ns_per_cmd.empty()) return;
    s.median = median_of(s.ns_per_cmd);
    s.min = *std::min_element(s.ns_per_cmd.begin(), s.ns_per_cmd.end());
    s.wall_median = median_of(s.wall_ns_per_cmd);
    for (const auto& v : s.lane_ns_per_cmd) s.lane_median.push_back(median_of(v));
  }

  // Warm-up of every workload on every reactor, then the rounds interleaved (read, write, write-icd, read,
  // ...) so that noise from the rest of the machine spreads over all of them. With N > 1 reactors a round
  // of a workload is each reactor alone in turn (reactor 0, 1, ...: so that the one-reactor figure is the
  // same CPUs' as the N-reactor one, as vCPUs of a VM run at different speeds), then all N at once.
  std::vector<WorkloadResult> measure(const std::vector<Workload>& workloads) {
    const unsigned n = cfg.reactors;
    std::vector<WorkloadResult> results(workloads.size());
    for (std::size_t i = 0; i < workloads.size(); ++i) {
      results[i].name = workloads[i].name;
      if (cfg.warmup > 0) run_lanes(workloads[i].kind, cfg.warmup, 0, n);
    }
    for (unsigned r = 0; r < cfg.rounds; ++r) {
      for (std::size_t i = 0; i < workloads.size(); ++i) {
        const Kind kind = workloads[i].kind;
        if (n > 1) {
          std::vector<LaneRun> alone;
          for (unsigned l = 0; l < n; ++l) alone.push_back(run_lanes(kind, cfg.commands, l, 1).front());
          record(results[i].single, alone);
        }
        record(results[i].multi, run_lanes(kind, cfg.commands, 0, n));
      }
    }
    for (auto& res : results) {
      summarize(res.multi);
      summarize(res.single);
    }
    return results;
  }

  // On lane l's thread: close a queue the way a disconnect does and wait for the transport to free it.
  static void close_queue(Lane& l, BenchQueue& b) {
    b.queue->close("benchmark done");
    for (int i = 0; i < 100000 && !b.qp->destroyed; ++i) l.driver->turn();
    if (!b.qp->destroyed) die("a queue did not finish closing");
    b.queue.reset();
  }

  // I/O queues, then the admin queues, each on its reactor's thread; then the threads end and the core goes.
  void teardown() {
    run_task(Task{Op::close_io, cfg.reactors, 0});
    run_task(Task{Op::close_admin, admin_lanes(), 0});
    run_task(Task{Op::exit, cfg.reactors, 0});
    for (auto& l : lanes) l->thread.join();
    cores.clear();
  }
};

std::string join_list(const std::vector<double>& v, const char* fmt_one) {
  std::string out;
  for (double x : v) out += fmt::format(fmt::runtime(fmt_one), x);
  return out;
}

// Each reactor's median alone / with the others.
std::string lane_pairs(const WorkloadResult& r) {
  std::string out;
  for (std::size_t i = 0; i < r.multi.lane_median.size() && i < r.single.lane_median.size(); ++i)
    out += fmt::format(" {:.1f}/{:.1f}", r.single.lane_median[i], r.multi.lane_median[i]);
  return out;
}

// Per round: all reactors at once / each alone (run back to back).
std::vector<double> round_ratios(const WorkloadResult& r) {
  std::vector<double> out;
  for (std::size_t i = 0; i < r.multi.ns_per_cmd.size() && i < r.single.ns_per_cmd.size(); ++i)
    out.push_back(r.multi.ns_per_cmd[i] / r.single.ns_per_cmd[i]);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"CPU cost per command of the RDMA target path (RdmaTargetQueue + TargetCore + null backend) over fake verbs"};
  app.add_option("-n,--commands", cfg.commands, "commands per timed round (per reactor)")->check(CLI::Range(uint64_t{1000}, uint64_t{1} << 40));
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
  app.add_option("--reactors", cfg.reactors, "reactor threads, each pinned to its own CPU with its own queue; "
                                             "N > 1: each round runs 1 reactor, then N, and reports the ratio")
      ->check(CLI::Range(1u, 64u));
  app.add_option("--cpus", cfg.cpus, "CPU of each reactor (default: the first N CPUs the process may run on)")
      ->delimiter(',')
      ->check(CLI::Range(0, CPU_SETSIZE - 1));
  app.add_option("--controllers", cfg.controllers,
                 "shared: one controller, I/O queue i + 1 on reactor i; per-reactor: a controller (admin + I/O "
                 "queue) per reactor; isolated: also a TargetCore (subsystem, backend) per reactor, the control")
      ->check(CLI::IsMember({"shared", "per-reactor", "isolated"}));
  app.add_flag("--json", cfg.json, "print the result as JSON");
  CLI11_PARSE(app, argc, argv);
  if (cfg.bs == 0 || cfg.bs % kBlockSize != 0 || cfg.bs > (1u << 20)) die("--bs must be a multiple of 4096, <= 1 MiB");
  if (cfg.qd > cfg.queue_size) die("--qd must not exceed --queue-size");
  spdlog::set_level(spdlog::level::warn);

  Bench bench;
  bench.cfg = cfg;
  bench.setup();
  std::vector<int> cpus;
  for (const auto& l : bench.lanes) cpus.push_back(l->cpu);
  std::vector<Workload> workloads;
  for (const auto& name : cfg.workloads) {
    const Kind kind = name == "read" ? Kind::read : name == "write" ? Kind::write_keyed : Kind::write_in_capsule;
    workloads.push_back(Workload{name, kind});
  }
  const auto results = bench.measure(workloads);
  bench.teardown();
  const bool multi = cfg.reactors > 1;

  if (cfg.json) {
    nlohmann::json out;
    out["config"] = {{"commands", cfg.commands}, {"rounds", cfg.rounds},         {"warmup", cfg.warmup},
                     {"qd", cfg.qd},             {"queue_size", cfg.queue_size}, {"bs", cfg.bs},
                     {"driver", cfg.driver},     {"invalidate", cfg.invalidate}, {"backend", "null"},
                     {"reactors", cfg.reactors}, {"cpus", cpus},                 {"controllers", cfg.controllers}};
    out["results"] = nlohmann::json::array();
    for (const auto& r : results) {
      const Series& s = r.multi;
      nlohmann::json j = {{"workload", r.name},
                          {"ns_per_cmd_median", s.median},
                          {"ns_per_cmd_min", s.min},
                          {"cmds_per_s", 1e9 / s.median},
                          {"ns_per_cmd_rounds", s.ns_per_cmd},
                          {"wall_ns_per_cmd_median", s.wall_median},
                          {"per_cmd", {{"rdma_write_wrs", s.rdma_writes},
                                       {"rdma_read_wrs", s.rdma_reads},
                                       {"send_wrs", s.sends},
                                       {"post_send_calls", s.chains},
                                       {"reactor_turns", s.turns}}}};
      if (multi) {  // the figures above: all N reactors (sum of CPU / sum of commands)
        j["per_reactor_ns_per_cmd_median"] = s.lane_median;
        j["per_reactor_ns_per_cmd_rounds"] = s.lane_ns_per_cmd;
        j["one_reactor"] = {{"ns_per_cmd_median", r.single.median},  // each reactor alone in turn, summed
                            {"ns_per_cmd_min", r.single.min},
                            {"ns_per_cmd_rounds", r.single.ns_per_cmd},
                            {"wall_ns_per_cmd_median", r.single.wall_median},
                            {"per_reactor_ns_per_cmd_median", r.single.lane_median}};
        j["ratio_median"] = s.median / r.single.median;
        j["ratio_min"] = s.min / r.single.min;
        j["ratio_rounds"] = round_ratios(r);
        j["ratio_paired_median"] = median_of(round_ratios(r));
      }
      out["results"].push_back(std::move(j));
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("RDMA target path over fake verbs, null backend: {} x {} commands per workload{} (+{} warm-up), "
             "QD {}, queue size {}, {} B, driver {}{}\n",
             cfg.rounds, cfg.commands, multi ? " per reactor" : "", cfg.warmup, cfg.qd, cfg.queue_size, cfg.bs,
             cfg.driver, cfg.invalidate ? ", SGL 0x4F" : "");
  if (!multi) {
    fmt::print("{:<10} {:>12} {:>10} {:>12} {:>10}   {}\n", "workload", "median ns", "min ns", "cmds/s", "wall ns",
               "per command: WRs (write/read/send), post_send calls, reactor turns");
    for (const auto& r : results) {
      const Series& s = r.multi;
      fmt::print("{:<10} {:>12.1f} {:>10.1f} {:>12.0f} {:>10.1f}   {:.2f}/{:.2f}/{:.2f}, {:.2f}, {:.3f}\n", r.name,
                 s.median, s.min, 1e9 / s.median, s.wall_median, s.rdma_writes, s.rdma_reads, s.sends, s.chains,
                 s.turns);
    }
    fmt::print("rounds (CPU ns per command):\n");
    for (const auto& r : results) fmt::print("  {:<10}{}\n", r.name, join_list(r.multi.ns_per_cmd, " {:.1f}"));
    return 0;
  }
  std::string cpu_list;
  for (std::size_t i = 0; i < cpus.size(); ++i) cpu_list += fmt::format("{}{}", i == 0 ? "" : ",", cpus[i]);
  fmt::print("{} reactors on CPUs {}, {}; CPU ns per command (sum of the threads' CPU / sum of their commands):\n"
             "1 = each reactor alone in turn, {} = all at once; ratio = {} / 1\n",
             cfg.reactors, cpu_list,
             bench.shared_controller() ? "one controller, I/O queue i+1 on reactor i"
             : bench.isolated()        ? "a TargetCore and controller per reactor (isolated)"
                                       : "a controller per reactor",
             cfg.reactors, cfg.reactors);
  fmt::print("{:<10} {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}   {:>7} {:>7} {:>7}   {}\n", "workload", "1 median",
             "1 min", "1 wall", fmt::format("{} median", cfg.reactors), fmt::format("{} min", cfg.reactors),
             fmt::format("{} wall", cfg.reactors), "ratio", "r(min)", "r(pair)", "per reactor: alone/together (medians)");
  for (const auto& r : results) {
    fmt::print("{:<10} {:>9.1f} {:>9.1f} {:>9.1f}   {:>9.1f} {:>9.1f} {:>9.1f}   {:>7.3f} {:>7.3f} {:>7.3f}  {}\n",
               r.name, r.single.median, r.single.min, r.single.wall_median, r.multi.median, r.multi.min,
               r.multi.wall_median, r.multi.median / r.single.median, r.multi.min / r.single.min,
               median_of(round_ratios(r)), lane_pairs(r));
  }
  fmt::print("ratio = {0} median / 1 median, r(min) = {0} min / 1 min, r(pair) = median over rounds of the round's "
             "{0} / 1 (run back to back)\n",
             cfg.reactors);
  fmt::print("rounds (CPU ns per command, 1 reactor | {} reactors | ratio):\n", cfg.reactors);
  for (const auto& r : results) {
    fmt::print("  {:<10}{} |{} |{}\n", r.name, join_list(r.single.ns_per_cmd, " {:.1f}"),
               join_list(r.multi.ns_per_cmd, " {:.1f}"), join_list(round_ratios(r), " {:.3f}"));
  }
  return 0;
}

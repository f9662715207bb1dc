// What every host queue shares (the initiator's counterpart of target_queue_base.h): command slots and the
// free CID list (CID = slot index), the outstanding / completed counts, the first error that failed the
// queue, failing every outstanding command once, the in-capsule decision and poll()'s wait loop with
// HostQueueOptions::busy_poll. A transport (NVMe/TCP, RDMA) adds only how capsules, data and completions
// move, and how it sleeps until there is more to do.
//
// poll(): drive() the transport (send what is queued, receive, reap the CQ) until `min_completions`
// commands completed; when a round made no progress it keeps trying without sleeping until busy_poll has
// passed since the last progress, then wait()s (the socket, the completion channel, the wake fd) up to the
// timeout. busy_poll is a time, not a count of rounds: a benchmark trades CPU for latency, the CLI and the
// attach keep 0 (sleep at once).
//
// Static polymorphism (CRTP), as on the target side: the hooks are plain calls the compiler can inline.
// Derived must provide:
//   bool drive() noexcept            one non-blocking round; true if it made progress (bytes moved,
//                                    completions reaped). Sets the error (fail) itself.
//   int wait(Clock::time_point deadline) noexcept
//                                    nothing to do: sleep until there may be, or until `deadline`.
//                                    < 0 the queue failed (error set), 0 stop polling (the wake fd, or the
//                                    timeout), > 0 poll again (events, an arm: the loop checks the deadline)
//   bool io_open() const noexcept    the connection is up (else poll() returns -ENOTCONN)
//   protocol::Cqe failure_cqe(uint16_t cid, protocol::Status st) noexcept
//                                    the CQE an outstanding command completes with when the queue fails
//   void release_slot(uint16_t cid, Slot& s) noexcept
//                                    transport state of a slot going free (a per-command MR, the send list)
//   static constexpr bool kDriveWhileProgress
//                                    poll(0, ...) repeats drive() while it makes progress (TCP: a received
//                                    R2T queues data to send) instead of one round (RDMA: reap drains the CQ)
// Slot must have `HostCommand* cmd` and `bool active`.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "protocol/completion.h"
#include "protocol/sgl.h"
#include "protocol/status.h"
#include "transport/host_queue.h"

namespace rdmablk::transport {

using HostClock = std::chrono::steady_clock;

// Milliseconds from now to `deadline` for poll(2): 0 when past, clamped to an int.
inline int remaining_ms(HostClock::time_point deadline) noexcept {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - HostClock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

template <typename Derived, typename Slot>
class HostQueueBase : public HostQueue {
 public:
  using Clock = HostClock;

  int poll(unsigned min_completions, std::chrono::milliseconds timeout) noexcept final {
    if (error_ != 0) return -error_;
    if (!self().io_open()) return -ENOTCONN;
    const auto start = Clock::now();
    const auto deadline = start + timeout;
    auto spin_until = start + opts_.busy_poll;
    completed_ = 0;
    for (;;) {
      const bool progress = self().drive();
      if (error_ != 0) return -error_;
      if (min_completions != 0 && completed_ >= min_completions) break;
      if (min_completions == 0 && (!Derived::kDriveWhileProgress || !progress)) break;
      if (progress) {
        // Only a busy-polling queue needs the time here: the others read the clock just before sleeping.
        if (opts_.busy_poll.count() != 0) spin_until = Clock::now() + opts_.busy_poll;
        continue;
      }
      const auto now = Clock::now();
      if (now >= deadline) break;
      if (now < spin_until) continue;  // busy-poll: another non-blocking round instead of a sleep
      const int rc = self().wait(deadline);
      if (rc < 0) return -error_;
      if (rc == 0) break;  // the wake fd: the owner has other work
    }
    return static_cast<int>(completed_);
  }

  unsigned outstanding() const noexcept final { return outstanding_; }
  const TransportAddress& address() const noexcept final { return opts_.address; }

 protected:
  explicit HostQueueBase(const HostQueueOptions& opts) : opts_(opts), in_capsule_limit_(opts.in_capsule_limit) {}

  Derived& self() noexcept { return static_cast<Derived&>(*this); }

  // `count` slots; CIDs [0, usable) are handed out, lowest first.
  void init_slots(std::size_t count, std::size_t usable) {
    slots_.assign(count, Slot{});
    free_cids_.clear();
    free_cids_.reserve(count);
    for (std::size_t i = usable; i-- > 0;) free_cids_.push_back(static_cast<uint16_t>(i));
  }

  // The slot the next submit() gets, reset, its CID and SGL type put in the command. Only a later
  // activate() takes it off the free list (a transport may still refuse the command). Needs a free CID.
  uint16_t prepare_slot(HostCommand& cmd) noexcept { return prepare_slot_at(free_cids_.size() - 1, cmd); }

  // A fused pair's two slots (needs two free CIDs): activate(first) then activate(second) takes them.
  std::pair<uint16_t, uint16_t> prepare_pair(HostCommand& first, HostCommand& second) noexcept {
    const std::size_t n = free_cids_.size();
    return {prepare_slot_at(n - 1, first), prepare_slot_at(n - 2, second)};
  }

  // The command in prepare_slot()'s slot is on its way.
  Slot& activate(uint16_t cid, HostCommand& cmd) noexcept {
    free_cids_.pop_back();  // `cid` (prepare_pair: the first, then the second)
    Slot& s = slots_[cid];
    s.cmd = &cmd;
    s.active = true;
    ++outstanding_;
    return s;
  }

  uint16_t prepare_slot_at(std::size_t free_index, HostCommand& cmd) noexcept {
    const uint16_t cid = free_cids_[free_index];
    slots_[cid] = Slot{};
    cmd.sqe.hdr.cid.set(cid);
    cmd.sqe.hdr.set_psdt(protocol::Psdt::sgl_mptr_contiguous);
    return cid;
  }

  static bool moves_data(const HostCommand& cmd) noexcept {
    return cmd.direction != DataDirection::none && !cmd.data.empty();
  }
  // Write data short enough to go in the capsule (SGL 0x01, offset 0).
  bool fits_in_capsule(const HostCommand& cmd) const noexcept {
    return cmd.direction == DataDirection::host_to_controller && !cmd.data.empty() &&
           cmd.data.size() <= in_capsule_limit_;
  }

  // The command in slot `cid` is done: free the slot, then run the caller's callback (which may submit).
  void complete(uint16_t cid, const protocol::Cqe& cqe) noexcept {
    Slot& s = slots_[cid];
    HostCommand* cmd = s.cmd;
    self().release_slot(cid, s);
    s.active = false;
    s.cmd = nullptr;
    free_cids_.push_back(cid);
    --outstanding_;
    ++completed_;
    if (cmd != nullptr && cmd->on_complete != nullptr) cmd->on_complete(*cmd, cqe);
  }

  // The first error fails the queue: true if this is it (the caller then stops its I/O and calls
  // fail_outstanding).
  bool set_error(int err) noexcept {
    if (error_ != 0) return false;
    error_ = err != 0 ? err : EIO;
    return true;
  }

  // Every outstanding command completes once with `st` (retryable: another path or a reconnect may work).
  void fail_outstanding(protocol::Status st) noexcept {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (!slots_[i].active) continue;
      const auto cid = static_cast<uint16_t>(i);
      complete(cid, self().failure_cqe(cid, st));
    }
  }

  HostQueueOptions opts_;
  std::vector<Slot> slots_;
  std::vector<uint16_t> free_cids_;
  uint32_t in_capsule_limit_ = 0;
  unsigned outstanding_ = 0;
  unsigned completed_ = 0;  // by the current poll()
  int error_ = 0;
};

}  // namespace rdmablk::transport

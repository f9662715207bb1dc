// LBA range locks of one namespace, for the commands that must be atomic against every other write to their
// blocks from any queue, controller or reactor of this target: fused Compare and Write (the pair reads,
// compares and writes under a lock on its range).
//
// Writes pay almost nothing while no range is locked: begin_write() is one atomic add and one load on the
// namespace (no mutex), end_write() one atomic subtract. Once a lock is asked for, new writes take the slow
// path under the namespace's mutex: a write that overlaps a locked (or waiting) range waits for its release,
// the others go on and are tracked by range. A lock is granted when the writes that took the fast path
// before it was asked for have all ended (all of them: they are not tracked by range, and locks are rare)
// and no overlapping tracked write or earlier overlapping lock remains. Waiters are resumed in the order
// they came, by RangeWaiter::resume, from whatever thread released what they waited for: resume must only
// hand the waiter back to its own thread (CoreReactor::post).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace rdmablk::target {

struct RangeWaiter {
  uint64_t slba = 0;
  uint64_t nlb = 0;  // 0: none (never waits, never blocks a lock)
  void (*resume)(RangeWaiter& w) noexcept = nullptr;
  void* context = nullptr;  // the owner's (the request)
  // RangeLocks' own state.
  bool fast = false;     // a write counted on the fast path
  bool tracked = false;  // a write or lock in one of the lists
  bool granted = false;  // a lock that is held
};

class RangeLocks {
 public:
  RangeLocks() = default;
  RangeLocks(const RangeLocks&) = delete;
  RangeLocks& operator=(const RangeLocks&) = delete;

  // A write over w's range may start: true = go now; false = it waits, w.resume runs when it may go. Either
  // way end_write(w) follows when it has ended.
  bool begin_write(RangeWaiter& w) noexcept;
  void end_write(RangeWaiter& w) noexcept;

  // An exclusive lock over w's range: true = held now; false with w.tracked = w.resume runs once it is held;
  // false without it = no memory to wait (nothing to undo). unlock(w) releases it (also one still waiting).
  bool lock(RangeWaiter& w) noexcept;
  void unlock(RangeWaiter& w) noexcept;

  // Blocks the calling thread (never a reactor's: the writes may need it to end) until every write that
  // started before the call has ended, as a lock over the whole namespace is granted, then lets the lock go.
  // False when `limit` passed first (or no memory to wait): the writes may still be running.
  bool wait_out_writes(std::chrono::milliseconds limit) noexcept;

  // For tests and statistics.
  std::size_t locks_held() const;
  std::size_t locks_asked() const noexcept { return lockers_.load(); }  // held or waiting
  std::size_t writes_waiting() const;

 private:
  void grant_locked(const RangeWaiter* inline_waiter) noexcept;
  bool overlaps_lock_locked(const RangeWaiter& w, std::size_t before) const noexcept;

  std::atomic<uint32_t> lockers_{0};     // locks held or waiting
  std::atomic<uint64_t> fast_writes_{0};  // writes in flight that took the fast path
  mutable std::mutex mu_;
  std::vector<RangeWaiter*> locks_;           // held and waiting, in arrival order
  std::vector<RangeWaiter*> tracked_writes_;  // in flight, taken while a lock was asked for
  std::vector<RangeWaiter*> waiting_writes_;  // overlapping a lock, in arrival order
};

}  // namespace rdmablk::target

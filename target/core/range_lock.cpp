#include "target/core/range_lock.h"

#include <algorithm>
#include <condition_variable>

namespace rdmablk::target {

namespace {

// Ranges are checked against the namespace before they get here: slba + nlb does not overflow.
bool overlap(const RangeWaiter& a, const RangeWaiter& b) noexcept {
  return a.slba < b.slba + b.nlb && b.slba < a.slba + a.nlb;
}

void remove_one(std::vector<RangeWaiter*>& v, const RangeWaiter* w) noexcept {
  if (auto it = std::find(v.begin(), v.end(), w); it != v.end()) v.erase(it);
}

}  // namespace

bool RangeLocks::begin_write(RangeWaiter& w) noexcept {
  w.fast = w.tracked = false;
  if (w.nlb == 0) return true;
  // Dekker with lock(): each side announces itself, then looks at the other (sequentially consistent), so a
  // lock never misses a write that did not see it.
  fast_writes_.fetch_add(1);
  if (lockers_.load() == 0) {
    w.fast = true;
    return true;
  }
  std::lock_guard g(mu_);
  fast_writes_.fetch_sub(1);  // under mu_: the grant below sees it
  w.tracked = true;
  try {
    // Room for every waiting write to become a tracked one without allocating (unlock() is noexcept).
    tracked_writes_.reserve(tracked_writes_.size() + waiting_writes_.size() + 1);
    if (overlaps_lock_locked(w, locks_.size())) {
      waiting_writes_.push_back(&w);
      grant_locked(nullptr);
      return false;
    }
    tracked_writes_.push_back(&w);
  } catch (...) {
    // No memory for the list: the write goes on untracked, counted on the fast path again, which keeps
    // every lock waiting for it (correct, only slower).
    w.tracked = false;
    w.fast = true;
    fast_writes_.fetch_add(1);
    return true;
  }
  grant_locked(nullptr);
  return true;
}

void RangeLocks::end_write(RangeWaiter& w) noexcept {
  if (w.fast) {
    w.fast = false;
    if (fast_writes_.fetch_sub(1) == 1 && lockers_.load() != 0) {
      std::lock_guard g(mu_);
      grant_locked(nullptr);
    }
    return;
  }
  if (!w.tracked) return;
  std::lock_guard g(mu_);
  w.tracked = false;
  remove_one(tracked_writes_, &w);
  remove_one(waiting_writes_, &w);  // ended while waiting: its queue closed
  grant_locked(nullptr);
}

bool RangeLocks::lock(RangeWaiter& w) noexcept {
  std::lock_guard g(mu_);
  w.granted = false;
  try {
    locks_.push_back(&w);
  } catch (...) {
    return false;  // out of memory: not tracked, never granted
  }
  w.tracked = true;
  lockers_.fetch_add(1);
  grant_locked(&w);
  return w.granted;
}

void RangeLocks::unlock(RangeWaiter& w) noexcept {
  std::lock_guard g(mu_);
  if (!w.tracked) return;
  remove_one(locks_, &w);
  w.tracked = w.granted = false;
  lockers_.fetch_sub(1);
  // Writes that no longer overlap any lock go on, in the order they came.
  for (std::size_t i = 0; i < waiting_writes_.size();) {
    RangeWaiter& ww = *waiting_writes_[i];
    if (overlaps_lock_locked(ww, locks_.size())) {
      ++i;
      continue;
    }
    waiting_writes_.erase(waiting_writes_.begin() + static_cast<std::ptrdiff_t>(i));
    tracked_writes_.push_back(&ww);  // no allocation: begin_write() reserved its place
    ww.resume(ww);
  }
  grant_locked(nullptr);
}

bool RangeLocks::overlaps_lock_locked(const RangeWaiter& w, std::size_t before) const noexcept {
  for (std::size_t i = 0; i < before && i < locks_.size(); ++i)
    if (overlap(*locks_[i], w)) return true;
  return false;
}

void RangeLocks::grant_locked(const RangeWaiter* inline_waiter) noexcept {
  if (fast_writes_.load() != 0) return;  // writes from before the first lock was asked for are still out
  for (std::size_t i = 0; i < locks_.size(); ++i) {
    RangeWaiter& l = *locks_[i];
    if (l.granted) continue;
    if (overlaps_lock_locked(l, i)) continue;  // an earlier lock on these blocks goes first
    if (std::any_of(tracked_writes_.begin(), tracked_writes_.end(),
                    [&](const RangeWaiter* t) { return overlap(*t, l); }))
      continue;
    l.granted = true;
    if (&l != inline_waiter) l.resume(l);
  }
}

namespace {

// wait_out_writes()'s lock: resume runs under RangeLocks' mutex on the releasing thread.
struct BlockingWaiter {
  RangeWaiter w;
  std::mutex mu;
  std::condition_variable cv;
  bool granted = false;
};

void wake(RangeWaiter& w) noexcept {
  auto* b = static_cast<BlockingWaiter*>(w.context);
  std::lock_guard g(b->mu);
  b->granted = true;
  b->cv.notify_all();
}

}  // namespace

bool RangeLocks::wait_out_writes(std::chrono::milliseconds limit) noexcept {
  BlockingWaiter b;
  b.w.nlb = UINT64_MAX;  // every block
  b.w.context = &b;
  b.w.resume = &wake;
  bool granted = lock(b.w);
  if (!granted && b.w.tracked) {
    std::unique_lock g(b.mu);
    granted = b.cv.wait_for(g, limit, [&] { return b.granted; });
  }
  // Not under b.mu (wake takes it under mu_). Afterwards no wake can come: unlock took the waiter out under mu_.
  unlock(b.w);
  return granted;
}

std::size_t RangeLocks::locks_held() const {
  std::lock_guard g(mu_);
  return static_cast<std::size_t>(
      std::count_if(locks_.begin(), locks_.end(), [](const RangeWaiter* l) { return l->granted; }));
}

std::size_t RangeLocks::writes_waiting() const {
  std::lock_guard g(mu_);
  return waiting_writes_.size();
}

}  // namespace rdmablk::target

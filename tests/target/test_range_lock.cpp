// RangeLocks (target/core/range_lock.h): writes go on at once while nothing is locked; a lock waits for the
// writes already out and holds back the overlapping ones; waiters resume in order.
#include "target/core/range_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace rdmablk::target {
namespace {

struct Waiter : RangeWaiter {
  int resumed = 0;
  Waiter(uint64_t s, uint64_t n) {
    slba = s;
    nlb = n;
    resume = [](RangeWaiter& w) noexcept { ++static_cast<Waiter&>(w).resumed; };
  }
};

TEST(RangeLocks, WritesGoOnAtOnceWithoutLocks) {
  RangeLocks locks;
  Waiter a(0, 8), b(0, 8);
  EXPECT_TRUE(locks.begin_write(a));
  EXPECT_TRUE(locks.begin_write(b));
  EXPECT_TRUE(a.fast);
  locks.end_write(a);
  locks.end_write(b);
  Waiter l(0, 8);
  EXPECT_TRUE(locks.lock(l));  // nothing out: held at once
  locks.unlock(l);
}

TEST(RangeLocks, ALockWaitsForTheWritesAlreadyOut) {
  RangeLocks locks;
  Waiter w(100, 8);  // does not even overlap: fast writes are not tracked by range
  ASSERT_TRUE(locks.begin_write(w));
  Waiter l(0, 8);
  EXPECT_FALSE(locks.lock(l));
  EXPECT_TRUE(l.tracked);
  EXPECT_EQ(l.resumed, 0);
  locks.end_write(w);
  EXPECT_EQ(l.resumed, 1);
  EXPECT_EQ(locks.locks_held(), 1u);
  locks.unlock(l);
  EXPECT_EQ(locks.locks_held(), 0u);
}

TEST(RangeLocks, OverlappingWritesWaitForTheLockOthersGoOn) {
  RangeLocks locks;
  Waiter l(10, 10);
  ASSERT_TRUE(locks.lock(l));
  Waiter before(0, 10), inside(15, 1), after(20, 5), across(5, 10);
  EXPECT_TRUE(locks.begin_write(before));  // [0, 10) ends where the lock starts
  EXPECT_TRUE(locks.begin_write(after));
  EXPECT_FALSE(locks.begin_write(inside));
  EXPECT_FALSE(locks.begin_write(across));
  EXPECT_EQ(locks.writes_waiting(), 2u);
  locks.unlock(l);
  EXPECT_EQ(inside.resumed, 1);
  EXPECT_EQ(across.resumed, 1);
  EXPECT_EQ(locks.writes_waiting(), 0u);
  // A new lock over them waits for those tracked writes, and only for the overlapping ones.
  Waiter l2(15, 1);
  EXPECT_FALSE(locks.lock(l2));
  locks.end_write(before);
  locks.end_write(after);
  EXPECT_EQ(l2.resumed, 0);
  locks.end_write(across);
  EXPECT_EQ(l2.resumed, 0);
  locks.end_write(inside);
  EXPECT_EQ(l2.resumed, 1);
  locks.unlock(l2);
}

TEST(RangeLocks, OverlappingLocksAreGrantedInOrder) {
  RangeLocks locks;
  Waiter a(0, 10), b(5, 10), c(100, 1), d(9, 1);
  ASSERT_TRUE(locks.lock(a));
  EXPECT_FALSE(locks.lock(b));
  EXPECT_TRUE(locks.lock(c));   // no overlap with anything
  EXPECT_FALSE(locks.lock(d));  // overlaps a and b
  locks.unlock(a);
  EXPECT_EQ(b.resumed, 1);
  EXPECT_EQ(d.resumed, 0);  // b (before it, overlapping) holds now
  locks.unlock(b);
  EXPECT_EQ(d.resumed, 1);
  locks.unlock(c);
  locks.unlock(d);
  EXPECT_EQ(locks.locks_held(), 0u);
}

TEST(RangeLocks, AWriteEndingWhileWaitingLeavesNothingBehind) {
  RangeLocks locks;
  Waiter l(0, 10), w(0, 10);
  ASSERT_TRUE(locks.lock(l));
  ASSERT_FALSE(locks.begin_write(w));
  locks.end_write(w);  // its queue closed: it never ran
  EXPECT_EQ(locks.writes_waiting(), 0u);
  locks.unlock(l);
  EXPECT_EQ(w.resumed, 0);
}

// Writers on several threads and a locker: the locked range is never written while held. Each writer marks
// its range busy between begin_write and end_write; the lock holder checks no mark overlaps.
// A thread that is not a reactor waits for the writes already out (another gateway group member's Preempt and
// Abort, target/commands/reservations.cpp): it returns once they ended, and leaves no lock behind.
TEST(RangeLocks, WaitingOutWritesBlocksUntilTheyEnded) {
  RangeLocks locks;
  EXPECT_TRUE(locks.wait_out_writes(std::chrono::milliseconds(0))) << "nothing out: at once";
  Waiter w(100, 8);
  ASSERT_TRUE(locks.begin_write(w));
  std::atomic<bool> returned{false};
  std::atomic<bool> result{false};
  std::thread waiter([&] {
    result = locks.wait_out_writes(std::chrono::minutes(10));
    returned = true;
  });
  while (locks.locks_asked() == 0) std::this_thread::yield();
  EXPECT_FALSE(returned) << "returned while a write was out";
  locks.end_write(w);
  waiter.join();
  EXPECT_TRUE(result);
  EXPECT_EQ(locks.locks_asked(), 0u);
  Waiter next(0, 8);
  EXPECT_TRUE(locks.begin_write(next)) << "writes go on at once again";
  locks.end_write(next);
}

TEST(RangeLocks, WaitingOutWritesGivesUpAtItsLimitAndLeavesNothing) {
  RangeLocks locks;
  Waiter w(0, 8);
  ASSERT_TRUE(locks.begin_write(w));
  EXPECT_FALSE(locks.wait_out_writes(std::chrono::milliseconds(1)));
  EXPECT_EQ(locks.locks_asked(), 0u);
  Waiter next(0, 8);
  EXPECT_TRUE(locks.begin_write(next)) << "no lock left to hold writes back";
  locks.end_write(next);
  locks.end_write(w);
}

TEST(RangeLocks, NoWriteOverlapsAHeldLockAcrossThreads) {
  RangeLocks locks;
  std::atomic<int> in_range{0};  // writers inside [0, 4) right now
  std::atomic<bool> stop{false};
  std::atomic<int> violations{0};
  auto writer = [&](uint64_t slba) {
    while (!stop.load()) {
      std::atomic<bool> go{false};
      struct W : RangeWaiter {
        std::atomic<bool>* go;
      } w;
      w.slba = slba;
      w.nlb = 1;
      w.go = &go;
      w.resume = [](RangeWaiter& x) noexcept { static_cast<W&>(x).go->store(true); };
      if (!locks.begin_write(w))
        while (!go.load()) std::this_thread::yield();
      if (slba < 4) in_range.fetch_add(1);
      std::this_thread::yield();
      if (slba < 4) in_range.fetch_sub(1);
      locks.end_write(w);
    }
  };
  std::vector<std::thread> threads;
  for (uint64_t s : {0u, 2u, 3u, 8u}) threads.emplace_back(writer, s);
  for (int round = 0; round < 2000; ++round) {
    std::atomic<bool> held{false};
    struct L : RangeWaiter {
      std::atomic<bool>* held;
    } l;
    l.slba = 0;
    l.nlb = 4;
    l.held = &held;
    l.resume = [](RangeWaiter& x) noexcept { static_cast<L&>(x).held->store(true); };
    if (!locks.lock(l))
      while (!held.load()) std::this_thread::yield();
    for (int i = 0; i < 3; ++i) {
      if (in_range.load() != 0) violations.fetch_add(1);
      std::this_thread::yield();
    }
    locks.unlock(l);
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(locks.locks_held(), 0u);
  EXPECT_EQ(locks.writes_waiting(), 0u);
}

}  // namespace
}  // namespace rdmablk::target

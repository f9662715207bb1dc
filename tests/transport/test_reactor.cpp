#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "transport/reactor.h"

using namespace rdmablk::transport;
using namespace std::chrono_literals;

namespace {
// Tests of wake-ups pass a long max_sleep: a missed wake-up then hangs until the test's (30 s) deadline
// instead of costing the 1 s idle timeout, which no timing check could tell from a loaded machine's delays.
constexpr auto kLongSleep = 60s;

std::unique_ptr<Reactor> make_reactor(std::chrono::milliseconds max_sleep = ReactorOptions{}.max_sleep) {
  ReactorOptions o;
  o.name = "test-reactor";
  o.ring_entries = 64;
  o.max_sleep = max_sleep;
  auto r = Reactor::create(o);
  EXPECT_TRUE(r) << r.error().message;
  return std::move(*r);
}
}  // namespace

TEST(Reactor, PostRunsOnTheReactorThreadInOrder) {
  auto r = make_reactor();
  std::thread t([&] { r->run(); });
  std::vector<int> seen;
  std::atomic<bool> on_thread{true};
  for (int i = 0; i < 100; ++i) {
    r->post([&, i] {
      if (!r->on_reactor_thread()) on_thread = false;
      seen.push_back(i);
    });
  }
  std::atomic<bool> done{false};
  r->post([&] { done = true; });
  for (auto end = std::chrono::steady_clock::now() + 30s; !done && std::chrono::steady_clock::now() < end;)
    std::this_thread::sleep_for(2ms);
  r->stop();
  t.join();
  ASSERT_TRUE(done);
  EXPECT_TRUE(on_thread);
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_FALSE(r->on_reactor_thread());
}

TEST(Reactor, TimersFireInDeadlineOrderAndCancelWorks) {
  auto r = make_reactor();
  std::vector<int> order;
  std::atomic<bool> done{false};
  std::thread t([&] { r->run(); });
  r->post([&] {
    r->schedule(30ms, [&] { order.push_back(3); });
    r->schedule(10ms, [&] { order.push_back(1); });
    uint64_t id = r->schedule(20ms, [&] { order.push_back(99); });
    r->schedule(20ms, [&] { order.push_back(2); });
    r->cancel(id);
    r->schedule(50ms, [&] { done = true; });
  });
  auto start = std::chrono::steady_clock::now();
  while (!done && std::chrono::steady_clock::now() - start < 30s) std::this_thread::sleep_for(1ms);
  r->stop();
  t.join();
  ASSERT_TRUE(done);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
}

TEST(Reactor, IoOpCompletionCallsHookWithResult) {
  auto r = make_reactor();
  struct Op {
    IoOp op;
    int res = 1;
    int calls = 0;
  } op;
  op.op.fn = +[](IoOp* o, int res, uint32_t) noexcept {
    auto* x = reinterpret_cast<Op*>(o);
    x->res = res;
    ++x->calls;
  };
  io_uring_prep_nop(r->sqe_for(&op.op));
  for (int i = 0; i < 100 && op.calls == 0; ++i) r->run_once(true);
  EXPECT_EQ(op.calls, 1);
  EXPECT_EQ(op.res, 0);
  EXPECT_TRUE(r->on_reactor_thread());
}

TEST(Reactor, ManySqesBeyondRingSizeAllComplete) {
  auto r = make_reactor();  // 64 entries
  struct Op {
    IoOp op;
    int* count;
  };
  int count = 0;
  std::vector<Op> ops(500);
  for (auto& o : ops) {
    o.op.fn = +[](IoOp* p, int, uint32_t) noexcept { ++*reinterpret_cast<Op*>(p)->count; };
    o.count = &count;
    io_uring_prep_nop(r->sqe_for(&o.op));
  }
  for (int i = 0; i < 1000 && count < 500; ++i) r->run_once(false);
  EXPECT_EQ(count, 500);
}

TEST(Reactor, PollersRunUntilRemoved) {
  auto r = make_reactor();
  struct CountPoller : Poller {
    int n = 0;
    Reactor* r = nullptr;
    bool poll() noexcept override {
      if (++n == 5) r->remove_poller(this);
      return true;
    }
  } p;
  p.r = r.get();
  r->add_poller(&p);
  r->add_poller(&p);  // once only
  for (int i = 0; i < 20; ++i) r->run_once(false);
  EXPECT_EQ(p.n, 5);
}

TEST(Reactor, BlockingRunOnceWakesForPostAndStopFromAnotherThread) {
  ReactorOptions o;
  o.busy_poll = std::chrono::microseconds(0);
  o.max_sleep = kLongSleep;
  auto rr = Reactor::create(o);
  ASSERT_TRUE(rr);
  auto& r = *rr;
  std::atomic<bool> ran{false};
  std::thread t([&] { r->run(); });
  std::this_thread::sleep_for(20ms);  // let it go to sleep in io_uring_wait
  auto start = std::chrono::steady_clock::now();
  r->post([&] { ran = true; });
  while (!ran && std::chrono::steady_clock::now() - start < 30s) std::this_thread::sleep_for(100us);
  EXPECT_TRUE(ran) << "the post did not wake the reactor (its idle sleep is " << kLongSleep.count() << " s)";
  r->stop();
  t.join();
}

namespace {
// CPU time of a thread so far.
std::chrono::nanoseconds thread_cpu(pthread_t t) {
  clockid_t id;
  if (pthread_getcpuclockid(t, &id) != 0) return {};
  timespec ts{};
  clock_gettime(id, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

struct WatchCounter {
  IoOp op;
  int fd = -1;
  std::atomic<int> calls{0};
  int last_res = 0;
  bool consume = true;
};
void on_watch_counter(IoOp* op, int res, uint32_t) noexcept {
  auto* w = reinterpret_cast<WatchCounter*>(op);
  w->last_res = res;
  if (w->consume) {
    uint64_t v;
    (void)!::read(w->fd, &v, sizeof(v));
  }
  w->calls.fetch_add(1);
}
}  // namespace

TEST(Reactor, WatchedFdWakesASleepingReactorEachTimeUntilUnwatched) {
  auto r = make_reactor(kLongSleep);
  WatchCounter w;
  w.op.fn = &on_watch_counter;
  w.fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(w.fd, 0);
  r->post([&] { r->watch_fd(w.fd, &w.op); });
  std::thread t([&] { r->run(); });
  const auto cpu0 = thread_cpu(t.native_handle());
  for (int i = 1; i <= 3; ++i) {
    std::this_thread::sleep_for(200ms);  // the reactor is asleep by now
    EXPECT_EQ(w.calls.load(), i - 1);
    uint64_t one = 1;
    ASSERT_EQ(::write(w.fd, &one, sizeof(one)), 8);
    const auto deadline = std::chrono::steady_clock::now() + 30s;  // < the reactor's 60 s idle sleep
    while (w.calls.load() < i && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(w.calls.load(), i) << "wakeup " << i;
    EXPECT_EQ(w.last_res & POLLIN, POLLIN);
  }
  // Asleep between wakeups: a few ms of CPU over 600 ms, not a spinning core.
  EXPECT_LT(thread_cpu(t.native_handle()) - cpu0, 100ms);
  std::atomic<bool> unwatched{false};
  r->post([&] {
    r->unwatch_fd(&w.op);
    unwatched = true;
  });
  while (!unwatched) std::this_thread::sleep_for(1ms);
  uint64_t one = 1;
  ASSERT_EQ(::write(w.fd, &one, sizeof(one)), 8);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(w.calls.load(), 3);
  r->stop();
  t.join();
  ::close(w.fd);
}

TEST(Reactor, UnwatchFromItsOwnCallbackAndReuseTheOp) {
  auto r = make_reactor();
  WatchCounter w;
  w.fd = ::eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);  // readable at once
  w.consume = false;
  static Reactor* reactor;
  reactor = r.get();
  w.op.fn = [](IoOp* op, int res, uint32_t flags) noexcept {
    on_watch_counter(op, res, flags);
    reactor->unwatch_fd(op);  // still readable: without the unwatch it would fire again and again
  };
  r->watch_fd(w.fd, &w.op);
  for (int i = 0; i < 50; ++i) r->run_once(false);
  EXPECT_EQ(w.calls.load(), 1);
  r->watch_fd(w.fd, &w.op);  // the same op again
  for (int i = 0; i < 50; ++i) r->run_once(false);
  EXPECT_EQ(w.calls.load(), 2);
  ::close(w.fd);
}

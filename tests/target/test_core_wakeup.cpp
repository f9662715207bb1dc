// The target core on a real transport::Reactor with a file namespace: while backend I/O is in flight the
// reactor sleeps (no busy loop burning a CPU), and the backend queue's event_fd() wakes it when the
// completion is due.
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "backend/backend.h"
#include "target/core_test_util.h"
#include "transport/reactor.h"

namespace rdmablk::target::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::chrono::nanoseconds thread_cpu(pthread_t t) {
  clockid_t id;
  if (pthread_getcpuclockid(t, &id) != 0) return {};
  timespec ts{};
  clock_gettime(id, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// A slow disk: the real file queue does the I/O, but its completions become visible (reap, event_fd) only
// `latency` after the submission.
class SlowQueue final : public backend::Queue {
 public:
  SlowQueue(std::unique_ptr<backend::Queue> inner, std::chrono::milliseconds latency)
      : inner_(std::move(inner)), latency_(latency), efd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    timer_ = std::thread([this] {
      std::unique_lock lock(mu_);
      for (;;) {
        cv_.wait(lock, [this] { return stop_ || armed_; });
        if (stop_) return;
        const auto due = due_;
        if (cv_.wait_until(lock, due, [this] { return stop_; })) return;
        armed_ = false;
        uint64_t one = 1;
        (void)!::write(efd_, &one, sizeof(one));
      }
    });
  }
  ~SlowQueue() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    timer_.join();
    ::close(efd_);
  }
  backend::Status submit(const backend::Request& req) noexcept override {
    const auto s = inner_->submit(req);
    if (s.ok()) {
      std::lock_guard lock(mu_);
      due_ = Clock::now() + latency_;
      armed_ = true;
      cv_.notify_all();
    }
    return s;
  }
  int flush() noexcept override { return inner_->flush(); }
  unsigned reap(std::span<backend::Completion> out, unsigned min_complete) noexcept override {
    {
      std::lock_guard lock(mu_);
      if (armed_ || Clock::now() < due_) {
        inner_->flush();  // the I/O itself starts now
        return 0;
      }
    }
    return inner_->reap(out, min_complete);
  }
  unsigned in_flight() const noexcept override { return inner_->in_flight(); }
  int event_fd() const noexcept override { return efd_; }
  void clear_event() noexcept override {
    uint64_t v;
    (void)!::read(efd_, &v, sizeof(v));
  }

 private:
  std::unique_ptr<backend::Queue> inner_;
  std::chrono::milliseconds latency_;
  int efd_;
  std::mutex mu_;
  std::condition_variable cv_;
  Clock::time_point due_{};
  bool armed_ = false;
  bool stop_ = false;
  std::thread timer_;
};

class SlowBackend final : public backend::Backend {
 public:
  SlowBackend(std::unique_ptr<backend::Backend> inner, std::chrono::milliseconds latency)
      : inner_(std::move(inner)), latency_(latency) {}
  const backend::Geometry& geometry() const noexcept override { return inner_->geometry(); }
  std::string describe() const override { return "slow " + inner_->describe(); }
  Result<std::unique_ptr<backend::Queue>> open_queue(const backend::QueueOptions& opts) const override {
    auto q = inner_->open_queue(opts);
    if (!q) return tl::unexpected(q.error());
    return std::unique_ptr<backend::Queue>(new SlowQueue(std::move(*q), latency_));
  }

 private:
  std::unique_ptr<backend::Backend> inner_;
  std::chrono::milliseconds latency_;
};

class CoreWakeup : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rdmablk-wakeup-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    spdlog::set_level(spdlog::level::err);
  }
  void TearDown() override {
    set_backend_wrapper({});
    fs::remove_all(dir_);
  }

  TargetConfig file_config() {
    return test_config_with_file_ns((dir_ / "ns5.img").string(), /*direct=*/false);
  }

  fs::path dir_;
};

// Runs fn on the reactor thread and waits for it.
template <typename Fn>
auto on_reactor(transport::Reactor& r, Fn fn) {
  std::packaged_task<decltype(fn())()> task(std::move(fn));
  auto f = task.get_future();
  r.post([&task] { task(); });
  return f.get();
}

// Waits for command `cid` without waking the reactor: only the queue's completion counter (an atomic) is
// watched, so the reactor sleeps until the backend's event fd wakes it; the result is then read on it.
Completed wait_for(transport::Reactor& r, FakeTargetQueue& q, uint16_t cid, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  unsigned seen = ~0u;
  for (;;) {
    const unsigned n = q.completed_count.load(std::memory_order_acquire);
    if (n != seen) {
      seen = n;
      auto c = on_reactor(r, [&] { return q.result(cid); });
      if (c) return *c;
    }
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "command " << cid << " did not complete within " << limit.count() << " ms";
      return {};
    }
    std::this_thread::sleep_for(1ms);
  }
}

// The reactors here sleep up to 60 s when idle: a completion that fails to wake them hangs past the tests'
// 30 s waits instead of showing up 1 s late, which no timing check could tell from a loaded machine's delays.
constexpr auto kIdleSleep = 60s;
constexpr auto kWait = 30s;

TEST_F(CoreWakeup, ReactorSleepsWhileAFileReadIsInFlightAndWakesForItsCompletion) {
  constexpr auto kLatency = 400ms;
  set_backend_wrapper([&](std::unique_ptr<backend::Backend> b) -> std::unique_ptr<backend::Backend> {
    return std::make_unique<SlowBackend>(std::move(b), kLatency);
  });
  transport::ReactorOptions ro;
  ro.name = "wakeup-test";
  ro.max_sleep = kIdleSleep;
  auto reactor = transport::Reactor::create(ro);
  ASSERT_TRUE(reactor) << reactor.error().message;
  transport::Reactor& r = **reactor;
  ReactorAdapter adapter(r);
  auto core = TargetCore::create(file_config(), {&adapter});
  ASSERT_TRUE(core) << core.error().message;
  std::thread t([&] { r.run(); });

  // Bring-up on the reactor thread (the fake queue is driven from there, as a transport would).
  std::unique_ptr<FakeTargetQueue> admin, io;
  uint16_t cid = 0;
  auto connect = [&](FakeTargetQueue& q, uint16_t qid, uint16_t cntlid) {
    auto data = p::make_connect_data(kHostId1, cntlid, kSub1, kHost1);
    std::vector<uint8_t> bytes(sizeof(data));
    std::memcpy(bytes.data(), &data, sizeof(data));
    q.submit(sqe_of(p::make_connect(++cid, qid, 31, 0, 0, p::make_in_capsule_sgl(0, p::kConnectDataSize))), bytes);
    return q.result(cid).value_or(Completed{});
  };
  const uint16_t cntlid = on_reactor(r, [&] {
    admin = std::make_unique<FakeTargetQueue>(**core, transport::TransportType::tcp, "10.0.0.1", 4420);
    const auto c = connect(*admin, 0, p::kCntlidDynamic);
    admin->submit(sqe_of(p::make_property_set(++cid, p::property::cc, CoreHarness::good_cc(), false)));
    return p::connect_result_cntlid(c.dw0());
  });
  ASSERT_TRUE(on_reactor(r, [&] {
    io = std::make_unique<FakeTargetQueue>(**core, transport::TransportType::tcp, "10.0.0.1", 4420);
    return connect(*io, 1, cntlid).status().ok();
  }));

  // A write then a read of the file, each "on the disk" for kLatency.
  const auto data = pattern(4096, 9);
  for (bool write : {true, false}) {
    std::this_thread::sleep_for(50ms);  // let the reactor go idle
    const auto cpu0 = thread_cpu(t.native_handle());
    const auto t0 = Clock::now();
    const uint16_t this_cid = on_reactor(r, [&] {
      const uint16_t c = ++cid;
      if (write) {
        io->submit(sqe_of(p::make_write(c, 5, 8, 8, p::make_transport_sgl(4096))), data);
      } else {
        io->submit(sqe_of(p::make_read(c, 5, 8, 8, p::make_transport_sgl(4096))));
      }
      return c;
    });
    const Completed done = wait_for(r, *io, this_cid, kWait);
    const auto elapsed = Clock::now() - t0;
    const auto cpu = thread_cpu(t.native_handle()) - cpu0;
    ASSERT_TRUE(done.status().ok()) << p::status_name(done.status());
    if (!write) {
      EXPECT_EQ(done.data, data);
    }
    EXPECT_GE(elapsed, kLatency);
    // Woken by the event fd (wait_for ended before kIdleSleep): the reactor's idle timeout did not do it.
    // Asleep meanwhile: a spinning reactor would burn most of kLatency.
    EXPECT_LT(cpu, 60ms) << (write ? "write" : "read") << " in flight for "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms";
  }

  on_reactor(r, [&] {
    io->close("test over");
    admin->close("test over");
    return 0;
  });
  r.stop();
  t.join();
  core->reset();
}

// The file backend's event_fd() must wake an io_uring poll armed before the I/O was submitted (with a
// DEFER_TASKRUN ring, the ring's own fd only polls readable once its owner enters the kernel).
TEST_F(CoreWakeup, FileQueueEventFdWakesAWatchArmedBeforeTheIo) {
  backend::FileOptions fo;
  fo.path = (dir_ / "ev.img").string();
  fo.size = 1 << 20;
  fo.direct = false;
  auto b = backend::open_file_backend(fo);
  ASSERT_TRUE(b) << b.error().message;
  transport::ReactorOptions ro;
  ro.name = "evfd-test";
  ro.max_sleep = kIdleSleep;
  auto reactor = transport::Reactor::create(ro);
  ASSERT_TRUE(reactor);
  transport::Reactor& r = **reactor;
  auto q = (*b)->open_queue({.depth = 8, .buffers = {}});
  ASSERT_TRUE(q) << q.error().message;
  struct Watch {
    transport::IoOp op;
    backend::Queue* queue;
    int calls = 0;
  } w{};
  w.queue = q->get();
  w.op.fn = [](transport::IoOp* op, int, uint32_t) noexcept {
    auto* self = reinterpret_cast<Watch*>(op);
    ++self->calls;
    self->queue->clear_event();
  };
  r.watch_fd((*q)->event_fd(), &w.op);
  for (int i = 0; i < 10; ++i) r.run_once(false);  // the poll is in the kernel, nothing ready
  EXPECT_EQ(w.calls, 0);
  std::vector<uint8_t> buf(4096);
  backend::Request req;
  req.op = backend::Op::read;
  req.slba = 0;
  req.nlb = 8;
  req.buf = buf.data();
  req.user_data = 42;
  ASSERT_TRUE((*q)->submit(req).ok());
  ASSERT_GE((*q)->flush(), 1);
  const auto t0 = Clock::now();
  while (w.calls == 0 && Clock::now() - t0 < kWait) r.run_once(true);  // sleeps up to kIdleSleep per call
  EXPECT_EQ(w.calls, 1);
  EXPECT_LT(Clock::now() - t0, kWait) << "woken by the " << kIdleSleep.count() << " s idle timeout, not the event fd";
  backend::Completion c[2];
  EXPECT_EQ((*q)->reap(c, 0), 1u);
  EXPECT_EQ(c[0].user_data, 42u);
  r.unwatch_fd(&w.op);
  for (int i = 0; i < 10; ++i) r.run_once(false);
}

}  // namespace
}  // namespace rdmablk::target::testing

// Our host queue against our TcpListener + a RAM core, over 127.0.0.1.
#include "tcp_test_util.h"

#include "transport/tcp/tcp_host.h"

#include <future>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

using namespace tcptest;

namespace {

std::unique_ptr<HostQueue> connect(const TargetFixture& f, uint32_t icd = 8192, bool hd = false, bool dd = false) {
  auto q = connect_host_queue(f.host_options(icd, hd, dd));
  EXPECT_TRUE(q) << (q ? "" : q.error().message);
  return q ? std::move(*q) : nullptr;
}


}  // namespace

TEST(TcpLoopback, InCapsuleWriteThenRead) {
  TargetFixture f;
  auto q = connect(f);
  ASSERT_TRUE(q);
  write_read_verify(*q, 0, 4096, 1);
  EXPECT_TRUE(std::equal(f.handler.ram.begin(), f.handler.ram.begin() + 4096, pattern(4096, 1).begin()));
  q.reset();
}

TEST(TcpLoopback, InCapsuleFlagReachesTheCore) {
  TargetFixture f;
  auto q = connect(f);
  ASSERT_TRUE(q);
  // A non-read/write command with in-capsule data (opcode 0x09 dataset management: host -> controller).
  std::vector<uint8_t> buf(1024, 7);
  Io io;
  io.cmd.sqe.hdr = p::make_header(0x09, 0, 1);
  io.cmd.direction = DataDirection::host_to_controller;
  io.cmd.data = buf;
  io.cmd.on_complete = &on_io_complete;
  io.cmd.context = &io;
  ASSERT_EQ(run_one(*q, io), p::status::success);
  EXPECT_TRUE(f.handler.last_in_capsule);
  EXPECT_EQ(f.handler.last_length, 1024u);
}

TEST(TcpLoopback, WriteLargerThanInCapsuleUsesSeveralR2Ts) {
  tcp::TcpTargetOptions o;
  o.maxh2cdata = 64 * 1024;
  TargetFixture f(o);
  auto q = connect(f);
  ASSERT_TRUE(q);
  write_read_verify(*q, 16, 300 * 1024, 2);  // 5 R2T windows of <= 64 KiB
}

TEST(TcpLoopback, ZeroInCapsuleLimitSendsEveryWriteByR2T) {
  TargetFixture f;
  auto q = connect(f, 0);
  ASSERT_TRUE(q);
  write_read_verify(*q, 8, 512, 3);
  write_read_verify(*q, 8, 8192, 4);
}

TEST(TcpLoopback, LargeReadIsSplitIntoSeveralC2HData) {
  tcp::TcpTargetOptions o;
  o.max_c2h_data = 16 * 1024;
  TargetFixture f(o);
  auto q = connect(f);
  ASSERT_TRUE(q);
  write_read_verify(*q, 100, 1000 * 1024, 5);  // ~63 C2HData PDUs, more than one send batch
}

TEST(TcpLoopback, HeaderAndDataDigests) {
  tcp::TcpTargetOptions o;
  o.maxh2cdata = 32 * 1024;
  o.max_c2h_data = 24 * 1024;
  TargetFixture f(o);
  for (int mode = 1; mode <= 3; ++mode) {
    auto q = connect(f, 8192, (mode & 1) != 0, (mode & 2) != 0);
    ASSERT_TRUE(q);
    write_read_verify(*q, 0, 4096, 10 + mode);        // in capsule
    write_read_verify(*q, 64, 200 * 1024, 20 + mode);  // R2T + split reads
  }
}

TEST(TcpLoopback, QueueDepth32RandomMixIsVerified) {
  TargetFixture f;
  auto q = connect(f);
  ASSERT_TRUE(q);
  constexpr int kSlots = 32;
  constexpr std::size_t kRegion = 64 * 1024;  // each slot owns a region
  std::vector<std::vector<uint8_t>> model(kSlots, std::vector<uint8_t>(kRegion, 0));
  std::vector<std::vector<uint8_t>> bufs(kSlots);
  std::vector<Io> ios(kSlots);
  std::vector<bool> was_write(kSlots);
  uint32_t rnd = 12345;
  auto next = [&] {
    rnd = rnd * 1103515245 + 12345;
    return rnd >> 8;
  };
  auto issue = [&](int i) {
    const std::size_t sizes[] = {512, 4096, 8192, 16384, 65536};
    std::size_t len = sizes[next() % 5];
    std::size_t off = (next() % ((kRegion - len) / kBlock + 1)) * kBlock;
    uint64_t lba = (i * kRegion + off) / kBlock;
    was_write[i] = next() % 2 == 0;
    if (was_write[i]) {
      bufs[i] = pattern(len, next());
      std::copy(bufs[i].begin(), bufs[i].end(), model[i].begin() + static_cast<long>(off));
    } else {
      bufs[i].assign(len, 0xEE);
    }
    prep_rw(ios[i], was_write[i], lba, bufs[i]);
    ios[i].cmd.context = &ios[i];
    // Remember where it goes for the check.
    ios[i].cqe.dw0.set(static_cast<uint32_t>(off));
    ASSERT_TRUE(q->submit(ios[i].cmd).ok());
  };
  // Keep 32 in flight for 2000 commands; reads are checked against the model of their region.
  std::vector<uint32_t> offs(kSlots);
  for (int i = 0; i < kSlots; ++i) {
    issue(i);
    offs[i] = ios[i].cqe.dw0.get();
  }
  int done = 0;
  auto end = std::chrono::steady_clock::now() + 120s;  // ~1 s unloaded
  while (done < 2000 && std::chrono::steady_clock::now() < end) {
    int rc = q->poll(1, 100ms);
    ASSERT_GE(rc, 0);
    for (int i = 0; i < kSlots; ++i) {
      if (!ios[i].done) continue;
      ASSERT_EQ(ios[i].cqe.get_status(), p::status::success);
      if (!was_write[i]) {
        ASSERT_TRUE(std::equal(bufs[i].begin(), bufs[i].end(), model[i].begin() + offs[i])) << "slot " << i;
      }
      ++done;
      issue(i);
      offs[i] = ios[i].cqe.dw0.get();
    }
    EXPECT_LE(q->outstanding(), static_cast<unsigned>(kSlots));
  }
  EXPECT_GE(done, 2000);
  while (q->outstanding() != 0 && q->poll(1, 100ms) >= 0) {
  }
}

TEST(TcpLoopback, ConnectionsSpreadOverReactorsRoundRobin) {
  TargetFixture f({}, 2);
  std::vector<std::unique_ptr<HostQueue>> qs;
  for (int i = 0; i < 4; ++i) {
    qs.push_back(connect(f));
    ASSERT_TRUE(qs.back());
  }
  for (int i = 0; i < 4; ++i) write_read_verify(*qs[i], static_cast<uint64_t>(i) * 64, 8192 * 2, 40 + i);
  EXPECT_EQ(f.handler.created, 4);
  qs.clear();
  EXPECT_TRUE(wait_until([&] { return f.handler.closed == 4; }));
}

TEST(TcpLoopback, PoolExhaustionMakesCommandsWaitNotFail) {
  BufferPoolOptions po;
  po.small_size = 4096;
  po.small_count = 2;
  po.large_size = 64 * 1024;
  po.large_count = 1;
  TargetFixture f({}, 1, po);
  auto q = connect(f);
  ASSERT_TRUE(q);
  // 16 concurrent 16 KiB reads and 4 KiB in-capsule writes on 3 buffers.
  std::vector<std::vector<uint8_t>> bufs(16);
  std::vector<Io> ios(16);
  for (int i = 0; i < 16; ++i) {
    bool w = i % 2 == 0;
    bufs[i] = w ? pattern(4096, 100 + i) : std::vector<uint8_t>(16384);
    prep_rw(ios[i], w, static_cast<uint64_t>(i) * 64, bufs[i]);
    ASSERT_TRUE(q->submit(ios[i].cmd).ok());
  }
  auto end = std::chrono::steady_clock::now() + 30s;
  while (q->outstanding() != 0 && std::chrono::steady_clock::now() < end) ASSERT_GE(q->poll(1, 100ms), 0);
  for (auto& io : ios) {
    ASSERT_TRUE(io.done);
    EXPECT_EQ(io.cqe.get_status(), p::status::success);
  }
}

TEST(TcpLoopback, ServerSideCloseFailsOutstandingCommands) {
  TargetFixture f;
  auto q = connect(f);
  ASSERT_TRUE(q);
  f.handler.hold_writes = true;
  auto data = pattern(4096, 9);
  Io io;
  prep_rw(io, true, 0, data);
  ASSERT_TRUE(q->submit(io.cmd).ok());
  ASSERT_TRUE(wait_until([&] {
    q->poll(0, 0ms);
    return f.handler.commands == 1;
  }));
  TargetQueue* tq = nullptr;
  {
    std::lock_guard lock(f.handler.mu);
    tq = f.handler.queues.at(0);
  }
  f.reactors[0].reactor->post([tq] { tq->close("test"); });
  int rc = 0;
  auto end = std::chrono::steady_clock::now() + 30s;
  while (rc >= 0 && std::chrono::steady_clock::now() < end) rc = q->poll(1, 100ms);
  EXPECT_LT(rc, 0);
  ASSERT_TRUE(io.done);
  EXPECT_EQ(io.cqe.get_status(), p::status::transient_transport_error);
  EXPECT_FALSE(q->submit(io.cmd).ok());
  EXPECT_TRUE(wait_until([&] { return f.handler.closed == 1; }));
}

TEST(TcpLoopback, FullQueueRejectsSubmit) {
  TargetFixture f;
  auto o = f.host_options();
  o.entries = 2;
  auto q = connect_host_queue(o);
  ASSERT_TRUE(q);
  std::vector<uint8_t> b1(512), b2(512), b3(512);
  Io a, b, c;
  prep_rw(a, false, 0, b1);
  prep_rw(b, false, 1, b2);
  prep_rw(c, false, 2, b3);
  EXPECT_TRUE((*q)->submit(a.cmd).ok());
  EXPECT_TRUE((*q)->submit(b.cmd).ok());
  EXPECT_EQ((*q)->submit(c.cmd), p::status::command_interrupted);
  while ((*q)->outstanding() != 0) ASSERT_GE((*q)->poll(2, 1000ms), 0);
  EXPECT_TRUE(a.done && b.done && !c.done);
}

TEST(TcpHostConnect, RdmaWithoutAPeerAndRefusedPortFailWithTheAddress) {
  HostQueueOptions o;
  o.address.type = TransportType::rdma;
  o.address.traddr = "127.0.0.1";
  o.connect_timeout = std::chrono::milliseconds(2000);
  // No RDMA device here (or nobody listening on 127.0.0.1 over RDMA): a clear error naming the address.
  auto r = connect_host_queue(o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("rdma://127.0.0.1:4420"), std::string::npos) << r.error().message;
  // A port nobody listens on.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  o.address.type = TransportType::tcp;
  o.address.trsvcid = ntohs(a.sin_port);
  auto t = connect_host_queue(o);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("connect to"), std::string::npos) << t.error().message;
}

TEST(TcpListener, PortInUseIsReportedAtCreate) {
  TargetFixture f;
  auto second = f.another_listener(f.port());
  // SO_REUSEADDR does not allow two listeners on one port.
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find("cannot listen"), std::string::npos);
  tcp::TcpTargetOptions bad;
  bad.maxh2cdata = 1000;
  EXPECT_FALSE(f.another_listener(0, bad));
}

namespace {

// Every message posted to `r` before this call has run when it returns.
void drain(Reactor& r) {
  std::promise<void> ran;
  r.post([&ran] { ran.set_value(); });
  ran.get_future().wait();
}

}  // namespace

// create() binds and listens; accepting waits for start(), so that the daemon's core knows a listener
// before its first connection: until then the kernel keeps the connection in the backlog.
TEST(TcpListener, ConnectionsWaitInTheBacklogUntilStart) {
  TargetFixture f;
  auto l = f.another_listener();
  ASSERT_TRUE(l) << l.error().message;
  const int fd = rdmablk::testing::raw_connect((*l)->address().trsvcid);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  drain(*f.reactors[0].reactor);  // anything create() posted has run
  EXPECT_EQ(tcp::live_tcp_target_connections(), 0u) << "accepted before start()";
  ASSERT_TRUE((*l)->start());
  EXPECT_TRUE((*l)->start()) << "a second start is a no-op";
  EXPECT_TRUE(wait_until([] { return tcp::live_tcp_target_connections() == 1; }));
  ::close(fd);
  EXPECT_TRUE(wait_until([] { return tcp::live_tcp_target_connections() == 0; }));
}

// A listener removed and added back on the same port (the management API): stop_and_wait() returns once
// the socket is closed, so the new bind cannot find the port busy; connections up stay up.
TEST(TcpListener, StopAndWaitFreesThePortAndKeepsQueues) {
  TargetFixture f;
  auto q = connect_host_queue(f.host_options());
  ASSERT_TRUE(q) << q.error().message;
  const uint16_t port = f.port();
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(f.listener->stop_and_wait(30s)) << "round " << round;
    EXPECT_FALSE(f.listener->stop_and_wait(30s)) << "nothing left to stop";
    auto again = f.another_listener(port);
    ASSERT_TRUE(again) << "round " << round << ": " << again.error().message;
    ASSERT_TRUE((*again)->start());
    f.listener = std::move(*again);
  }
  EXPECT_EQ(tcp::live_tcp_acceptors(), 1u);
  auto q2 = connect_host_queue(f.host_options());
  ASSERT_TRUE(q2) << q2.error().message;
  std::vector<uint8_t> data(kBlock, 0x5a);
  Io io;
  prep_rw(io, true, 3, data);
  EXPECT_EQ(run_one(**q, io), p::status::success) << "the queue from before the stops still works";
}

// Out of descriptors, the acceptor retries its accept after 100 ms instead of spinning on EMFILE. A listener
// stopped while that retry is pending must cancel it: the acceptor is freed at stop, and a retry that
// fired afterwards would re-arm freed memory (ASan: heap-use-after-free in the sanitized run).
TEST(TcpListener, StopCancelsTheAcceptRetryAfterEmfile) {
  auto ring = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  auto logger = spdlog::default_logger();
  logger->sinks().push_back(ring);  // before the reactor thread starts: sinks() is not thread-safe
  const auto saved_level = logger->level();
  logger->set_level(spdlog::level::warn);
  auto emfile_logged = [&] {
    for (const auto& line : ring->last_formatted()) {
      if (line.find("accept failed: Too many open files") != std::string::npos) return true;
    }
    return false;
  };
  // io_uring reads RLIMIT_NOFILE when an accept is prepared, so the limit is lowered before the listener
  // arms its accept, and the descriptors below it are then used up by dup().
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest_free = ::dup(0);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest_free) + 64;  // room for the fixture's ring, eventfds, socket
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  {
    TargetFixture f;
    int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(client, 0);
    // Once with descriptors to spare: UBSan's first check of a dynamic type (here the sink's, the
    // formatter's, and the acceptor's behind ListenerHome in ReactorListener::stop) reads the vtable
    // through a pipe, and with no descriptor left it reports a false "invalid vptr" and then fails.
    spdlog::warn("test: 'accept failed: Too many open files' is expected next");
    emfile_logged();
    {
      auto warm = f.another_listener();
      ASSERT_TRUE(warm) << warm.error().message;
    }
    ASSERT_TRUE(wait_until([] { return tcp::live_tcp_acceptors() == 1; }));
    for (int d; (d = ::dup(0)) >= 0;) filler.push_back(d);  // no descriptor left for the accepted socket
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(f.port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // The kernel completes the handshake from the backlog; only the accept fails.
    EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
    // Each failed accept (one per 100 ms retry) logs, subject to the per-second log budget.
    const bool failed = wait_until(emfile_logged);
    f.listener.reset();  // most likely while a retry is pending (the retry waits 100 ms, an accept takes us)
    EXPECT_TRUE(wait_until([] { return tcp::live_tcp_acceptors() == 0; }));
    for (int d : filler) ::close(d);  // descriptors again, for a sanitizer report
    filler.clear();
    ::setrlimit(RLIMIT_NOFILE, &saved);
    std::this_thread::sleep_for(300ms);  // past any retry that stop failed to cancel: ASan reports it here
    ::close(client);
    std::string seen;
    for (const auto& line : ring->last_formatted()) seen += line;
    EXPECT_TRUE(failed) << "the accept never failed with EMFILE; logged:\n" << seen;
  }
  ::setrlimit(RLIMIT_NOFILE, &saved);
  logger->set_level(saved_level);
  logger->sinks().pop_back();
}

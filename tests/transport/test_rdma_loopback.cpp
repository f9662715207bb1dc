// Our RDMA host queue against our RdmaListener + a RAM core, over a real RDMA device (Soft-RoCE in the VM
// lab: tests/vm/rdma-loopback). Skipped unless RDMABLK_RDMA_ADDR names an address on an RDMA device
// (the dev machines have none).
#include <dirent.h>
#include <sys/resource.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "tcp_test_util.h"

#include "transport/rdma/rdma_host.h"
#include "transport/rdma/rdma_target.h"

using namespace tcptest;
namespace rd = rdmablk::transport::rdma;

namespace {

const char* rdma_addr() {
  const char* a = std::getenv("RDMABLK_RDMA_ADDR");
  return a != nullptr && *a != '\0' ? a : nullptr;
}

#define REQUIRE_RDMA()                                                                       \
  do {                                                                                       \
    if (rdma_addr() == nullptr) GTEST_SKIP() << "RDMABLK_RDMA_ADDR not set (no RDMA here)"; \
  } while (0)

struct RdmaFixture {
  ReactorSet reactors;
  RamHandler handler;
  std::unique_ptr<rd::RdmaListener> listener;

  static BufferPoolOptions test_pool(BufferPoolOptions popts) {
    if (popts.small_count == BufferPoolOptions{}.small_count) {
      popts.small_count = 64;
      popts.large_count = 16;
    }
    return popts;
  }

  explicit RdmaFixture(rd::RdmaTargetOptions opts = {}, unsigned nreactors = 2, BufferPoolOptions popts = {})
      : reactors(nreactors, test_pool(popts), "rdma-test") {
    TransportAddress a;
    a.type = TransportType::rdma;
    a.traddr = rdma_addr();
    a.trsvcid = 0;
    auto l = rd::RdmaListener::create(a, reactors.slots(), handler, opts);
    EXPECT_TRUE(l) << (l ? "" : l.error().message);
    if (l) listener = std::move(*l);
    if (listener) {
      EXPECT_TRUE(listener->start());
    }
  }
  ~RdmaFixture() {
    EXPECT_TRUE(wait_until([] { return rd::live_rdma_target_queues() == 0; }, 60s))
        << rd::live_rdma_target_queues() << " queues still alive";
    listener.reset();
    EXPECT_TRUE(wait_until([] { return rd::live_rdma_reactor_contexts() == 0; }, 60s))
        << rd::live_rdma_reactor_contexts() << " reactor contexts still alive";
    reactors.stop();
  }
  uint16_t port() const { return listener->address().trsvcid; }

  HostQueueOptions host_options(uint16_t qid = 1, uint16_t entries = 32, uint32_t in_capsule = 4096) const {
    HostQueueOptions o;
    o.address.type = TransportType::rdma;
    o.address.traddr = rdma_addr();
    o.address.trsvcid = port();
    o.qid = qid;
    o.entries = entries;
    o.in_capsule_limit = in_capsule;
    o.connect_timeout = 5000ms;
    return o;
  }
};

std::unique_ptr<HostQueue> connect(const RdmaFixture& f, uint16_t qid = 1, uint16_t entries = 32,
                                   uint32_t icd = 4096) {
  auto q = rd::connect_rdma_host_queue(f.host_options(qid, entries, icd));
  EXPECT_TRUE(q) << (q ? "" : q.error().message);
  return q ? std::move(*q) : nullptr;
}


unsigned count_fds() {
  unsigned n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

TEST(RdmaLoopback, KeyedAndInCapsuleWritesThenReads) {
  REQUIRE_RDMA();
  RdmaFixture f;
  auto q = connect(f);
  ASSERT_TRUE(q);
  write_read_verify(*q, 0, 512, 1);          // in-capsule
  write_read_verify(*q, 8, 4096, 2);         // in-capsule, at the limit
  write_read_verify(*q, 16, 8192, 3);        // keyed (RDMA READ / RDMA WRITE)
  write_read_verify(*q, 64, 128 * 1024, 4);  // keyed
  write_read_verify(*q, 1024, 1024 * 1024, 5);  // keyed, MDTS
  EXPECT_TRUE(std::equal(f.handler.ram.begin(), f.handler.ram.begin() + 512, pattern(512, 1).begin()));
  // In-capsule data reaches the core as in-capsule (opcode 0x09: host -> controller).
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
  // Larger than the in-capsule limit: keyed.
  std::vector<uint8_t> big(16384, 9);
  io.done = false;
  io.cmd.data = big;
  ASSERT_EQ(run_one(*q, io), p::status::success);
  EXPECT_FALSE(f.handler.last_in_capsule);
  EXPECT_EQ(f.handler.last_length, 16384u);
  q.reset();
}

TEST(RdmaLoopback, PreRegisteredBufferAndNoInCapsule) {
  REQUIRE_RDMA();
  RdmaFixture f;
  auto q = connect(f, 1, 32, 0);
  ASSERT_TRUE(q);
  std::vector<uint8_t> region(2 * 1024 * 1024);
  ASSERT_TRUE(rd::register_host_buffer(*q, region));
  auto data = pattern(64 * 1024, 11);
  std::copy(data.begin(), data.end(), region.begin());
  Io io;
  prep_rw(io, true, 200, std::span<uint8_t>(region.data(), data.size()));
  ASSERT_EQ(run_one(*q, io), p::status::success);
  prep_rw(io, false, 200, std::span<uint8_t>(region.data() + 1024 * 1024, data.size()));
  ASSERT_EQ(run_one(*q, io), p::status::success);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), region.begin() + 1024 * 1024));
}

TEST(RdmaLoopback, SeveralQueuesConcurrentIo) {
  REQUIRE_RDMA();
  RdmaFixture f;
  constexpr unsigned kQueues = 4;
  constexpr unsigned kDepth = 16;
  constexpr std::size_t kIo = 16 * 1024;
  std::vector<std::unique_ptr<HostQueue>> qs;
  for (unsigned i = 0; i < kQueues; ++i) {
    qs.push_back(connect(f, static_cast<uint16_t>(i + 1), 32));
    ASSERT_TRUE(qs.back());
  }
  // Each queue writes its own LBA range with kDepth commands in flight, then reads everything back.
  std::vector<std::vector<uint8_t>> data(kQueues * kDepth);
  std::vector<std::vector<uint8_t>> back(kQueues * kDepth, std::vector<uint8_t>(kIo));
  std::vector<Io> ios(kQueues * kDepth);
  for (int pass = 0; pass < 2; ++pass) {
    for (unsigned qi = 0; qi < kQueues; ++qi) {
      for (unsigned d = 0; d < kDepth; ++d) {
        const unsigned k = qi * kDepth + d;
        const uint64_t lba = k * (kIo / kBlock);
        if (pass == 0) {
          data[k] = pattern(kIo, 100 + k);
          prep_rw(ios[k], true, lba, data[k]);
        } else {
          prep_rw(ios[k], false, lba, back[k]);
        }
        ASSERT_EQ(qs[qi]->submit(ios[k].cmd), p::status::success);
      }
    }
    for (unsigned qi = 0; qi < kQueues; ++qi) {
      auto end = std::chrono::steady_clock::now() + 60s;
      while (qs[qi]->outstanding() != 0 && std::chrono::steady_clock::now() < end) {
        ASSERT_GE(qs[qi]->poll(1, 100ms), 0);
      }
      ASSERT_EQ(qs[qi]->outstanding(), 0u);
    }
    for (auto& io : ios) ASSERT_EQ(io.cqe.get_status(), p::status::success);
  }
  for (unsigned k = 0; k < kQueues * kDepth; ++k) EXPECT_EQ(back[k], data[k]) << "command " << k;
}

TEST(RdmaLoopback, PoolExhaustionWaitsThenCompletes) {
  REQUIRE_RDMA();
  BufferPoolOptions po;
  po.small_count = 4;
  po.large_count = 2;
  po.large_size = 1024 * 1024;
  RdmaFixture f({}, 1, po);
  auto q = connect(f);
  ASSERT_TRUE(q);
  constexpr unsigned kN = 8;
  std::vector<std::vector<uint8_t>> data(kN);
  std::vector<Io> ios(kN);
  for (unsigned i = 0; i < kN; ++i) {
    data[i] = pattern(512 * 1024, 300 + i);
    prep_rw(ios[i], true, i * 1024, data[i]);
    ASSERT_EQ(q->submit(ios[i].cmd), p::status::success);
  }
  auto end = std::chrono::steady_clock::now() + 60s;
  while (q->outstanding() != 0 && std::chrono::steady_clock::now() < end) ASSERT_GE(q->poll(1, 100ms), 0);
  ASSERT_EQ(q->outstanding(), 0u);
  for (unsigned i = 0; i < kN; ++i) {
    ASSERT_EQ(ios[i].cqe.get_status(), p::status::success);
    EXPECT_TRUE(std::equal(data[i].begin(), data[i].end(), f.handler.ram.begin() + i * 1024 * kBlock));
  }
}

TEST(RdmaLoopback, BadConnectRequestsAreRejected) {
  REQUIRE_RDMA();
  RdmaFixture f;
  auto admin = rd::connect_rdma_host_queue(f.host_options(0, 64));  // admin queue above 32 entries
  ASSERT_FALSE(admin);
  EXPECT_NE(admin.error().message.find("invalid host SQ size"), std::string::npos) << admin.error().message;
  auto io = rd::connect_rdma_host_queue(f.host_options(1, 1024));  // above max_queue_depth 128
  ASSERT_FALSE(io);
  EXPECT_NE(io.error().message.find("invalid host SQ size"), std::string::npos) << io.error().message;
  auto ok = connect(f, 0, 32);  // a valid admin queue still works
  ASSERT_TRUE(ok);
  write_read_verify(*ok, 0, 4096, 7);
}

TEST(RdmaLoopback, SglErrorsCompleteWithStatus) {
  REQUIRE_RDMA();
  RdmaFixture f;
  auto q = connect(f);
  ASSERT_TRUE(q);
  // Keyed length above MDTS (1 MiB): Data SGL Length Invalid, the queue goes on.
  std::vector<uint8_t> big(2 * 1024 * 1024);
  Io io;
  prep_rw(io, true, 0, big);
  EXPECT_EQ(run_one(*q, io), p::status::data_sgl_length_invalid);
  write_read_verify(*q, 0, 8192, 8);
}

TEST(RdmaLoopback, HostVanishingReleasesHeldRequests) {
  REQUIRE_RDMA();
  RdmaFixture f;
  f.handler.hold_writes = true;
  {
    auto q = connect(f);
    ASSERT_TRUE(q);
    std::vector<uint8_t> d(8192, 1);
    Io io;
    prep_rw(io, true, 0, d);
    ASSERT_EQ(q->submit(io.cmd), p::status::success);
    ASSERT_TRUE(wait_until([&] { return f.handler.commands.load() == 1; }, 60s));
    q->close();  // the host goes away with a command held by the core
  }
  ASSERT_TRUE(wait_until([&] { return f.handler.closed.load() == 1; }, 60s));
  EXPECT_TRUE(wait_until([] { return rd::live_rdma_target_queues() == 0; }, 60s));
  EXPECT_EQ(f.handler.created.load(), 1);
}

TEST(RdmaLoopback, TargetCloseFailsTheHostQueue) {
  REQUIRE_RDMA();
  RdmaFixture f({}, 1);
  auto q = connect(f);
  ASSERT_TRUE(q);
  write_read_verify(*q, 0, 4096, 9);
  TargetQueue* tq = nullptr;
  {
    std::lock_guard lock(f.handler.mu);
    ASSERT_EQ(f.handler.queues.size(), 1u);
    tq = f.handler.queues[0];
  }
  f.reactors[0].reactor->post([tq] { tq->close("test: controller fatal"); });
  std::vector<uint8_t> d(4096);
  Io io;
  prep_rw(io, false, 0, d);
  auto end = std::chrono::steady_clock::now() + 60s;
  int rc = 0;
  while (std::chrono::steady_clock::now() < end) {
    rc = q->poll(1, 100ms);
    if (rc < 0) break;
  }
  EXPECT_LT(rc, 0) << "the host queue should see the disconnect";
  EXPECT_NE(q->submit(io.cmd), p::status::success);
  q.reset();
  EXPECT_TRUE(wait_until([&] { return f.handler.closed.load() == 1; }, 60s));
}

TEST(RdmaLoopback, IdleConnectionsUseNoCpu) {
  REQUIRE_RDMA();
  RdmaFixture f;
  auto q1 = connect(f, 1);
  auto q2 = connect(f, 2);
  ASSERT_TRUE(q1 && q2);
  write_read_verify(*q1, 0, 4096, 12);
  write_read_verify(*q2, 8, 4096, 13);
  std::this_thread::sleep_for(200ms);  // let the pollers arm their CQs and the reactors fall asleep
  const double before = cpu_seconds();
  std::this_thread::sleep_for(1000ms);
  const double used = cpu_seconds() - before;
  EXPECT_LT(used, 0.1) << "reactors spin while idle";
  write_read_verify(*q1, 16, 8192, 14);  // and they wake up for new work
}

TEST(RdmaLoopback, ConnectDisconnectStormLeaksNothing) {
  REQUIRE_RDMA();
  RdmaFixture f;
  const unsigned rounds = std::getenv("RDMABLK_STORM_ROUNDS") ? std::atoi(std::getenv("RDMABLK_STORM_ROUNDS")) : 100;
  auto cycle = [&](unsigned i) {
    auto q = connect(f, static_cast<uint16_t>(1 + i % 4), 32);
    ASSERT_TRUE(q);
    write_read_verify(*q, (i % 64) * 16, 8192, i);
    if (i % 3 == 0) {
      // Leave a command outstanding when the host goes.
      std::vector<uint8_t> d(4096, 1);
      Io io;
      prep_rw(io, true, 0, d);
      ASSERT_EQ(q->submit(io.cmd), p::status::success);
    }
    q.reset();
  };
  for (unsigned i = 0; i < 10; ++i) cycle(i);  // warm up: reactor contexts, allocator arenas
  ASSERT_TRUE(wait_until([] { return rd::live_rdma_target_queues() == 0; }, 60s));
  const unsigned fds0 = count_fds();
  const long rss0 = rss_kib();
  for (unsigned i = 0; i < rounds; ++i) cycle(i);
  ASSERT_TRUE(wait_until([] { return rd::live_rdma_target_queues() == 0; }, 60s));
  EXPECT_EQ(rd::live_rdma_host_queues(), 0u);
  const unsigned fds1 = count_fds();
  const long rss1 = rss_kib();
  std::printf("storm: %u rounds, fds %u -> %u, RSS %ld -> %ld KiB, queues created %d closed %d\n", rounds, fds0,
              fds1, rss0, rss1, f.handler.created.load(), f.handler.closed.load());
  EXPECT_EQ(fds1, fds0);
  EXPECT_LT(rss1 - rss0, 8 * 1024) << "RSS grew by more than 8 MiB";
  EXPECT_EQ(f.handler.created.load(), f.handler.closed.load());
}

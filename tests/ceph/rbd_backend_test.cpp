// The rbd backend against a real (throw-away) Ceph cluster: tests/ceph/ceph-cluster, see ceph_cluster.h.
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_test_util.h"
#include "ceph/ceph_cluster.h"

namespace rdmablk::backend {
namespace {

using test::AlignedBuf;
using test::fill_pattern;
using test::range;
using test::run;
using test::rw;
namespace st = protocol::status;

RbdOptions options_for(const ceph_test::Cluster& c, const std::string& image) {
  RbdOptions o;
  o.pool = "rbd";
  o.image = image;
  o.ceph_conf = c.conf();
  o.client = "rdmablk";
  o.keyring = c.rdmablk_keyring();
  o.timeout_seconds = 20;
  return o;
}

std::unique_ptr<Backend> open_or_fail(const RbdOptions& o) {
  auto b = open_rbd_backend(o);
  EXPECT_TRUE(b) << (b ? "" : b.error().message);
  return b ? std::move(*b) : nullptr;
}

std::unique_ptr<Queue> queue_or_fail(const Backend& b, unsigned depth = 32) {
  QueueOptions qo;
  qo.depth = depth;
  auto q = b.open_queue(qo);
  EXPECT_TRUE(q) << (q ? "" : q.error().message);
  return q ? std::move(*q) : nullptr;
}

TEST(RbdBackend, GeometryAndDescription) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string image = cluster->create_image("geo", "64M");
  auto b = open_or_fail(options_for(*cluster, image));
  ASSERT_TRUE(b);
  const Geometry& g = b->geometry();
  EXPECT_EQ(g.block_size, 512u);
  EXPECT_EQ(g.num_blocks, (64ull << 20) / 512);
  EXPECT_TRUE(g.caps.flush);
  EXPECT_TRUE(g.caps.fua);
  EXPECT_TRUE(g.caps.write_zeroes);
  EXPECT_TRUE(g.caps.deallocate);
  EXPECT_TRUE(g.caps.deallocated_reads_zeroes);
  EXPECT_TRUE(g.caps.volatile_write_cache);  // librbd's rbd_cache defaults to true; the conf leaves it
  EXPECT_FALSE(g.caps.read_only);
  EXPECT_EQ(b->describe(), "rbd rbd/" + image + " (client rdmablk)");

  RbdOptions o4k = options_for(*cluster, image);
  o4k.block_size = 4096;
  auto b4k = open_or_fail(o4k);  // a second handle on the same image, the same shared connection
  ASSERT_TRUE(b4k);
  EXPECT_EQ(b4k->geometry().block_size, 4096u);
  EXPECT_EQ(b4k->geometry().num_blocks, (64ull << 20) / 4096);
}

TEST(RbdBackend, WriteReadBackAtSeveralOffsetsAndSizes) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string image = cluster->create_image("rw", "64M");
  auto b = open_or_fail(options_for(*cluster, image));
  ASSERT_TRUE(b);
  auto q = queue_or_fail(*b);
  ASSERT_TRUE(q);
  struct Case {
    uint64_t slba;
    uint32_t bytes;
  };
  // 512 B .. 1 MiB; crossing librbd's 4 MiB object boundary (block 8192) and ending at the last block.
  const uint64_t last = b->geometry().num_blocks;
  const std::vector<Case> cases = {{0, 512},          {1, 4096},       {7, 8192 + 512}, {8190, 4096},
                                   {8192 - 1, 65536}, {20000, 1 << 20}, {last - 1, 512}, {last - 2048, 1 << 20}};
  uint64_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE("slba " + std::to_string(c.slba) + " bytes " + std::to_string(c.bytes));
    AlignedBuf w(c.bytes), r(c.bytes);
    fill_pattern(w.get(), c.bytes, seed++);
    EXPECT_TRUE(run(*q, rw(Op::write, c.slba, c.bytes / 512, w.get())).ok());
    EXPECT_TRUE(run(*q, rw(Op::read, c.slba, c.bytes / 512, r.get())).ok());
    EXPECT_EQ(std::memcmp(w.get(), r.get(), c.bytes), 0);
  }
  // The data is in the image, not in this handle: a second backend (own image handle) reads it too.
  auto b2 = open_or_fail(options_for(*cluster, image));
  ASSERT_TRUE(b2);
  auto q2 = queue_or_fail(*b2);
  ASSERT_TRUE(q2);
  EXPECT_TRUE(run(*q, range(Op::flush, 0, 0)).ok());
  AlignedBuf w(1 << 20), r(1 << 20);
  fill_pattern(w.get(), w.size, 6);  // the seed of case {20000, 1 MiB}
  EXPECT_TRUE(run(*q2, rw(Op::read, 20000, 2048, r.get())).ok());
  EXPECT_EQ(std::memcmp(w.get(), r.get(), w.size), 0);
}

// Compare and Write in the OSD (Capabilities::compare_and_write): replaces the blocks only when they hold
// what the caller expects, and a second image handle (another target) sees the same outcome.
TEST(RbdBackend, CompareAndWriteIsDoneByTheOsd) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string image = cluster->create_image("caw", "16M");
  auto b = open_or_fail(options_for(*cluster, image));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->geometry().caps.compare_and_write_blocks, 1u);  // one 512-byte sector (librbd's limit)
  auto q = queue_or_fail(*b);
  ASSERT_TRUE(q);
  AlignedBuf old_data(512), new_data(512), other(512), r(512);
  fill_pattern(old_data.get(), 512, 1);
  fill_pattern(new_data.get(), 512, 2);
  fill_pattern(other.get(), 512, 3);
  ASSERT_TRUE(run(*q, rw(Op::write, 64, 1, old_data.get())).ok());
  Request caw = rw(Op::compare_and_write, 64, 1, new_data.get());
  caw.cmp_buf = old_data.get();
  EXPECT_TRUE(run(*q, caw).ok());
  ASSERT_TRUE(run(*q, rw(Op::read, 64, 1, r.get())).ok());
  EXPECT_EQ(std::memcmp(r.get(), new_data.get(), 512), 0);
  // The blocks no longer hold old_data: Compare Failure, nothing written, seen through another handle too.
  Request stale = rw(Op::compare_and_write, 64, 1, other.get());
  stale.cmp_buf = old_data.get();
  const Status s = run(*q, stale);
  EXPECT_TRUE(s.is(st::compare_failure)) << protocol::status_name(s);
  auto b2 = open_or_fail(options_for(*cluster, image));
  ASSERT_TRUE(b2);
  auto q2 = queue_or_fail(*b2);
  ASSERT_TRUE(q2);
  ASSERT_TRUE(run(*q2, rw(Op::read, 64, 1, r.get())).ok());
  EXPECT_EQ(std::memcmp(r.get(), new_data.get(), 512), 0);
  // Without a compare buffer, or over more than one sector, the request is refused at submit.
  EXPECT_TRUE(q->submit(rw(Op::compare_and_write, 64, 1, other.get())).is(st::invalid_field));
  AlignedBuf two(1024);
  Request big = rw(Op::compare_and_write, 64, 2, two.get());
  big.cmp_buf = two.get();
  EXPECT_TRUE(q->submit(big).is(st::invalid_field));
}

TEST(RbdBackend, FourKBlocks) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  RbdOptions o = options_for(*cluster, cluster->create_image("4k", "16M"));
  o.block_size = 4096;
  auto b = open_or_fail(o);
  ASSERT_TRUE(b);
  auto q = queue_or_fail(*b);
  ASSERT_TRUE(q);
  AlignedBuf w(3 * 4096), r(3 * 4096);
  fill_pattern(w.get(), w.size, 44);
  ASSERT_TRUE(run(*q, rw(Op::write, 100, 3, w.get())).ok());
  ASSERT_TRUE(run(*q, rw(Op::read, 100, 3, r.get())).ok());
  EXPECT_EQ(std::memcmp(w.get(), r.get(), w.size), 0);
  EXPECT_EQ(q->submit(rw(Op::read, 4096, 1, r.get())), st::lba_out_of_range);  // 16 MiB = 4096 blocks
}

TEST(RbdBackend, FlushAndFuaWrite) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  auto b = open_or_fail(options_for(*cluster, cluster->create_image("flush", "16M")));
  ASSERT_TRUE(b);
  auto q = queue_or_fail(*b);
  ASSERT_TRUE(q);
  AlignedBuf w(8192), r(8192);
  fill_pattern(w.get(), w.size, 7);
  EXPECT_TRUE(run(*q, rw(Op::write, 64, 16, w.get())).ok());
  EXPECT_TRUE(run(*q, range(Op::flush, 0, 0)).ok());
  fill_pattern(w.get(), w.size, 8);
  // FUA: one completion for the write and its flush
  EXPECT_TRUE(run(*q, rw(Op::write, 64, 16, w.get(), -1, /*fua=*/true)).ok());
  EXPECT_EQ(q->in_flight(), 0u);
  EXPECT_TRUE(run(*q, rw(Op::read, 64, 16, r.get())).ok());
  EXPECT_EQ(std::memcmp(w.get(), r.get(), w.size), 0);
}

TEST(RbdBackend, DeallocateReadsZeroes) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  auto b = open_or_fail(options_for(*cluster, cluster->create_image("discard", "16M")));
  ASSERT_TRUE(b);
  auto q = queue_or_fail(*b);
  ASSERT_TRUE(q);
  AlignedBuf w(256 * 1024), r(256 * 1024);
  fill_pattern(w.get(), w.size, 9);
  ASSERT_TRUE(run(*q, rw(Op::write, 0, 512, w.get())).ok());
  // An unaligned range (3 blocks at 7) and a large one (blocks 64..447): all of it must read as zeroes,
  // the blocks around it keep their data.
  ASSERT_TRUE(run(*q, range(Op::deallocate, 7, 3)).ok());
  ASSERT_TRUE(run(*q, range(Op::deallocate, 64, 384)).ok());
  ASSERT_TRUE(run(*q, rw(Op::read, 0, 512, r.get())).ok());
  std::memset(w.get() + 7 * 512, 0, 3 * 512);
  std::memset(w.get() + 64 * 512, 0, 384 * 512);
  EXPECT_TRUE(test::all_zero(r.get() + 7 * 512, 3 * 512));
  EXPECT_TRUE(test::all_zero(r.get() + 64 * 512, 384 * 512));
  EXPECT_EQ(std::memcmp(w.get(), r.get(), w.size), 0);
}

TEST(RbdBackend, WriteZeroes) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  auto b = open_or_fail(options_for(*cluster, cluster->create_image("wz", "16M")));
  ASSERT_TRUE(b);
  auto q = queue_or_fail(*b);
  ASSERT_TRUE(q);
  AlignedBuf w(64 * 1024), r(64 * 1024);
  fill_pattern(w.get(), w.size, 10);
  ASSERT_TRUE(run(*q, rw(Op::write, 1000, 128, w.get())).ok());
  ASSERT_TRUE(run(*q, range(Op::write_zeroes, 1001, 5)).ok());
  ASSERT_TRUE(run(*q, rw(Op::read, 1000, 128, r.get())).ok());
  std::memset(w.get() + 512, 0, 5 * 512);
  EXPECT_TRUE(test::all_zero(r.get() + 512, 5 * 512));
  EXPECT_EQ(std::memcmp(w.get(), r.get(), w.size), 0);
}

TEST(RbdBackend, RefusesOutOfRangeAndBoundsInFlight) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  auto b = open_or_fail(options_for(*cluster, cluster->create_image("range", "1M")));
  ASSERT_TRUE(b);
  auto q = queue_or_fail(*b, 4);
  ASSERT_TRUE(q);
  AlignedBuf buf(4096);
  EXPECT_EQ(q->submit(rw(Op::read, 2048, 1, buf.get())), st::lba_out_of_range);  // 1 MiB = 2048 blocks
  EXPECT_EQ(q->submit(rw(Op::write, 2047, 2, buf.get())), st::lba_out_of_range);
  EXPECT_EQ(q->submit(range(Op::deallocate, UINT64_MAX, 1)), st::lba_out_of_range);
  EXPECT_EQ(q->submit(rw(Op::read, 0, 0, buf.get())), st::invalid_field);
  EXPECT_EQ(q->in_flight(), 0u);
  // depth 4: the fifth request is queue_full until one is reaped
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(q->submit(rw(Op::read, i, 1, buf.get())).ok());
  EXPECT_EQ(q->submit(rw(Op::read, 5, 1, buf.get())), queue_full);
  EXPECT_EQ(q->in_flight(), 4u);
  Completion c[4];
  unsigned got = 0;
  while (got < 4) got += q->reap(std::span(c).subspan(got), 1);
  for (const auto& x : c) EXPECT_TRUE(x.status.ok());
  EXPECT_EQ(q->in_flight(), 0u);
  EXPECT_TRUE(run(*q, rw(Op::read, 5, 1, buf.get())).ok());
}

TEST(RbdBackend, ReadOnlyImageRefusesWrites) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  RbdOptions o = options_for(*cluster, cluster->create_image("ro", "1M"));
  o.read_only = true;
  auto b = open_or_fail(o);
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->geometry().caps.read_only);
  auto q = queue_or_fail(*b);
  ASSERT_TRUE(q);
  AlignedBuf buf(512);
  EXPECT_EQ(q->submit(rw(Op::write, 0, 1, buf.get())), st::namespace_write_protected);
  EXPECT_TRUE(run(*q, rw(Op::read, 0, 1, buf.get())).ok());
}

// The completions wake the owner through event_fd(): readable after a submit, quiet after clear_event().
TEST(RbdBackend, EventFdSignalsCompletions) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  auto b = open_or_fail(options_for(*cluster, cluster->create_image("efd", "1M")));
  ASSERT_TRUE(b);
  auto q = queue_or_fail(*b);
  ASSERT_TRUE(q);
  ASSERT_GE(q->event_fd(), 0);
  AlignedBuf buf(4096);
  ASSERT_TRUE(q->submit(rw(Op::write, 0, 8, buf.get())).ok());
  pollfd p{q->event_fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 20'000), 1);
  q->clear_event();
  p.revents = 0;
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  Completion c[1];
  EXPECT_EQ(q->reap(c, 0), 1u);
  EXPECT_TRUE(c[0].status.ok());
}

// Two reactors' worth: two queues on one image, each driven by its own thread with many requests in flight.
TEST(RbdBackend, ManyInFlightFromTwoQueuesOnTwoThreads) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  auto b = open_or_fail(options_for(*cluster, cluster->create_image("mt", "64M")));
  ASSERT_TRUE(b);
  constexpr unsigned kDepth = 32, kRequests = 512, kBlocks = 8;  // 4 KiB each
  auto worker = [&](unsigned id, std::string* error) {
    auto q = queue_or_fail(*b, kDepth);
    if (!q) return;
    std::vector<AlignedBuf> bufs;
    for (unsigned i = 0; i < kRequests; ++i) {
      bufs.emplace_back(kBlocks * 512);
      fill_pattern(bufs.back().get(), kBlocks * 512, id * 100000 + i);
    }
    const uint64_t base = id * (kRequests * kBlocks);
    auto pass = [&](Op op) {
      unsigned next = 0, done = 0, max_seen = 0;
      std::vector<bool> seen(kRequests);
      Completion c[16];
      while (done < kRequests) {
        while (next < kRequests) {
          Request r = rw(op, base + next * kBlocks, kBlocks, bufs[next].get());
          r.user_data = next;
          const Status s = q->submit(r);
          if (s == queue_full) break;
          if (!s.ok()) {
            *error = "submit refused";
            return;
          }
          ++next;
        }
        max_seen = std::max(max_seen, q->in_flight());
        const unsigned n = q->reap(c, 1);
        for (unsigned i = 0; i < n; ++i) {
          if (!c[i].status.ok() || c[i].user_data >= kRequests || seen[c[i].user_data]) {
            *error = "bad completion";
            return;
          }
          seen[c[i].user_data] = true;
        }
        done += n;
      }
      if (max_seen != kDepth) *error = "in flight never reached the depth: " + std::to_string(max_seen);
    };
    pass(Op::write);
    for (auto& bf : bufs) std::memset(bf.get(), 0, bf.size);
    if (error->empty()) pass(Op::read);
    for (unsigned i = 0; i < kRequests && error->empty(); ++i) {
      AlignedBuf want(kBlocks * 512);
      fill_pattern(want.get(), want.size, id * 100000 + i);
      if (std::memcmp(want.get(), bufs[i].get(), want.size) != 0) *error = "data mismatch at " + std::to_string(i);
    }
  };
  std::string e0, e1;
  std::thread t0(worker, 0, &e0), t1(worker, 1, &e1);
  t0.join();
  t1.join();
  EXPECT_EQ(e0, "");
  EXPECT_EQ(e1, "");
}

// Reservation state (target/reservations/object_store.h) lives in a RADOS object next to the image: every
// handle of the image, in any target, reads what another wrote; write replaces, remove removes.
TEST(RbdBackend, SideObjectIsSharedByEveryHandleOfTheImage) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string image = cluster->create_image("side", "4M", "tenant2");
  RbdOptions o = options_for(*cluster, image);
  o.rados_namespace = "tenant2";
  auto b1 = open_or_fail(o);
  auto b2 = open_or_fail(o);
  ASSERT_TRUE(b1 && b2);
  auto w = b1->side_object("reservations");
  auto r = b2->side_object("reservations");
  ASSERT_TRUE(w && r);
  EXPECT_EQ(w->describe(), "rados object rbd/tenant2/rdmablk.reservations." + image);
  auto none = r->read();
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_FALSE(*none);
  const std::vector<uint8_t> first{1, 2, 3, 4, 5}, second{9, 8};
  ASSERT_TRUE(w->write(first));
  ASSERT_TRUE(w->write(second));  // replaces, not appends
  auto got = r->read();
  ASSERT_TRUE(got && *got) << (got ? "no object" : got.error().message);
  EXPECT_EQ(**got, second);
  b1.reset();  // the object outlives the handle that wrote it
  ASSERT_TRUE(r->remove());
  ASSERT_TRUE(r->remove()) << "removing what is gone is no error";
  auto gone = r->read();
  ASSERT_TRUE(gone);
  EXPECT_FALSE(*gone);
}

TEST(RbdBackend, RadosNamespace) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string image = cluster->create_image("nsimg", "4M", "tenant1");
  RbdOptions o = options_for(*cluster, image);
  o.rados_namespace = "tenant1";
  auto b = open_or_fail(o);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->describe(), "rbd rbd/tenant1/" + image + " (client rdmablk)");
  // the image is not in the default namespace
  auto missing = open_rbd_backend(options_for(*cluster, image));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("cannot open the image"), std::string::npos) << missing.error().message;
}

TEST(RbdBackend, MissingImageAndPool) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  auto r = open_rbd_backend(options_for(*cluster, "no-such-image"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "rbd rbd/no-such-image: cannot open the image: No such file or directory");
  RbdOptions o = options_for(*cluster, "x");
  o.pool = "nopool";
  r = open_rbd_backend(o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot open pool nopool"), std::string::npos) << r.error().message;
  o = options_for(*cluster, "x");
  o.ceph_conf = cluster->dir() + "/missing.conf";
  r = open_rbd_backend(o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot read the Ceph configuration"), std::string::npos) << r.error().message;
}

// A cluster nobody answers for (the conf's mon port changed to a closed one): an error within the
// timeout, never a hang.
TEST(RbdBackend, UnreachableClusterFailsWithinTheTimeout) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string conf = cluster->dir() + "/unreachable-" + std::to_string(::getpid()) + ".conf";
  const std::string dead = cluster->write_dead_conf(conf);
  RbdOptions o = options_for(*cluster, "whatever");
  o.ceph_conf = conf;
  o.timeout_seconds = 3;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = open_rbd_backend(o);
  const auto took = std::chrono::steady_clock::now() - t0;
  std::remove(conf.c_str());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.rfind("rbd rbd/whatever: cannot reach the Ceph cluster: ", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find(dead), std::string::npos) << r.error().message;  // names the mon address
  EXPECT_GE(took, std::chrono::seconds(2));
  EXPECT_LT(took, std::chrono::seconds(15));
}

// The OSD dies with the image open: a write then completes with an error status after the OSD op timeout
// (ETIMEDOUT -> Command Interrupted: the host retries), it does not hang. A private cluster (this test
// kills its OSD).
TEST(RbdBackend, DeadOsdCompletesWithAnErrorNotAHang) {
  CEPH_CLUSTER_OR_SKIP(shared);  // skips without ceph
  const std::string root = shared->dir() + "-private-" + std::to_string(::getpid());
  std::string out;
  ASSERT_EQ(ceph_test::shell(ceph_test::fixture_script() + " start " + root, &out), 0) << out;
  struct Stop {
    std::string dir;
    ~Stop() { ceph_test::shell(ceph_test::fixture_script() + " stop " + dir); }
  } stop{root};
  ASSERT_EQ(ceph_test::shell("env -u CEPH_KEYRING -u CEPH_ARGS -u CEPH_CONF timeout 60 rbd -c " + root +
                                 "/ceph.conf -n client.admin create --size 8M rbd/dead",
                             &out),
            0)
      << out;
  RbdOptions o;
  o.pool = "rbd";
  o.image = "dead";
  o.ceph_conf = root + "/ceph.conf";
  o.client = "rdmablk";
  o.timeout_seconds = 3;
  auto b = open_or_fail(o);
  ASSERT_TRUE(b);
  auto q = queue_or_fail(*b);
  ASSERT_TRUE(q);
  AlignedBuf buf(4096);
  fill_pattern(buf.get(), buf.size, 3);
  ASSERT_TRUE(run(*q, rw(Op::write, 0, 8, buf.get(), -1, /*fua=*/true)).ok());
  ASSERT_EQ(ceph_test::shell("kill -KILL $(cat " + root + "/run/osd.0.pid)", &out), 0) << out;
  const auto t0 = std::chrono::steady_clock::now();
  // FUA: the write reaches past librbd's cache to the (dead) OSD
  ASSERT_TRUE(q->submit(rw(Op::write, 8, 8, buf.get(), -1, /*fua=*/true)).ok());
  Completion c[1];
  unsigned n = 0;
  while (n == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    pollfd p{q->event_fd(), POLLIN, 0};
    ::poll(&p, 1, 1000);
    q->clear_event();
    n = q->reap(c, 0);
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(n, 1u) << "no completion within 60 s";
  EXPECT_EQ(c[0].status, st::command_interrupted) << "ETIMEDOUT expected";
  EXPECT_LT(took, std::chrono::seconds(30));
  std::printf("completed after %.1f s\n", std::chrono::duration<double>(took).count());
  const auto c0 = std::chrono::steady_clock::now();
  q.reset();
  b.reset();  // returns at once: the close (against a dead OSD) is the closer thread's
  // rbd_close against a dead OSD: bounded by the same timeouts (~9 s: 3 of them)
  ASSERT_TRUE(wait_for_rbd_closes(std::chrono::seconds(60))) << "the image was not closed within 60 s";
  const auto closing = std::chrono::steady_clock::now() - c0;
  std::printf("closed after %.1f s\n", std::chrono::duration<double>(closing).count());
}

// Destroying a backend hands the close to a background thread (a reactor must not wait for the cluster);
// the close still flushes librbd's write-back cache: a write that was never flushed is in the image once
// wait_for_rbd_closes() returns.
TEST(RbdBackend, BackgroundCloseFlushesTheCache) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string image = cluster->create_image("close", "8M");
  AlignedBuf data(64 * 1024), got(64 * 1024);
  fill_pattern(data.get(), data.size, 41);
  {
    auto b = open_or_fail(options_for(*cluster, image));
    ASSERT_TRUE(b);
    auto q = queue_or_fail(*b);
    ASSERT_TRUE(q);
    // librbd's cache writes through until it has seen a flush; after one it holds writes back
    ASSERT_TRUE(run(*q, range(Op::flush, 0, 0)).ok());
    ASSERT_TRUE(run(*q, rw(Op::write, 256, 128, data.get())).ok());  // no flush, no FUA
  }
  ASSERT_TRUE(wait_for_rbd_closes(std::chrono::seconds(60)));
  auto b = open_or_fail(options_for(*cluster, image));
  ASSERT_TRUE(b);
  auto q = queue_or_fail(*b);
  ASSERT_TRUE(q);
  ASSERT_TRUE(run(*q, rw(Op::read, 256, 128, got.get())).ok());
  EXPECT_EQ(std::memcmp(data.get(), got.get(), data.size), 0) << "the close lost the cached write";
}

}  // namespace
}  // namespace rdmablk::backend

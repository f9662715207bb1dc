// rdmablk-target with rbd namespaces against the throw-away cluster (tests/ceph/ceph-cluster): a verified
// bench through the real target, one image exported by two targets, a restart, --check-config on a cluster
// that does not answer.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ceph/ceph_cluster.h"
#include "protocol/command.h"
#include "caw_counter.h"
#include "e2e_common.h"
#include "initiator/host/shared_volume.h"
#include "support/target_process.h"

namespace {

using namespace e2e;
using rdmablk::initiator::IoQueue;

std::string rbd_namespace(const ceph_test::Cluster& c, const std::string& image, const std::string& extra = "") {
  return "      - nsid: 1\n        backend: rbd\n        pool: rbd\n        image: " + image +
         "\n        ceph_conf: " + c.conf() + "\n        client: rdmablk\n        keyring: " + c.rdmablk_keyring() +
         "\n" + extra;
}

TEST(RbdE2e, BenchWithCrc32cVerify) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string image = cluster->create_image("bench", "64M");
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(rbd_namespace(*cluster, image))));
  auto j = run_bench_json(t, "verify",
                          "[global]\nnamespace=1\nbs=4k\niodepth=32\n\n[verify]\nrw=randwrite\nsize=8m\n"
                          "verify=crc32c\n");
  ASSERT_TRUE(j.contains("jobs"));
  EXPECT_EQ(j["jobs"][0]["error"], 0);
  EXPECT_EQ(j["jobs"][0]["write"]["io_bytes"], 8u << 20);
  EXPECT_EQ(j["jobs"][0]["read"]["io_bytes"], 8u << 20) << "verify reads every written block back";
  // 128 KiB requests (several RADOS objects' worth per second, crossing object boundaries) too
  j = run_bench_json(t, "verify128k",
                     "[global]\nnamespace=1\nbs=128k\niodepth=8\n\n[verify]\nrw=write\nsize=16m\nverify=crc32c\n");
  ASSERT_TRUE(j.contains("jobs"));
  EXPECT_EQ(j["jobs"][0]["error"], 0);
  EXPECT_EQ(j["jobs"][0]["read"]["io_bytes"], 16u << 20);
  EXPECT_TRUE(t.stop());
}

// One image, two targets (as two gateways of a group would): written and flushed through A, read through B;
// then A restarts and still reads it.
TEST(RbdE2e, TwoTargetsOneImageAndRestart) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string image = cluster->create_image("shared", "32M");
  TargetProcess a, b;
  ASSERT_TRUE(a.start(config_with_namespaces(rbd_namespace(*cluster, image))));
  ASSERT_TRUE(b.start(config_with_namespaces(rbd_namespace(*cluster, image))));

  constexpr uint32_t kBlock = 512;
  std::vector<uint8_t> data = pattern(256 * 1024, 77);
  {
    auto ca = connect_or_fail(controller_options(a.io_port(), kSubnqn), a);
    ASSERT_TRUE(ca);
    auto qa = io_queue_or_fail(*ca, 1);
    ASSERT_TRUE(qa);
    for (uint64_t off = 0; off < data.size(); off += 64 * 1024) {
      auto w = write_blocks(*qa, 1, 1000 + off / kBlock, kBlock, std::span<uint8_t>(data.data() + off, 64 * 1024));
      ASSERT_TRUE(w) << w.error().message;
      EXPECT_TRUE(w->get_status().ok());
    }
    // the rbd cache of A's librbd is write-back once it has seen a flush: Flush makes the data the image's
    auto f = flush(*qa, 1);
    ASSERT_TRUE(f) << f.error().message;
    EXPECT_TRUE(f->get_status().ok());
  }
  {
    auto cb = connect_or_fail(controller_options(b.io_port(), kSubnqn), b);
    ASSERT_TRUE(cb);
    auto qb = io_queue_or_fail(*cb, 1);
    ASSERT_TRUE(qb);
    std::vector<uint8_t> got(data.size());
    for (uint64_t off = 0; off < got.size(); off += 64 * 1024) {
      auto r = read_blocks(*qb, 1, 1000 + off / kBlock, kBlock, std::span<uint8_t>(got.data() + off, 64 * 1024));
      ASSERT_TRUE(r) << r.error().message;
      EXPECT_TRUE(r->get_status().ok());
    }
    EXPECT_TRUE(got == data) << "target B does not read what target A wrote";
  }
  EXPECT_TRUE(b.stop());

  // A restarts (a new process, a new librbd): the data is in the cluster.
  ASSERT_TRUE(a.stop());
  ASSERT_TRUE(a.restart());
  {
    auto ca = connect_or_fail(controller_options(a.io_port(), kSubnqn), a);
    ASSERT_TRUE(ca);
    auto qa = io_queue_or_fail(*ca, 1);
    ASSERT_TRUE(qa);
    std::vector<uint8_t> got(data.size());
    for (uint64_t off = 0; off < got.size(); off += 64 * 1024) {
      auto r = read_blocks(*qa, 1, 1000 + off / kBlock, kBlock, std::span<uint8_t>(got.data() + off, 64 * 1024));
      ASSERT_TRUE(r) << r.error().message;
      EXPECT_TRUE(r->get_status().ok());
    }
    EXPECT_TRUE(got == data) << "the data did not survive the restart";
  }
  EXPECT_TRUE(a.stop());
}

// Shared volumes through a gateway pair: two targets export one image with 512-byte blocks, so every fused
// Compare and Write goes to the OSD as one compare-and-write. Four connections (each of two hosts on each
// target) run the counter (caw_counter.h): it ends at exactly 800 only if no pair lost another's increment.
TEST(RbdE2e, CompareAndWriteCounterThroughTwoTargets) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string image = cluster->create_image("cawcount", "16M");
  TargetProcess a, b;
  ASSERT_TRUE(a.start(config_with_namespaces(rbd_namespace(*cluster, image))));
  ASSERT_TRUE(b.start(config_with_namespaces(rbd_namespace(*cluster, image))));
  CawQueues q;
  ASSERT_TRUE(connect_caw_queues({&a, &b}, q));
  const CawCounterResult r = run_caw_counter(q.raw, 40, 200);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front() << "\n--- A ---\n" << a.log() << "\n--- B ---\n" << b.log();
  EXPECT_EQ(r.final_value, 800u);
  std::printf("[ counter  ] rbd through two targets, 4 connections x 200 increments: %llu, %d miscompares retried\n",
              static_cast<unsigned long long>(r.final_value), r.retries);
  q.queues.clear();  // the queues before their controllers
  q.ctrls.clear();
  EXPECT_TRUE(a.stop());
  EXPECT_TRUE(b.stop());
}

// The reservation state of an rbd namespace is a RADOS object next to the image: registered with PTPL
// through target A, it holds through target B, which opens the image after A has gone.
TEST(RbdE2e, ReservationsWithPtplLiveNextToTheImage) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  namespace p = rdmablk::protocol;
  const std::string image = cluster->create_image("resv", "16M");
  TargetProcess a, b;
  ASSERT_TRUE(a.start(config_with_namespaces(rbd_namespace(*cluster, image))));
  {
    auto ca = connect_or_fail(controller_options(a.io_port(), kSubnqn, kHostA), a);
    ASSERT_TRUE(ca);
    auto qa = io_queue_or_fail(*ca, 1);
    ASSERT_TRUE(qa);
    auto reg = rdmablk::initiator::reservation_register(*qa, 1, p::RegisterAction::register_key, false,
                                                        p::ChangePtpl::set, 0, 0xA);
    ASSERT_TRUE(reg) << reg.error().message;
    auto acq = rdmablk::initiator::reservation_acquire(*qa, 1, p::AcquireAction::acquire, false,
                                                       p::ReservationType::write_exclusive, 0xA, 0);
    ASSERT_TRUE(acq) << acq.error().message;
  }
  ASSERT_TRUE(a.stop());
  ASSERT_TRUE(b.start(config_with_namespaces(rbd_namespace(*cluster, image))));
  auto cb = connect_or_fail(controller_options(b.io_port(), kSubnqn, kHostB), b);
  ASSERT_TRUE(cb);
  auto qb = io_queue_or_fail(*cb, 1);
  ASSERT_TRUE(qb);
  std::vector<uint8_t> block = pattern(512, 3);
  auto w = write_blocks(*qb, 1, 0, 512, block);
  ASSERT_FALSE(w) << "host B wrote through a Write Exclusive reservation of host A";
  EXPECT_NE(w.error().message.find("Reservation Conflict"), std::string::npos) << w.error().message;
  auto st = rdmablk::initiator::reservation_report(*qb, 1, true);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->rtype, static_cast<uint8_t>(p::ReservationType::write_exclusive));
  ASSERT_EQ(st->registrants.size(), 1u);
  EXPECT_EQ(st->registrants[0].hostid, host_identity(kHostA).hostid);
  EXPECT_NE(b.log().find("reservations restored"), std::string::npos) << b.log();
  qb.reset();
  cb.reset();
  EXPECT_TRUE(b.stop());
}

// SIGHUP adds an rbd namespace to a running target (the connect happens on the daemon's thread, not a
// reactor's): I/O on the ram namespace goes on, the new one serves data.
TEST(RbdE2e, ReloadAddsAnRbdNamespace) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string image = cluster->create_image("reload", "8M");
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  std::string rbd_ns = rbd_namespace(*cluster, image);
  rbd_ns.replace(rbd_ns.find("nsid: 1"), 7, "nsid: 2");
  ASSERT_TRUE(t.reload(config_with_namespaces(std::string(kRamNamespace) + rbd_ns)));
  auto c = connect_or_fail(controller_options(t.io_port(), kSubnqn), t);
  ASSERT_TRUE(c);
  auto q = io_queue_or_fail(*c, 1);
  ASSERT_TRUE(q);
  std::vector<uint8_t> data = pattern(8192, 5), got(8192);
  auto w = write_blocks(*q, 2, 16, 512, data);
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_TRUE(w->get_status().ok());
  auto r = read_blocks(*q, 2, 16, 512, got);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->get_status().ok());
  EXPECT_TRUE(got == data);
  r = read_blocks(*q, 1, 0, 512, got);  // the ram namespace is still there
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->get_status().ok());
  EXPECT_TRUE(t.stop());
}

// `rbd resize` on another client: the target hears it through the image's header watch (no reload) and
// announces it with a Namespace Attribute Changed event; Identify Namespace and the range checks follow,
// growing and shrinking.
TEST(RbdE2e, ImageResizeIsAnnouncedToHosts) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  const std::string image = cluster->create_image("resize", "16M");
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(rbd_namespace(*cluster, image))));
  RecordingConnector rec;
  auto opts = controller_options(t.io_port(), kSubnqn);
  opts.connector = rec.connector();
  RawCommand aer;  // outlives the controller
  auto c = connect_or_fail(opts, t);
  ASSERT_TRUE(c);
  auto q = io_queue_or_fail(*c, 1);
  ASSERT_TRUE(q);
  auto size_bytes = [&]() -> uint64_t {
    auto info = c->identify_namespace(1);
    EXPECT_TRUE(info) << info.error().message;
    return info ? info->size_blocks * info->block_size : 0;
  };
  ASSERT_EQ(size_bytes(), 16u << 20);
  ASSERT_TRUE(request_namespace_events(*c, *rec.admin_queue, aer));

  std::string out;
  ASSERT_EQ(cluster->rbd("resize --size 24M rbd/" + image, &out), 0) << out;
  std::vector<uint32_t> changed;
  ASSERT_TRUE(wait_namespace_changed(*c, *rec.admin_queue, aer, 60s, &changed)) << t.log();
  EXPECT_EQ(changed, (std::vector<uint32_t>{1}));
  EXPECT_EQ(size_bytes(), 24u << 20);
  std::vector<uint8_t> data = pattern(8192, 9), got(8192);
  const uint64_t past_old_end = (16u << 20) / 512 + 64;
  auto w = write_blocks(*q, 1, past_old_end, 512, data);
  ASSERT_TRUE(w) << w.error().message;
  auto r = read_blocks(*q, 1, past_old_end, 512, got);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(got == data);

  aer.done = false;
  aer.cmd.sqe = rdmablk::protocol::make_async_event_request(0);
  ASSERT_TRUE(rec.admin_queue->submit(aer.cmd).ok());
  ASSERT_EQ(cluster->rbd("resize --allow-shrink --size 8M rbd/" + image, &out), 0) << out;
  ASSERT_TRUE(wait_namespace_changed(*c, *rec.admin_queue, aer, 60s, &changed)) << t.log();
  EXPECT_EQ(size_bytes(), 8u << 20);
  auto refused = read_blocks(*q, 1, past_old_end, 512, got);
  ASSERT_FALSE(refused) << "a read past the new end was accepted";
  EXPECT_NE(refused.error().message.find("LBA Out of Range"), std::string::npos) << refused.error().message;
  q->disconnect();
  EXPECT_TRUE(c->shutdown());
  EXPECT_TRUE(t.stop());
}

TEST(RbdE2e, CheckConfigNamesTheNamespaceWhenTheClusterDoesNotAnswer) {
  CEPH_CLUSTER_OR_SKIP(cluster);
  TempDir dir(kE2eDir);
  // The cluster's conf with the mon moved to a port nobody listens on, and a 3 s mount timeout (the conf's
  // value wins over the backend's default of 30 s).
  const std::string dead = cluster->write_dead_conf((dir.path() / "dead.conf").string(), "client mount timeout = 3\n");
  const auto config = dir.path() / "target.yaml";
  write_file(config, std::string("listeners: [{address: 127.0.0.1, port: ") + std::to_string(pick_free_port()) +
                         "}]\nsubsystems:\n  - nqn: " + kSubnqn +
                         "\n    allow_any_host: true\n    namespaces:\n"
                         "      - {nsid: 1, backend: rbd, pool: rbd, image: img, ceph_conf: dead.conf, client: rdmablk}\n");
  auto r = run_target({"--check-config", "--config", config.string()}, dir.path());
  EXPECT_EQ(r.exit_status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(config.string() + ":6:51: subsystems[0].namespaces[0]: rbd rbd/img: cannot reach the Ceph "
                                         "cluster: "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(dead), std::string::npos) << r.err;
  EXPECT_LT(r.elapsed, 30s);

  // The reachable cluster and a missing image: an error naming the image, not the cluster.
  write_file(config, std::string("listeners: [{address: 127.0.0.1, port: ") + std::to_string(pick_free_port()) +
                         "}]\nsubsystems:\n  - nqn: " + kSubnqn +
                         "\n    allow_any_host: true\n    namespaces:\n"
                         "      - {nsid: 1, backend: rbd, pool: rbd, image: nope, ceph_conf: " +
                         cluster->conf() + ", client: rdmablk}\n");
  r = run_target({"--check-config", "--config", config.string()}, dir.path());
  EXPECT_EQ(r.exit_status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("subsystems[0].namespaces[0]: rbd rbd/nope: cannot open the image: No such file or directory"),
            std::string::npos)
      << r.err;
}

}  // namespace

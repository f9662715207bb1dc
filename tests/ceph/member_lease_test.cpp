// Gateway group members' leases (target/group/member_lease.h) against the throw-away Ceph cluster: a
// lease is exclusive while it lives, a release frees it at once, a lapsed one is taken over by a survivor
// and its holder learns it at its next renewal, and a lapsed one cannot be renewed even when nobody took it.
// The waits for a lease to lapse poll for the event (the takeover succeeding) or only bound it from below.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "ceph_cluster.h"
#include "target/group/member_lease.h"

namespace {

using rdmablk::target::group::LeaseOptions;
using rdmablk::target::group::MemberLease;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::shared_ptr<rdmablk::backend::RadosCluster> connect(const ceph_test::Cluster& c) {
  rdmablk::backend::RadosOptions o;
  o.ceph_conf = c.conf();
  o.client = "rdmablk";
  o.keyring = c.rdmablk_keyring();
  o.timeout_seconds = 20;
  auto cluster = rdmablk::backend::shared_rados_cluster(o);
  EXPECT_TRUE(cluster) << (cluster ? "" : cluster.error().message);
  return cluster ? *cluster : nullptr;
}

// A group of its own per test: ctest runs the ceph tests in parallel on one cluster.
LeaseOptions options(std::chrono::seconds duration) {
  static std::atomic<unsigned> counter{0};
  LeaseOptions o;
  o.place.pool = "rbd";
  o.place.group = "lease-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  o.member = "gw-a";
  o.duration = duration;
  return o;
}

class MemberLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CEPH_CLUSTER_OR_SKIP(cluster);
    rados = connect(*cluster);
    ASSERT_TRUE(rados);
  }
  // The member's lease, taken (the test stops on failure: check with ASSERT_TRUE).
  std::unique_ptr<MemberLease> acquire(const LeaseOptions& o) {
    auto a = MemberLease::acquire(rados, o);
    EXPECT_TRUE(a) << a.error().message;
    return a ? std::move(*a) : nullptr;
  }
  std::shared_ptr<rdmablk::backend::RadosCluster> rados;
};

TEST_F(MemberLeaseTest, IsExclusiveUntilReleased) {
  const LeaseOptions o = options(60s);
  auto a = acquire(o);
  ASSERT_TRUE(a);
  auto twice = MemberLease::acquire(rados, o);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().errno_value, EBUSY);
  EXPECT_NE(twice.error().message.find("held by " + a->cookie()), std::string::npos) << twice.error().message;
  auto early = MemberLease::take_over(rados, o, "gw-b");
  ASSERT_FALSE(early) << "taken over while its holder's lease lives";
  EXPECT_EQ(early.error().errno_value, EBUSY);
  EXPECT_TRUE(a->renew());

  ASSERT_TRUE(a->release());
  auto b = MemberLease::take_over(rados, o, "gw-b");
  ASSERT_TRUE(b) << "a released lease is free at once: " << b.error().message;
  auto renewed = a->renew();
  ASSERT_FALSE(renewed);
  EXPECT_EQ(renewed.error().errno_value, ENOENT);
  EXPECT_TRUE((*b)->release());
}

TEST_F(MemberLeaseTest, ALapsedLeaseIsTakenOverAndItsHolderLearnsIt) {
  const LeaseOptions o = options(2s);
  const auto t0 = Clock::now();
  auto a = acquire(o);
  ASSERT_TRUE(a);
  // The holder stops renewing (a crash, a hang): a survivor gets the lease once it lapsed, never before.
  rdmablk::Result<std::unique_ptr<MemberLease>> b = rdmablk::make_error("not tried");
  const auto deadline = t0 + 120s;  // a hang, not a delay
  while (Clock::now() < deadline) {
    b = MemberLease::take_over(rados, o, "gw-b");
    if (b || b.error().errno_value != EBUSY) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_GE(Clock::now() - t0, 1900ms) << "taken over before the lease's duration had passed";
  auto renewed = a->renew();
  ASSERT_FALSE(renewed) << "the old holder renewed a lease a survivor holds";
  EXPECT_EQ(renewed.error().errno_value, ENOENT);
  EXPECT_NE(renewed.error().message.find("lost"), std::string::npos) << renewed.error().message;
  EXPECT_TRUE((*b)->renew()) << "the survivor holds it now";
  EXPECT_TRUE((*b)->release());
}

TEST_F(MemberLeaseTest, ALapsedLeaseCannotBeRenewedEvenIfNobodyTookIt) {
  const LeaseOptions o = options(1s);
  auto a = acquire(o);
  ASSERT_TRUE(a);
  std::this_thread::sleep_for(2500ms);  // a lower bound: any extra delay only makes it more lapsed
  auto renewed = a->renew();
  ASSERT_FALSE(renewed) << "a member must learn that its lease lapsed, not take it back silently";
  EXPECT_EQ(renewed.error().errno_value, ENOENT);
  auto again = MemberLease::acquire(rados, o);
  ASSERT_TRUE(again) << "the member starts over with a new lease: " << again.error().message;
  EXPECT_TRUE((*again)->release());
}

TEST_F(MemberLeaseTest, BadOptionsAreRefused) {
  LeaseOptions o = options(10s);
  o.place.group.clear();
  auto no_group = MemberLease::acquire(rados, o);
  ASSERT_FALSE(no_group);
  EXPECT_EQ(no_group.error().errno_value, EINVAL);
  o = options(10s);
  o.place.pool = "no-such-pool";
  auto no_pool = MemberLease::acquire(rados, o);
  ASSERT_FALSE(no_pool);
  EXPECT_NE(no_pool.error().message.find("cannot open pool no-such-pool"), std::string::npos)
      << no_pool.error().message;
}

}  // namespace

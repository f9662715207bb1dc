// A gateway group's shared state object (target/group/state_object.h) against the throw-away Ceph cluster:
// read and versioned writes, the second of two writers working from the same version gets a conflict and
// nothing of its write lands, and a notified change has reached every watcher when notify() returns.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "ceph_cluster.h"
#include "target/group/state_object.h"

namespace {

using rdmablk::target::group::GroupPlace;
using rdmablk::target::group::StateObject;
using namespace std::chrono_literals;

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
std::string text_of(const StateObject::Snapshot& s) { return {s.bytes.begin(), s.bytes.end()}; }

class GroupStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CEPH_CLUSTER_OR_SKIP(cluster);
    rdmablk::backend::RadosOptions r;
    r.ceph_conf = cluster->conf();
    r.client = "rdmablk";
    r.keyring = cluster->rdmablk_keyring();
    r.timeout_seconds = 20;
    auto c = rdmablk::backend::shared_rados_cluster(r);
    ASSERT_TRUE(c) << c.error().message;
    rados = *c;
    static std::atomic<unsigned> counter{0};
    options.pool = "rbd";
    options.group = "state-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }
  // A member's handle on the group's state (each its own ioctx and watch).
  std::unique_ptr<StateObject> member() {
    auto s = StateObject::open(rados, options);
    EXPECT_TRUE(s) << s.error().message;
    return s ? std::move(*s) : nullptr;
  }
  StateObject::Snapshot read_or_fail(StateObject& s) {
    auto r = s.read();
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : StateObject::Snapshot{};
  }
  std::shared_ptr<rdmablk::backend::RadosCluster> rados;
  GroupPlace options;
};

TEST_F(GroupStateTest, ReadAndVersionedWrites) {
  auto a = member();
  ASSERT_TRUE(a);
  const auto empty = read_or_fail(*a);
  EXPECT_FALSE(empty.exists);
  auto v1 = a->write_if(empty, bytes_of("first"));
  ASSERT_TRUE(v1) << v1.error().message;
  const auto s1 = read_or_fail(*a);
  EXPECT_TRUE(s1.exists);
  EXPECT_EQ(s1.version, *v1);
  EXPECT_EQ(text_of(s1), "first");
  auto v2 = a->write_if(s1, bytes_of("second, longer"));
  ASSERT_TRUE(v2) << v2.error().message;
  EXPECT_GT(*v2, *v1);
  EXPECT_EQ(text_of(read_or_fail(*a)), "second, longer");
}

TEST_F(GroupStateTest, TheSecondOfTwoWritersGetsAConflict) {
  auto a = member();
  auto b = member();
  ASSERT_TRUE(a && b);
  // Two members creating it at once: one wins.
  const auto none_a = read_or_fail(*a);
  const auto none_b = read_or_fail(*b);
  ASSERT_TRUE(a->write_if(none_a, bytes_of("from a")));
  auto lost_create = b->write_if(none_b, bytes_of("from b"));
  ASSERT_FALSE(lost_create);
  EXPECT_EQ(lost_create.error().errno_value, ECANCELED);
  EXPECT_NE(lost_create.error().message.find("changed by another member"), std::string::npos)
      << lost_create.error().message;
  // Two members changing the same version: the second is refused, and nothing of it lands.
  const auto seen_a = read_or_fail(*a);
  const auto seen_b = read_or_fail(*b);
  ASSERT_EQ(seen_a.version, seen_b.version);
  ASSERT_TRUE(a->write_if(seen_a, bytes_of("a again")));
  auto lost = b->write_if(seen_b, bytes_of("b again"));
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().errno_value, ECANCELED);
  const auto now = read_or_fail(*b);
  EXPECT_EQ(text_of(now), "a again");
  EXPECT_TRUE(b->write_if(now, bytes_of("b, after rereading"))) << "a writer that reread wins";
}

TEST_F(GroupStateTest, ANotifiedChangeHasReachedTheWatchersWhenNotifyReturns) {
  auto a = member();
  auto b = member();
  auto c = member();
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(a->write_if(read_or_fail(*a), bytes_of("v1")));
  std::atomic<int> b_heard{0}, c_heard{0};
  ASSERT_TRUE(b->watch([&](bool lost) { b_heard += lost ? 100 : 1; }));
  ASSERT_TRUE(c->watch([&](bool lost) { c_heard += lost ? 100 : 1; }));
  EXPECT_FALSE(b->watch([](bool) {})) << "one watch per handle";
  ASSERT_TRUE(a->write_if(read_or_fail(*a), bytes_of("v2")));
  auto told = a->notify(60s);  // a bound for a hang: the acknowledgements come in milliseconds
  ASSERT_TRUE(told) << told.error().message;
  // Each watcher acknowledges after its callback ran: no waiting needed here.
  EXPECT_EQ(b_heard.load(), 1);
  EXPECT_EQ(c_heard.load(), 1);
  EXPECT_EQ(text_of(read_or_fail(*b)), "v2");
  ASSERT_TRUE(b->rewatch());
  ASSERT_TRUE(a->notify(60s));
  EXPECT_EQ(b_heard.load(), 2) << "the rewatched handle hears the next change";
}

TEST_F(GroupStateTest, BadOptionsAreRefused) {
  GroupPlace o = options;
  o.group.clear();
  auto no_group = StateObject::open(rados, o);
  ASSERT_FALSE(no_group);
  EXPECT_EQ(no_group.error().errno_value, EINVAL);
  o = options;
  o.pool = "no-such-pool";
  auto no_pool = StateObject::open(rados, o);
  ASSERT_FALSE(no_pool);
  EXPECT_NE(no_pool.error().message.find("cannot open pool no-such-pool"), std::string::npos)
      << no_pool.error().message;
}

}  // namespace

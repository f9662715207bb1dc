// The ANA registry (target/core/ana_registry.h) on its own: a queue's port by its local address, the states
// set by hand and by a reload, the change count, ports kept across a new listener list, the running
// config's live states, and which groups the log page lists.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "protocol/ana.h"
#include "target/core/ana_registry.h"

namespace rdmablk::target::testing {
namespace {

using protocol::AnaState;

ListenerConfig listener(const char* address, uint16_t port, std::vector<AnaGroupState> ana = {},
                        ListenerRole role = ListenerRole::io) {
  ListenerConfig l;
  l.address = address;
  l.port = port;
  l.role = role;
  l.ana = std::move(ana);
  return l;
}

transport::TransportAddress local(const char* address, uint16_t port) {
  transport::TransportAddress a;
  a.traddr = address;
  a.trsvcid = port;
  return a;
}

std::vector<ListenerConfig> two_listeners() {
  return {listener("10.0.0.1", 4420, {{2, AnaState::inaccessible, {}}}), listener("0.0.0.0", 4421)};
}

TEST(AnaRegistryTest, AQueueGetsThePortOfItsListenerOrTheFallback) {
  AnaRegistry ana(two_listeners());
  auto first = ana.port_for(local("10.0.0.1", 4420));
  EXPECT_EQ(first->get(2), AnaState::inaccessible);
  EXPECT_EQ(first->get(3), AnaState::optimized);
  auto wildcard = ana.port_for(local("10.0.0.9", 4421));
  EXPECT_NE(wildcard, first);
  auto none = ana.port_for(local("10.0.0.9", 4420));  // no listener on that address
  EXPECT_NE(none, first);
  EXPECT_NE(none, wildcard);
  EXPECT_EQ(none->get(2), AnaState::optimized);
  EXPECT_EQ(ana.port_for(local("10.0.0.8", 5000)), none);  // one fallback for all
}

TEST(AnaRegistryTest, SetStateCountsOnlyChanges) {
  AnaRegistry ana(two_listeners());
  EXPECT_FALSE(ana.set_state("10.0.0.2", 4420, 2, AnaState::optimized).has_value());  // no such listener
  auto same = ana.set_state("10.0.0.1", 4420, 2, AnaState::inaccessible);
  ASSERT_TRUE(same.has_value());
  EXPECT_TRUE(same->empty());
  EXPECT_EQ(ana.change_count(), 0u);
  auto changed = ana.set_state("10.0.0.1", 4420, 2, AnaState::non_optimized);
  ASSERT_TRUE(changed.has_value());
  ASSERT_EQ(changed->size(), 1u);
  EXPECT_EQ(changed->front(), ana.port_for(local("10.0.0.1", 4420)).get());
  EXPECT_EQ(ana.change_count(), 1u);
}

TEST(AnaRegistryTest, DiscoveryListenersHaveNoStatesToSet) {
  AnaRegistry ana({listener("10.0.0.1", 8009, {}, ListenerRole::discovery)});
  EXPECT_FALSE(ana.set_state("10.0.0.1", 8009, 1, AnaState::inaccessible).has_value());
}

TEST(AnaRegistryTest, AReloadKeepsThePortOfAListenerAtTheSameEndpoint) {
  AnaRegistry ana(two_listeners());
  auto kept = ana.port_for(local("10.0.0.1", 4420));
  ana.take_listeners({listener("10.0.0.3", 4420, {{2, AnaState::change, {}}}),
                      listener("10.0.0.1", 4420, {{2, AnaState::inaccessible, {}}})});
  EXPECT_EQ(ana.port_for(local("10.0.0.1", 4420)), kept);
  EXPECT_EQ(ana.port_for(local("10.0.0.3", 4420))->get(2), AnaState::change);  // new: as configured

  const AnaPort* moved = ana.set_listener_state(listener_key(listener("10.0.0.1", 4420)), 2, AnaState::optimized);
  EXPECT_EQ(moved, kept.get());
  EXPECT_EQ(ana.set_listener_state(listener_key(listener("10.0.0.1", 4420)), 2, AnaState::optimized), nullptr);
  EXPECT_EQ(ana.set_listener_state(listener_key(listener("10.0.0.7", 4420)), 2, AnaState::change), nullptr);
  EXPECT_EQ(ana.change_count(), 0u);  // a reload counts once, by hand
  ana.bump_change_count();
  EXPECT_EQ(ana.change_count(), 1u);
}

TEST(AnaRegistryTest, TheRunningConfigShowsTheLiveStates) {
  auto listeners = two_listeners();
  AnaRegistry ana(listeners);
  ASSERT_TRUE(ana.set_state("10.0.0.1", 4420, 2, AnaState::optimized).has_value());
  ASSERT_TRUE(ana.set_state("0.0.0.0", 4421, 3, AnaState::change).has_value());
  ana.overlay_live_states(listeners);
  EXPECT_EQ(listeners[0].ana_state(2), AnaState::optimized);
  EXPECT_EQ(listeners[1].ana_state(3), AnaState::change);
  ASSERT_EQ(listeners[1].ana.size(), 1u);
  EXPECT_EQ(listeners[1].ana[0].group, 3u);
}

TEST(AnaRegistryTest, TheLogListsGroupOneTheListenersGroupsAndTheNamespaces) {
  auto listeners = two_listeners();
  listeners[1].ana = {{5, AnaState::non_optimized, {}}};
  AnaRegistry ana(listeners);
  ana.bump_change_count();
  NamespaceTable table;
  for (uint32_t nsid : {1u, 2u, 3u}) {
    auto ns = std::make_shared<Namespace>();
    ns->nsid = nsid;
    ns->ana_group = nsid == 2 ? 7 : 2;
    table.namespaces.push_back(ns);
  }
  auto port = ana.port_for(local("10.0.0.1", 4420));
  const std::vector<protocol::AnaGroupEntry> expected{
      {1, AnaState::optimized, 1, {}},
      {2, AnaState::inaccessible, 1, {1, 3}},
      {5, AnaState::optimized, 1, {}},  // named by the other listener; optimized on this one
      {7, AnaState::optimized, 1, {2}},
  };
  EXPECT_EQ(ana.log_page(port.get(), table, "nqn.h", false), protocol::make_ana_log(1, expected, false));
  EXPECT_EQ(ana.log_page(port.get(), table, "nqn.h", true), protocol::make_ana_log(1, expected, true));
  // No port (a controller without one): the fallback's states, all optimized.
  auto all_optimized = expected;
  all_optimized[1].state = AnaState::optimized;
  EXPECT_EQ(ana.log_page(nullptr, table, "nqn.h", false), protocol::make_ana_log(1, all_optimized, false));
}

// A namespace masked from a host is not in that host's ANA log (an inactive NSID to it).
TEST(AnaRegistryTest, TheLogLeavesOutNamespacesMaskedFromTheHost) {
  AnaRegistry ana(two_listeners());
  NamespaceTable table;
  for (uint32_t nsid : {1u, 2u}) {
    auto ns = std::make_shared<Namespace>();
    ns->nsid = nsid;
    if (nsid == 2) ns->config.hosts = {"nqn.only"};
    table.namespaces.push_back(ns);
  }
  // Group 2 is named by a listener: listed, empty. No port: every group optimized.
  const std::vector<protocol::AnaGroupEntry> other{{1, AnaState::optimized, 0, {1}}, {2, AnaState::optimized, 0, {}}};
  const std::vector<protocol::AnaGroupEntry> only{{1, AnaState::optimized, 0, {1, 2}}, {2, AnaState::optimized, 0, {}}};
  EXPECT_EQ(ana.log_page(nullptr, table, "nqn.other", false), protocol::make_ana_log(0, other, false));
  EXPECT_EQ(ana.log_page(nullptr, table, "nqn.only", false), protocol::make_ana_log(0, only, false));
}

}  // namespace
}  // namespace rdmablk::target::testing

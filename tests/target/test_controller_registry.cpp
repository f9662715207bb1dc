// The controller registry (target/core/controller_registry.h) on its own: CNTLID allocation within a range,
// wrap-around, an exhausted range, reuse after removal; and the events queued on one controller.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "protocol/command.h"
#include "target/core/controller_registry.h"

namespace rdmablk::target::testing {
namespace {

// Allocates an ID from [min, max] and registers a controller under it; returns the ID (0: none free).
uint16_t take(ControllerRegistry& reg, uint16_t min, uint16_t max, uint16_t& next) {
  const uint16_t id = reg.allocate(min, max, next);
  if (id == 0) return 0;
  auto ctrl = std::make_shared<Controller>();
  ctrl->cntlid = id;
  reg.add(ctrl);
  return id;
}

TEST(ControllerRegistryTest, AllocatesInOrderWithinTheRangeAndWrapsAround) {
  ControllerRegistry reg;
  uint16_t next = 10;
  EXPECT_EQ(take(reg, 10, 12, next), 10);
  EXPECT_EQ(take(reg, 10, 12, next), 11);
  reg.remove(10);
  EXPECT_EQ(take(reg, 10, 12, next), 12);
  EXPECT_EQ(take(reg, 10, 12, next), 10);  // wrapped around to the freed one
  EXPECT_EQ(reg.size(), 3u);
}

TEST(ControllerRegistryTest, AnExhaustedRangeGivesZeroUntilOneIsRemoved) {
  ControllerRegistry reg;
  uint16_t next = 5;
  EXPECT_EQ(take(reg, 5, 6, next), 5);
  EXPECT_EQ(take(reg, 5, 6, next), 6);
  EXPECT_EQ(reg.allocate(5, 6, next), 0);
  reg.remove(5);
  EXPECT_EQ(reg.allocate(5, 6, next), 5);
  EXPECT_EQ(reg.find(5), nullptr);
  ASSERT_NE(reg.find(6), nullptr);
  EXPECT_EQ(reg.find(6)->cntlid, 6);
}

TEST(ControllerRegistryTest, IdsAreUniqueAcrossRangesAndClampedToTheValidOnes) {
  ControllerRegistry reg;
  uint16_t next_a = 1;
  uint16_t next_b = 0;  // outside the range: starts at its minimum
  EXPECT_EQ(take(reg, 1, 3, next_a), 1);
  EXPECT_EQ(take(reg, 2, 4, next_b), 2);
  EXPECT_EQ(take(reg, 1, 3, next_a), 3);  // 2 is taken by the other range
  EXPECT_EQ(take(reg, 1, 3, next_a), 0);
  uint16_t next = 0;
  EXPECT_EQ(reg.allocate(0, 0, next), 0);                  // 0 is no controller ID
  EXPECT_EQ(reg.allocate(0xFFF0, 0xFFFF, next), 0);        // above kMaxCntlid
  EXPECT_EQ(reg.allocate(0xFFEF, 0xFFFF, next), kMaxCntlid);
}

TEST(ControllerRegistryTest, DiscoveryControllersTakeTheWholeRange) {
  ControllerRegistry reg;
  uint16_t next = 1;
  EXPECT_EQ(take(reg, 1, 1, next), 1);
  EXPECT_EQ(reg.allocate_discovery(), 2);  // the cursor moved past 1
  EXPECT_EQ(reg.allocate_discovery(), 3);  // not registered: allocation only advances the cursor
}

TEST(ControllerRegistryTest, EventsAreQueuedOncePerTypeUntilTheLogIsRead) {
  Controller ctrl;
  ctrl.aec = protocol::kAecNamespaceAttribute;
  ControllerRegistry::note_changed_namespaces(ctrl, {1, 2});
  ControllerRegistry::note_changed_namespaces(ctrl, {2, 3});
  EXPECT_EQ(ctrl.changed_namespaces, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(ctrl.pending_events.size(), 1u);  // masked until the log page is read
  EXPECT_EQ(ctrl.event_seq, 1u);

  ControllerRegistry::queue_event(ctrl, 0x1234, kAenMaskAna, protocol::kAecAnaChange);
  EXPECT_EQ(ctrl.pending_events.size(), 1u);  // the host did not enable ANA change events
  ctrl.aec |= protocol::kAecAnaChange;
  ControllerRegistry::queue_event(ctrl, 0x1234, kAenMaskAna, protocol::kAecAnaChange);
  EXPECT_EQ(ctrl.pending_events.size(), 2u);
  ctrl.dead = true;
  ctrl.aen_masked = 0;
  ControllerRegistry::queue_event(ctrl, 0x1234, kAenMaskAna, protocol::kAecAnaChange);
  EXPECT_EQ(ctrl.pending_events.size(), 2u);
}

}  // namespace
}  // namespace rdmablk::target::testing

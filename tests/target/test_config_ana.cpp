// Config: ANA groups (namespace ana_group, listener ana states) and controller ID ranges (cntlid_min/max).
#include <gtest/gtest.h>

#include <string>

#include "target/config/config.h"
#include "target/config_test_util.h"

namespace {

using namespace rdmablk::target;
using namespace rdmablk::target::testing;
using rdmablk::protocol::AnaState;

TEST(ConfigAna, DefaultsAreGroupOneOptimizedAndTheWholeCntlidRange) {
  auto c = parse_ok(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces: [{nsid: 1, backend: ram, size: 1MiB}]
)");
  ASSERT_EQ(c.subsystems.size(), 1u);
  EXPECT_EQ(c.subsystems[0].namespaces[0].ana_group, 1u);
  EXPECT_EQ(c.subsystems[0].cntlid_min, 1);
  EXPECT_EQ(c.subsystems[0].cntlid_max, 0xFFEF);
  EXPECT_TRUE(c.listeners[0].ana.empty());
  EXPECT_EQ(c.listeners[0].ana_state(1), AnaState::optimized);
  EXPECT_EQ(c.listeners[0].ana_state(77), AnaState::optimized);
}

TEST(ConfigAna, GroupsStatesAndRangesParse) {
  auto c = parse_ok(R"(
listeners:
  - address: 127.0.0.1
    port: 4420
    ana: {2: inaccessible, 1: non_optimized}
  - address: 127.0.0.1
    port: 4421
    ana:
      1: persistent_loss
      3: change
      4: optimized
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    cntlid_min: 0x100
    cntlid_max: 511
    namespaces:
      - {nsid: 1, backend: ram, size: 1MiB, ana_group: 2}
      - {nsid: 2, backend: ram, size: 1MiB, ana_group: 128}
)");
  ASSERT_EQ(c.listeners.size(), 2u);
  const auto& a = c.listeners[0].ana;
  ASSERT_EQ(a.size(), 2u);  // sorted by group
  EXPECT_EQ(a[0].group, 1u);
  EXPECT_EQ(a[0].state, AnaState::non_optimized);
  EXPECT_EQ(a[1].group, 2u);
  EXPECT_EQ(a[1].state, AnaState::inaccessible);
  EXPECT_EQ(a[0].at.line, 4);
  EXPECT_EQ(c.listeners[0].ana_state(3), AnaState::optimized);  // not named: optimized
  EXPECT_EQ(c.listeners[1].ana_state(1), AnaState::persistent_loss);
  EXPECT_EQ(c.listeners[1].ana_state(3), AnaState::change);
  EXPECT_EQ(c.subsystems[0].cntlid_min, 0x100);
  EXPECT_EQ(c.subsystems[0].cntlid_max, 511);
  EXPECT_EQ(c.subsystems[0].namespaces[0].ana_group, 2u);
  EXPECT_EQ(c.subsystems[0].namespaces[1].ana_group, 128u);
  EXPECT_TRUE(restart_only_changes(c, parse_ok(R"(
listeners:
  - address: 127.0.0.1
    port: 4420
  - address: 127.0.0.1
    port: 4421
subsystems: []
)")).empty());  // ANA states are reloadable
}

TEST(ConfigAna, UnknownStateGroupZeroAndDuplicates) {
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
    ana: {1: optimised}
)"),
            "t.yaml:3:14: listeners[0].ana.1: unknown ANA state 'optimised' (expected optimized, non_optimized, "
            "inaccessible, persistent_loss or change)");
  const auto zero = parse_error(R"(
listeners:
  - address: 127.0.0.1
    ana: {0: optimized}
)");
  EXPECT_EQ(zero.rfind("t.yaml:3:11: listeners[0].ana: ", 0), 0u) << zero;
  EXPECT_NE(zero.find("1..128"), std::string::npos) << zero;
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
    ana:
      2: optimized
      2: inaccessible
)"),
            "t.yaml:5:7: listeners[0].ana.2: ANA group listed twice (first at line 4)");
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
    ana: [1, 2]
)"),
            "t.yaml:3:10: listeners[0].ana: expected a mapping of ANA group to state ({1: optimized, 2: "
            "inaccessible}), got a list");
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
  - address: 127.0.0.1
    role: discovery
    ana: {1: optimized}
)"),
            "t.yaml:5:5: listeners[1].ana: ANA states apply to io listeners only (a discovery listener serves no "
            "namespaces)");
}

TEST(ConfigAna, NamespaceGroupOutOfRange) {
  for (const char* group : {"0", "129"}) {
    const auto e = parse_error(std::string(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces: [{nsid: 1, backend: ram, size: 1MiB, ana_group: )") + group + "}]\n");
    EXPECT_EQ(e.rfind("t.yaml:5:65: subsystems[0].namespaces[0].ana_group: ", 0), 0u) << e;
  }
}

TEST(ConfigAna, CntlidRangeErrors) {
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    cntlid_min: 100
    cntlid_max: 99
)"),
            "t.yaml:6:17: subsystems[0].cntlid_max: cntlid_min 100 is greater than cntlid_max 99");
  const auto zero = parse_error(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    cntlid_min: 0
)");
  EXPECT_EQ(zero.rfind("t.yaml:5:17: subsystems[0].cntlid_min: ", 0), 0u) << zero;
  const auto high = parse_error(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    cntlid_max: 0xFFF0
)");
  EXPECT_EQ(high.rfind("t.yaml:5:17: subsystems[0].cntlid_max: ", 0), 0u) << high;
}

TEST(ConfigAna, SmallMaxIoSizeWarnsThatHostsDropAna) {
  auto c = parse_ok(R"(
listeners: [{address: 127.0.0.1}]
limits:
  max_io_size: 4KiB
)");
  ASSERT_EQ(c.warnings.size(), 2u);  // + no subsystems
  EXPECT_NE(c.warnings[1].find("limits.max_io_size: 4 KiB is below the ANA log page's 8208 bytes"), std::string::npos)
      << c.warnings[1];
  auto ok = parse_ok(R"(
listeners: [{address: 127.0.0.1}]
limits:
  max_io_size: 16KiB
)");
  EXPECT_EQ(ok.warnings.size(), 1u);
}

TEST(ConfigAna, StateNames) {
  for (auto s : {AnaState::optimized, AnaState::non_optimized, AnaState::inaccessible, AnaState::persistent_loss,
                 AnaState::change}) {
    auto back = parse_ana_state(ana_state_config_name(s));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, s);
  }
  EXPECT_FALSE(parse_ana_state("Optimized"));
}

}  // namespace

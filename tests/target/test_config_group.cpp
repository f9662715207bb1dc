// `group:` (a gateway group member, docs/gateway-groups.md): its keys and defaults, and the errors that name
// file:line:column and the field: a bad name, a lease out of range, an ANA group listed twice, a
// listener's own `ana:` next to the group, an unknown failback mode. And that group changes wait for a restart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "target/config/config.h"
#include "target/config_test_util.h"

namespace rdmablk::target::testing {
namespace {

// `group` is written from line 7 on.
std::string config(const std::string& group, const std::string& listener_extra = "") {
  return "listeners:\n"
         "  - {address: 127.0.0.1" +
         listener_extra +
         "}\n"
         "subsystems:\n"
         "  - nqn: nqn.2024-12.io.rdmablk:group\n"
         "    allow_any_host: true\n"
         "    namespaces: [{nsid: 1, backend: ram, size: 1MiB, ana_group: 2}]\n" +
         group;
}

TEST(ConfigGroup, KeysAndDefaults) {
  const TargetConfig c =
      parse_ok(config("group:\n"
                      "  name: gw\n"
                      "  pool: rbd\n"
                      "  member: gw-a\n"
                      "  namespace: gateways\n"
                      "  client: rdmablk\n"
                      "  lease_seconds: 6\n"
                      "  ana_groups: [3, 2]\n"
                      "  failback: manual\n"
                      "  blocklist: false\n"
                      "  standby_state: non_optimized\n"));
  const GroupConfig& g = c.group;
  EXPECT_TRUE(g.enabled);
  EXPECT_EQ(g.name, "gw");
  EXPECT_EQ(g.pool, "rbd");
  EXPECT_EQ(g.member, "gw-a");
  EXPECT_EQ(g.rados_namespace, "gateways");
  EXPECT_EQ(g.client, "rdmablk");
  EXPECT_EQ(g.lease_seconds, 6u);
  EXPECT_EQ(g.ana_groups, (std::vector<uint32_t>{2, 3})) << "kept ascending";
  EXPECT_EQ(g.failback, GroupFailback::manual);
  EXPECT_FALSE(g.blocklist);
  EXPECT_EQ(g.standby_state, protocol::AnaState::non_optimized);
  EXPECT_EQ(g.at.line, 8);

  const TargetConfig d = parse_ok(config("group: {name: gw, pool: rbd}\n"));
  EXPECT_EQ(d.group.lease_seconds, 10u);
  EXPECT_EQ(d.group.failback, GroupFailback::automatic);
  EXPECT_TRUE(d.group.blocklist);
  EXPECT_EQ(d.group.standby_state, protocol::AnaState::inaccessible);
  EXPECT_EQ(d.group.client, "admin");
  EXPECT_EQ(d.group.ceph_conf, "/etc/ceph/ceph.conf");
  EXPECT_TRUE(d.group.ana_groups.empty()) << "a member may be a pure standby";
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string short_host = std::string(host).substr(0, std::string(host).find('.'));
  EXPECT_EQ(d.group.member, short_host) << "the member's name defaults to the short host name";

  EXPECT_FALSE(parse_ok(config("")).group.enabled);
}

TEST(ConfigGroup, ErrorsNameTheField) {
  EXPECT_EQ(parse_error(config("group: {pool: rbd}\n")),
            "t.yaml:7:8: group.name: missing (required: the gateway group's name)");
  const std::string bad_name = parse_error(config("group: {name: 'g w', pool: rbd}\n"));
  EXPECT_NE(bad_name.find("t.yaml:7:15: group.name: 'g w' is not a valid name"), std::string::npos) << bad_name;
  const std::string lease = parse_error(config("group: {name: g, pool: rbd, lease_seconds: 1}\n"));
  EXPECT_NE(lease.find("group.lease_seconds"), std::string::npos) << lease;
  EXPECT_NE(lease.find("2..600"), std::string::npos) << lease;
  const std::string twice = parse_error(config("group: {name: g, pool: rbd, ana_groups: [2, 2]}\n"));
  EXPECT_NE(twice.find("group.ana_groups[1]: listed twice"), std::string::npos) << twice;
  const std::string range = parse_error(config("group: {name: g, pool: rbd, ana_groups: [129]}\n"));
  EXPECT_NE(range.find("group.ana_groups[0]"), std::string::npos) << range;
  const std::string failback = parse_error(config("group: {name: g, pool: rbd, failback: sometimes}\n"));
  EXPECT_NE(failback.find("group.failback"), std::string::npos) << failback;
  const std::string standby = parse_error(config("group: {name: g, pool: rbd, standby_state: optimized}\n"));
  EXPECT_NE(standby.find("group.standby_state"), std::string::npos) << standby;
  const std::string unknown = parse_error(config("group: {name: g, pool: rbd, leases: 3}\n"));
  EXPECT_NE(unknown.find("leases"), std::string::npos) << unknown;
}

TEST(ConfigGroup, ListenersTakeNoAnaStatesInAGroup) {
  const std::string e = parse_error(config("group: {name: g, pool: rbd}\n", ", ana: {2: inaccessible}"));
  EXPECT_NE(e.find("listeners[0].ana: ANA states are the gateway group's (group: at line 7)"), std::string::npos) << e;
  EXPECT_NE(e.find("t.yaml:2:"), std::string::npos) << "names the listener's ana entry: " << e;
}

TEST(ConfigGroup, TheShippedExampleParses) {
  auto c = load_config(std::string(RDMABLK_SOURCE_DIR) + "/configs/gateway-group.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->group.enabled);
  EXPECT_EQ(c->group.member, "gw-a");
  EXPECT_EQ(c->group.ana_groups, std::vector<uint32_t>{1});
  ASSERT_EQ(c->subsystems.size(), 1u);
  EXPECT_EQ(c->subsystems[0].namespaces.size(), 3u);
}

TEST(ConfigGroup, ChangesTakeEffectAtRestart) {
  const TargetConfig a = parse_ok(config("group: {name: g, pool: rbd, ana_groups: [1]}\n"));
  const TargetConfig b = parse_ok(config("group: {name: g, pool: rbd, ana_groups: [2]}\n"));
  EXPECT_EQ(restart_only_changes(a, b), std::vector<std::string>{"group"});
  EXPECT_TRUE(restart_only_changes(a, a).empty());
  const TargetConfig none = parse_ok(config(""));
  EXPECT_EQ(restart_only_changes(none, a), std::vector<std::string>{"group"});
}

}  // namespace
}  // namespace rdmablk::target::testing

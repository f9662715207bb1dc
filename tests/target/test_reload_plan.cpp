// The reload planner (target/core/reload_plan.h) on its own: two configs in, the change list out. Then the
// core's side of it that the planner relies on: running_config() and apply_changes().
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "security/dhchap_key.h"
#include "target/config/config.h"
#include "target/config_test_util.h"
#include "target/core/reload_plan.h"
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

using protocol::AnaState;

constexpr const char* kA = "nqn.2024-11.io.rdmablk:a";
constexpr const char* kB = "nqn.2024-11.io.rdmablk:b";
constexpr const char* kHostA = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
constexpr const char* kHostB = "nqn.2014-08.org.nvmexpress:uuid:99999999-2222-3333-4444-555555555555";

// Two io listeners (group 2 inaccessible on the first), a discovery listener; subsystem a (one host, ns 1 in
// group 1, ns 2 in group 2) and b (any host, one namespace).
constexpr const char* kBase = R"(
listeners:
  - {address: 10.0.0.1, port: 4420, ana: {2: inaccessible}}
  - {address: 10.0.0.2, port: 4420}
  - {address: 10.0.0.1, port: 8009, role: discovery}
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    hosts: [nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555]
    namespaces:
      - {nsid: 1, backend: ram, size: 1MiB}
      - {nsid: 2, backend: ram, size: 1MiB, ana_group: 2}
  - nqn: nqn.2024-11.io.rdmablk:b
    allow_any_host: true
    namespaces: [{nsid: 1, backend: null, size: 1MiB}]
)";

NamespaceConfig ns(uint32_t nsid, uint64_t size = 1 << 20) {
  NamespaceConfig n;
  n.nsid = nsid;
  n.backend = BackendKind::ram;
  n.size = size;
  n.block_size = 512;
  return n;
}

SubsystemConfig& sub(TargetConfig& c, std::string_view nqn) {
  for (auto& s : c.subsystems)
    if (s.nqn == nqn) return s;
  ADD_FAILURE() << "no subsystem " << nqn;
  return c.subsystems.front();
}

NamespaceConfig& ns_of(TargetConfig& c, std::string_view nqn, uint32_t nsid) {
  for (auto& n : sub(c, nqn).namespaces)
    if (n.nsid == nsid) return n;
  ADD_FAILURE() << "no namespace " << nsid;
  return sub(c, nqn).namespaces.front();
}

void erase_ns(TargetConfig& c, std::string_view nqn, uint32_t nsid) {
  std::erase_if(sub(c, nqn).namespaces, [nsid](const NamespaceConfig& n) { return n.nsid == nsid; });
}

std::vector<std::string> described(const ChangeList& changes) {
  std::vector<std::string> out;
  for (const auto& c : changes) out.push_back(describe(c));
  return out;
}

// One row: the running config (kBase unless `old` is given), the edit that makes the new one from a second
// parse of the same text, and the changes expected, described.
struct Row {
  const char* name;
  std::function<void(TargetConfig&)> edit;
  std::vector<std::string> want;
  const char* old = kBase;
};

const std::vector<Row>& rows() {
  static const std::vector<Row> r = {
      {"the same file again", [](TargetConfig&) {}, {}},
      {"namespace added", [](TargetConfig& c) { sub(c, kA).namespaces.push_back(ns(3)); },
       {"namespace added nqn.2024-11.io.rdmablk:a:3"}},
      {"namespace removed", [](TargetConfig& c) { erase_ns(c, kA, 1); },
       {"namespace removed nqn.2024-11.io.rdmablk:a:1"}},
      {"namespace replaced: another block size", [](TargetConfig& c) { ns_of(c, kA, 1).block_size = 4096; },
       {"namespace replaced nqn.2024-11.io.rdmablk:a:1"}},
      {"namespace replaced: another backend", [](TargetConfig& c) { ns_of(c, kB, 1).backend = BackendKind::ram; },
       {"namespace replaced nqn.2024-11.io.rdmablk:b:1"}},
      {"namespace replaced: read only", [](TargetConfig& c) { ns_of(c, kA, 2).read_only = true; },
       {"namespace replaced nqn.2024-11.io.rdmablk:a:2"}},
      {"namespace resized", [](TargetConfig& c) { ns_of(c, kA, 1).size = 2 << 20; },
       {"namespace resized nqn.2024-11.io.rdmablk:a:1 1 MiB -> 2 MiB"}},
      {"resized and another key: replaced",
       [](TargetConfig& c) {
         ns_of(c, kA, 1).size = 2 << 20;
         ns_of(c, kA, 1).direct = false;
       },
       {"namespace replaced nqn.2024-11.io.rdmablk:a:1"}},
      {"namespace moved to another ANA group", [](TargetConfig& c) { ns_of(c, kA, 1).ana_group = 3; },
       {"namespace moved nqn.2024-11.io.rdmablk:a:1 ANA group 1 -> 3"}},
      {"moved and replaced: only replaced",
       [](TargetConfig& c) {
         ns_of(c, kA, 1).ana_group = 3;
         ns_of(c, kA, 1).block_size = 4096;
       },
       {"namespace replaced nqn.2024-11.io.rdmablk:a:1"}},
      {"host added", [](TargetConfig& c) { sub(c, kA).hosts.push_back(kHostB); },
       {std::string("hosts changed nqn.2024-11.io.rdmablk:a: ") + kHostA + ", " + kHostB, "discovery log changed"}},
      {"any host now", [](TargetConfig& c) { sub(c, kA).allow_any_host = true; },
       {"hosts changed nqn.2024-11.io.rdmablk:a: any", "discovery log changed"}},
      {"model", [](TargetConfig& c) { sub(c, kA).model = "other"; }, {"settings changed nqn.2024-11.io.rdmablk:a"}},
      {"controller ID range",
       [](TargetConfig& c) {
         sub(c, kB).cntlid_min = 100;
         sub(c, kB).cntlid_max = 200;
       },
       {"settings changed nqn.2024-11.io.rdmablk:b"}},
      {"authentication required", [](TargetConfig& c) { sub(c, kA).require_authentication = true; },
       {"settings changed nqn.2024-11.io.rdmablk:a"}},
      {"DH-HMAC-CHAP hashes of a host",
       [](TargetConfig& c) { sub(c, kA).host_configs[0].dhchap_hashes = {protocol::auth::HashId::sha512}; },
       {"settings changed nqn.2024-11.io.rdmablk:a"}},
      {"the serial is not reloaded", [](TargetConfig& c) { sub(c, kA).serial = "OTHER"; }, {}},
      {"limits and reactors are not reloaded",
       [](TargetConfig& c) {
         c.limits.io_queue_depth = 64;
         c.reactors = 7;
       },
       {}},
      {"subsystem added",
       [](TargetConfig& c) {
         SubsystemConfig s;
         s.nqn = "nqn.2024-11.io.rdmablk:c";
         s.allow_any_host = true;
         s.namespaces = {ns(1), ns(2)};
         c.subsystems.push_back(s);
       },
       {"subsystem added nqn.2024-11.io.rdmablk:c (2 namespaces)", "discovery log changed"}},
      {"subsystem removed", [](TargetConfig& c) { c.subsystems.erase(c.subsystems.begin()); },
       {"subsystem removed nqn.2024-11.io.rdmablk:a (2 namespaces)", "discovery log changed"}},
      {"ANA state of a listener", [](TargetConfig& c) { c.listeners[0].ana.clear(); },
       {"listeners changed", "ANA state tcp 10.0.0.1:4420 group 2: inaccessible -> optimized"}},
      {"ANA states of two groups, by group",
       [](TargetConfig& c) {
         c.listeners[1].ana = {AnaGroupState{3, AnaState::change, {}}, AnaGroupState{1, AnaState::non_optimized, {}}};
       },
       {"listeners changed", "ANA state tcp 10.0.0.2:4420 group 1: optimized -> non_optimized",
        "ANA state tcp 10.0.0.2:4420 group 3: optimized -> change"}},
      {"an explicit optimized key: the keys change, no state does",
       [](TargetConfig& c) { c.listeners[1].ana = {AnaGroupState{5, AnaState::optimized, {}}}; },
       {"listeners changed"}},
      {"TLS of a listener: not in the discovery log's change",
       [](TargetConfig& c) { c.listeners[1].tls = transport::tcp::TlsPolicy::required; }, {"listeners changed"}},
      {"listener now discovery-only: a new listener, no ANA change",
       [](TargetConfig& c) { c.listeners[0].role = ListenerRole::discovery; },
       {"listeners changed (endpoints)", "discovery log changed"}},
      {"listener added with its own states: no ANA change",
       [](TargetConfig& c) {
         ListenerConfig l = c.listeners[1];
         l.address = "10.0.0.3";
         l.ana = {AnaGroupState{1, AnaState::inaccessible, {}}};
         c.listeners.push_back(l);
       },
       {"listeners changed (endpoints)", "discovery log changed"}},
      {"listener removed", [](TargetConfig& c) { c.listeners.pop_back(); },
       {"listeners changed (endpoints)", "discovery log changed"}},
      {"listeners reordered", [](TargetConfig& c) { std::swap(c.listeners[0], c.listeners[1]); },
       {"listeners changed (endpoints)", "discovery log changed"}},
      {"namespace changes in the new order, then removals by NSID",
       [](TargetConfig& c) {
         auto& s = sub(c, kA);
         s.namespaces = {ns(7), ns_of(c, kA, 2), ns(4)};
         s.namespaces[1].size = 2 << 20;
       },
       {"namespace added nqn.2024-11.io.rdmablk:a:7", "namespace resized nqn.2024-11.io.rdmablk:a:2 1 MiB -> 2 MiB",
        "namespace added nqn.2024-11.io.rdmablk:a:4", "namespace removed nqn.2024-11.io.rdmablk:a:1",
        "namespace removed nqn.2024-11.io.rdmablk:a:3"},
       R"(
listeners: [{address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces:
      - {nsid: 3, backend: ram, size: 1MiB}
      - {nsid: 2, backend: ram, size: 1MiB}
      - {nsid: 1, backend: ram, size: 1MiB}
)"},
      {"a namespace masked to one host: the same backend",
       [](TargetConfig& c) { ns_of(c, kA, 2).hosts = {"nqn.2014-08.org.nvmexpress:uuid:h1"}; },
       {"namespace masked nqn.2024-11.io.rdmablk:a:2 every allowed host -> nqn.2014-08.org.nvmexpress:uuid:h1"}},
      {"a QoS limit changed: the same backend",
       [](TargetConfig& c) {
         ns_of(c, kA, 2).qos.limits.iops = 5000;
         ns_of(c, kA, 2).qos.hosts.push_back(HostQosConfig{"nqn.2014-08.org.nvmexpress:uuid:h1", {0, 0, 0, 7}, {}});
       },
       {"namespace QoS changed nqn.2024-11.io.rdmablk:a:2 unlimited -> iops 5000 "
        "[nqn.2014-08.org.nvmexpress:uuid:h1: write_mbps 7]"}},
      {"subsystems removed by NQN", [](TargetConfig& c) { c.subsystems.clear(); },
       {"subsystem removed nqn.2024-11.io.rdmablk:a (1 namespaces)",
        "subsystem removed nqn.2024-11.io.rdmablk:m (1 namespaces)",
        "subsystem removed nqn.2024-11.io.rdmablk:z (1 namespaces)", "discovery log changed"},
       R"(
listeners: [{address: 10.0.0.1}]
subsystems:
  - {nqn: "nqn.2024-11.io.rdmablk:z", allow_any_host: true, namespaces: [{nsid: 1, backend: ram, size: 1MiB}]}
  - {nqn: "nqn.2024-11.io.rdmablk:a", allow_any_host: true, namespaces: [{nsid: 1, backend: ram, size: 1MiB}]}
  - {nqn: "nqn.2024-11.io.rdmablk:m", allow_any_host: true, namespaces: [{nsid: 1, backend: ram, size: 1MiB}]}
)"},
      {"several at once: subsystems in the new order, then removals, listeners, discovery",
       [](TargetConfig& c) {
         SubsystemConfig s;
         s.nqn = "nqn.2024-11.io.rdmablk:c";
         s.allow_any_host = true;
         s.namespaces = {ns(1)};
         auto a = sub(c, kA);
         a.allow_any_host = true;
         a.model = "other";
         a.namespaces = {ns(3), a.namespaces[1]};
         a.namespaces[1].ana_group = 1;
         c.subsystems = {s, a};  // b goes
         c.listeners[0].ana.clear();
       },
       {"subsystem added nqn.2024-11.io.rdmablk:c (1 namespaces)", "hosts changed nqn.2024-11.io.rdmablk:a: any",
        "settings changed nqn.2024-11.io.rdmablk:a", "namespace added nqn.2024-11.io.rdmablk:a:3",
        "namespace moved nqn.2024-11.io.rdmablk:a:2 ANA group 2 -> 1", "namespace removed nqn.2024-11.io.rdmablk:a:1",
        "subsystem removed nqn.2024-11.io.rdmablk:b (1 namespaces)", "listeners changed",
        "ANA state tcp 10.0.0.1:4420 group 2: inaccessible -> optimized", "discovery log changed"}},
  };
  return r;
}

class ReloadPlanRows : public ::testing::TestWithParam<Row> {};

TEST_P(ReloadPlanRows, PlansTheChanges) {
  const Row& row = GetParam();
  const TargetConfig running = parse_ok(row.old);
  TargetConfig next = parse_ok(row.old);
  row.edit(next);
  const ChangeList changes = plan_changes(running, next);
  EXPECT_EQ(described(changes), row.want);
  // Carried out on the running config, the changes leave nothing to do.
  TargetConfig applied = running;
  apply_to_config(applied, changes);
  EXPECT_EQ(described(plan_changes(applied, next)), std::vector<std::string>{});
  // A subsystem's edits are adjacent: the applier tells its controllers once.
  std::vector<std::string> seen;
  for (const auto& c : changes) {
    const std::string* nqn = edited_subsystem(c);
    if (nqn == nullptr || (!seen.empty() && seen.back() == *nqn)) continue;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), *nqn), 0) << *nqn;
    seen.push_back(*nqn);
  }
}

std::string row_name(const ::testing::TestParamInfo<Row>& row) {
  std::string name;
  for (const char* p = row.param.name; *p != 0; ++p)
    name += std::isalnum(static_cast<unsigned char>(*p)) != 0 ? *p : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Rows, ReloadPlanRows, ::testing::ValuesIn(rows()), row_name);

TEST(ReloadPlan, ChangesCarryWhatTheApplierNeeds) {
  const TargetConfig running = parse_ok(kBase);
  TargetConfig next = running;
  sub(next, kA).namespaces.push_back(ns(3, 4 << 20));
  sub(next, kA).hosts = {kHostB};
  sub(next, kA).host_configs[0].nqn = kHostB;
  next.subsystems.pop_back();  // b
  next.listeners[0].ana = {AnaGroupState{2, AnaState::change, {}}};
  const ChangeList changes = plan_changes(running, next);
  ASSERT_EQ(changes.size(), 7u) << ::testing::PrintToString(described(changes));
  const auto& hosts = std::get<change::HostsChanged>(changes[0]);
  EXPECT_EQ(hosts.nqn, kA);
  EXPECT_FALSE(hosts.allow_any_host);
  EXPECT_EQ(hosts.hosts, std::vector<std::string>{kHostB});
  EXPECT_EQ(std::get<change::SettingsChanged>(changes[1]).config.host_configs[0].nqn, kHostB);
  const auto& added = std::get<change::NamespaceAdded>(changes[2]);
  EXPECT_EQ(added.nqn, kA);
  EXPECT_EQ(added.config.nsid, 3u);
  EXPECT_EQ(added.config.size, 4u << 20);
  const auto& removed = std::get<change::SubsystemRemoved>(changes[3]);
  EXPECT_EQ(removed.nqn, kB);
  EXPECT_EQ(removed.namespaces, 1u);
  const auto& listeners = std::get<change::ListenersChanged>(changes[4]);
  EXPECT_FALSE(listeners.endpoints_changed);
  ASSERT_EQ(listeners.listeners.size(), 3u);
  EXPECT_EQ(listeners.listeners[0].ana_state(2), AnaState::change);
  const auto& ana = std::get<change::AnaStateChanged>(changes[5]);
  EXPECT_EQ(ana.listener, listener_key(next.listeners[0]));
  EXPECT_EQ(ana.group, 2u);
  EXPECT_EQ(ana.from, AnaState::inaccessible);
  EXPECT_EQ(ana.to, AnaState::change);
  EXPECT_TRUE(std::holds_alternative<change::DiscoveryLogChanged>(changes[6]));
}

TEST(ReloadPlan, SummaryIsWhatTheLogLinePrints) {
  EXPECT_EQ(summarize({}).describe(),
            "subsystems +0 -0, namespaces +0 -0 ~0, host lists changed 0, masks changed 0, QoS changed 0, controllers dropped 0, "
            "ANA changes 0, discovery log unchanged");
  const Row& several = rows().back();
  const TargetConfig running = parse_ok(several.old);
  TargetConfig next = running;
  several.edit(next);
  ns_of(next, kA, 2).size = 2 << 20;  // moved and resized: resized only
  ReloadSummary s = summarize(plan_changes(running, next));
  EXPECT_EQ(s.subsystems_added, 1u);
  EXPECT_EQ(s.namespaces_added, 2u);  // c's one, a's 3
  EXPECT_EQ(s.namespaces_removed, 2u);  // a's 1, b's one
  EXPECT_EQ(s.namespaces_changed, 1u);
  EXPECT_EQ(s.ana_changes, 1u);
  s.controllers_dropped = 4;  // the applier's count
  EXPECT_EQ(s.describe(),
            "subsystems +1 -1, namespaces +2 -2 ~1, host lists changed 1, masks changed 0, QoS changed 0, controllers dropped 4, "
            "ANA changes 1, discovery log changed");
}

// Reading the config again reads its secrets again: new key objects, the same secrets, no change.
TEST(ReloadPlan, HostSecretsCompareByContent) {
  auto key = [] {
    auto k = security::dhchap::DhchapKey::generate(32, security::dhchap::KeyTransform::none);
    EXPECT_TRUE(k);
    return k->format();
  };
  auto doc = [](const std::string& secret) {
    return std::string(R"(
listeners: [{address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    namespaces: [{nsid: 1, backend: ram, size: 1MiB}]
    hosts:
      - nqn: nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555
        dhchap_key: ")") + secret + "\"\n";
  };
  const std::string secret = key();
  const TargetConfig running = parse_ok(doc(secret));
  EXPECT_TRUE(plan_changes(running, parse_ok(doc(secret))).empty());
  EXPECT_EQ(described(plan_changes(running, parse_ok(doc(key())))),
            std::vector<std::string>{"settings changed nqn.2024-11.io.rdmablk:a"});
}

TEST(ReloadPlan, SameBackendIgnoresTheAnaGroupOnly) {
  const NamespaceConfig a = ns(1);
  NamespaceConfig b = a;
  b.ana_group = 9;
  b.at = {3, 4};
  EXPECT_TRUE(same_backend(a, b));
  b.qos.limits.iops = 5000;  // a limit keeps the backend too
  EXPECT_TRUE(same_backend(a, b));
  b.uuid[0] ^= 1;
  EXPECT_FALSE(same_backend(a, b));
}

// --- The core's side ---------------------------------------------------------------------------------------

TargetConfig with_ana_key() {
  auto c = test_config();
  c.listeners[0].ana = {AnaGroupState{2, AnaState::inaccessible, {}}};
  return c;
}

// set_ana_state holds until the next reload: the running config shows it, and reloading the same file puts the
// file's state back and counts it.
TEST(ReloadApply, ReloadPutsBackAnAnaStateSetSince) {
  const TargetConfig config = with_ana_key();
  CoreHarness h(config);
  EXPECT_TRUE(plan_changes(h.core().running_config(), config).empty());
  ASSERT_TRUE(h.core().set_ana_state("0.0.0.0:4420", 2, AnaState::optimized));
  ASSERT_TRUE(h.core().set_ana_state("0.0.0.0:4420", 7, AnaState::non_optimized));
  const TargetConfig running = h.core().running_config();
  EXPECT_EQ(running.listeners[0].ana_state(2), AnaState::optimized);
  EXPECT_EQ(running.listeners[0].ana_state(7), AnaState::non_optimized);
  auto r = h.core().reload(config);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->ana_changes, 2u);
  EXPECT_FALSE(r->discovery_changed);
  EXPECT_EQ(h.core().ana_change_count(), 3u);
  EXPECT_TRUE(plan_changes(h.core().running_config(), config).empty());
  EXPECT_EQ(h.core().running_config().listeners[0].ana, config.listeners[0].ana);  // the keys as in the file
}

TEST(ReloadApply, RunningConfigFollowsReloadsNotFailedOnes) {
  CoreHarness h;
  auto config = test_config();
  config.subsystems[0].namespaces.push_back(ram_ns(kSub1, 3, 2 << 20));
  config.subsystems[1].hosts.push_back(kHost2);
  ASSERT_TRUE(h.core().reload(config));
  EXPECT_TRUE(plan_changes(h.core().running_config(), config).empty());
  auto broken = config;
  broken.subsystems[0].namespaces.push_back(ram_ns(kSub1, 4, 1000));  // not a multiple of the block size
  broken.subsystems.pop_back();
  EXPECT_FALSE(h.core().reload(broken));
  EXPECT_TRUE(plan_changes(h.core().running_config(), config).empty());
}

// A list made by hand (as the live-management API will) applies like a reload's, even with a subsystem's edits
// apart: they make one table (a second one of the same generation would be stale on the reactors).
TEST(ReloadApply, AHandMadeChangeListApplies) {
  CoreHarness h;
  auto admin = h.queue();
  const uint16_t cntlid = h.bring_up(*admin);
  auto io = h.io_queue(cntlid, 1);
  SubsystemConfig sub2 = test_config().subsystems[1];
  sub2.model = "renamed";
  ChangeList changes{change::NamespaceAdded{kSub1, ram_ns(kSub1, 9, 1 << 20)}, change::SettingsChanged{sub2},
                     change::NamespaceRemoved{kSub1, 2}};
  auto r = h.core().apply_changes(changes);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->namespaces_added, 1u);
  EXPECT_EQ(r->namespaces_removed, 1u);
  h.reactor.run();
  EXPECT_TRUE(h.write(*io, 9, 0, 1, pattern(512, 3)).status().ok());
  EXPECT_EQ(h.read(*io, 2, 0, 1, 4096).status(), st::invalid_namespace);
  auto expected = test_config();
  apply_to_config(expected, changes);
  EXPECT_TRUE(plan_changes(h.core().running_config(), expected).empty());
}

}  // namespace
}  // namespace rdmablk::target::testing

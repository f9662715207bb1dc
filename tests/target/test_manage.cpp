// The management API's edits and their overlay (target/manage/): each verb's checks, the same change list as
// the same edit made to the YAML, and the overlay saved, replayed at start and reload, and refused when the
// file no longer agrees with it.
#include <sys/stat.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "support/temp_dir.h"
#include "target/core/reload_plan.h"
#include "target/manage/config_edits.h"
#include "target/manage/managed_config.h"

namespace {

using nlohmann::json;
using namespace rdmablk::target;
using namespace rdmablk::target::manage;

constexpr const char* kHostA = "nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-0000-0000-0000-000000000001";
constexpr const char* kHostB = "nqn.2014-08.org.nvmexpress:uuid:bbbbbbbb-0000-0000-0000-000000000002";
constexpr const char* kSub = "nqn.2024-01.io.rdmablk:a";

std::string base_yaml(const std::string& state_dir, const std::string& extra_namespaces = "") {
  return "# operator's comment\n"
         "listeners:\n"
         "  - {transport: tcp, address: 127.0.0.1, port: 4420, ana: {1: optimized}}\n"
         "state_dir: " +
         state_dir +
         "\n"
         "subsystems:\n"
         "  - nqn: " +
         kSub +
         "\n"
         "    hosts: [" +
         kHostA + ", " + kHostB +
         "]\n"
         "    namespaces:\n"
         "      - {nsid: 1, backend: ram, size: 1MiB}\n" +
         extra_namespaces;
}

class Manage : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.path().string() + "/target.yaml";
    write(base_yaml(dir_.path().string() + "/state"));
    auto m = load_managed_config(path_);
    ASSERT_TRUE(m) << m.error().message;
    running_ = std::move(*m);
  }
  void write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  // A verb carried out as the daemon does (minus the core): proposed, saved, adopted.
  rdmablk::Result<bool> run(const std::string& verb, const json& params) {
    auto p = propose_edit(running_, verb, params);
    EXPECT_TRUE(p) << verb << ": " << p.error().message;
    if (!p) return tl::unexpected(p.error());
    if (p->changed) {
      if (auto s = save_overlay(p->next); !s) return tl::unexpected(s.error());
      running_ = std::move(p->next);
    }
    return p->changed;
  }
  std::string error_of(const std::string& verb, const json& params) {
    auto p = propose_edit(running_, verb, params);
    EXPECT_FALSE(p) << verb << " " << params.dump() << " was accepted";
    return p ? std::string() : p.error().message;
  }
  const NamespaceConfig* ns(uint32_t nsid) const {
    for (const auto& n : running_.config.subsystems.at(0).namespaces)
      if (n.nsid == nsid) return &n;
    return nullptr;
  }

  rdmablk::testing::TempDir dir_;
  std::string path_;
  ManagedConfig running_;
};

TEST_F(Manage, NamespaceVerbsAddChangeMaskAndRemove) {
  ASSERT_EQ(run("namespace_add", {{"subsystem", kSub}, {"nsid", 2}, {"backend", "ram"}, {"size", "2MiB"}}), true);
  ASSERT_NE(ns(2), nullptr);
  EXPECT_EQ(ns(2)->size, 2u << 20);
  // The same again is a no-op, not an error; other settings under the same NSID are refused.
  EXPECT_EQ(run("namespace_add", {{"subsystem", kSub}, {"nsid", 2}, {"backend", "ram"}, {"size", "2MiB"}}), false);
  EXPECT_NE(error_of("namespace_add", {{"subsystem", kSub}, {"nsid", 2}, {"backend", "ram"}, {"size", "4MiB"}})
                .find("exists already, with other settings"),
            std::string::npos);
  ASSERT_EQ(run("namespace_set", {{"subsystem", kSub}, {"nsid", 2}, {"size", "4MiB"}}), true);
  EXPECT_EQ(ns(2)->size, 4u << 20);
  ASSERT_EQ(run("namespace_add_host", {{"subsystem", kSub}, {"nsid", 2}, {"host", kHostA}}), true);
  EXPECT_TRUE(ns(2)->visible_to(kHostA));
  EXPECT_FALSE(ns(2)->visible_to(kHostB));
  EXPECT_EQ(run("namespace_add_host", {{"subsystem", kSub}, {"nsid", 2}, {"host", kHostA}}), false);
  // The last host of a mask cannot go (no host would see it); `hosts: null` gives it to every allowed host.
  EXPECT_NE(error_of("namespace_remove_host", {{"subsystem", kSub}, {"nsid", 2}, {"host", kHostA}})
                .find("an empty list hides the namespace from every host"),
            std::string::npos);
  ASSERT_EQ(run("namespace_add_host", {{"subsystem", kSub}, {"nsid", 2}, {"host", kHostB}}), true);
  ASSERT_EQ(run("namespace_remove_host", {{"subsystem", kSub}, {"nsid", 2}, {"host", kHostA}}), true);
  EXPECT_FALSE(ns(2)->visible_to(kHostA));
  EXPECT_TRUE(ns(2)->visible_to(kHostB));
  ASSERT_EQ(run("namespace_set", {{"subsystem", kSub}, {"nsid", 2}, {"hosts", nullptr}}), true);
  EXPECT_TRUE(ns(2)->visible_to(kHostA));
  // QoS limits, set and lifted live (change::QosChanged: the same backend).
  ASSERT_EQ(run("namespace_set", {{"subsystem", kSub}, {"nsid", 2}, {"qos", {{"iops", 5000}}}}), true);
  EXPECT_EQ(ns(2)->qos.limits.iops, 5000u);
  EXPECT_NE(error_of("namespace_set", {{"subsystem", kSub}, {"nsid", 2}, {"qos", {{"iopz", 5}}}}).find("qos.iopz"),
            std::string::npos);
  ASSERT_EQ(run("namespace_set", {{"subsystem", kSub}, {"nsid", 2}, {"qos", nullptr}}), true);
  EXPECT_FALSE(ns(2)->qos.limits.any());
  ASSERT_EQ(run("namespace_remove", {{"subsystem", kSub}, {"nsid", 2}}), true);
  EXPECT_EQ(ns(2), nullptr);
}

TEST_F(Manage, EveryCheckOfTheConfigFileAppliesAndNamesTheField) {
  auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                                   : ::testing::AssertionFailure() << message;
  };
  EXPECT_TRUE(has(error_of("namespace_add", {{"subsystem", kSub}, {"nsid", 2}, {"backend", "ram"}, {"sise", 1}}),
                  "namespaces[1].sise: unknown key (did you mean 'size'?)"));
  EXPECT_TRUE(has(error_of("namespace_add", {{"subsystem", kSub}, {"nsid", 2}, {"backend", "ram"}, {"size", "big"}}),
                  "namespaces[1].size"));
  EXPECT_TRUE(has(error_of("namespace_add", {{"subsystem", kSub}, {"backend", "ram"}}), "nsid: missing"));
  EXPECT_TRUE(has(error_of("namespace_add", {{"subsystem", kSub}, {"nsid", "two"}}), "nsid: expected an NSID"));
  EXPECT_TRUE(has(error_of("namespace_add", {{"subsystem", "nqn.x:none"}, {"nsid", 2}}), "subsystem: no subsystem"));
  EXPECT_TRUE(has(error_of("namespace_set", {{"subsystem", kSub}, {"nsid", 7}, {"size", "1MiB"}}),
                  "nsid: no namespace 7 in " + std::string(kSub)));
  EXPECT_TRUE(has(error_of("namespace_remove", {{"subsystem", kSub}, {"nsid", 7}}), "no namespace 7"));
  EXPECT_TRUE(has(error_of("namespace_add_host",
                           {{"subsystem", kSub}, {"nsid", 1}, {"host", "nqn.2014-08.org.nvmexpress:uuid:other"}}),
                  "hosts"));  // a mask may only name hosts the subsystem allows
  EXPECT_TRUE(has(error_of("subsystem_set", {{"nqn", kSub}, {"namespaces", json::array()}}),
                  "namespaces: not changed by this verb"));
  EXPECT_TRUE(has(error_of("subsystem_add", {{"nqn", "nqn.2024-01.io.rdmablk:b"}}), "no host may connect"));
  EXPECT_TRUE(has(error_of("host_remove", {{"subsystem", kSub}, {"host", "nqn.x:nobody"}}), "is not a host of"));
  EXPECT_TRUE(has(error_of("ana_set", {{"listener", "127.0.0.1:4420"}, {"group", 0}, {"state", "optimized"}}),
                  "group: expected"));
  EXPECT_TRUE(has(error_of("ana_set", {{"listener", "127.0.0.1:4420"}, {"group", 200}, {"state", "optimized"}}),
                  "ana"));  // above the ANA group limit: the parser's range check
  EXPECT_TRUE(has(error_of("ana_set", {{"listener", "127.0.0.1:4420"}, {"group", 1}, {"state", "fast"}}), "fast"));
  EXPECT_TRUE(has(error_of("ana_set", {{"listener", "127.0.0.9:4420"}, {"group", 1}, {"state", "optimized"}}),
                  "listener: no io listener at 127.0.0.9:4420"));
  EXPECT_TRUE(
      has(error_of("ana_set", {{"listener", "nonsense"}, {"group", 1}, {"state", "optimized"}}), "is not ADDR:PORT"));
  EXPECT_TRUE(has(error_of("format_disk", json::object()), "unknown verb"));
  EXPECT_TRUE(has(error_of("namespace_add", json::array()), "params: expected an object"));
  // None of them changed anything.
  EXPECT_TRUE(running_.edits.empty());
}

// The change list of an API verb is the reload planner's for the same edit written into the file.
TEST_F(Manage, AVerbPlansTheSameChangesAsTheSameEditToTheFile) {
  struct Case {
    const char* verb;
    json params;
    std::string extra_namespaces;  // what the file gets instead
    bool after_listener = false;  // the file's line goes under the listener's, not at the end
  };
  const std::string state = dir_.path().string() + "/state";
  const std::vector<Case> cases = {
      {"namespace_add",
       {{"subsystem", kSub}, {"nsid", 3}, {"backend", "ram"}, {"size", "1MiB"}},
       "      - {nsid: 3, backend: ram, size: 1MiB}\n"},
      {"namespace_set",
       {{"subsystem", kSub}, {"nsid", 1}, {"hosts", json::array({kHostB})}},
       "__replace__      - {nsid: 1, backend: ram, size: 1MiB, hosts: [" + std::string(kHostB) + "]}\n"},
      {"namespace_set",
       {{"subsystem", kSub}, {"nsid", 1}, {"size", "2MiB"}},
       "__replace__      - {nsid: 1, backend: ram, size: 2MiB}\n"},
      {"namespace_set",
       {{"subsystem", kSub}, {"nsid", 1}, {"qos", {{"iops", 5000}, {"write_mbps", 50}}}},
       "__replace__      - {nsid: 1, backend: ram, size: 1MiB, qos: {iops: 5000, write_mbps: 50}}\n"},
      {"listener_add",
       {{"transport", "tcp"}, {"address", "127.0.0.1"}, {"port", 8009}, {"role", "discovery"}},
       "  - {transport: tcp, address: 127.0.0.1, port: 8009, role: discovery}\n",
       true},
  };
  for (const auto& c : cases) {
    const ManagedConfig before = running_;
    auto api = propose_edit(before, c.verb, c.params);
    ASSERT_TRUE(api) << api.error().message;
    std::string text = base_yaml(state);
    if (c.after_listener) {
      const std::string line = "ana: {1: optimized}}\n";
      text.insert(text.find(line) + line.size(), c.extra_namespaces);
    } else if (c.extra_namespaces.rfind("__replace__", 0) == 0) {
      const std::string line = "      - {nsid: 1, backend: ram, size: 1MiB}\n";
      text.replace(text.find(line), line.size(), c.extra_namespaces.substr(11));
    } else {
      text += c.extra_namespaces;
    }
    auto file = parse_config(text, path_);
    ASSERT_TRUE(file) << file.error().message;
    const ChangeList from_api = plan_changes(before.config, api->next.config);
    const ChangeList from_file = plan_changes(before.config, *file);
    ASSERT_FALSE(from_api.empty()) << c.verb;
    ASSERT_EQ(from_api.size(), from_file.size()) << c.verb;
    for (std::size_t i = 0; i < from_api.size(); ++i)
      EXPECT_EQ(describe(from_api[i]), describe(from_file[i])) << c.verb;
  }
}

TEST_F(Manage, TheOverlayIsSavedAndReplayedAtStartWithSecretsNeverShown) {
  const std::string key = "DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:";
  ASSERT_EQ(run("namespace_add", {{"subsystem", kSub}, {"nsid", 2}, {"backend", "ram"}, {"size", "1MiB"}}), true);
  ASSERT_EQ(run("ana_set", {{"listener", "127.0.0.1:4420"}, {"group", 1}, {"state", "non_optimized"}}), true);
  auto with_key = run("host_add", {{"subsystem", kSub},
                                   {"host", "nqn.2014-08.org.nvmexpress:uuid:cccccccc-0000-0000-0000-000000000003"},
                                   {"dhchap_key", key}});
  ASSERT_TRUE(with_key) << with_key.error().message;
  struct stat sb {};
  ASSERT_EQ(::stat(running_.overlay_path.c_str(), &sb), 0) << running_.overlay_path;
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  EXPECT_NE(running_.overlay_path.find("/state/managed/"), std::string::npos);
  EXPECT_EQ(overlay_json(running_).dump().find("ia6zGod"), std::string::npos);  // redacted
  EXPECT_NE(overlay_json(running_).dump().find("(secret)"), std::string::npos);

  // A restart: the file as it was, and the overlay.
  auto restarted = load_managed_config(path_);
  ASSERT_TRUE(restarted) << restarted.error().message;
  EXPECT_EQ(restarted->edits.size(), 3u);
  EXPECT_TRUE(plan_changes(running_.config, restarted->config).empty());
  EXPECT_EQ(restarted->config.listeners[0].ana.at(0).state, rdmablk::protocol::AnaState::non_optimized);
  // The operator's file was not touched.
  std::ifstream in(path_);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "# operator's comment");
}

TEST_F(Manage, AReloadReplaysTheOverlayAndRefusesAFileThatContradictsIt) {
  ASSERT_EQ(run("namespace_add", {{"subsystem", kSub}, {"nsid", 2}, {"backend", "ram"}, {"size", "1MiB"}}), true);
  ASSERT_EQ(run("namespace_remove", {{"subsystem", kSub}, {"nsid", 1}}), true);
  // The operator removes namespace 1 from the file too: the overlay's removal is then simply done already.
  write(base_yaml(dir_.path().string() + "/state")
            .substr(0, base_yaml(dir_.path().string() + "/state").find("      - {nsid: 1")) +
        "      - {nsid: 5, backend: ram, size: 1MiB}\n");
  auto reloaded = reload_base(running_);
  ASSERT_TRUE(reloaded) << reloaded.error().message;
  ASSERT_EQ(reloaded->config.subsystems[0].namespaces.size(), 2u);  // 5 from the file, 2 from the API
  // Then defines namespace 2 itself, differently: the reload fails and says which entry no longer applies.
  write(base_yaml(dir_.path().string() + "/state", "      - {nsid: 2, backend: ram, size: 8MiB}\n"));
  auto conflict = reload_base(running_);
  ASSERT_FALSE(conflict);
  EXPECT_NE(conflict.error().message.find("entry 1 (namespace_add"), std::string::npos) << conflict.error().message;
  EXPECT_NE(conflict.error().message.find(running_.overlay_path), std::string::npos) << conflict.error().message;
}

TEST_F(Manage, AnOverlayThatIsNotOneStopsTheStartWithItsPath) {
  ASSERT_EQ(run("namespace_add", {{"subsystem", kSub}, {"nsid", 2}, {"backend", "ram"}, {"size", "1MiB"}}), true);
  std::ofstream(running_.overlay_path, std::ios::trunc) << "{\"edits\": 5";
  auto broken = load_managed_config(path_);
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message.find(running_.overlay_path), std::string::npos) << broken.error().message;
  EXPECT_NE(broken.error().message.find("not a management overlay"), std::string::npos) << broken.error().message;
}

TEST(ManageEdits, JsonBecomesTheYamlTheParserReads) {
  YAML::Node n = to_yaml(json{{"a", 1}, {"b", true}, {"c", json::array({"x", 2})}, {"d", nullptr}, {"e", "s"}});
  EXPECT_EQ(n["a"].Scalar(), "1");
  EXPECT_EQ(n["b"].Scalar(), "true");
  EXPECT_EQ(n["c"][1].Scalar(), "2");
  EXPECT_TRUE(n["d"].IsNull());
  EXPECT_EQ(n["e"].Scalar(), "s");
  EXPECT_EQ(redact_secrets(json{{"hosts", json::array({json{{"tls_psk", "NVMeTLSkey-1:01:x:"}}})}}).dump(),
            R"x({"hosts":[{"tls_psk":"(secret)"}]})x");
}

}  // namespace

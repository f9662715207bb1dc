// The management API end to end over NVMe/TCP: a namespace added through `ctl namespace_add` reaches a
// connected host as a Namespace Attribute Changed event and serves I/O without a reconnect; a mask set live
// takes it away from one host only; bad requests change nothing and the target keeps serving; and after a
// restart every change is still there (the overlay in state_dir).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e_common.h"
#include "initiator/ublk/multipath.h"
#include "protocol/ana.h"

namespace e2e {
namespace {

::testing::AssertionResult ctl_ok(const TargetProcess& t, const std::vector<std::string>& args) {
  auto r = ctl(t, args);
  if (r.exit_status == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "ctl exited " << r.exit_status << ": " << r.out << r.err;
}

std::vector<uint32_t> namespaces_of(const TargetProcess& t) {
  auto r = ctl(t, {"namespaces"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  std::vector<uint32_t> out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& n : j) out.push_back(n["nsid"].get<uint32_t>());
  return out;
}

TEST(ManageE2e, LiveChangesReachConnectedHostsAndSurviveARestart) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  const std::string sub = std::string("subsystem=") + kSubnqn;
  RecordingConnector rec;
  auto opts = controller_options(t.io_port(), kSubnqn, kHostA);
  opts.connector = rec.connector();
  RawCommand aer;  // outlives the controller
  auto a = connect_or_fail(opts, t);
  ASSERT_TRUE(a);
  auto b = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostB), t);
  ASSERT_TRUE(b);

  // Added live: host A hears of it, lists it and reads it, still on the same connection.
  ASSERT_TRUE(request_namespace_events(*a, *rec.admin_queue, aer));
  ASSERT_TRUE(ctl_ok(t, {"namespace_add", sub, "nsid=2", "backend=ram", "size=8MiB"}));
  std::vector<uint32_t> changed;
  ASSERT_TRUE(wait_namespace_changed(*a, *rec.admin_queue, aer, 30s, &changed)) << t.log();
  EXPECT_EQ(changed, std::vector<uint32_t>{2});
  auto ids = a->active_namespaces();
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, (std::vector<uint32_t>{1, 2}));
  auto qa = io_queue_or_fail(*a, 1);
  ASSERT_TRUE(qa);
  std::vector<uint8_t> block(512, 0x5a);
  ASSERT_TRUE(write_blocks(*qa, 2, 0, 512, block));

  // Masked live to host B: A loses it, B keeps it.
  ASSERT_TRUE(request_namespace_events(*a, *rec.admin_queue, aer));
  ASSERT_TRUE(ctl_ok(t, {"namespace_add_host", sub, "nsid=2", std::string("host=") + kHostB}));
  ASSERT_TRUE(wait_namespace_changed(*a, *rec.admin_queue, aer, 30s, &changed)) << t.log();
  ids = a->active_namespaces();
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, std::vector<uint32_t>{1});
  auto ids_b = b->active_namespaces();
  ASSERT_TRUE(ids_b);
  EXPECT_EQ(*ids_b, (std::vector<uint32_t>{1, 2}));

  // Bad requests: an error naming the field, nothing changed, I/O goes on.
  auto twice = ctl(t, {"namespace_add", sub, "nsid=2", "backend=ram", "size=16MiB"});
  EXPECT_EQ(twice.exit_status, 1);
  EXPECT_NE(twice.err.find("exists already"), std::string::npos) << twice.err;
  auto typo = ctl(t, {"namespace_set", sub, "nsid=2", "sise=16MiB"});
  EXPECT_EQ(typo.exit_status, 1);
  EXPECT_NE(typo.err.find("sise: unknown key (did you mean 'size'?)"), std::string::npos) << typo.err;
  auto wrong_type = ctl(t, {"namespace_set", sub, "nsid=2", "size=[1,2]"});
  EXPECT_EQ(wrong_type.exit_status, 1);
  EXPECT_NE(wrong_type.err.find("size"), std::string::npos) << wrong_type.err;
  auto nobody = ctl(t, {"namespace_remove", sub, "nsid=9"});
  EXPECT_EQ(nobody.exit_status, 1);
  EXPECT_NE(nobody.err.find("no namespace 9"), std::string::npos) << nobody.err;
  EXPECT_TRUE(read_blocks(*qa, 1, 0, 512, block));
  ASSERT_TRUE(
      ctl_ok(t, {"ana_set", "listener=127.0.0.1:" + std::to_string(t.io_port()), "group=1", "state=non_optimized"}));

  qa->disconnect();
  EXPECT_TRUE(a->shutdown());
  EXPECT_TRUE(b->shutdown());
  ASSERT_TRUE(t.stop());

  // A restart: the file as written, plus the overlay.
  ASSERT_TRUE(t.restart());
  EXPECT_EQ(namespaces_of(t), (std::vector<uint32_t>{1, 2}));
  auto managed = ctl(t, {"managed"});
  ASSERT_EQ(managed.exit_status, 0) << managed.err;
  auto m = nlohmann::json::parse(managed.out);
  ASSERT_EQ(m["edits"].size(), 3u) << managed.out;  // the refused requests left nothing
  EXPECT_EQ(m["edits"][0]["verb"], "namespace_add");
  EXPECT_NE(m["overlay"].get<std::string>().find((t.dir() / "state").string()), std::string::npos);
  auto c = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostA), t);
  ASSERT_TRUE(c);
  ids = c->active_namespaces();
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, std::vector<uint32_t>{1});  // still masked from A
  auto page = c->read_ana_log();
  ASSERT_TRUE(page) << page.error().message;
  auto log = rdmablk::initiator::ublk::parse_ana_log(*page);
  ASSERT_TRUE(log) << log.error().message;
  EXPECT_EQ(rdmablk::initiator::ublk::ana_state_of(*log, 1, c->find_namespace(1)->id.anagrpid.get()),
            rdmablk::protocol::AnaState::non_optimized);
  EXPECT_TRUE(c->shutdown());
  EXPECT_TRUE(t.stop());
}

}  // namespace
}  // namespace e2e

// Namespace masking end to end over NVMe/TCP: a namespace with `hosts:` is visible to those hosts only, and a
// reload that unmasks it reaches a connected host as a Namespace Attribute Changed event, after which it is
// in the host's active namespace list and serves I/O, without a reconnect.
#include <gtest/gtest.h>

#include "e2e_common.h"

namespace e2e {
namespace {

// Namespace 1 masked to `hosts` (empty: no mask), namespace 2 for everyone.
std::string masked(const std::vector<std::string>& hosts) {
  std::string ns1 = "      - nsid: 1\n        backend: ram\n        size: 8MiB\n";
  if (!hosts.empty()) {
    ns1 += "        hosts:\n";
    for (const auto& h : hosts) ns1 += "          - " + h + "\n";
  }
  return config_with_namespaces(ns1 + "      - nsid: 2\n        backend: ram\n        size: 8MiB\n");
}

TEST(MaskingE2e, HostsSeeOnlyTheirNamespacesAndALiveUnmaskReachesThem) {
  TargetProcess t;
  ASSERT_TRUE(t.start(masked({kHostA})));
  auto a = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostA), t);
  ASSERT_TRUE(a);
  RecordingConnector rec;
  auto opts = controller_options(t.io_port(), kSubnqn, kHostB);
  opts.connector = rec.connector();
  RawCommand aer;  // outlives the controller
  auto b = connect_or_fail(opts, t);
  ASSERT_TRUE(b);
  auto ids_a = a->active_namespaces();
  auto ids_b = b->active_namespaces();
  ASSERT_TRUE(ids_a && ids_b);
  EXPECT_EQ(*ids_a, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(*ids_b, (std::vector<uint32_t>{2}));
  auto qb = io_queue_or_fail(*b, 1);
  ASSERT_TRUE(qb);
  std::vector<uint8_t> block(512);
  auto refused = read_blocks(*qb, 1, 0, 512, block);
  ASSERT_FALSE(refused) << "host B read a namespace masked from it";
  EXPECT_NE(refused.error().message.find("Invalid Namespace"), std::string::npos) << refused.error().message;

  ASSERT_TRUE(request_namespace_events(*b, *rec.admin_queue, aer));
  ASSERT_TRUE(t.reload(masked({})));
  std::vector<uint32_t> changed;
  ASSERT_TRUE(wait_namespace_changed(*b, *rec.admin_queue, aer, 30s, &changed)) << t.log();
  EXPECT_EQ(changed, std::vector<uint32_t>{1});
  ids_b = b->active_namespaces();
  ASSERT_TRUE(ids_b);
  EXPECT_EQ(*ids_b, (std::vector<uint32_t>{1, 2}));
  auto r = read_blocks(*qb, 1, 0, 512, block);
  EXPECT_TRUE(r) << r.error().message;
  EXPECT_NE(t.log().find("masks changed 1"), std::string::npos) << t.log();
  qb->disconnect();
  EXPECT_TRUE(b->shutdown());
  EXPECT_TRUE(a->shutdown());
  EXPECT_TRUE(t.stop());
}

}  // namespace
}  // namespace e2e

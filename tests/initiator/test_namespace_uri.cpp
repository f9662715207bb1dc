#include <gtest/gtest.h>

#include "initiator/host/namespace_uri.h"

using namespace rdmablk::initiator;

TEST(NamespaceUri, ParsesAddressNqnAndNsid) {
  auto u = parse_namespace_uri("tcp://127.0.0.1:4420/nqn.2024-01.io.rdmablk:vol0/7");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->address.traddr, "127.0.0.1");
  EXPECT_EQ(u->address.trsvcid, 4420);
  EXPECT_EQ(u->subnqn, "nqn.2024-01.io.rdmablk:vol0");
  EXPECT_EQ(u->nsid, 7u);
}

TEST(NamespaceUri, NsidDefaultsToOne) {
  auto u = parse_namespace_uri("rdma://[fe80::2]:4420/nqn.2024-01.io.rdmablk:vol0");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->address.type, rdmablk::transport::TransportType::rdma);
  EXPECT_EQ(u->nsid, 1u);
}

TEST(NamespaceUri, RejectsMissingNqnAndBadNsid) {
  for (const char* bad : {"tcp://127.0.0.1:4420", "tcp://127.0.0.1:4420/", "tcp://127.0.0.1:4420/nqn.x/0",
                          "tcp://127.0.0.1:4420/nqn.x/4294967295", "tcp://127.0.0.1:4420/nqn.x/abc",
                          "tcp://127.0.0.1:4420//1", "127.0.0.1:4420/nqn.x"}) {
    EXPECT_FALSE(parse_namespace_uri(bad)) << bad;
  }
}

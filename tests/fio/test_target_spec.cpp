// The fio engine's filename / option parsing (fio_engine/target_spec.h): SPDK's key=value form, namespace
// URIs, labels with everything in the options, precedence, and the errors a user sees.
#include "fio_engine/target_spec.h"

#include <gtest/gtest.h>

namespace fe = rdmablk::fio_engine;
using rdmablk::transport::TransportType;

namespace {

fe::EngineOptions options_with_address() {
  fe::EngineOptions o;
  o.traddr = "192.0.2.1";
  o.subnqn = "nqn.2024-11.io.rdmablk:opt";
  return o;
}

}  // namespace

TEST(FioTargetSpec, SpdkKeyValues) {
  auto t = fe::resolve_target({}, "trtype=RDMA adrfam=IPv4 traddr=192.0.2.7 trsvcid=4421 "
                                  "subnqn=nqn.2024-11.io.rdmablk:vol0 ns=3 hostnqn=nqn.2014-08.org.example:h1");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->address.type, TransportType::rdma);
  EXPECT_EQ(t->address.traddr, "192.0.2.7");
  EXPECT_EQ(t->address.trsvcid, 4421);
  EXPECT_EQ(t->subnqn, "nqn.2024-11.io.rdmablk:vol0");
  EXPECT_EQ(t->nsid, 3u);
  EXPECT_EQ(t->hostnqn, "nqn.2014-08.org.example:h1");
  EXPECT_EQ(t->describe(), "rdma://192.0.2.7:4421/nqn.2024-11.io.rdmablk:vol0/3");
}

TEST(FioTargetSpec, SpdkDefaultsAndExtraSpaces) {
  auto t = fe::resolve_target({}, "  traddr=127.0.0.1   subnqn=nqn.2024-11.io.rdmablk:vol0 nsid=2 ");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->address.type, TransportType::tcp);
  EXPECT_EQ(t->address.trsvcid, 4420);
  EXPECT_EQ(t->nsid, 2u);
}

TEST(FioTargetSpec, NamespaceUri) {
  auto t = fe::resolve_target({}, "tcp://[::1]:4430/nqn.2024-11.io.rdmablk:vol0/5");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->address.traddr, "::1");
  EXPECT_EQ(t->address.trsvcid, 4430);
  EXPECT_EQ(t->subnqn, "nqn.2024-11.io.rdmablk:vol0");
  EXPECT_EQ(t->nsid, 5u);
}

TEST(FioTargetSpec, UriWithoutNsidTakesTheOption) {
  fe::EngineOptions o;
  o.nsid = 7;
  auto t = fe::resolve_target(o, "rdma://192.0.2.1:4420/nqn.2024-11.io.rdmablk:vol0");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->address.type, TransportType::rdma);
  EXPECT_EQ(t->nsid, 7u);
  auto d = fe::resolve_target({}, "rdma://192.0.2.1:4420/nqn.2024-11.io.rdmablk:vol0");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->nsid, 1u);
}

TEST(FioTargetSpec, LabelUsesTheOptions) {
  auto o = options_with_address();
  o.transport = "rdma";
  o.trsvcid = "4500";
  o.nsid = 4;
  o.hostid = "4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c";
  auto t = fe::resolve_target(o, "vol");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->address.type, TransportType::rdma);
  EXPECT_EQ(t->address.traddr, "192.0.2.1");
  EXPECT_EQ(t->address.trsvcid, 4500);
  EXPECT_EQ(t->subnqn, "nqn.2024-11.io.rdmablk:opt");
  EXPECT_EQ(t->nsid, 4u);
  EXPECT_EQ(t->hostid, "4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c");
}

TEST(FioTargetSpec, FilenameWinsOverOptions) {
  auto o = options_with_address();
  o.nsid = 4;
  auto t = fe::resolve_target(o, "traddr=192.0.2.9 ns=2");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->address.traddr, "192.0.2.9");
  EXPECT_EQ(t->subnqn, "nqn.2024-11.io.rdmablk:opt");  // from the options
  EXPECT_EQ(t->nsid, 2u);
}

TEST(FioTargetSpec, ControllerKeyIgnoresTheNamespace) {
  auto o = options_with_address();
  auto a = fe::resolve_target(o, "ns=1");
  auto b = fe::resolve_target(o, "ns=2");
  auto c = fe::resolve_target(o, "ns=1 subnqn=nqn.2024-11.io.rdmablk:other");
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->controller_key(), b->controller_key());
  EXPECT_NE(a->controller_key(), c->controller_key());
}

TEST(FioTargetSpec, Errors) {
  auto msg = [](const fe::EngineOptions& o, std::string_view name) {
    auto t = fe::resolve_target(o, name);
    EXPECT_FALSE(t) << name;
    return t ? std::string() : t.error().message;
  };
  const auto o = options_with_address();
  EXPECT_NE(msg({}, "vol").find("no target address for file 'vol'"), std::string::npos);
  fe::EngineOptions no_nqn;
  no_nqn.traddr = "192.0.2.1";
  EXPECT_NE(msg(no_nqn, "vol").find("no subsystem NQN"), std::string::npos);
  EXPECT_NE(msg(o, "traddr=1.2.3.4 color=blue").find("unknown key 'color'"), std::string::npos);
  EXPECT_NE(msg(o, "traddr=1.2.3.4 subnqn").find("'subnqn' is not KEY=VALUE"), std::string::npos);
  EXPECT_NE(msg(o, "ns=0").find("invalid namespace id '0'"), std::string::npos);
  EXPECT_NE(msg(o, "ns=x").find("invalid namespace id 'x'"), std::string::npos);
  EXPECT_NE(msg(o, "trtype=fc").find("transport 'fc': expected tcp or rdma"), std::string::npos);
  EXPECT_NE(msg(o, "adrfam=ib").find("adrfam=ib"), std::string::npos);
  EXPECT_NE(msg(o, "trsvcid=0").find("trsvcid '0'"), std::string::npos);
  EXPECT_NE(msg(o, "tcp://1.2.3.4:4420").find("filename 'tcp://1.2.3.4:4420'"), std::string::npos);
}

TEST(FioTargetSpec, OptionValuesAcceptFilenameEscapes) {
  EXPECT_EQ(fe::unescape_option("nqn.2024-11.io.rdmablk\\:vol0"), "nqn.2024-11.io.rdmablk:vol0");
  EXPECT_EQ(fe::unescape_option("fe80\\:\\:1"), "fe80::1");
  EXPECT_EQ(fe::unescape_option("plain"), "plain");
}

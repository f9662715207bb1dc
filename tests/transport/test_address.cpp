#include <gtest/gtest.h>

#include "transport/address.h"

using namespace rdmablk::transport;

TEST(TransportAddress, ParsesTcpUriWithPort) {
  auto a = parse_transport_uri("tcp://127.0.0.1:4421");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->type, TransportType::tcp);
  EXPECT_EQ(a->traddr, "127.0.0.1");
  EXPECT_EQ(a->trsvcid, 4421);
  EXPECT_EQ(to_uri(*a), "tcp://127.0.0.1:4421");
}

TEST(TransportAddress, DefaultsPortTo4420AndAcceptsRdma) {
  auto a = parse_transport_uri("RDMA://10.0.0.1");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->type, TransportType::rdma);
  EXPECT_EQ(a->trsvcid, kDefaultIoPort);
}

TEST(TransportAddress, ParsesBracketedIpv6) {
  auto a = parse_transport_uri("tcp://[fe80::1]:8009");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->traddr, "fe80::1");
  EXPECT_EQ(a->trsvcid, 8009);
  EXPECT_EQ(to_uri(*a), "tcp://[fe80::1]:8009");
}

TEST(TransportAddress, RejectsMalformedUris) {
  for (const char* bad : {"127.0.0.1:4420", "udp://1.2.3.4:1", "tcp://:4420", "tcp://1.2.3.4:0",
                          "tcp://1.2.3.4:65536", "tcp://1.2.3.4:44x", "tcp://fe80::1:4420", "tcp://[fe80::1",
                          "tcp://1.2.3.4:"}) {
    auto a = parse_transport_uri(bad);
    EXPECT_FALSE(a) << bad;
    if (!a) {
      EXPECT_FALSE(a.error().message.empty()) << bad;
    }
  }
}

TEST(TransportAddress, PortParserBounds) {
  EXPECT_EQ(parse_port("1").value(), 1);
  EXPECT_EQ(parse_port("65535").value(), 65535);
  EXPECT_FALSE(parse_port(""));
  EXPECT_FALSE(parse_port("-1"));
  EXPECT_FALSE(parse_port("4420 "));
}

// ConnectionGate: per-listener and per-host limits, places given back by tickets, and host_of's keys.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "transport/connection_limits.h"

namespace rdmablk::transport {
namespace {

TEST(ConnectionGate, PerHostLimitCountsOverEveryListener) {
  auto gate = ConnectionGate::create({.per_listener = 0, .per_host = 3});
  const unsigned a = gate->add_listener("127.0.0.1:4420");
  const unsigned b = gate->add_listener("127.0.0.1:8009");
  std::vector<ConnectionTicket> held(3);
  std::string why;
  ASSERT_TRUE(gate->admit(a, "10.0.0.2", held[0], why));
  ASSERT_TRUE(gate->admit(b, "10.0.0.2", held[1], why));
  ASSERT_TRUE(gate->admit(a, "10.0.0.2", held[2], why));
  ConnectionTicket more;
  EXPECT_FALSE(gate->admit(b, "10.0.0.2", more, why));
  EXPECT_EQ(why, "3 connections from 10.0.0.2 are open (limits.connections.per_host)");
  ConnectionTicket other;
  EXPECT_TRUE(gate->admit(b, "10.0.0.3", other, why)) << "another host is not affected";
  EXPECT_EQ(gate->open_from("10.0.0.2"), 3u);
  held.pop_back();  // one closes: its place is free again
  EXPECT_EQ(gate->open_from("10.0.0.2"), 2u);
  EXPECT_TRUE(gate->admit(b, "10.0.0.2", more, why));
  EXPECT_EQ(gate->refused(), 1u);
}

TEST(ConnectionGate, PerListenerLimitAndMovedTickets) {
  auto gate = ConnectionGate::create({.per_listener = 2, .per_host = 0});
  const unsigned a = gate->add_listener("[::]:4420");
  const unsigned b = gate->add_listener("[::]:4421");
  ConnectionTicket t1, t2, t3;
  std::string why;
  ASSERT_TRUE(gate->admit(a, "h1", t1, why));
  ASSERT_TRUE(gate->admit(a, "h2", t2, why));
  EXPECT_FALSE(gate->admit(a, "h3", t3, why));
  EXPECT_EQ(why, "2 connections are open on [::]:4420 (limits.connections.per_listener)");
  EXPECT_TRUE(gate->admit(b, "h3", t3, why)) << "the limit is per listener";
  ConnectionTicket moved(std::move(t1));  // moving keeps one place, not two
  EXPECT_EQ(gate->open_on(a), 2u);
  moved = ConnectionTicket();  // assigning over it gives the place back
  EXPECT_EQ(gate->open_on(a), 1u);
  EXPECT_EQ(gate->open_from("h1"), 0u);
}

// A listener removed and added back keeps its slot: what is still open from before counts.
TEST(ConnectionGate, TheSameListenerNameGetsTheSameSlot) {
  auto gate = ConnectionGate::create({.per_listener = 1, .per_host = 0});
  const unsigned a = gate->add_listener("127.0.0.1:4420");
  const unsigned rdma = gate->add_listener("rdma 127.0.0.1:4420");
  EXPECT_NE(a, rdma);
  ConnectionTicket t;
  std::string why;
  ASSERT_TRUE(gate->admit(a, "h1", t, why));
  const unsigned again = gate->add_listener("127.0.0.1:4420");
  EXPECT_EQ(again, a);
  EXPECT_EQ(gate->open_on(again), 1u);
  ConnectionTicket refused;
  EXPECT_FALSE(gate->admit(again, "h2", refused, why));
  EXPECT_EQ(why, "1 connections are open on 127.0.0.1:4420 (limits.connections.per_listener)");
  ConnectionTicket other;
  EXPECT_TRUE(gate->admit(rdma, "h2", other, why)) << why;
}

TEST(ConnectionGate, TicketsOutliveTheGateHandleAndReleaseFromOtherThreads) {
  auto gate = ConnectionGate::create({.per_listener = 100, .per_host = 100});
  const unsigned l = gate->add_listener("x");
  std::vector<ConnectionTicket> tickets(100);
  std::string why;
  for (auto& t : tickets) ASSERT_TRUE(gate->admit(l, "h", t, why));
  std::weak_ptr<ConnectionGate> weak = gate;
  gate.reset();  // the listeners went away; the connections still hold the gate
  ASSERT_FALSE(weak.expired());
  std::thread closer([&] { tickets.clear(); });
  closer.join();
  EXPECT_TRUE(weak.expired()) << "the last ticket frees the gate";
}

TEST(ConnectionGate, HostOfUsesTheAddressWithoutPortAndUnmapsIpv4) {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_port = htons(5000);
  ::inet_pton(AF_INET, "192.0.2.7", &v4.sin_addr);
  EXPECT_EQ(host_of(reinterpret_cast<sockaddr*>(&v4)), "192.0.2.7");
  sockaddr_in6 mapped{};
  mapped.sin6_family = AF_INET6;
  mapped.sin6_port = htons(6000);
  ::inet_pton(AF_INET6, "::ffff:192.0.2.7", &mapped.sin6_addr);
  EXPECT_EQ(host_of(reinterpret_cast<sockaddr*>(&mapped)), "192.0.2.7") << "one host whichever listener it used";
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  ::inet_pton(AF_INET6, "2001:db8::1", &v6.sin6_addr);
  EXPECT_EQ(host_of(reinterpret_cast<sockaddr*>(&v6)), "2001:db8::1");
  sockaddr unix_sa{};
  unix_sa.sa_family = AF_UNIX;
  EXPECT_EQ(host_of(&unix_sa), "");
  EXPECT_EQ(host_of(nullptr), "");
}

}  // namespace
}  // namespace rdmablk::transport

// Target core: listener roles. A `discovery` listener serves the discovery controller only; a Connect to an
// NVM subsystem arriving on it fails like nvmet's for a subsystem not linked to the port: Connect Invalid
// Parameters, IATTR 1 (data), IPO 256 (SUBNQN).
#include "target/core_test_util.h"

namespace rdmablk::target::testing {
namespace {

constexpr uint16_t kIpoSubnqn = offsetof(p::ConnectData, subnqn);
static_assert(kIpoSubnqn == 256);

void expect_refused_subnqn(const Completed& c) {
  EXPECT_EQ(c.status(), st::connect_invalid_parameters) << p::status_name(c.status());
  EXPECT_EQ(c.dw0(), p::connect_invalid_param_result(true, kIpoSubnqn));
}

TEST(CoreListeners, DiscoveryListenerRefusesNvmSubsystems) {
  CoreHarness h;  // 0.0.0.0:4420 io, 10.0.0.1:8009 discovery
  auto q = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);
  expect_refused_subnqn(h.connect(*q, 0, 31, kSub1, kHost1));
  EXPECT_FALSE(q->connected);
  EXPECT_EQ(h.core().controller_count(), 0u);
  // The discovery controller is what it serves.
  auto d = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);
  EXPECT_TRUE(h.connect(*d, 0, 31, p::kDiscoveryNqn, kHost1).status().ok());
  // The io listener (wildcard address) serves both.
  auto io = h.queue(transport::TransportType::tcp, "10.0.0.7", 4420);
  EXPECT_TRUE(h.connect(*io, 0, 31, kSub1, kHost1).status().ok());
  auto io_disc = h.queue(transport::TransportType::tcp, "10.0.0.7", 4420);
  EXPECT_TRUE(h.connect(*io_disc, 0, 31, p::kDiscoveryNqn, kHost1).status().ok());
}

TEST(CoreListeners, IoQueueOnADiscoveryListenerIsRefused) {
  CoreHarness h;
  auto admin = h.queue();  // 10.0.0.1:4420
  const uint16_t cntlid = h.bring_up(*admin);
  auto q = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);
  expect_refused_subnqn(h.connect(*q, 1, 127, kSub1, kHost1, cntlid));
  EXPECT_FALSE(q->connected);
}

TEST(CoreListeners, WildcardDiscoveryListenerMatchesEveryLocalAddress) {
  auto config = test_config();
  config.listeners[1].address = "::";  // discovery on [::]:8009
  config.listeners.push_back(config.listeners[1]);
  config.listeners.back().address = "0.0.0.0";
  CoreHarness h(config);
  for (const char* local : {"127.0.0.1", "::1", "::ffff:10.0.0.1"}) {
    auto q = h.queue(transport::TransportType::tcp, local, 8009);
    expect_refused_subnqn(h.connect(*q, 0, 31, kSub1, kHost1));
  }
  // Another transport on the same port is another listener (none here: not restricted).
  auto rdma = h.queue(transport::TransportType::rdma, "10.0.0.1", 8009);
  EXPECT_TRUE(h.connect(*rdma, 0, 31, kSub1, kHost1).status().ok());
}

TEST(CoreListeners, AListenerOnTheExactAddressWinsOverAWildcard) {
  auto config = test_config();
  // 10.0.0.1:4420 is discovery-only; every other address on 4420 is io.
  ListenerConfig disc = config.listeners[0];
  disc.address = "10.0.0.1";
  disc.role = ListenerRole::discovery;
  config.listeners.push_back(disc);
  CoreHarness h(config);
  auto on_disc = h.queue(transport::TransportType::tcp, "10.0.0.1", 4420);
  expect_refused_subnqn(h.connect(*on_disc, 0, 31, kSub1, kHost1));
  auto on_io = h.queue(transport::TransportType::tcp, "10.0.0.2", 4420);
  EXPECT_TRUE(h.connect(*on_io, 0, 31, kSub1, kHost1).status().ok());
}

TEST(CoreListeners, ReloadMakingAListenerDiscoveryOnlyDropsItsControllers) {
  CoreHarness h;
  auto admin = h.queue();  // 10.0.0.1:4420
  const uint16_t cntlid = h.bring_up(*admin);
  auto io = h.io_queue(cntlid, 1);
  auto disc_admin = h.queue();
  h.bring_up(*disc_admin, p::kDiscoveryNqn, kHost2);
  ASSERT_EQ(h.core().controller_count(), 2u);

  auto config = test_config();
  config.listeners[0].role = ListenerRole::discovery;
  auto r = h.core().reload(config);
  ASSERT_TRUE(r) << r.error().message;
  h.reactor.run();
  EXPECT_EQ(r->controllers_dropped, 1u);
  EXPECT_TRUE(admin->closed);
  EXPECT_TRUE(io->closed);
  EXPECT_FALSE(disc_admin->closed);  // the discovery controller stays
  EXPECT_EQ(h.core().controller_count(), 1u);
  auto again = h.queue();
  expect_refused_subnqn(h.connect(*again, 0, 31, kSub1, kHost1));

  // And back: the listener serves the subsystems again.
  ASSERT_TRUE(h.core().reload(test_config()));
  h.reactor.run();
  auto back = h.queue();
  EXPECT_TRUE(h.connect(*back, 0, 31, kSub1, kHost1).status().ok());
}

// A listener removed (the management API's listener_remove, or a reload): nvmet deletes a removed port's
// controllers and SPDK disconnects a removed listener's qpairs; so do we, discovery controllers included,
// so that hosts fail over to a path still offered. Controllers on the other listeners stay.
TEST(CoreListeners, ReloadRemovingAListenerDropsItsControllers) {
  CoreHarness h;  // 0.0.0.0:4420 io, 10.0.0.1:8009 discovery
  auto admin = h.queue();  // 10.0.0.1:4420
  const uint16_t cntlid = h.bring_up(*admin);
  auto io = h.io_queue(cntlid, 1);
  auto disc_on_io = h.queue();
  h.bring_up(*disc_on_io, p::kDiscoveryNqn, kHost2);
  auto disc = h.queue(transport::TransportType::tcp, "10.0.0.1", 8009);
  h.bring_up(*disc, p::kDiscoveryNqn, kHost2);
  ASSERT_EQ(h.core().controller_count(), 3u);

  auto config = test_config();
  config.listeners.erase(config.listeners.begin());
  auto r = h.core().reload(config);
  ASSERT_TRUE(r) << r.error().message;
  h.reactor.run();
  EXPECT_EQ(r->controllers_dropped, 2u);
  EXPECT_TRUE(admin->closed);
  EXPECT_TRUE(io->closed);
  EXPECT_TRUE(disc_on_io->closed);
  EXPECT_FALSE(disc->closed) << "the discovery listener is still there";
  EXPECT_EQ(h.core().controller_count(), 1u);
  EXPECT_EQ(h.core().running_config().listeners.size(), 1u);

  // Added back: served again (a connection on no configured listener is served anyway; what changed is
  // that the discovery log lists it again, which test_core_discovery covers).
  ASSERT_TRUE(h.core().reload(test_config()));
  h.reactor.run();
  auto back = h.queue();
  EXPECT_TRUE(h.connect(*back, 0, 31, kSub1, kHost1).status().ok());
}

}  // namespace
}  // namespace rdmablk::target::testing

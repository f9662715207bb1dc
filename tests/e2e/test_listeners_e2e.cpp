// Listeners changed on a running target through the management API, end to end over NVMe/TCP: a listener
// added with `ctl listener_add` accepts hosts and appears in the discovery log; a port in use refuses the
// verb and changes nothing; `listener_remove` drops the controllers that came through it, frees the port at
// once (the same port can be added again) and leaves the other listeners' hosts alone; a restart keeps it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "e2e_common.h"
#include "initiator/host/discovery_strings.h"
#include "protocol/log_pages.h"
#include "support/ports.h"

namespace e2e {
namespace {

namespace p = rdmablk::protocol;
using rdmablk::initiator::Controller;
using rdmablk::initiator::field_string;

// The ports the discovery log (read through the discovery listener) gives for the subsystem.
std::vector<uint16_t> advertised_ports(const TargetProcess& t) {
  auto d = Controller::connect_discovery(controller_options(t.discovery_port(), "", kHostA, 0));
  EXPECT_TRUE(d) << (d ? "" : d.error().message) << "\n" << t.log();
  if (!d) return {};
  auto log = (*d)->discovery_log();
  EXPECT_TRUE(log) << (log ? "" : log.error().message);
  EXPECT_TRUE((*d)->shutdown());
  std::vector<uint16_t> ports;
  if (!log) return ports;
  for (const auto& e : log->entries) {
    if (field_string(e.subnqn.data(), e.subnqn.size()) != kSubnqn) continue;
    ports.push_back(static_cast<uint16_t>(std::stoi(field_string(e.trsvcid.data(), e.trsvcid.size()))));
  }
  std::sort(ports.begin(), ports.end());
  return ports;
}

std::vector<uint16_t> sorted(std::vector<uint16_t> ports) {
  std::sort(ports.begin(), ports.end());
  return ports;
}

std::vector<std::string> listener_args(const char* verb, uint16_t port) {
  return {verb, "transport=tcp", "address=127.0.0.1", "port=" + std::to_string(port)};
}

std::size_t managed_edits(const TargetProcess& t) {
  auto r = ctl(t, {"managed"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_object() && j["edits"].is_array() ? j["edits"].size() : 0;
}

bool accepts(uint16_t port) {
  const int fd = rdmablk::testing::raw_connect(port);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// `ctl listener_add` on a port that was free; another process taking it first is retried on a new one.
uint16_t add_listener(const TargetProcess& t) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    const uint16_t port = rdmablk::testing::pick_free_port();
    auto r = ctl(t, listener_args("listener_add", port));
    if (r.exit_status == 0) return port;
    EXPECT_NE(r.err.find("in use"), std::string::npos) << r.err;
  }
  ADD_FAILURE() << "no free port for listener_add";
  return 0;
}

TEST(ListenersE2e, AddedAndRemovedLiveAndKeptAcrossARestart) {
  TargetProcess t;
  ASSERT_TRUE(t.start(config_with_namespaces(kRamNamespace)));
  auto b = connect_or_fail(controller_options(t.io_port(), kSubnqn, kHostB), t);
  ASSERT_TRUE(b);
  auto qb = io_queue_or_fail(*b, 1);
  ASSERT_TRUE(qb);

  // Added: it accepts a host, which does I/O through it, and discovery lists it.
  const uint16_t port = add_listener(t);
  ASSERT_NE(port, 0);
  EXPECT_TRUE(t.wait_for_log("listening on tcp://127.0.0.1:" + std::to_string(port))) << t.log();
  EXPECT_EQ(advertised_ports(t), sorted({t.io_port(), port}));
  auto a = connect_or_fail(controller_options(port, kSubnqn, kHostA), t);
  ASSERT_TRUE(a);
  auto qa = io_queue_or_fail(*a, 1);
  ASSERT_TRUE(qa);
  std::vector<uint8_t> block(512, 0x6c);
  ASSERT_TRUE(write_blocks(*qa, 1, 8, 512, block));

  // The same request again changes nothing; the same endpoint with other settings, and a port another
  // socket holds, are refused and change nothing.
  const std::size_t edits = managed_edits(t);
  EXPECT_EQ(ctl(t, listener_args("listener_add", port)).exit_status, 0);
  auto other_role = listener_args("listener_add", port);
  other_role.push_back("role=discovery");
  auto twice = ctl(t, other_role);
  EXPECT_EQ(twice.exit_status, 1);
  EXPECT_NE(twice.err.find("exists already"), std::string::npos) << twice.err;
  uint16_t held_port = 0;
  const int held = rdmablk::testing::listen_on_loopback(&held_port);
  ASSERT_GE(held, 0);
  auto in_use = ctl(t, listener_args("listener_add", held_port));
  ::close(held);
  EXPECT_EQ(in_use.exit_status, 1);
  EXPECT_NE(in_use.err.find("in use"), std::string::npos) << in_use.err;
  EXPECT_EQ(managed_edits(t), edits);
  EXPECT_EQ(advertised_ports(t), sorted({t.io_port(), port}));

  // Removed: its host loses the controller, the port refuses connections, discovery drops it; the host
  // on the io listener goes on.
  ASSERT_EQ(ctl(t, listener_args("listener_remove", port)).exit_status, 0);
  EXPECT_FALSE(accepts(port));
  EXPECT_FALSE(read_blocks(*qa, 1, 8, 512, block));
  EXPECT_FALSE(a->active_namespaces());
  EXPECT_EQ(advertised_ports(t), std::vector<uint16_t>{t.io_port()});
  EXPECT_TRUE(read_blocks(*qb, 1, 8, 512, block));
  EXPECT_EQ(block, std::vector<uint8_t>(512, 0x6c));
  qa.reset();
  a.reset();

  // The same port again at once, and after a restart it is still there.
  ASSERT_EQ(ctl(t, listener_args("listener_add", port)).exit_status, 0);
  auto again = connect_or_fail(controller_options(port, kSubnqn, kHostA), t);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->shutdown());
  qb->disconnect();
  EXPECT_TRUE(b->shutdown());
  ASSERT_TRUE(t.stop());
  ASSERT_TRUE(t.restart());
  EXPECT_EQ(advertised_ports(t), sorted({t.io_port(), port}));
  auto after = connect_or_fail(controller_options(port, kSubnqn, kHostA), t);
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->shutdown());
  EXPECT_TRUE(t.stop());
}

}  // namespace
}  // namespace e2e

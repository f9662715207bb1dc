// The resource limits of limits.connections and limits.queue_buffer_bytes: defaults, parsing, errors that
// name file:line:column and the field, and how they reach the transports.
#include <gtest/gtest.h>

#include <string>

#include "protocol/defaults.h"
#include "target/config/config.h"
#include "target/daemon/transport_options.h"

namespace {

using namespace rdmablk::target;

constexpr std::string_view kListener = "listeners: [{address: 127.0.0.1}]\n";

rdmablk::Result<TargetConfig> parse(std::string_view limits) {
  return parse_config(std::string(kListener) + std::string(limits), "t.yaml");
}

TEST(ConfigLimits, DefaultsBoundEveryHostAndListener) {
  auto c = parse("");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->limits.connections.per_listener, 4096u);
  EXPECT_EQ(c->limits.connections.per_host, 1024u);
  EXPECT_EQ(c->limits.connections.connect_timeout_ms, 10000u);
  EXPECT_EQ(c->limits.queue_buffer_bytes, 32u << 20);
  EXPECT_NE(describe(*c).find("connections 4096/listener 1024/host, Connect within 10000 ms, queue buffers 32 MiB"),
            std::string::npos)
      << describe(*c);
}

// The in-capsule sizes and the small buffer size have one home, protocol/defaults.h: the config's defaults,
// the transports' own option defaults and what the daemon passes them all say what it says.
TEST(ConfigLimits, InCapsuleDefaultsComeFromProtocolDefaults) {
  namespace d = rdmablk::protocol::defaults;
  auto c = parse("");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->limits.admin_inline_data, d::kAdminInCapsule);
  EXPECT_EQ(c->limits.io_inline_data, d::kTargetIoInCapsule);
  EXPECT_EQ(c->limits.admin_inline_data, 8192u);  // the values themselves are behaviour: unchanged
  EXPECT_EQ(c->limits.io_inline_data, 16384u);
  EXPECT_EQ(tcp_target_options(c->limits).io_in_capsule, d::kTargetIoInCapsule);
  EXPECT_EQ(rdma_target_options(c->limits).io_in_capsule, d::kTargetIoInCapsule);
  EXPECT_EQ(buffer_pool_options(c->limits).small_size, d::kSmallBufferBytes);

  // Without a config (tests, tools): TCP and RDMA differ on purpose (protocol/defaults.h says why).
  EXPECT_EQ(rdmablk::transport::tcp::TcpTargetOptions{}.admin_in_capsule, d::kAdminInCapsule);
  EXPECT_EQ(rdmablk::transport::tcp::TcpTargetOptions{}.io_in_capsule, d::kTcpIoInCapsule);
  EXPECT_EQ(rdmablk::transport::rdma::RdmaTargetOptions{}.admin_in_capsule, d::kAdminInCapsule);
  EXPECT_EQ(rdmablk::transport::rdma::RdmaTargetOptions{}.io_in_capsule, d::kRdmaIoInCapsule);
  EXPECT_EQ(rdmablk::transport::BufferPoolOptions{}.small_size, d::kSmallBufferBytes);
}

TEST(ConfigLimits, ParsedAndPassedToTheTransports) {
  auto c = parse(
      "limits:\n"
      "  queue_buffer_bytes: 4MiB\n"
      "  connections: {per_listener: 0, per_host: 8, connect_timeout_ms: 2500}\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->limits.connections.per_listener, 0u);
  EXPECT_EQ(c->limits.connections.per_host, 8u);
  EXPECT_EQ(c->limits.connections.connect_timeout_ms, 2500u);
  EXPECT_EQ(tcp_target_options(c->limits).max_buffer_bytes, 4u << 20);
  EXPECT_EQ(rdma_target_options(c->limits).max_buffer_bytes, 4u << 20);
  const auto gate = connection_limit_options(c->limits);
  EXPECT_EQ(gate.per_listener, 0u);
  EXPECT_EQ(gate.per_host, 8u);
  EXPECT_NE(describe(*c).find("connections unlimited/listener 8/host"), std::string::npos) << describe(*c);
}

TEST(ConfigLimits, BadValuesNameFileLineAndField) {
  auto c = parse("limits:\n  connections: {connect_timeout_ms: 5}\n");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("t.yaml:3:"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("limits.connections.connect_timeout_ms"), std::string::npos) << c.error().message;
  c = parse("limits:\n  queue_buffer_bytes: 1KiB\n");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("t.yaml:3:23: limits.queue_buffer_bytes"), std::string::npos) << c.error().message;
  c = parse("limits:\n  connections: {per_hosts: 3}\n");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("per_hosts"), std::string::npos) << c.error().message;
  c = parse("limits:\n  connections: {per_host: -1}\n");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("limits.connections.per_host"), std::string::npos) << c.error().message;
}

}  // namespace

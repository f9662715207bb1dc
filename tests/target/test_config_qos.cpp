// QoS limits in the configuration (a namespace's `qos:`): the four keys and per-host entries, and the errors
// that name file:line:column and the field: unknown keys, bad values, a host the subsystem does not allow.
#include <gtest/gtest.h>

#include <string>

#include "target/config/config.h"
#include "target/config_test_util.h"

namespace rdmablk::target::testing {
namespace {

constexpr const char* kH1 = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
constexpr const char* kH2 = "nqn.2014-08.org.nvmexpress:uuid:99999999-2222-3333-4444-555555555555";

// `qos` is written under namespace 1 from line 9 on.
std::string config(const std::string& qos, const std::string& subsystem_hosts = "    allow_any_host: true\n") {
  return "listeners: [{address: 127.0.0.1}]\n"
         "subsystems:\n"
         "  - nqn: nqn.2024-12.io.rdmablk:tenants\n" +
         subsystem_hosts +
         "    namespaces:\n"
         "      - nsid: 1\n"
         "        backend: ram\n"
         "        size: 1MiB\n" +
         qos +
         "      - nsid: 2\n"
         "        backend: ram\n"
         "        size: 1MiB\n";
}

TEST(ConfigQos, TheFourLimitsAndPerHostOnes) {
  const TargetConfig c =
      parse_ok(config("        qos:\n"
                      "          iops: 5000\n"
                      "          mbps: 200\n"
                      "          read_mbps: 100\n"
                      "          write_mbps: 50\n"
                      "          hosts:\n"
                      "            - host: " +
                      std::string(kH1) +
                      "\n"
                      "              iops: 1000\n"
                      "            - {host: " +
                      kH2 + ", write_mbps: 5}\n"));
  const auto& ns = c.subsystems[0].namespaces;
  EXPECT_EQ(ns[0].qos.limits, (QosLimits{5000, 200, 100, 50}));
  ASSERT_EQ(ns[0].qos.hosts.size(), 2u);
  EXPECT_EQ(ns[0].qos.hosts[0].host, kH1);
  EXPECT_EQ(ns[0].qos.hosts[0].limits, (QosLimits{1000, 0, 0, 0}));
  EXPECT_EQ(ns[0].qos.hosts[1].limits, (QosLimits{0, 0, 0, 5}));
  EXPECT_TRUE(ns[0].qos.any());
  EXPECT_FALSE(ns[1].qos.any()) << "no qos: unlimited";
  EXPECT_EQ(ns[0].qos.at.line, 10);
}

TEST(ConfigQos, ZeroIsUnlimited) {
  const TargetConfig c = parse_ok(config("        qos: {iops: 0}\n"));
  EXPECT_FALSE(c.subsystems[0].namespaces[0].qos.any());
}

TEST(ConfigQos, MistakesNameTheLineAndTheField) {
  EXPECT_NE(parse_error(config("        qos: {iopz: 5}\n")).find("t.yaml:9:"), std::string::npos);
  EXPECT_NE(parse_error(config("        qos: {iopz: 5}\n")).find("subsystems[0].namespaces[0].qos"), std::string::npos);
  EXPECT_NE(parse_error(config("        qos: {iops: -5}\n")).find("subsystems[0].namespaces[0].qos.iops"),
            std::string::npos);
  EXPECT_NE(parse_error(config("        qos: {mbps: lots}\n")).find("subsystems[0].namespaces[0].qos.mbps"),
            std::string::npos);
  EXPECT_NE(parse_error(config("        qos: {iops: 100000000}\n")).find("out of range"), std::string::npos);
  EXPECT_NE(parse_error(config("        qos: 5000\n")).find("expected a mapping"), std::string::npos);
  EXPECT_NE(parse_error(config("        qos: {hosts: []}\n")).find("qos.hosts: an empty list"), std::string::npos);
  EXPECT_NE(parse_error(config("        qos: {hosts: [{iops: 5}]}\n")).find("host"), std::string::npos);
  EXPECT_NE(parse_error(config("        qos: {hosts: [{host: " + std::string(kH1) + "}]}\n")).find("no limit"),
            std::string::npos);
  EXPECT_NE(parse_error(config("        qos: {hosts: [{host: " + std::string(kH1) + ", iops: 1}, {host: " + kH1 +
                               ", iops: 2}]}\n"))
                .find("duplicate host NQN"),
            std::string::npos);
}

TEST(ConfigQos, APerHostLimitNeedsAHostThatCanConnect) {
  const std::string allowed = "    hosts: [" + std::string(kH1) + "]\n";
  EXPECT_TRUE(parse_ok(config("        qos: {hosts: [{host: " + std::string(kH1) + ", iops: 1}]}\n", allowed))
                  .subsystems[0]
                  .namespaces[0]
                  .qos.any());
  const std::string stranger =
      parse_error(config("        qos: {hosts: [{host: " + std::string(kH2) + ", iops: 1}]}\n", allowed));
  EXPECT_NE(stranger.find("t.yaml:9:"), std::string::npos) << stranger;
  EXPECT_NE(stranger.find("subsystems[0].namespaces[0].qos.hosts[0].host: '" + std::string(kH2) +
                          "' is not among the subsystem's hosts"),
            std::string::npos)
      << stranger;
  // Nor one the namespace is masked from.
  const std::string masked =
      parse_error(config("        hosts: [" + std::string(kH1) + "]\n        qos: {hosts: [{host: " + std::string(kH2) +
                         ", iops: 1}]}\n"));
  EXPECT_NE(masked.find("does not see this namespace"), std::string::npos) << masked;
}

}  // namespace
}  // namespace rdmablk::target::testing

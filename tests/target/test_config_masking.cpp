// Namespace masking in the configuration (a namespace's `hosts:`): parsed sorted, and the errors that name
// file:line:column and the field: an empty list, a duplicate, a host the subsystem does not allow.
#include <gtest/gtest.h>

#include <string>

#include "target/config/config.h"
#include "target/config_test_util.h"

namespace rdmablk::target::testing {
namespace {

constexpr const char* kH1 = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
constexpr const char* kH2 = "nqn.2014-08.org.nvmexpress:uuid:99999999-2222-3333-4444-555555555555";

std::string config(const std::string& subsystem_hosts, const std::string& ns_hosts) {
  return "listeners: [{address: 127.0.0.1}]\n"
         "subsystems:\n"
         "  - nqn: nqn.2024-12.io.rdmablk:tenants\n" +
         subsystem_hosts +
         "    namespaces:\n"
         "      - nsid: 1\n"
         "        backend: ram\n"
         "        size: 1MiB\n" +
         ns_hosts +
         "      - nsid: 2\n"
         "        backend: ram\n"
         "        size: 1MiB\n";
}

TEST(ConfigMasking, HostsAreParsedSortedAndTheRestSeeEverything) {
  const TargetConfig c =
      parse_ok(config("    hosts: [" + std::string(kH1) + ", " + kH2 + "]\n",
                      "        hosts:\n          - " + std::string(kH2) + "\n          - " + kH1 + "\n"));
  ASSERT_EQ(c.subsystems.size(), 1u);
  const auto& ns = c.subsystems[0].namespaces;
  EXPECT_EQ(ns[0].hosts, (std::vector<std::string>{kH1, kH2}));
  EXPECT_TRUE(ns[1].hosts.empty());
  EXPECT_TRUE(ns[0].visible_to(kH1));
  EXPECT_FALSE(ns[0].visible_to("nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000000"));
  EXPECT_TRUE(ns[1].visible_to("nqn.anyone"));
  EXPECT_EQ(ns[0].hosts_at.line, 10);  // the block list under `hosts:` on line 9
}

TEST(ConfigMasking, WithAllowAnyHostAnyNqnMayBeListed) {
  const TargetConfig c = parse_ok(config("    allow_any_host: true\n", "        hosts: [nqn.2024-12.io.example:x]\n"));
  EXPECT_EQ(c.subsystems[0].namespaces[0].hosts, std::vector<std::string>{"nqn.2024-12.io.example:x"});
}

TEST(ConfigMasking, MistakesNameTheLineAndTheField) {
  const std::string allowed = "    hosts: [" + std::string(kH1) + "]\n";
  EXPECT_EQ(parse_error(config(allowed, "        hosts: []\n")),
            "t.yaml:9:16: subsystems[0].namespaces[0].hosts: an empty list hides the namespace from every host: list "
            "the hosts that see it, or leave hosts out for every host the subsystem allows");
  EXPECT_NE(parse_error(config(allowed, "        hosts: [" + std::string(kH1) + ", " + kH1 + "]\n"))
                .find("subsystems[0].namespaces[0].hosts[1]: duplicate host NQN"),
            std::string::npos);
  const std::string stranger = parse_error(config(allowed, "        hosts: [" + std::string(kH2) + "]\n"));
  EXPECT_EQ(stranger, "t.yaml:9:16: subsystems[0].namespaces[0].hosts: '" + std::string(kH2) +
                          "' is not among the subsystem's hosts, so it could never see this namespace");
  EXPECT_NE(parse_error(config(allowed, "        hosts: [not an nqn]\n")).find("namespaces[0].hosts[0]"),
            std::string::npos);
}

}  // namespace
}  // namespace rdmablk::target::testing

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "initiator/cli/cli.h"
#include "initiator/cli_runner.h"
#include "initiator/fake_target.h"

using namespace rdmablk;
using namespace rdmablk::initiator;
using namespace rdmablk::testing;

namespace {

using Run = CliRun;

Run run(FakeTarget& t, std::vector<const char*> args, bool refuse = false) {
  CliEnv env;
  FakeConnector conn(&t);
  conn.refuse = refuse;
  env.connector = conn;
  return run_cli(env, std::move(args));
}

std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST(Cli, DiscoverPrintsLikeNvmeCli) {
  FakeTarget t;
  t.discovery_entries.push_back(make_discovery_entry("nqn.2024-01.io.rdmablk:vol0", "192.168.1.10", "4420", 1));
  auto r = run(t, {"discover", "-t", "tcp", "-a", "192.168.1.10", "-s", "8009"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "\nDiscovery Log Number of Records 1, Generation counter 7\n"
            "=====Discovery Log Entry 0======\n"
            "trtype:  tcp\n"
            "adrfam:  ipv4\n"
            "subtype: nvme subsystem\n"
            "treq:    not specified\n"
            "portid:  1\n"
            "trsvcid: 4420\n"
            "subnqn:  nqn.2024-01.io.rdmablk:vol0\n"
            "traddr:  192.168.1.10\n"
            "eflags:  none\n"
            "sectype: none\n");
  EXPECT_EQ(t.last_connect.kato.get(), 0u);  // discovery: no keep-alive unless asked

  auto j = run(t, {"discover", "-a", "192.168.1.10", "-o", "json"});
  ASSERT_EQ(j.code, 0) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["genctr"], 7);
  EXPECT_EQ(doc["records"][0]["subnqn"], "nqn.2024-01.io.rdmablk:vol0");
  EXPECT_EQ(doc["records"][0]["trsvcid"], "4420");
}

TEST(Cli, IdentifyPrintsControllerAndNamespaces) {
  FakeTarget t;
  auto r = run(t, {"identify", "-a", "127.0.0.1", "-n", "nqn.2024-01.io.rdmablk:test", "--kato", "30"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("sn        : FAKE0001\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mn        : rdmablk fake target\n"), std::string::npos);
  EXPECT_NE(r.out.find("cntlid    : 0x1\n"), std::string::npos);
  EXPECT_NE(r.out.find("mdts      : 5 (131072 bytes max transfer)\n"), std::string::npos);
  EXPECT_NE(r.out.find("nsid      : 1\n"), std::string::npos);
  EXPECT_NE(r.out.find("size      : 2048 blocks (1.05 MB)\n"), std::string::npos);
  EXPECT_NE(r.out.find("block size: 512\n"), std::string::npos);
  EXPECT_NE(r.out.find("uuid      : 11223344-5566-4788-99aa-bbccddeeff01\n"), std::string::npos);
  // CAP.MQES is 0-based: 127 means 128 entries per queue.
  EXPECT_NE(r.out.find("queue size 128 (CAP.MQES 127)\n"), std::string::npos) << r.out;
  EXPECT_EQ(t.last_connect.kato.get(), 30000u);
}

TEST(Cli, UsageErrorsAreOneLineAndExit2) {
  FakeTarget t;
  struct Case {
    std::vector<const char*> args;
    const char* expect;
  } cases[] = {
      {{"discover"}, "--traddr is required"},
      {{"identify", "-a", "127.0.0.1"}, "--nqn is required"},
      {{"discover", "-a", "127.0.0.1", "-t", "fc"}, "unknown transport 'fc' (expected tcp or rdma)"},
      {{"discover", "-a", "127.0.0.1", "-s", "70000"}, "invalid port '70000' (expected 1-65535)"},
      {{"identify", "-a", "127.0.0.1", "-n", "nqn.2024-01.io.x:y", "--hostid", "nope"}, "invalid host id 'nope'"},
      {{"bench"}, "jobfile is required"},
      {{"bench", "/nonexistent.fio"}, "cannot open job file '/nonexistent.fio'"},
      {{"frobnicate"}, "rdmablk: error:"},
      {{}, "rdmablk: error:"},
  };
  for (const auto& c : cases) {
    auto r = run(t, c.args);
    EXPECT_EQ(r.code, 2) << c.expect;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
}

TEST(Cli, ConnectionFailuresAreOneLineAndExit1) {
  FakeTarget t;
  auto refused = run(t, {"discover", "-a", "127.0.0.1"}, true);
  EXPECT_EQ(refused.code, 1);
  EXPECT_EQ(refused.err, "rdmablk: error: cannot connect to tcp://127.0.0.1:8009: Connection refused\n");

  t.allowed_hosts = {"nqn.2024-01.io.rdmablk:someone-else"};
  auto denied = run(t, {"identify", "-a", "127.0.0.1", "-n", "nqn.2024-01.io.rdmablk:test", "-q",
                        "nqn.2024-01.io.rdmablk:me"});
  EXPECT_EQ(denied.code, 1);
  EXPECT_EQ(lines(denied.err), 1u);
  EXPECT_NE(denied.err.find("Connect Invalid Host"), std::string::npos) << denied.err;
  EXPECT_NE(denied.err.find("nqn.2024-01.io.rdmablk:me"), std::string::npos) << denied.err;
}

TEST(Cli, BenchRunsAJobFileInBothOutputFormats) {
  FakeTarget t;
  auto path = std::filesystem::temp_directory_path() / ("rdmablk-cli-" + std::to_string(::getpid()) + ".fio");
  std::ofstream(path) << "[global]\nbs=4k\niodepth=4\nsize=64k\n[wv]\nrw=randwrite\nverify=crc32c\n";
  auto text = run(t, {"bench", path.c_str(), "-a", "127.0.0.1", "-n", "nqn.2024-01.io.rdmablk:test"});
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("wv: (groupid=0, jobs=1): err= 0"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  write: IOPS="), std::string::npos);
  EXPECT_NE(text.out.find("  read: IOPS="), std::string::npos);

  auto json = run(t, {"bench", path.c_str(), "-a", "127.0.0.1", "-n", "nqn.2024-01.io.rdmablk:test",
                      "--output-format=json"});
  ASSERT_EQ(json.code, 0) << json.err;
  auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["jobs"][0]["jobname"], "wv");
  EXPECT_EQ(doc["jobs"][0]["write"]["total_ios"], 16);
  EXPECT_EQ(doc["jobs"][0]["read"]["total_ios"], 16);
  EXPECT_EQ(doc["global options"]["bs"], "4k");

  // A failing job: report on stdout, one error line on stderr, exit 1.
  t.corrupt_read_at = 4096 + 100;  // in a block's body
  auto bad = run(t, {"bench", path.c_str(), "-a", "127.0.0.1", "-n", "nqn.2024-01.io.rdmablk:test"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(lines(bad.err), 1u);
  EXPECT_NE(bad.err.find("rdmablk: error: job 'wv': verify: crc32c mismatch at byte offset"), std::string::npos) << bad.err;
  EXPECT_NE(bad.out.find("err=84"), std::string::npos);
  std::filesystem::remove(path);
}

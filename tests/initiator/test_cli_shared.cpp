// The compare, copy and resv-* verbs of `rdmablk` against the fake target: nvme-cli 2.4's option names,
// defaults and range checks, what reaches the wire (CDW10 bits, keys, report sizes), the printed forms, and
// the errors (usage: exit 2, nothing sent; an NVMe status: exit 1, named). The reservation verbs need no
// target support: the fake answers what a test tells it to.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "initiator/cli_runner.h"
#include "initiator/fake_target.h"
#include "protocol/reservation.h"
#include "support/temp_dir.h"

using namespace rdmablk;
using namespace rdmablk::initiator;
using namespace rdmablk::testing;
namespace p = rdmablk::protocol;

namespace {

constexpr const char* kUri = "tcp://127.0.0.1:4420/nqn.2024-01.io.rdmablk:test/1";

CliRun run(FakeTarget& t, std::vector<const char*> args) {
  CliEnv env;
  env.connector = FakeConnector(&t);
  return run_cli(env, std::move(args));
}

uint32_t last_cdw10(const FakeTarget& t) { return p::as<p::ReservationRegisterCommand>(t.io_log.back()).cdw10.get(); }

TEST(CliResv, RegisterDefaultsAndEveryOption) {
  FakeTarget t;
  auto r = run(t, {"resv-register", kUri});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "NVME Reservation Register success\n");
  ASSERT_FALSE(t.io_log.empty());
  EXPECT_EQ(t.io_log.back().hdr.opcode, 0x0D);
  EXPECT_EQ(t.io_log.back().hdr.nsid.get(), 1u) << "the URI's NSID";
  EXPECT_EQ(last_cdw10(t), 0u) << "register, no IEKEY, no PTPL change";
  EXPECT_EQ(t.io_data.back(), std::vector<uint8_t>(16, 0));

  r = run(t, {"resv-register", kUri, "-c", "0x10", "-k", "0x1234", "-r", "2", "-p", "3", "-i"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(last_cdw10(t), 0xC000000Au);
  const auto d = p::load<p::ReservationRegisterData>(t.io_data.back().data());
  EXPECT_EQ(d.crkey.get(), 0x10u);
  EXPECT_EQ(d.nrkey.get(), 0x1234u);

  r = run(t, {"resv-register", kUri, "--crkey=5", "--nrkey=6", "--rrega=1", "--cptpl=2", "--iekey"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(last_cdw10(t), 0x80000009u);
}

TEST(CliResv, AcquireAndReleaseOptions) {
  FakeTarget t;
  auto r = run(t, {"resv-acquire", kUri, "-c", "1", "-p", "2", "-t", "1", "-a", "1", "-i"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "NVME Reservation Acquire success\n");
  EXPECT_EQ(t.io_log.back().hdr.opcode, 0x11);
  EXPECT_EQ(last_cdw10(t), 0x0109u);
  const auto d = p::load<p::ReservationAcquireData>(t.io_data.back().data());
  EXPECT_EQ(d.crkey.get(), 1u);
  EXPECT_EQ(d.prkey.get(), 2u);

  r = run(t, {"resv-release", kUri, "--crkey", "9", "--rtype", "6", "--rrela", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "NVME Reservation Release success\n");
  EXPECT_EQ(t.io_log.back().hdr.opcode, 0x15);
  EXPECT_EQ(last_cdw10(t), 0x0601u);
  EXPECT_EQ(p::load<p::ReservationReleaseData>(t.io_data.back().data()).crkey.get(), 9u);
}

TEST(CliResv, NamespaceIdOptionOverridesTheUri) {
  FakeTarget t;
  t.namespaces.push_back(FakeNamespace{});
  t.namespaces.back().nsid = 2;
  auto r = run(t, {"resv-acquire", kUri, "-n", "2", "-t", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(t.io_log.back().hdr.nsid.get(), 2u);
}

TEST(CliResv, OutOfRangeValuesAreUsageErrorsAndSendNothing) {
  const std::vector<std::vector<const char*>> bad{
      {"resv-register", kUri, "-r", "8"}, {"resv-register", kUri, "-p", "4"},
      {"resv-acquire", kUri, "-a", "8"},  {"resv-acquire", kUri, "-t", "7"},
      {"resv-release", kUri, "-a", "8"},  {"resv-release", kUri, "-t", "7"},
      {"resv-report", kUri, "-o", "xml"}, {"resv-register", kUri, "-k"},
      {"resv-register", kUri, "--bogus"}, {"resv-register"},
      {"resv-acquire", kUri, "-c", "x"},  {"resv-register", "nvme0n1"},
      {"resv-register", kUri, "-n", "0"}};
  for (const auto& args : bad) {
    FakeTarget t;
    auto r = run(t, args);
    std::string what;
    for (const char* a : args) what += std::string(a) + " ";
    EXPECT_EQ(r.code, 2) << what << "\n" << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << what;
    EXPECT_EQ(t.connects.load(), 0) << what << ": nothing is sent for a usage error";
  }
  FakeTarget t;
  auto r = run(t, {"resv-acquire", kUri, "-a", "9"});
  EXPECT_NE(r.err.find("invalid racqa 9"), std::string::npos) << r.err;
}

TEST(CliResv, HelpListsNvmeCliOptionNames) {
  FakeTarget t;
  const std::vector<std::pair<const char*, std::vector<const char*>>> verbs{
      {"resv-register", {"--namespace-id", "--crkey", "--nrkey", "--rrega", "--cptpl", "--iekey"}},
      {"resv-acquire", {"--namespace-id", "--crkey", "--prkey", "--rtype", "--racqa", "--iekey"}},
      {"resv-release", {"--namespace-id", "--crkey", "--rtype", "--rrela", "--iekey"}},
      {"resv-report", {"--namespace-id", "--numd", "--eds", "--output-format", "--raw-binary"}}};
  for (const auto& [verb, names] : verbs) {
    auto r = run(t, {verb, "--help"});
    EXPECT_EQ(r.code, 0) << verb;
    for (const char* n : names) EXPECT_NE(r.out.find(n), std::string::npos) << verb << " " << n << "\n" << r.out;
  }
}

TEST(CliResv, ANvmeErrorIsNamedWithExitStatus1) {
  FakeTarget t;
  t.reservation_answer = p::status::reservation_conflict;
  auto r = run(t, {"resv-acquire", kUri, "-t", "1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("Reservation Acquire failed: Reservation Conflict (SCT 0x0 SC 0x83, DNR)"), std::string::npos)
      << r.err;
}

std::vector<uint8_t> report(uint16_t regctl, unsigned entries) {
  std::vector<uint8_t> out(24 + entries * 24);
  p::ReservationStatusHeader h{};
  h.gen.set(7);
  h.rtype = 1;
  h.regctl = {static_cast<uint8_t>(regctl), 0};
  store(out.data(), h);
  for (unsigned i = 0; i < entries; ++i) {
    p::RegisteredController e{};
    e.cntlid.set(static_cast<uint16_t>(i + 1));
    e.rcsts = i == 0 ? 1 : 0;
    e.hostid.set(0xABCDEF00 + i);
    e.rkey.set(0x100 + i);
    store(out.data() + 24 + i * 24, e);
  }
  return out;
}

TEST(CliResv, ReportPrintsLikeNvmeCli) {
  FakeTarget t;
  t.reservation_report = report(2, 2);
  auto r = run(t, {"resv-report", kUri});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "\nNVME Reservation status:\n\n"
            "gen       : 7\n"
            "rtype     : 1\n"
            "regctl    : 2\n"
            "ptpls     : 0\n"
            "regctl[0] :\n"
            "  cntlid  : 1\n"
            "  rcsts   : 1\n"
            "  hostid  : abcdef00\n"
            "  rkey    : 100\n"
            "regctl[1] :\n"
            "  cntlid  : 2\n"
            "  rcsts   : 0\n"
            "  hostid  : abcdef01\n"
            "  rkey    : 101\n"
            "\n");
  const auto cmd = p::as<p::ReservationReportCommand>(t.io_log.back());
  EXPECT_EQ(cmd.data_length(), 4096u) << "nvme-cli's default: 4 KiB";
  EXPECT_FALSE(cmd.extended());

  auto j = run(t, {"resv-report", kUri, "-o", "json"});
  ASSERT_EQ(j.code, 0) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["gen"], 7);
  EXPECT_EQ(doc["regctl"], 2);
  ASSERT_EQ(doc["regctls"].size(), 2u);
  EXPECT_EQ(doc["regctls"][1]["hostid"], 0xABCDEF01u);
  EXPECT_EQ(doc["regctls"][1]["rkey"], 0x101u);

  auto b = run(t, {"resv-report", kUri, "-b"});
  ASSERT_EQ(b.code, 0) << b.err;
  ASSERT_EQ(b.out.size(), 4096u);
  EXPECT_EQ(std::vector<uint8_t>(b.out.begin(), b.out.begin() + 72), t.reservation_report);
}

TEST(CliResv, ReportSizesAndTruncationAndExtended) {
  FakeTarget t;
  t.reservation_report = report(3, 3);
  auto r = run(t, {"resv-report", kUri, "-d", "11"});  // 48 bytes: the header and one entry
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(p::as<p::ReservationReportCommand>(t.io_log.back()).data_length(), 48u);
  EXPECT_NE(r.out.find("regctl[0]"), std::string::npos);
  EXPECT_EQ(r.out.find("regctl[1]"), std::string::npos) << "no entry read past the data";
  EXPECT_NE(r.err.find("1 of 3 registrants"), std::string::npos) << r.err;

  r = run(t, {"resv-report", kUri, "-d", "2"});  // fewer dwords than the header: the header
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(p::as<p::ReservationReportCommand>(t.io_log.back()).data_length(), 24u);

  r = run(t, {"resv-report", kUri, "-e", "-d", "5"});  // extended: a 64-byte header at least
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(p::as<p::ReservationReportCommand>(t.io_log.back()).data_length(), 64u);
  EXPECT_TRUE(p::as<p::ReservationReportCommand>(t.io_log.back()).extended());
}

// ---------------------------------------------------------------------------------------------------------
// compare, copy
// ---------------------------------------------------------------------------------------------------------

TEST(CliCompare, MatchMismatchAndSizes) {
  FakeTarget t;
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::memset(t.find_ns(1)->data.data() + 4 * 512, 0x42, 1024);
  const std::string same = dir.write("same", std::string(1024, '\x42')).string();
  const std::string other = dir.write("other", std::string(1024, '\x43')).string();
  const std::string shorter = dir.write("short", std::string(600, '\x42')).string();

  auto r = run(t, {"compare", kUri, "-s", "4", "-c", "1", "-z", "1024", "-d", same.c_str()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "compare: Success\n");
  const auto cmd = p::as<p::ReadWriteCommand>(t.io_log.back());
  EXPECT_EQ(cmd.hdr.opcode, 0x05);
  EXPECT_EQ(cmd.start_lba(), 4u);
  EXPECT_EQ(cmd.nlb(), 1u) << "-c is 0-based, as on the wire";

  r = run(t, {"compare", kUri, "--start-block=4", "--block-count=1", "--data-size=1024", "--data", other.c_str()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("Compare failed: Compare Failure (SCT 0x2 SC 0x85, DNR)"), std::string::npos) << r.err;

  // -z smaller than the blocks: rounded up, as nvme-cli does; the file must still hold them.
  r = run(t, {"compare", kUri, "-s", "4", "-c", "1", "-z", "512", "-d", same.c_str()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("Rounding data size to fit block count (1024 bytes)"), std::string::npos) << r.err;

  const auto sent = t.io_log.size();
  for (const std::vector<const char*>& args :
       {std::vector<const char*>{"compare", kUri, "-s", "4", "-c", "1", "-d", same.c_str()},  // no -z
        {"compare", kUri, "-s", "4", "-c", "1", "-z", "2048", "-d", same.c_str()},            // -z too large
        {"compare", kUri, "-s", "4", "-c", "1", "-z", "1024", "-d", shorter.c_str()},         // file too short
        {"compare", kUri, "-c", "65536", "-z", "1024", "-d", same.c_str()}}) {
    r = run(t, args);
    EXPECT_EQ(r.code, 2) << r.err;
  }
  EXPECT_EQ(t.io_log.size(), sent);

  r = run(t, {"compare", kUri, "-n", "2", "-c", "0", "-z", "512", "-d", same.c_str()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no namespace 2"), std::string::npos) << r.err;
}

TEST(CliCopy, RangesListsAndFormat) {
  FakeTarget t;
  std::memset(t.find_ns(1)->data.data() + 10 * 512, 0xA1, 512);
  std::memset(t.find_ns(1)->data.data() + 20 * 512, 0xB2, 1024);
  auto r = run(t, {"copy", kUri, "-d", "100", "-s", "10,20", "-b", "0,1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "NVMe Copy: success\n");
  const auto c = p::as<p::CopyCommand>(t.io_log.back());
  EXPECT_EQ(c.hdr.opcode, 0x19);
  EXPECT_EQ(c.sdlba.get(), 100u);
  EXPECT_EQ(c.range_count(), 2u);
  EXPECT_FALSE(c.fua());
  const auto r1 = p::load<p::CopySourceRange>(t.io_data.back().data() + 32);
  EXPECT_EQ(r1.slba.get(), 20u);
  EXPECT_EQ(r1.nlb.get(), 1u);
  const uint8_t* dest = t.find_ns(1)->data.data() + 100 * 512;
  EXPECT_EQ(dest[0], 0xA1);
  EXPECT_EQ(dest[512], 0xB2);
  EXPECT_EQ(dest[1535], 0xB2);

  r = run(t, {"copy", kUri, "--sdlba=200", "--slbs=10", "--blocks=0", "-f"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(p::as<p::CopyCommand>(t.io_log.back()).fua());

  const auto sent = t.io_log.size();
  for (const std::vector<const char*>& args :
       {std::vector<const char*>{"copy", kUri, "-d", "1", "-s", "10,20", "-b", "0"},  // lists differ
        {"copy", kUri, "-d", "1", "-s", "10", "-b", "0", "-F", "1"},                  // format 1
        {"copy", kUri, "-d", "1", "-s", "10", "-b", "65536"},                         // range too long
        {"copy", kUri, "-d", "1", "-b", "0"}}) {                                       // no --slbs
    r = run(t, args);
    EXPECT_EQ(r.code, 2) << r.err;
  }
  EXPECT_EQ(t.io_log.size(), sent);
}

}  // namespace

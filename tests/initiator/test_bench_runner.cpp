#include <gtest/gtest.h>

#include "initiator/bench_runner.h"
#include "initiator/bench_verify.h"
#include "initiator/fake_target.h"

using namespace rdmablk;
using namespace rdmablk::initiator;
using namespace rdmablk::initiator::bench;
using namespace rdmablk::testing;
using namespace std::chrono_literals;

namespace {

RunnerOptions runner_options(FakeTarget& t) {
  RunnerOptions o;
  o.connection.address = transport::TransportAddress{transport::TransportType::tcp, "127.0.0.1", 4420};
  o.connection.subnqn = t.subnqn;
  o.connection.host = test_host();
  o.connection.connector = FakeConnector(&t);
  return o;
}

JobFile jobs(std::string_view text) {
  auto f = parse_job_text(text, "test.fio");
  EXPECT_TRUE(f) << (f ? "" : f.error().message);
  return *f;
}

}  // namespace

TEST(BenchRunner, RandwriteThenVerifyCoversEveryBlockOnce) {
  FakeTarget t;
  t.namespaces[0].blocks = 4096;  // 2 MiB of 512-byte blocks
  auto r = run_bench(jobs("[wv]\nrw=randwrite\nbs=4k\niodepth=8\nsize=1m\noffset=64k\nverify=crc32c\n"), runner_options(t));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  const auto& res = (*r)[0];
  EXPECT_EQ(res.error, 0) << res.error_message;
  EXPECT_EQ(res.write.ios, 256u);
  EXPECT_EQ(res.read.ios, 256u);  // the verify pass
  EXPECT_EQ(res.write.bytes, 1u << 20);
  EXPECT_EQ(res.write.clat.count(), 256u);
  // Every block of the region holds its pattern, nothing outside it was written.
  auto& data = t.namespaces[0].data;
  for (uint64_t off = 65536; off < 65536 + (1 << 20); off += 4096) {
    EXPECT_FALSE(check_verify_block(std::span<const uint8_t>(data.data() + off, 4096), off, std::nullopt)) << off;
  }
  EXPECT_TRUE(std::all_of(data.begin(), data.begin() + 65536, [](uint8_t b) { return b == 0; }));
  // A clean shutdown at the end.
  EXPECT_EQ(protocol::Cc{t.ctrls[1].cc}.shn(), 1);
}

TEST(BenchRunner, VerifyMismatchFailsTheJobWithTheOffset) {
  FakeTarget t;
  t.corrupt_read_at = 5 * 4096 + 100;
  auto r = run_bench(jobs("[wv]\nrw=write\nbs=4k\niodepth=4\nsize=64k\nverify=crc32c\n"), runner_options(t));
  ASSERT_TRUE(r);
  const auto& res = (*r)[0];
  EXPECT_EQ(res.error, EILSEQ);
  EXPECT_NE(res.error_message.find("crc32c mismatch at byte offset 20580"), std::string::npos) << res.error_message;
}

TEST(BenchRunner, ReadJobVerifiesWhatAWriteJobLeft) {
  FakeTarget t;
  auto w = run_bench(jobs("[w]\nrw=write\nbs=8k\nsize=256k\nverify=crc32c\n"), runner_options(t));
  ASSERT_TRUE(w);
  ASSERT_EQ((*w)[0].error, 0) << (*w)[0].error_message;
  auto r = run_bench(jobs("[r]\nrw=randread\nbs=8k\nsize=256k\nverify=crc32c\niodepth=16\n"), runner_options(t));
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
  EXPECT_EQ((*r)[0].read.ios, 32u);
  // Unwritten space fails a verifying read job.
  auto bad = run_bench(jobs("[r]\nrw=read\nbs=8k\noffset=512k\nsize=64k\nverify=crc32c\n"), runner_options(t));
  ASSERT_TRUE(bad);
  EXPECT_EQ((*bad)[0].error, EILSEQ);
  EXPECT_NE((*bad)[0].error_message.find("never written"), std::string::npos);
}

TEST(BenchRunner, TimeBasedParallelJobsWithRamp) {
  FakeTarget t;
  auto r = run_bench(jobs("[global]\nbs=4k\niodepth=4\nruntime=200ms\nramp_time=50ms\ntime_based\n"
                          "[mix]\nrw=randrw\nrwmixread=70\nnumjobs=2\n[seq]\nrw=read\nsize=16k\n"),
                     runner_options(t));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  for (const auto& res : *r) {
    EXPECT_EQ(res.error, 0) << res.error_message;
    EXPECT_GT(res.read.ios, 0u) << res.spec.name;
    EXPECT_GE(res.read.runtime_ms(), 190u);
    EXPECT_LE(res.read.runtime_ms(), 400u);
    EXPECT_GE(res.job_runtime_ms, 240u);  // ramp + runtime
  }
  EXPECT_GT((*r)[0].write.ios, 0u);
  EXPECT_GT((*r)[0].read.ios, (*r)[0].write.ios);  // 70/30
  EXPECT_EQ((*r)[2].write.ios, 0u);
  EXPECT_EQ(t.connects.load(), 6);  // each job: admin + one I/O queue
}

TEST(BenchRunner, SetupErrorsAreClear) {
  FakeTarget t;
  RunnerOptions none = runner_options(t);
  none.connection.address.reset();
  auto r = run_bench(jobs("[j]\nrw=read\n"), none);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "test.fio:1: job 'j' names no target: set filename=tcp://ADDR:PORT/NQN/NSID in the job file or pass -a ADDR -n NQN");

  auto big = run_bench(jobs("[j]\nbs=1m\n"), runner_options(t));
  ASSERT_TRUE(big);
  EXPECT_NE((*big)[0].error_message.find("exceeds the controller's maximum transfer of 131072 bytes"), std::string::npos)
      << (*big)[0].error_message;

  auto ns = run_bench(jobs("[j]\nnamespace=9\n"), runner_options(t));
  ASSERT_TRUE(ns);
  EXPECT_NE((*ns)[0].error_message.find("namespace 9 is not active"), std::string::npos);

  auto past = run_bench(jobs("[j]\noffset=1m\nsize=1m\n"), runner_options(t));
  ASSERT_TRUE(past);
  EXPECT_NE((*past)[0].error_message.find("beyond the end of namespace 1"), std::string::npos) << (*past)[0].error_message;

  // filename= in the job file works without -a/-n.
  auto named = run_bench(jobs("[j]\nfilename=tcp://10.1.1.1:4420/nqn.2024-01.io.rdmablk:test/1\nsize=8k\n"), none);
  ASSERT_TRUE(named) << named.error().message;
  EXPECT_EQ((*named)[0].error, 0) << (*named)[0].error_message;
  EXPECT_EQ((*named)[0].read.ios, 2u);
}

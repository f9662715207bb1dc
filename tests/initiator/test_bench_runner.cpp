#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "initiator/bench/log.h"
#include "initiator/bench/runner.h"
#include "initiator/bench/verify.h"
#include "initiator/cli/cli.h"
#include "initiator/cli_runner.h"
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
    // Ends at its runtime, not at some other limit; the margin is for a descheduled job thread.
    EXPECT_LE(res.read.runtime_ms(), 200u + 5000u);
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

// ---------------------------------------------------------------------------------------------------------
// The runner's fio options. A recording connector wraps the fake target's queues to see what the runner
// sends (opcode, LBA range, how many commands were queued at once, on which thread), and what CPU set
// each job thread had when it connected.

namespace {

struct IoRecord {
  std::thread::id thread;
  uint8_t opcode = 0;
  uint64_t slba = 0;
  uint32_t nlb = 0;
  unsigned queued = 0;  // commands on the queue right after this one was submitted (itself included)
};

struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<IoRecord> ios;  // NVM commands on I/O queues
  std::vector<std::pair<std::thread::id, cpu_set_t>> affinity;  // per connected queue
  std::set<std::thread::id> connecting_threads;
  std::chrono::milliseconds io_delay{0};  // an I/O queue poll with commands queued waits this long first
  bool rendezvous = false;  // the first connecting job waits (up to 60 s) until another job connects
  bool overlapped = false;  // ... and another did

  void on_connect() {
    cpu_set_t set;
    CPU_ZERO(&set);
    (void)sched_getaffinity(0, sizeof(set), &set);
    std::unique_lock lk(mu);
    affinity.emplace_back(std::this_thread::get_id(), set);
    connecting_threads.insert(std::this_thread::get_id());
    cv.notify_all();
    if (rendezvous && connecting_threads.size() == 1) {
      // Ends when the other job connects: 60 s only bounds a run whose jobs do not overlap (the failure).
      overlapped = cv.wait_for(lk, 60s, [&] { return connecting_threads.size() >= 2; });
    }
  }
  std::vector<IoRecord> snapshot() {
    std::lock_guard lk(mu);
    return ios;
  }
};

class RecordingQueue final : public transport::HostQueue {
 public:
  RecordingQueue(std::unique_ptr<transport::HostQueue> inner, std::shared_ptr<Recorder> rec, uint16_t qid)
      : inner_(std::move(inner)), rec_(std::move(rec)), qid_(qid) {}
  protocol::Status submit(transport::HostCommand& cmd) noexcept override {
    const protocol::Status st = inner_->submit(cmd);
    if (st.ok() && qid_ != 0 && cmd.sqe.hdr.opcode != protocol::kFabricsOpcode) {
      IoRecord r;
      r.thread = std::this_thread::get_id();
      r.opcode = cmd.sqe.hdr.opcode;
      r.queued = inner_->outstanding();
      if (r.opcode == static_cast<uint8_t>(protocol::IoOpcode::read) ||
          r.opcode == static_cast<uint8_t>(protocol::IoOpcode::write)) {
        auto rw = protocol::as<protocol::ReadWriteCommand>(cmd.sqe);
        r.slba = rw.start_lba();
        r.nlb = rw.block_count();
      } else if (r.opcode == static_cast<uint8_t>(protocol::IoOpcode::dataset_management) &&
                 cmd.data.size() >= sizeof(protocol::DsmRange)) {
        protocol::DsmRange range;
        std::memcpy(&range, cmd.data.data(), sizeof(range));
        r.slba = range.slba.get();
        r.nlb = range.nlb.get();
      }
      try {
        std::lock_guard lk(rec_->mu);
        rec_->ios.push_back(r);
      } catch (...) {
      }
    }
    return st;
  }
  int poll(unsigned min_completions, std::chrono::milliseconds timeout) noexcept override {
    if (qid_ != 0 && rec_->io_delay.count() && inner_->outstanding()) std::this_thread::sleep_for(rec_->io_delay);
    return inner_->poll(min_completions, timeout);
  }
  unsigned outstanding() const noexcept override { return inner_->outstanding(); }
  uint16_t entries() const noexcept override { return inner_->entries(); }
  uint32_t max_transfer() const noexcept override { return inner_->max_transfer(); }
  void set_in_capsule_limit(uint32_t bytes) noexcept override { inner_->set_in_capsule_limit(bytes); }
  const transport::TransportAddress& address() const noexcept override { return inner_->address(); }
  void close() noexcept override { inner_->close(); }
  Result<void> register_buffer(std::span<uint8_t> region) override { return inner_->register_buffer(region); }

 private:
  std::unique_ptr<transport::HostQueue> inner_;
  std::shared_ptr<Recorder> rec_;
  uint16_t qid_;
};

RunnerOptions recording_options(FakeTarget& t, const std::shared_ptr<Recorder>& rec) {
  RunnerOptions o = runner_options(t);
  FakeConnector inner(&t);
  o.connection.connector = [inner, rec](const transport::HostQueueOptions& qo) -> Result<std::unique_ptr<transport::HostQueue>> {
    rec->on_connect();
    auto q = inner(qo);
    if (!q) return q;
    return std::unique_ptr<transport::HostQueue>(std::make_unique<RecordingQueue>(std::move(*q), rec, qo.qid));
  };
  return o;
}

// The I/O commands as letters: R read, W write, F flush, D dataset management (trim).
std::string opcodes(const std::vector<IoRecord>& ios) {
  std::string s;
  for (const auto& r : ios) {
    switch (static_cast<protocol::IoOpcode>(r.opcode)) {
      case protocol::IoOpcode::read: s += 'R'; break;
      case protocol::IoOpcode::write: s += 'W'; break;
      case protocol::IoOpcode::flush: s += 'F'; break;
      case protocol::IoOpcode::dataset_management: s += 'D'; break;
      default: s += '?';
    }
  }
  return s;
}

const JobResult& job(const std::vector<JobResult>& results, std::string_view name, unsigned clone = 0) {
  for (const auto& r : results) {
    if (r.spec.name == name && r.spec.clone == clone) return r;
  }
  ADD_FAILURE() << "no job " << name;
  return results.front();
}

std::span<uint8_t> ns_data(FakeTarget& t, uint8_t fill) {
  auto* ns = t.find_ns(1);
  std::fill(ns->data.begin(), ns->data.end(), fill);
  return ns->data;
}

bool all_bytes(std::span<const uint8_t> s, uint8_t v) {
  return std::all_of(s.begin(), s.end(), [v](uint8_t b) { return b == v; });
}

std::string temp_dir() {
  static std::atomic<int> n{0};
  auto p = std::filesystem::temp_directory_path() /
           ("rdmablk-runner-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

uint64_t total_ios(const JobResult& r) { return r.read.ios + r.write.ios + r.trim.ios; }

}  // namespace

TEST(BenchRunner, StonewallAndWaitForRunAJobAfterTheOneBefore) {
  // r verifies what w wrote: it can only succeed if w had finished writing when r started.
  for (const char* order : {"stonewall", "wait_for=w"}) {
    SCOPED_TRACE(order);
    FakeTarget t;
    auto rec = std::make_shared<Recorder>();
    auto r = run_bench(jobs(std::string("[global]\nbs=4k\nsize=64k\niodepth=4\nverify=crc32c\n"
                                        "[w]\nrw=write\ndo_verify=0\n[r]\nrw=read\n") +
                            order + "\n"),
                       recording_options(t, rec));
    ASSERT_TRUE(r) << r.error().message;
    const auto& w = job(*r, "w");
    const auto& rd = job(*r, "r");
    EXPECT_EQ(w.error, 0) << w.error_message;
    EXPECT_EQ(rd.error, 0) << rd.error_message;
    EXPECT_EQ(w.write.ios, 16u);
    EXPECT_EQ(w.read.ios, 0u);  // do_verify=0
    EXPECT_EQ(rd.read.ios, 16u);
    // Every write was sent before the first read.
    const std::string ops = opcodes(rec->snapshot());
    EXPECT_EQ(ops, std::string(16, 'W') + std::string(16, 'R'));
    // stonewall starts a reporting group; wait_for does not.
    EXPECT_EQ(w.spec.groupid, 0u);
    EXPECT_EQ(rd.spec.groupid, std::string(order) == "stonewall" ? 1u : 0u);
  }
}

TEST(BenchRunner, NewGroupAloneDoesNotSerialize) {
  FakeTarget t;
  auto rec = std::make_shared<Recorder>();
  rec->rendezvous = true;  // the first job to connect waits for the other one to connect too
  auto r = run_bench(jobs("[global]\nbs=4k\nsize=64k\nrw=read\n[a]\n[b]\nnew_group\noffset=64k\n"), recording_options(t, rec));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(job(*r, "a").spec.groupid, 0u);
  EXPECT_EQ(job(*r, "b").spec.groupid, 1u);
  for (const auto& res : *r) {
    EXPECT_EQ(res.error, 0) << res.error_message;
    EXPECT_EQ(res.read.ios, 16u);
  }
  EXPECT_TRUE(rec->overlapped) << "job b did not connect while job a was connecting: the groups ran one after the other";
}

TEST(BenchRunner, TrimDeallocatesTheRegionAndReportsTrimStats) {
  for (const char* mode : {"trim", "randtrim"}) {
    SCOPED_TRACE(mode);
    FakeTarget t;
    auto data = ns_data(t, 0xff);
    auto rec = std::make_shared<Recorder>();
    auto r = run_bench(jobs(std::string("[t]\nbs=8k\nsize=128k\noffset=64k\niodepth=4\nrw=") + mode + "\n"),
                       recording_options(t, rec));
    ASSERT_TRUE(r) << r.error().message;
    const auto& res = (*r)[0];
    EXPECT_EQ(res.error, 0) << res.error_message;
    EXPECT_EQ(t.dsm_ranges.load(), 16);
    EXPECT_EQ(res.trim.ios, 16u);
    EXPECT_EQ(res.trim.bytes, 128u * 1024);
    EXPECT_EQ(res.trim.clat.count(), 16u);
    EXPECT_EQ(res.read.ios + res.write.ios, 0u);
    // Each 8 KiB block of the region once (randtrim: in a random order).
    std::set<uint64_t> lbas;
    for (const auto& io : rec->snapshot()) {
      EXPECT_EQ(io.nlb, 16u);
      lbas.insert(io.slba);
    }
    EXPECT_EQ(lbas.size(), 16u);
    EXPECT_EQ(*lbas.begin(), 128u);
    EXPECT_EQ(*lbas.rbegin(), 128u + 15 * 16);
    // The region reads back as zeroes; around it the data is untouched.
    EXPECT_TRUE(all_bytes(data.subspan(64 * 1024, 128 * 1024), 0));
    EXPECT_TRUE(all_bytes(data.subspan(0, 64 * 1024), 0xff));
    EXPECT_TRUE(all_bytes(data.subspan(192 * 1024), 0xff));
    const std::string report = text_report(*r);
    EXPECT_NE(report.find("  trim: IOPS="), std::string::npos) << report;
  }
}

TEST(BenchRunner, FsyncFlushesAfterEveryNWritesAndEndFsyncOnceMore) {
  {
    FakeTarget t;
    auto rec = std::make_shared<Recorder>();
    auto r = run_bench(jobs("[w]\nrw=write\nbs=4k\nsize=64k\niodepth=4\nfsync=4\n"), recording_options(t, rec));
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
    EXPECT_EQ((*r)[0].write.ios, 16u);
    EXPECT_EQ(t.flushes.load(), 4);
    EXPECT_EQ(opcodes(rec->snapshot()), "WWWWFWWWWFWWWWFWWWWF");
  }
  {
    FakeTarget t;
    auto r = run_bench(jobs("[w]\nrw=write\nbs=4k\nsize=64k\niodepth=4\nfsync=4\nend_fsync=1\n"), runner_options(t));
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
    EXPECT_EQ(t.flushes.load(), 5);
  }
  {
    FakeTarget t;
    auto r = run_bench(jobs("[w]\nrw=randwrite\nbs=4k\nsize=64k\niodepth=4\nend_fsync=1\n"), runner_options(t));
    ASSERT_TRUE(r);
    EXPECT_EQ(t.flushes.load(), 1);
    EXPECT_EQ(t.io_commands.load(), 17);
  }
}

TEST(BenchRunner, NumberIosIoSizeAndLoopsGiveExactCounts) {
  struct Case {
    const char* opts;
    uint64_t reads, writes;
  } cases[] = {
      {"rw=read\nnumber_ios=10\n", 10, 0},
      {"rw=randread\nio_size=32k\n", 8, 0},
      {"rw=read\nloops=3\n", 48, 0},
      {"rw=read\nnumber_ios=5\nloops=3\n", 15, 0},
      {"rw=randwrite\nio_size=32k\nloops=2\nverify=crc32c\n", 16, 16},  // each loop verifies its writes
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.opts);
    FakeTarget t;
    auto rec = std::make_shared<Recorder>();
    auto r = run_bench(jobs(std::string("[j]\nbs=4k\nsize=64k\niodepth=4\n") + c.opts), recording_options(t, rec));
    ASSERT_TRUE(r);
    const auto& res = (*r)[0];
    EXPECT_EQ(res.error, 0) << res.error_message;
    EXPECT_EQ(res.read.ios, c.reads);
    EXPECT_EQ(res.write.ios, c.writes);
    EXPECT_EQ(uint64_t(t.io_commands.load()), c.reads + c.writes);
    for (const auto& io : rec->snapshot()) EXPECT_LT(io.slba, 128u);  // inside size=64k
  }
  // io_size below size: a sequential job covers the first io_size bytes.
  FakeTarget t;
  auto rec = std::make_shared<Recorder>();
  auto r = run_bench(jobs("[j]\nrw=read\nbs=4k\nsize=64k\nio_size=16k\n"), recording_options(t, rec));
  ASSERT_TRUE(r);
  std::vector<uint64_t> lbas;
  for (const auto& io : rec->snapshot()) lbas.push_back(io.slba);
  EXPECT_EQ(lbas, (std::vector<uint64_t>{0, 8, 16, 24}));
}

TEST(BenchRunner, VerifyKindsRoundTripAndCatchCorruption) {
  struct Case {
    const char* opts;
    VerifyKind kind;
    uint64_t corrupt;     // a byte of block 5 (offset 20480) the verify must catch
    const char* message;  // ... with this text
  } cases[] = {
      {"verify=md5\n", VerifyKind::md5, 5 * 4096 + 100, "md5 mismatch at byte offset 20580"},
      {"verify=sha1\n", VerifyKind::sha1, 5 * 4096 + 100, "sha1 mismatch at byte offset 20580"},
      {"verify=sha256\n", VerifyKind::sha256, 5 * 4096 + 4000, "sha256 mismatch at byte offset 24480"},
      {"verify=crc32c\n", VerifyKind::crc32c, 5 * 4096 + 100, "crc32c mismatch at byte offset 20580"},
      // meta checks the header only (fio): a corrupted offset field is caught.
      {"verify=meta\n", VerifyKind::meta, 5 * 4096 + 8, "at byte offset 20488"},
      {"verify=pattern\nverify_pattern=0x1a2b3c4d\n", VerifyKind::pattern, 5 * 4096 + 100,
       "pattern mismatch at byte offset 20580"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.opts);
    const std::string text = std::string("[wv]\nrw=randwrite\nbs=4k\nsize=64k\niodepth=4\n") + c.opts;
    {
      FakeTarget t;
      auto r = run_bench(jobs(text), runner_options(t));
      ASSERT_TRUE(r);
      const auto& res = (*r)[0];
      EXPECT_EQ(res.error, 0) << res.error_message;
      EXPECT_EQ(res.write.ios, 16u);
      EXPECT_EQ(res.read.ios, 16u);
      // The namespace holds blocks of that kind.
      std::vector<uint8_t> pattern;
      if (c.kind == VerifyKind::pattern) pattern = {0x1a, 0x2b, 0x3c, 0x4d};
      Verifier v(c.kind, pattern, 0);
      auto& data = t.find_ns(1)->data;
      for (uint64_t off = 0; off < 65536; off += 4096) {
        EXPECT_FALSE(v.check(std::span<const uint8_t>(data.data() + off, 4096), off, std::nullopt)) << off;
      }
      if (c.kind != VerifyKind::pattern) {
        EXPECT_TRUE(Verifier(c.kind == VerifyKind::crc32c ? VerifyKind::md5 : VerifyKind::crc32c, {}, 0)
                        .check(std::span<const uint8_t>(data.data(), 4096), 0, std::nullopt));
      }
    }
    {
      FakeTarget t;
      t.corrupt_read_at = c.corrupt;
      auto r = run_bench(jobs(text), runner_options(t));
      ASSERT_TRUE(r);
      EXPECT_EQ((*r)[0].error, EILSEQ);
      EXPECT_NE((*r)[0].error_message.find(c.message), std::string::npos) << (*r)[0].error_message;
    }
  }
  // verify=meta does not check the body (fio's meta).
  FakeTarget t;
  t.corrupt_read_at = 5 * 4096 + 100;
  auto r = run_bench(jobs("[wv]\nrw=write\nbs=4k\nsize=64k\nverify=meta\n"), runner_options(t));
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
}

TEST(BenchRunner, VerifyBacklogChecksAsItGoes) {
  FakeTarget t;
  auto rec = std::make_shared<Recorder>();
  auto r = run_bench(jobs("[wv]\nrw=write\nbs=4k\nsize=64k\niodepth=4\nverify=crc32c\nverify_backlog=4\n"),
                     recording_options(t, rec));
  ASSERT_TRUE(r);
  const auto& res = (*r)[0];
  EXPECT_EQ(res.error, 0) << res.error_message;
  EXPECT_EQ(res.write.ios, 16u);
  EXPECT_EQ(res.read.ios, 16u);  // everything read back once, nothing twice
  EXPECT_EQ(opcodes(rec->snapshot()), "WWWWRRRRWWWWRRRRWWWWRRRRWWWWRRRR");

  // A corrupted block is caught by the backlog's check, before the later writes.
  FakeTarget bad;
  bad.corrupt_read_at = 5 * 4096 + 100;
  auto rec2 = std::make_shared<Recorder>();
  auto r2 = run_bench(jobs("[wv]\nrw=write\nbs=4k\nsize=64k\niodepth=4\nverify=crc32c\nverify_backlog=4\n"),
                      recording_options(bad, rec2));
  ASSERT_TRUE(r2);
  EXPECT_EQ((*r2)[0].error, EILSEQ);
  EXPECT_NE((*r2)[0].error_message.find("crc32c mismatch at byte offset 20580"), std::string::npos);
  EXPECT_EQ(opcodes(rec2->snapshot()), "WWWWRRRRWWWWRRRR");
}

TEST(BenchRunner, VerifyOnlyAndDoVerify) {
  FakeTarget t;
  // do_verify=0: the pattern is written, nothing is read back.
  auto w = run_bench(jobs("[w]\nrw=write\nbs=4k\nsize=64k\nverify=crc32c\ndo_verify=0\n"), runner_options(t));
  ASSERT_TRUE(w);
  EXPECT_EQ((*w)[0].error, 0) << (*w)[0].error_message;
  EXPECT_EQ((*w)[0].write.ios, 16u);
  EXPECT_EQ((*w)[0].read.ios, 0u);
  EXPECT_EQ(t.io_commands.load(), 16);

  // verify_only: the same write job reads and checks instead of writing.
  const auto before = t.find_ns(1)->data;
  auto rec = std::make_shared<Recorder>();
  auto v = run_bench(jobs("[w]\nrw=write\nbs=4k\nsize=64k\nverify=crc32c\nverify_only\n"), recording_options(t, rec));
  ASSERT_TRUE(v);
  EXPECT_EQ((*v)[0].error, 0) << (*v)[0].error_message;
  EXPECT_EQ((*v)[0].write.ios, 0u);
  EXPECT_EQ((*v)[0].read.ios, 16u);
  EXPECT_EQ(opcodes(rec->snapshot()), std::string(16, 'R'));
  EXPECT_EQ(t.find_ns(1)->data, before);
  // ... and it does check: a corrupted read fails it.
  t.corrupt_read_at = 3 * 4096 + 50;
  auto bad = run_bench(jobs("[w]\nrw=write\nbs=4k\nsize=64k\nverify=crc32c\nverify_only\n"), runner_options(t));
  ASSERT_TRUE(bad);
  EXPECT_EQ((*bad)[0].error, EILSEQ);
  EXPECT_NE((*bad)[0].error_message.find("at byte offset 12338"), std::string::npos) << (*bad)[0].error_message;
  // A read job checks what it reads whatever do_verify says (do_verify only adds a write job's read-back
  // phase, as in fio).
  auto read = run_bench(jobs("[r]\nrw=read\nbs=4k\nsize=64k\nverify=crc32c\ndo_verify=0\n"), runner_options(t));
  ASSERT_TRUE(read);
  EXPECT_EQ((*read)[0].error, EILSEQ) << "a read job with verify=crc32c do_verify=0 did not check its reads";
}

TEST(BenchRunner, BlockSizesBssplitBsrangeAndPerDirection) {
  {
    FakeTarget t;
    t.namespaces[0].blocks = 8192;
    auto rec = std::make_shared<Recorder>();
    auto r = run_bench(jobs("[j]\nrw=randread\nbssplit=4k/50:8k/50\nsize=4m\nnumber_ios=200\niodepth=4\n"),
                       recording_options(t, rec));
    ASSERT_TRUE(r);
    const auto& res = (*r)[0];
    EXPECT_EQ(res.error, 0) << res.error_message;
    EXPECT_EQ(res.read.ios, 200u);
    EXPECT_GT(res.read.bytes, 200u * 4096);
    EXPECT_LT(res.read.bytes, 200u * 8192);
    std::set<uint32_t> sizes;
    for (const auto& io : rec->snapshot()) sizes.insert(io.nlb);
    EXPECT_EQ(sizes, (std::set<uint32_t>{8, 16}));
  }
  {
    FakeTarget t;
    auto rec = std::make_shared<Recorder>();
    auto r = run_bench(jobs("[j]\nrw=randread\nbsrange=4k-16k\nblockalign=8k\nsize=512k\nnumber_ios=100\n"),
                       recording_options(t, rec));
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
    std::set<uint32_t> sizes;
    for (const auto& io : rec->snapshot()) {
      EXPECT_EQ(io.slba % 16, 0u) << "offset not 8k aligned: LBA " << io.slba;
      EXPECT_GE(io.nlb, 8u);
      EXPECT_LE(io.nlb, 32u);
      EXPECT_EQ(io.nlb % 8, 0u);
      EXPECT_LE(io.slba + io.nlb, 1024u);
      sizes.insert(io.nlb);
    }
    EXPECT_GE(sizes.size(), 2u);
  }
  {
    FakeTarget t;
    t.namespaces[0].blocks = 8192;
    auto rec = std::make_shared<Recorder>();
    auto r = run_bench(jobs("[j]\nrw=randrw\nbs=4k,8k\nsize=4m\nnumber_ios=200\niodepth=4\n"), recording_options(t, rec));
    ASSERT_TRUE(r);
    const auto& res = (*r)[0];
    EXPECT_EQ(res.error, 0) << res.error_message;
    EXPECT_EQ(res.read.ios + res.write.ios, 200u);
    EXPECT_GT(res.read.ios, 0u);
    EXPECT_GT(res.write.ios, 0u);
    EXPECT_EQ(res.read.bytes, res.read.ios * 4096);
    EXPECT_EQ(res.write.bytes, res.write.ios * 8192);
    for (const auto& io : rec->snapshot()) {
      EXPECT_EQ(io.nlb, io.opcode == static_cast<uint8_t>(protocol::IoOpcode::write) ? 16u : 8u);
    }
  }
}

// Rates and think time can only make a job slower: lower bounds on how long it took.
TEST(BenchRunner, RateAndThinkTimeSlowAJobDown) {
  auto run_one = [](const std::string& text) {
    FakeTarget t;
    auto r = run_bench(jobs(text), runner_options(t));
    EXPECT_TRUE(r);
    EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
    return (*r)[0];
  };
  // 200 IOPS: the 20th I/O may not start before 19 * 5 ms.
  auto iops = run_one("[j]\nrw=read\nbs=4k\nnumber_ios=20\nrate_iops=200\n");
  EXPECT_EQ(iops.read.ios, 20u);
  EXPECT_GE(iops.read.runtime_ns, 90'000'000u);
  // rate= in bytes: 800 KiB/s of 4 KiB I/Os is 200 IOPS.
  auto bytes = run_one("[j]\nrw=read\nbs=4k\nnumber_ios=20\nrate=800k\n");
  EXPECT_GE(bytes.read.runtime_ns, 90'000'000u);
  // Poisson arrivals at 1000 IOPS: 99 exponential gaps of mean 1 ms before the 100th I/O (sd 10 ms).
  auto poisson = run_one("[j]\nrw=randread\nbs=4k\nnumber_ios=100\nrate_iops=1000\nrate_process=poisson\nsize=512k\n");
  EXPECT_EQ(poisson.read.ios, 100u);
  EXPECT_GE(poisson.read.runtime_ns, 50'000'000u);
  // 10 ms of think time after every 2 I/Os: three pauses before the 8th I/O.
  auto think = run_one("[j]\nrw=read\nbs=4k\nnumber_ios=8\nthinktime=10ms\nthinktime_blocks=2\n");
  EXPECT_EQ(think.read.ios, 8u);
  EXPECT_GE(think.read.runtime_ns, 30'000'000u);
  // startdelay: the job starts 100 ms late (its runtime is not counted from before).
  auto delayed = run_one("[j]\nrw=read\nbs=4k\nnumber_ios=8\nstartdelay=100ms\n");
  EXPECT_EQ(delayed.read.ios, 8u);
  EXPECT_GE(delayed.job_runtime_ms, 100u);
}

// flow=: the jobs of a flow_id keep their I/O counts in the ratio of their weights. What the runner
// guarantees: while both run, a job issues only while its share of the flow's I/O is at most its weight's
// share, so the second job's share stays within 1/total of 3/4 whatever the speeds. A job that ends takes
// its I/O and weight out of the flow (fio's flow_exit_job), so the other then runs unthrottled until its own
// runtime ends: for as long as they started apart. Every I/O here takes at least 1 ms (the queue sleeps
// before completing it), so that tail adds at most one I/O per ms against ~1.3 per ms while both run: the
// share stays inside [0.6, 0.9] unless the two jobs start about 100 ms apart.
TEST(BenchRunner, FlowKeepsTheRatioOfTheWeights) {
  FakeTarget t;
  auto rec = std::make_shared<Recorder>();
  rec->io_delay = 1ms;
  auto r = run_bench(jobs("[global]\nrw=randread\nbs=4k\nsize=256k\niodepth=1\ntime_based\nruntime=500ms\nflow_id=7\n"
                          "[a]\nflow=1\n[b]\nflow=3\n"),
                     recording_options(t, rec));
  ASSERT_TRUE(r);
  const auto& a = job(*r, "a");
  const auto& b = job(*r, "b");
  EXPECT_EQ(a.error, 0) << a.error_message;
  EXPECT_EQ(b.error, 0) << b.error_message;
  ASSERT_GT(a.read.ios, 0u);
  const double share = static_cast<double>(b.read.ios) / static_cast<double>(a.read.ios + b.read.ios);
  auto why = [&] {
    return fmt::format("a: {} I/Os, started at {} ms, ran {} ms; b: {} I/Os, started at {} ms, ran {} ms", a.read.ios,
                       a.job_start_ms % 100000, a.job_runtime_ms, b.read.ios, b.job_start_ms % 100000, b.job_runtime_ms);
  };
  // A job runs alone (unthrottled, at most one I/O per ms) while the other has not started or has ended:
  // for up to the difference of their start times plus that of their run times, which a loaded machine
  // can stretch (thread start-up); those I/Os widen the bounds.
  const auto diff = [](uint64_t x, uint64_t y) { return x > y ? x - y : y - x; };
  const double alone = static_cast<double>(diff(a.job_start_ms, b.job_start_ms) + diff(a.job_runtime_ms, b.job_runtime_ms) + 2);
  const double total = static_cast<double>(a.read.ios + b.read.ios);
  EXPECT_GE(share, 0.6 - alone / total) << why();
  EXPECT_LE(share, 0.9 + alone / total) << why();
}

// A job that has finished no longer holds its flow partners back (fio's flow_exit_job): size-based jobs of
// different lengths in one flow both finish.
TEST(BenchRunner, FlowPartnerThatFinishesReleasesTheOthers) {
  FakeTarget t;
  const JobFile file = jobs("[global]\nrw=read\nbs=4k\niodepth=1\nflow_id=3\n[a]\nflow=1\nsize=64k\n[b]\nflow=3\nsize=512k\n"
                            "[c]\nstonewall\nflow=1\nflow_id=4\nsize=512k\n[d]\nflow=3\nflow_id=4\nsize=64k\n");
  const RunnerOptions opts = runner_options(t);
  auto fut = std::async(std::launch::async, [&] { return run_bench(file, opts); });
  if (fut.wait_for(60s) != std::future_status::ready) {
    std::fprintf(stderr, "FlowPartnerThatFinishesReleasesTheOthers: run_bench hangs (a flow job waits for a finished partner)\n");
    std::_Exit(1);
  }
  auto r = fut.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(job(*r, "a").read.ios, 16u);
  EXPECT_EQ(job(*r, "b").read.ios, 128u);
  EXPECT_EQ(job(*r, "c").read.ios, 128u);
  EXPECT_EQ(job(*r, "d").read.ios, 16u);
  for (const auto& res : *r) EXPECT_EQ(res.error, 0) << res.error_message;
}

TEST(BenchRunner, WritesFioLogFiles) {
  const std::string dir = temp_dir();
  {
    // Per-I/O logs (log_avg_msec=0): a line per I/O in each of them.
    FakeTarget t;
    auto r = run_bench(jobs("[global]\nbs=4k\nsize=64k\niodepth=4\nlog_offset=1\n[j]\nrw=randrw\nwrite_lat_log=" + dir +
                            "/j\nwrite_bw_log=" + dir + "/j\nwrite_iops_log=" + dir + "/j\n[k]\nrw=read\nwrite_iops_log=" +
                            dir + "/k\n"),
                       runner_options(t));
    ASSERT_TRUE(r);
    const auto& res = job(*r, "j");
    EXPECT_EQ(res.error, 0) << res.error_message;
    ASSERT_EQ(total_ios(res), 16u);
    for (const char* kind : {"lat", "clat", "bw", "iops"}) {
      SCOPED_TRACE(kind);
      auto lines = read_fio_log(dir + "/j_" + kind + ".1.log");
      ASSERT_TRUE(lines) << lines.error().message;
      EXPECT_EQ(lines->size(), 16u);
      uint64_t reads = 0;
      std::set<uint64_t> offsets;
      for (const auto& l : *lines) {
        EXPECT_EQ(l.bs, 4096u);
        EXPECT_GT(l.value, 0);
        if (std::string(kind) == "iops") {
          EXPECT_EQ(l.value, 1);
        }
        reads += l.ddir == kRead;
        offsets.insert(l.offset);
      }
      EXPECT_EQ(reads, res.read.ios);
      EXPECT_EQ(offsets.size(), 16u);  // randrw covers the region once
      EXPECT_EQ(*offsets.rbegin(), 60u * 1024);
    }
    auto slat = read_fio_log(dir + "/j_slat.1.log");  // written empty, as fio for synchronous engines
    ASSERT_TRUE(slat);
    EXPECT_TRUE(slat->empty());
    // fio's job numbers: k is job 2.
    auto k = read_fio_log(dir + "/k_iops.2.log");
    ASSERT_TRUE(k) << k.error().message;
    EXPECT_EQ(k->size(), 16u);
    EXPECT_FALSE(std::filesystem::exists(dir + "/k_lat.2.log"));
  }
  {
    // Averaged logs: one line per direction and log_avg_msec.
    FakeTarget t;
    auto r = run_bench(jobs("[a]\nrw=randread\nbs=4k\nsize=64k\ntime_based\nruntime=500ms\nlog_avg_msec=100\nwrite_lat_log=" +
                            dir + "/a\nwrite_iops_log=" + dir + "/a\n"),
                       runner_options(t));
    ASSERT_TRUE(r);
    const auto& res = (*r)[0];
    EXPECT_EQ(res.error, 0) << res.error_message;
    for (const char* kind : {"lat", "iops"}) {
      SCOPED_TRACE(kind);
      auto lines = read_fio_log(dir + "/a_" + kind + ".1.log");
      ASSERT_TRUE(lines) << lines.error().message;
      EXPECT_GE(lines->size(), 1u);
      EXPECT_LE(lines->size(), res.job_runtime_ms / 100 + 1);
      EXPECT_LT(lines->size(), res.read.ios);
      for (const auto& l : *lines) {
        EXPECT_EQ(l.bs, 0u);
        EXPECT_EQ(l.ddir, kRead);
        EXPECT_GT(l.value, 0);
      }
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(BenchRunner, TimelineCoversTheJob) {
  FakeTarget t;
  auto r = run_bench(jobs("[t]\nrw=randread\nbs=4k\nsize=64k\niodepth=2\ntime_based\nruntime=1200ms\nlog_avg_msec=200\n"),
                     runner_options(t));
  ASSERT_TRUE(r);
  const auto& res = (*r)[0];
  EXPECT_EQ(res.error, 0) << res.error_message;
  ASSERT_GE(res.timeline.size(), 3u);
  uint64_t ios = 0, bytes = 0, last = 0;
  for (const auto& s : res.timeline) {
    EXPECT_GE(s.t_ms, last);
    last = s.t_ms;
    ios += s.ios[kRead];
    bytes += s.bytes[kRead];
    EXPECT_EQ(s.ios[kWrite], 0u);
  }
  EXPECT_EQ(ios, res.read.ios);
  EXPECT_EQ(bytes, res.read.bytes);
  EXPECT_GE(last, 1200u);
  // With a ramp the timeline has the ramp's I/O too (t_ms counts from the start, ramp included); the
  // results do not.
  FakeTarget t2;
  auto ramp = run_bench(jobs("[t]\nrw=randread\nbs=4k\nsize=64k\ntime_based\nruntime=300ms\nramp_time=200ms\nlog_avg_msec=100\n"),
                        runner_options(t2));
  ASSERT_TRUE(ramp);
  uint64_t all = 0;
  for (const auto& s : (*ramp)[0].timeline) all += s.ios[kRead];
  EXPECT_EQ(all, uint64_t(t2.io_commands.load()));
  EXPECT_GE(all, (*ramp)[0].read.ios);
}

TEST(BenchRunner, LatencyTargetProbesTheDepth) {
  {
    // A target the fake always meets: the depth doubles from 1 up to iodepth and stays there.
    FakeTarget t;
    t.namespaces[0].blocks = 8192;
    auto rec = std::make_shared<Recorder>();
    auto r = run_bench(jobs("[l]\nrw=randread\nbs=4k\nsize=2m\nnumber_ios=256\niodepth=8\nlatency_target=10s\n"),
                       recording_options(t, rec));
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
    EXPECT_EQ((*r)[0].read.ios, 256u);
    const auto ios = rec->snapshot();
    ASSERT_EQ(ios.size(), 256u);
    EXPECT_EQ(ios[0].queued, 1u);
    EXPECT_EQ(ios[1].queued, 1u);  // the probe starts at depth 1
    unsigned late_max = 0;
    for (std::size_t i = ios.size() / 2; i < ios.size(); ++i) late_max = std::max(late_max, ios[i].queued);
    EXPECT_EQ(late_max, 8u);
  }
  {
    // Without a target: the full depth at once.
    FakeTarget t;
    auto rec = std::make_shared<Recorder>();
    auto r = run_bench(jobs("[l]\nrw=randread\nbs=4k\nsize=512k\nnumber_ios=64\niodepth=8\n"), recording_options(t, rec));
    ASSERT_TRUE(r);
    EXPECT_EQ(rec->snapshot()[7].queued, 8u);
  }
  {
    // Every I/O takes at least 2 ms: a 1 ms target is never met, the depth stays at 1.
    FakeTarget t;
    auto rec = std::make_shared<Recorder>();
    rec->io_delay = 2ms;
    auto r = run_bench(jobs("[l]\nrw=randread\nbs=4k\nsize=512k\nnumber_ios=32\niodepth=8\nlatency_target=1ms\n"),
                       recording_options(t, rec));
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
    EXPECT_EQ((*r)[0].read.ios, 32u);
    for (const auto& io : rec->snapshot()) EXPECT_EQ(io.queued, 1u);
  }
}

TEST(BenchRunner, CpusAllowedPinsTheJobThread) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  {
    FakeTarget t;
    auto rec = std::make_shared<Recorder>();
    auto r = run_bench(jobs("[c]\nrw=read\nbs=4k\nsize=64k\ncpus_allowed=0\n"), recording_options(t, rec));
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
    EXPECT_EQ((*r)[0].read.ios, 16u);
    ASSERT_FALSE(rec->affinity.empty());
    if (CPU_ISSET(0, &mine)) {
      for (const auto& [thread, set] : rec->affinity) {
        EXPECT_EQ(CPU_COUNT(&set), 1);
        EXPECT_TRUE(CPU_ISSET(0, &set));
      }
    }
  }
  {
    // split: copy i gets CPU i. (A CPU this process may not use is not an error, as fio's taskset users
    // expect the job to run anyway.)
    FakeTarget t;
    auto rec = std::make_shared<Recorder>();
    auto r = run_bench(jobs("[c]\nrw=read\nbs=4k\nsize=64k\noffset_increment=64k\nnumjobs=2\ncpus_allowed=0,1\n"
                            "cpus_allowed_policy=split\n"),
                       recording_options(t, rec));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->size(), 2u);
    for (const auto& res : *r) {
      EXPECT_EQ(res.error, 0) << res.error_message;
      EXPECT_EQ(res.read.ios, 16u);
    }
    // Which thread ran which copy: copy 1 reads from 64k (LBA 128).
    std::map<std::thread::id, unsigned> copy_of;
    for (const auto& io : rec->snapshot()) copy_of[io.thread] = io.slba >= 128 ? 1 : 0;
    ASSERT_EQ(copy_of.size(), 2u);
    for (const auto& [thread, set] : rec->affinity) {
      const unsigned cpu = copy_of.at(thread);
      if (!CPU_ISSET(cpu, &mine)) continue;
      EXPECT_EQ(CPU_COUNT(&set), 1);
      EXPECT_TRUE(CPU_ISSET(cpu, &set)) << "copy " << cpu;
    }
  }
}

TEST(BenchRunner, WriteBufferContents) {
  {
    FakeTarget t;
    auto data = ns_data(t, 0xff);
    auto r = run_bench(jobs("[z]\nrw=randwrite\nbs=4k\nsize=64k\niodepth=4\nzero_buffers\n"), runner_options(t));
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
    EXPECT_TRUE(all_bytes(data.subspan(0, 65536), 0));
    EXPECT_TRUE(all_bytes(data.subspan(65536), 0xff));
  }
  const std::array<uint8_t, 4> pattern{0xde, 0xad, 0xbe, 0xef};
  auto holds_pattern = [&](std::span<const uint8_t> s) {
    for (std::size_t i = 0; i < s.size(); ++i)
      if (s[i] != pattern[i % 4]) return false;
    return true;
  };
  {
    // buffer_pattern turns scramble_buffers off (fio): every written byte is the pattern's.
    FakeTarget t;
    auto data = ns_data(t, 0xff);
    auto r = run_bench(jobs("[p]\nrw=write\nbs=4k\nsize=64k\niodepth=4\nbuffer_pattern=0xdeadbeef\n"), runner_options(t));
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
    EXPECT_TRUE(holds_pattern(data.subspan(0, 65536)));
    EXPECT_TRUE(all_bytes(data.subspan(65536), 0xff));
  }
  {
    // Reads land in the same buffers; the writes after them still carry the pattern.
    FakeTarget t;
    auto data = ns_data(t, 0xff);
    auto r = run_bench(jobs("[p]\nrw=randrw\nbs=4k\nsize=256k\niodepth=4\nbuffer_pattern=0xdeadbeef\n"), runner_options(t));
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)[0].error, 0) << (*r)[0].error_message;
    ASSERT_GT((*r)[0].write.ios, 0u);
    ASSERT_GT((*r)[0].read.ios, 0u);
    uint64_t written = 0;
    for (uint64_t off = 0; off < 256 * 1024; off += 4096) {
      auto block = data.subspan(off, 4096);
      if (all_bytes(block, 0xff)) continue;
      EXPECT_TRUE(holds_pattern(block)) << "block at " << off;
      ++written;
    }
    EXPECT_EQ(written, (*r)[0].write.ios);
  }
}

TEST(BenchRunner, DescribeJobsPrintsFioStartupLines) {
  auto f = jobs("[global]\nbs=4k\niodepth=8\n[seq]\nrw=read\n[rand]\nstonewall\nrw=randwrite\nbs=64k\n[more]\nrw=randrw\n"
                "bsrange=4k-16k\n");
  EXPECT_EQ(describe_jobs(f),
            "seq: (g=0): rw=read, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=rdmablk, iodepth=8\n"
            "rand: (g=1): rw=randwrite, bs=(R) 64.0KiB-64.0KiB, (W) 64.0KiB-64.0KiB, (T) 64.0KiB-64.0KiB, ioengine=rdmablk, "
            "iodepth=8\n"
            "more: (g=1): rw=randrw, bs=(R) 4096B-16.0KiB, (W) 4096B-16.0KiB, (T) 4096B-16.0KiB, ioengine=rdmablk, iodepth=8\n"
            "3 jobs in 2 groups\n");
}

TEST(BenchRunner, CliParseOnlyPrintsTheJobsAndEachNoteOnce) {
  FakeTarget t;
  const std::string dir = temp_dir();
  const std::string path = dir + "/jobs.fio";
  std::ofstream(path) << "[global]\nbs=4k\nsize=64k\ndirectory=/tmp\n[a]\nrw=read\ndirectory=/var/tmp\n[b]\nnew_group\n"
                         "rw=write\n";
  CliEnv env;
  env.connector = FakeConnector(&t);
  auto parsed = run_cli(env, {"bench", path.c_str(), "--parse-only"});
  EXPECT_EQ(parsed.code, 0) << parsed.err;
  auto file = parse_job_file(path);
  ASSERT_TRUE(file);
  EXPECT_EQ(parsed.out, describe_jobs(*file));
  EXPECT_NE(parsed.out.find("b: (g=1): rw=write"), std::string::npos) << parsed.out;
  EXPECT_NE(parsed.out.find("2 jobs in 2 groups\n"), std::string::npos) << parsed.out;
  ASSERT_EQ(file->notes.size(), 1u);
  EXPECT_EQ(parsed.err, "rdmablk bench: note: " + file->notes[0] + "\n");
  EXPECT_NE(parsed.err.find("'directory'"), std::string::npos);
  EXPECT_EQ(t.connects.load(), 0);  // nothing ran

  // A real run prints the note once too, and the report.
  auto ran = run_cli(env, {"bench", path.c_str(), "-a", "127.0.0.1", "-n", "nqn.2024-01.io.rdmablk:test"});
  EXPECT_EQ(ran.code, 0) << ran.err;
  EXPECT_EQ(ran.err, "rdmablk bench: note: " + file->notes[0] + "\n");
  EXPECT_NE(ran.out.find("Run status group 1 (all jobs):"), std::string::npos) << ran.out;
  std::filesystem::remove_all(dir);
}

// ramp_time with a size-based job: the ramp is time from the job's first I/O (not from each loop's); the
// I/O it covers counts toward the size but not in the results.
TEST(BenchRunner, RampTimeWithASizeBasedJob) {
  FakeTarget t;
  // 40 IOPS: I/O k is issued at k * 25 ms at the earliest, so the ones from the 9th on come after the ramp.
  auto r = run_bench(jobs("[r]\nrw=read\nbs=4k\nsize=16k\nloops=4\nrate_iops=40\nramp_time=200ms\n"), runner_options(t));
  ASSERT_TRUE(r);
  const auto& res = (*r)[0];
  EXPECT_EQ(res.error, 0) << res.error_message;
  EXPECT_EQ(t.io_commands.load(), 16);
  EXPECT_GE(res.read.ios, 8u);
  EXPECT_LT(res.read.ios, 16u);  // the first I/O is in the ramp
  EXPECT_EQ(res.read.bytes, res.read.ios * 4096);
  EXPECT_EQ(res.read.clat.count(), res.read.ios);
  EXPECT_LE(res.read.runtime_ms() + 200, res.job_runtime_ms + 1);
}

// verify_backlog's checks during the ramp do not end the ramp, and the write runtime counts.
TEST(BenchRunner, RampTimeWithVerifyBacklog) {
  FakeTarget t;
  auto r = run_bench(jobs("[w]\nrw=write\nbs=4k\nsize=128k\niodepth=4\nverify=crc32c\nverify_backlog=8\ntime_based\n"
                          "runtime=300ms\nramp_time=100ms\n"),
                     runner_options(t));
  ASSERT_TRUE(r);
  const auto& res = (*r)[0];
  EXPECT_EQ(res.error, 0) << res.error_message;
  EXPECT_GT(res.write.ios, 0u);
  EXPECT_GT(res.read.ios, 0u);
  EXPECT_GE(res.write.runtime_ns, 295'000'000u);
  EXPECT_GE(res.job_runtime_ms, 400u);
}

#include <gtest/gtest.h>

#include "initiator/bench_job.h"

using namespace rdmablk::initiator::bench;
using namespace std::chrono_literals;

namespace {

JobFile parse_ok(std::string_view text) {
  auto r = parse_job_text(text, "jobs.fio");
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? *r : JobFile{};
}

std::string parse_err(std::string_view text) {
  auto r = parse_job_text(text, "jobs.fio");
  EXPECT_FALSE(r);
  return r ? std::string() : r.error().message;
}

}  // namespace

TEST(JobParser, GlobalSectionIsInheritedAndOverridden) {
  auto f = parse_ok(R"(; a comment
# another comment
[global]
bs=4k
iodepth = 8
rw=randread
filename=tcp://127.0.0.1:4420/nqn.2024-01.io.rdmablk:vol0/2

[small]
size=1m

[big]
bs=128K   ; trailing comment
rw=write
verify=crc32c
)");
  ASSERT_EQ(f.jobs.size(), 2u);
  const auto& a = f.jobs[0];
  EXPECT_EQ(a.name, "small");
  EXPECT_EQ(a.bs[kRead].min, 4096u);
  EXPECT_EQ(a.iodepth, 8u);
  EXPECT_EQ(a.rw, RwMode::randread);
  EXPECT_EQ(a.size, 1u << 20);
  ASSERT_TRUE(a.filename);
  EXPECT_EQ(a.filename->nsid, 2u);
  EXPECT_EQ(a.filename->subnqn, "nqn.2024-01.io.rdmablk:vol0");
  EXPECT_EQ(a.where, "jobs.fio:9");
  const auto& b = f.jobs[1];
  EXPECT_EQ(b.bs[kRead].min, 131072u);
  EXPECT_EQ(b.rw, RwMode::write);
  EXPECT_EQ(b.verify, VerifyKind::crc32c);
  EXPECT_EQ(b.iodepth, 8u);
  // fio's "job options" hold the section's own keys; "global options" the [global] ones.
  ASSERT_EQ(b.options.size(), 3u);
  EXPECT_EQ(b.options[0], (std::pair<std::string, std::string>{"bs", "128K"}));
  ASSERT_EQ(f.global_options.size(), 4u);
  EXPECT_EQ(f.global_options[1].first, "iodepth");
  EXPECT_EQ(f.global_options[1].second, "8");
}

TEST(JobParser, GlobalAfterAJobOnlyAffectsLaterJobs) {
  auto f = parse_ok("[first]\nrw=read\n[global]\nbs=8k\n[second]\nrw=write\n");
  ASSERT_EQ(f.jobs.size(), 2u);
  EXPECT_EQ(f.jobs[0].bs[kRead].min, 4096u);
  EXPECT_EQ(f.jobs[1].bs[kRead].min, 8192u);
}

TEST(JobParser, NumjobsExpandsIntoCopiesWithOffsetIncrement) {
  auto f = parse_ok("[w]\nrw=randwrite\nnumjobs=3\nsize=1m\noffset=4k\noffset_increment=1m\nverify=crc32c\n[r]\n");
  ASSERT_EQ(f.jobs.size(), 4u);
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(f.jobs[i].name, "w");
    EXPECT_EQ(f.jobs[i].clone, i);
    EXPECT_EQ(f.jobs[i].offset, 4096u + i * (1u << 20));
  }
  EXPECT_EQ(f.jobs[3].name, "r");
  EXPECT_EQ(f.jobs[3].rw, RwMode::read);
}

TEST(JobParser, TimesRwmixAndBooleans) {
  auto f = parse_ok("[j]\nrw=randrw\nrwmixwrite=30\nruntime=2m\nramp_time=500ms\ntime_based\nnamespace=3\n");
  const auto& j = f.jobs[0];
  EXPECT_EQ(j.rwmixread, 70u);
  EXPECT_EQ(j.runtime, 120s);
  EXPECT_EQ(j.ramp_time, 500ms);
  EXPECT_TRUE(j.time_based);
  EXPECT_EQ(j.nsid, 3u);
  auto g = parse_ok("[j]\nruntime=10\ntime_based=0\nrw=readwrite\nioengine=libaio\ndirect=1\n");
  EXPECT_EQ(g.jobs[0].runtime, 10s);
  EXPECT_FALSE(g.jobs[0].time_based);
  EXPECT_EQ(g.jobs[0].rw, RwMode::rw);
}

TEST(JobParser, SizesFollowFioUnits) {
  EXPECT_EQ(*parse_size("4096"), 4096u);
  EXPECT_EQ(*parse_size("4k"), 4096u);
  EXPECT_EQ(*parse_size("4K"), 4096u);
  EXPECT_EQ(*parse_size("4KiB"), 4096u);
  EXPECT_EQ(*parse_size("4kb"), 4096u);
  EXPECT_EQ(*parse_size("1m"), 1048576u);
  EXPECT_EQ(*parse_size("2g"), 2147483648u);
  EXPECT_EQ(*parse_size("1t"), 1ull << 40);
  EXPECT_FALSE(parse_size("4x"));
  EXPECT_FALSE(parse_size("k"));
  EXPECT_FALSE(parse_size("99999999999p"));
  EXPECT_EQ(*parse_duration("30"), 30s);
  EXPECT_EQ(*parse_duration("250us"), 250us);
  EXPECT_EQ(*parse_duration("1h"), 3600s);
  EXPECT_FALSE(parse_duration("5 fortnights"));
}

TEST(JobParser, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(parse_err("[j]\nrw=read\nblocksize_range=4k\n"), "jobs.fio:3: unknown option 'blocksize_range'");
  EXPECT_EQ(parse_err("[j]\n\nbs=4q\n"),
            "jobs.fio:3: invalid value '4q' for 'bs': unknown size unit 'q' (use k, m, g, t or p)");
  EXPECT_EQ(parse_err("[j]\nrw=trim\n"),
            "jobs.fio:2: invalid value 'trim' for 'rw': expected read, write, randread, randwrite, rw, readwrite or randrw");
  EXPECT_EQ(parse_err("bs=4k\n[j]\n"), "jobs.fio:1: option 'bs=4k' outside of a [section]");
  EXPECT_EQ(parse_err("[j\n"), "jobs.fio:1: unterminated section header '[j'");
  EXPECT_EQ(parse_err("[j]\niodepth\n"), "jobs.fio:2: option 'iodepth' needs a value (iodepth=...)");
  EXPECT_EQ(parse_err("[j]\niodepth=0\n"), "jobs.fio:2: invalid value '0' for 'iodepth': must be between 1 and 4096");
  EXPECT_EQ(parse_err("[j]\nbs=1000\n"), "jobs.fio:2: invalid value '1000' for 'bs': must be a multiple of 512 up to 1g");
  EXPECT_EQ(parse_err("[j]\nverify=md5\n"), "jobs.fio:2: invalid value 'md5' for 'verify': only verify=crc32c (or 0/none) is supported");
  EXPECT_EQ(parse_err("[global]\nbs=4k\n"), "jobs.fio: no job sections (only [global])");
  auto m = parse_err("[j]\nfilename=/dev/nvme0n1\n");
  EXPECT_EQ(m.rfind("jobs.fio:2: invalid value '/dev/nvme0n1' for 'filename': ", 0), 0u) << m;
}

TEST(JobParser, JobLevelValidationNamesTheSection) {
  EXPECT_EQ(parse_err("\n[t]\ntime_based\n"), "jobs.fio:2: job 't': time_based needs a runtime");
  EXPECT_NE(parse_err("[m]\nrw=randrw\nverify=crc32c\n").find("jobs.fio:1: job 'm': verify=crc32c works with"),
            std::string::npos);
  EXPECT_NE(parse_err("[v]\nrw=write\nverify=crc32c\nnumjobs=2\nsize=1m\n").find("offset_increment"), std::string::npos);
  EXPECT_EQ(parse_err("[s]\nsize=2k\nbs=4k\n"), "jobs.fio:1: job 's': size (2048) is smaller than bs (4096)");
}

TEST(JobParser, MissingFileIsAClearError) {
  auto r = parse_job_file("/nonexistent/dir/job.fio");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "cannot open job file '/nonexistent/dir/job.fio': No such file or directory");
}

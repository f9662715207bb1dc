#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "initiator/bench/job_file.h"

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

JobSpec one(std::string_view text) {
  auto f = parse_ok(text);
  EXPECT_FALSE(f.jobs.empty());
  return f.jobs.empty() ? JobSpec{} : f.jobs[0];
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

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
blocksize=128K   ; trailing comment
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
  EXPECT_EQ(b.bs[kTrim].max, 131072u);
  EXPECT_EQ(b.rw, RwMode::write);
  EXPECT_EQ(b.verify, VerifyKind::crc32c);
  EXPECT_EQ(b.iodepth, 8u);
  // fio's "job options" hold the section's own keys under fio's option names; "global options" the
  // [global] ones.
  ASSERT_EQ(b.options.size(), 3u);
  EXPECT_EQ(b.options[0], (std::pair<std::string, std::string>{"bs", "128K"}));
  ASSERT_EQ(f.global_options.size(), 4u);
  EXPECT_EQ(f.global_options[1].first, "iodepth");
  EXPECT_EQ(f.global_options[1].second, "8");
  EXPECT_TRUE(f.notes.empty());
}

TEST(JobParser, GlobalAfterAJobOnlyAffectsLaterJobs) {
  auto f = parse_ok("[first]\nrw=read\n[global]\nbs=8k\n[second]\nrw=write\n");
  ASSERT_EQ(f.jobs.size(), 2u);
  EXPECT_EQ(f.jobs[0].bs[kRead].min, 4096u);
  EXPECT_EQ(f.jobs[1].bs[kRead].min, 8192u);
}

TEST(JobParser, NameInGlobalDoesNotRenameJobsButNameInAJobDoes) {
  auto f = parse_ok("[global]\nname=everyone\n[a]\n[b]\nname=bee\n");
  ASSERT_EQ(f.jobs.size(), 2u);
  EXPECT_EQ(f.jobs[0].name, "a");
  EXPECT_EQ(f.jobs[1].name, "bee");
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
  auto g = parse_ok("[j]\ntimeout=10\ntime_based=0\nrw=readwrite\nrwmixread=60\nrwmixwrite=40\n");
  EXPECT_EQ(g.jobs[0].runtime, 10s);
  EXPECT_FALSE(g.jobs[0].time_based);
  EXPECT_EQ(g.jobs[0].rw, RwMode::rw);
  EXPECT_EQ(g.jobs[0].rwmixread, 60u);
  EXPECT_TRUE(one("[j]\nrandrepeat=1\n").randrepeat);
  EXPECT_FALSE(one("[j]\nrandrepeat=0\n").randrepeat);
  EXPECT_TRUE(one("[j]\nnorandommap\n").norandommap);
  // hipri: fio's polled completions; the bench then polls its queue without sleeping.
  EXPECT_FALSE(one("[j]\n").hipri);
  EXPECT_TRUE(one("[j]\nhipri\n").hipri);
  EXPECT_FALSE(one("[j]\nhipri=0\n").hipri);
}

TEST(JobParser, SizesFollowFioUnits) {
  EXPECT_EQ(*parse_size("4096"), 4096u);
  EXPECT_EQ(*parse_size("4k"), 4096u);
  EXPECT_EQ(*parse_size("4K"), 4096u);
  EXPECT_EQ(*parse_size("4kb"), 4096u);
  EXPECT_EQ(*parse_size("4KB"), 4096u);
  EXPECT_EQ(*parse_size("1m"), 1048576u);
  EXPECT_EQ(*parse_size("2g"), 2147483648u);
  EXPECT_EQ(*parse_size("1t"), 1ull << 40);
  EXPECT_EQ(*parse_size("0x1000"), 4096u);
  EXPECT_EQ(*parse_size("512b"), 512u);
  // fio's kb_base=1024 "compatibility mode": the IEC spellings are powers of 1000.
  EXPECT_EQ(*parse_size("4KiB"), 4000u);
  EXPECT_EQ(*parse_size("1MiB"), 1000000u);
  EXPECT_FALSE(parse_size("4x"));
  EXPECT_FALSE(parse_size("4ki"));
  EXPECT_FALSE(parse_size("k"));
  EXPECT_FALSE(parse_size("99999999999p"));
  EXPECT_EQ(*parse_duration("30"), 30s);
  EXPECT_EQ(*parse_duration("250us"), 250us);
  EXPECT_EQ(*parse_duration("1h"), 3600s);
  EXPECT_EQ(*parse_duration("2m"), 120s);
  EXPECT_EQ(*parse_duration("1d"), 86400s);
  EXPECT_FALSE(parse_duration("5 fortnights"));
}

TEST(JobParser, KbBaseSwitchesUnitsAndAppliesBeforeOtherOptions) {
  auto j = one("[j]\nsize=8k\nkb_base=1000\noffset=1kib\n");  // kb_base counts whatever its position
  EXPECT_EQ(j.size, 8000u);
  EXPECT_EQ(j.offset, 1024u);
  auto f = parse_ok("[global]\nkb_base=1000\n[a]\nsize=1m\n[b]\nkb_base=1024\nsize=1m\n");
  EXPECT_EQ(f.jobs[0].size, 1000000u);
  EXPECT_EQ(f.jobs[1].size, 1048576u);
  EXPECT_EQ(parse_err("[j]\nkb_base=1001\n"), "jobs.fio:2: invalid value '1001' for 'kb_base': expected 1024 or 1000");
  EXPECT_NE(parse_err("[j]\nkb_base=1000\nbs=4k\n").find("must be a multiple of 512"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nunit_base=8\n").find("bit-based output is not supported"), std::string::npos);
  parse_ok("[j]\nunit_base=1\n");
}

TEST(JobParser, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(parse_err("[j]\nrw=read\nno_such_option=4k\n"), "jobs.fio:3: unknown option 'no_such_option'");
  EXPECT_EQ(parse_err("[j]\n\nbs=4q\n"),
            "jobs.fio:3: invalid value '4q' for 'bs': unknown size unit 'q' (use k, m, g, t or p)");
  EXPECT_EQ(parse_err("[j]\nrw=trimwrite\n"), "jobs.fio:2: invalid value 'trimwrite' for 'rw': rw=trimwrite is not supported");
  EXPECT_EQ(parse_err("[j]\nrw=sideways\n"),
            "jobs.fio:2: invalid value 'sideways' for 'rw': expected read, write, trim, randread, randwrite, randtrim, "
            "rw, readwrite or randrw");
  EXPECT_EQ(parse_err("bs=4k\n[j]\n"), "jobs.fio:1: option 'bs=4k' outside of a [section]");
  EXPECT_EQ(parse_err("[j\n"), "jobs.fio:1: unterminated section header '[j'");
  EXPECT_EQ(parse_err("[j]\niodepth\n"), "jobs.fio:2: option 'iodepth' needs a value (iodepth=...)");
  EXPECT_EQ(parse_err("[j]\niodepth=0\n"), "jobs.fio:2: invalid value '0' for 'iodepth': must be between 1 and 4096");
  EXPECT_EQ(parse_err("[j]\nbs=1000\n"), "jobs.fio:2: invalid value '1000' for 'bs': must be a multiple of 512 up to 1g");
  EXPECT_EQ(parse_err("[global]\nbs=4k\n"), "jobs.fio: no job sections (only [global])");
  auto m = parse_err("[j]\nfilename=tcp://nohost/\n");
  EXPECT_TRUE(starts_with(m, "jobs.fio:2: invalid value 'tcp://nohost/' for 'filename': ")) << m;
  // An error in a [global] names the global's line.
  EXPECT_EQ(parse_err("[global]\nnumjobs=0\n[j]\n"), "jobs.fio:2: invalid value '0' for 'numjobs': must be between 1 and 256");
}

TEST(JobParser, CommentsEndALineLikeFio) {
  auto j = one("[j] ; the job\nbs=8k;no space needed\nsize=1m\t# tab then comment\niodepth=4#x\n");
  EXPECT_EQ(j.bs[kRead].min, 8192u);
  EXPECT_EQ(j.size, 1u << 20);
  EXPECT_EQ(j.iodepth, 4u);
  // Quoted pattern text keeps its ';' and '#'.
  EXPECT_EQ(one("[j]\nverify_pattern=\"a;#\"\n").verify_pattern, (std::vector<uint8_t>{'a', ';', '#'}));
}

TEST(JobParser, RwModesAndOffsetModifiers) {
  EXPECT_EQ(one("[j]\nrw=trim\n").rw, RwMode::trim);
  EXPECT_EQ(one("[j]\nrw=randtrim\n").rw, RwMode::randtrim);
  EXPECT_EQ(one("[j]\nreadwrite=randwrite\n").rw, RwMode::randwrite);
  auto j = one("[j]\nrw=read:8k\n");
  EXPECT_EQ(j.rw, RwMode::read);
  EXPECT_EQ(j.seq_skip, 8192);
  EXPECT_EQ(j.random_nr, 1u);
  EXPECT_EQ(one("[j]\nrw=read:-8k\n").seq_skip, -8192);
  EXPECT_EQ(one("[j]\nrw=write:4k\n").seq_skip, 4096);
  auto r = one("[j]\nrw=randread:8\n");
  EXPECT_EQ(r.random_nr, 8u);
  EXPECT_EQ(r.seq_skip, 0);
  // A later rw without a modifier drops the global's.
  auto f = parse_ok("[global]\nrw=read:-8k\n[a]\n[b]\nrw=read\n");
  EXPECT_EQ(f.jobs[0].seq_skip, -8192);
  EXPECT_EQ(f.jobs[1].seq_skip, 0);
  EXPECT_NE(parse_err("[j]\nrw=randread:0\n").find("the number of I/Os per random offset must be between 1"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nrw=read:100\n").find("the offset step must be a multiple of 512"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nrw=read:xyz\n").find("for 'rw'"), std::string::npos);
  parse_ok("[j]\nrw=randread:8\nrw_sequencer=sequential\n");
  EXPECT_EQ(parse_err("[j]\nrw_sequencer=identical\n"),
            "jobs.fio:2: invalid value 'identical' for 'rw_sequencer': rw_sequencer=identical is not supported");
}

TEST(JobParser, BlockSizesPerDirectionInheritLikeFio) {
  auto a = one("[j]\nbs=256k\n");
  for (auto d : {kRead, kWrite, kTrim}) EXPECT_EQ(a.bs[d].min, 262144u) << d;
  auto b = one("[j]\nbs=8k,32k\n");  // 8k reads, 32k writes and trims
  EXPECT_EQ(b.bs[kRead].min, 8192u);
  EXPECT_EQ(b.bs[kWrite].min, 32768u);
  EXPECT_EQ(b.bs[kTrim].min, 32768u);
  auto c = one("[j]\nbs=8k,32k,\n");  // the trailing comma leaves trims at the default
  EXPECT_EQ(c.bs[kTrim].min, 4096u);
  auto d = one("[j]\nbs=,8k\n");
  EXPECT_EQ(d.bs[kRead].min, 4096u);
  EXPECT_EQ(d.bs[kWrite].min, 8192u);
  EXPECT_EQ(d.bs[kTrim].min, 8192u);
  auto e = one("[j]\nbs=,8k,\n");
  EXPECT_EQ(e.bs[kWrite].min, 8192u);
  EXPECT_EQ(e.bs[kTrim].min, 4096u);
  auto g = one("[j]\nbs=1k,2k,4k\n");
  EXPECT_EQ(g.bs[kRead].max, 1024u);
  EXPECT_EQ(g.bs[kWrite].max, 2048u);
  EXPECT_EQ(g.bs[kTrim].max, 4096u);
  EXPECT_EQ(parse_err("[j]\nbs=1k,2k,4k,8k\n"), "jobs.fio:2: invalid value '1k,2k,4k,8k' for 'bs': at most three values (read,write,trim)");
  EXPECT_EQ(parse_err("[j]\nbs=,\n"), "jobs.fio:2: invalid value ',' for 'bs': expected a value");
}

TEST(JobParser, BsrangeBssplitAndBlockalign) {
  auto r = one("[j]\nbsrange=4k-16k\n");
  EXPECT_EQ(r.bs[kRead].min, 4096u);
  EXPECT_EQ(r.bs[kRead].max, 16384u);
  EXPECT_EQ(r.bs[kTrim].max, 16384u);
  auto r2 = one("[j]\nblocksize_range=4k-16k,8k:32k\n");
  EXPECT_EQ(r2.bs[kWrite].min, 8192u);
  EXPECT_EQ(r2.bs[kWrite].max, 32768u);
  auto back = one("[j]\nbsrange=16k-4k\n");  // fio swaps a range given backwards
  EXPECT_EQ(back.bs[kRead].min, 4096u);
  EXPECT_EQ(back.bs[kRead].max, 16384u);
  EXPECT_NE(parse_err("[j]\nbsrange=4k\n").find("expected MIN-MAX"), std::string::npos);

  // bssplit: empty percentages share the rest evenly; bssplit wins over bs and bsrange in any order.
  auto s = one("[j]\nbssplit=4k/50:1k/:32k/\nbs=64k\nbsrange=1k-2k\n");
  for (auto d : {kRead, kWrite, kTrim}) {
    const auto& sp = s.bs[d].split;
    ASSERT_EQ(sp.size(), 3u);
    EXPECT_EQ(sp[0].bs, 4096u);
    EXPECT_EQ(sp[0].percent, 50u);
    EXPECT_EQ(sp[1].bs, 1024u);
    EXPECT_EQ(sp[1].percent, 25u);
    EXPECT_EQ(sp[2].percent, 25u);
    EXPECT_EQ(s.bs[d].min, 1024u);
    EXPECT_EQ(s.bs[d].max, 32768u);
  }
  auto thirds = one("[j]\nbssplit=4k:8k:16k\n");  // 34 + 33 + 33
  EXPECT_EQ(thirds.bs[kRead].split[0].percent + thirds.bs[kRead].split[1].percent + thirds.bs[kRead].split[2].percent, 100u);
  auto per_dir = one("[j]\nbssplit=2k/50:4k/50,4k/90:8k/10\n");
  EXPECT_EQ(per_dir.bs[kRead].split.size(), 2u);
  EXPECT_EQ(per_dir.bs[kRead].split[0].bs, 2048u);
  EXPECT_EQ(per_dir.bs[kWrite].split[0].percent, 90u);
  EXPECT_EQ(per_dir.bs[kTrim].split[1].bs, 8192u);  // trims follow writes
  EXPECT_EQ(per_dir.max_bs(), 8192u);
  EXPECT_EQ(per_dir.min_bs(), 2048u);
  EXPECT_EQ(parse_err("[j]\nbssplit=4k/50:8k/40\n"), "jobs.fio:2: invalid value '4k/50:8k/40' for 'bssplit': the percentages add up to 90, not 100");
  EXPECT_EQ(parse_err("[j]\nbssplit=4k/70:8k/40:16k/\n"),
            "jobs.fio:2: invalid value '4k/70:8k/40:16k/' for 'bssplit': the percentages add up to 110, more than 100");
  EXPECT_NE(parse_err("[j]\nbssplit=4k/50::8k/50\n").find("empty entry"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nbssplit=3000/100\n").find("multiple of 512"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nbssplit=4k/101\n").find("percentage must be between 0 and 100"), std::string::npos);

  // blockalign: random offsets only; anything but the block size turns the random map off (fio).
  auto ba = one("[j]\nrw=randread\nbs=4k\nblockalign=8k\n");
  EXPECT_EQ(ba.bs[kRead].align, 8192u);
  EXPECT_TRUE(ba.norandommap);
  auto same = one("[j]\nrw=randread\nbs=4k\nba=4k\n");
  EXPECT_EQ(same.bs[kRead].align, 4096u);
  EXPECT_FALSE(same.norandommap);
  auto seq = one("[j]\nrw=read\nba=8k\n");
  EXPECT_EQ(seq.bs[kRead].align, 0u);
  EXPECT_FALSE(seq.norandommap);
}

TEST(JobParser, QueueDepthOptionsGetFiosDefaults) {
  auto a = one("[j]\niodepth=32\niodepth_batch=8\niodepth_batch_complete_min=4\niodepth_low=16\n");
  EXPECT_EQ(a.iodepth_batch_submit, 8u);
  EXPECT_EQ(a.iodepth_batch_complete_min, 4u);
  EXPECT_EQ(a.iodepth_low, 16u);
  auto b = one("[j]\niodepth=32\niodepth_batch_submit=0\niodepth_batch_complete=0\n");
  EXPECT_EQ(b.iodepth_batch_submit, 32u);  // 0 = iodepth
  EXPECT_EQ(b.iodepth_batch_complete_min, 0u);
  EXPECT_EQ(b.iodepth_low, 32u);  // unset = iodepth
  auto c = one("[j]\niodepth=4\niodepth_batch=64\niodepth_low=9\niodepth_batch_complete_min=9\n");
  EXPECT_EQ(c.iodepth_batch_submit, 4u);
  EXPECT_EQ(c.iodepth_low, 4u);
  EXPECT_EQ(c.iodepth_batch_complete_min, 4u);
  EXPECT_EQ(one("[j]\n").iodepth_batch_submit, 1u);
}

TEST(JobParser, RegionOptions) {
  auto a = one("[j]\nsize=20%\noffset=10%\n");
  EXPECT_EQ(a.size, 0u);
  EXPECT_EQ(a.size_percent, 20u);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(a.offset_percent, 10u);
  auto f = parse_ok("[global]\nsize=50%\n[a]\n[b]\nsize=1g\n");
  EXPECT_EQ(f.jobs[0].size_percent, 50u);
  EXPECT_EQ(f.jobs[1].size_percent, 0u);
  EXPECT_EQ(f.jobs[1].size, 1ull << 30);
  EXPECT_NE(parse_err("[j]\nsize=0%\n").find("between 1 and 100"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nsize=101%\n").find("between 1 and 100"), std::string::npos);
  EXPECT_EQ(parse_err("[j]\noffset_increment=5%\n"),
            "jobs.fio:2: invalid value '5%' for 'offset_increment': a percentage is not supported for offset_increment");
  EXPECT_EQ(one("[j]\nfileoffset=8k\n").offset, 8192u);
  EXPECT_EQ(one("[j]\nio_size=5g\n").io_size, 5ull << 30);
  EXPECT_EQ(one("[j]\nio_limit=1m\n").io_size, 1u << 20);
  EXPECT_NE(parse_err("[j]\nio_size=50%\n").find("not supported"), std::string::npos);
  EXPECT_EQ(one("[j]\nnumber_ios=1000\n").number_ios, 1000u);
  EXPECT_EQ(one("[j]\nloops=3\n").loops, 3u);
  EXPECT_EQ(one("[j]\nloops=0\n").loops, 1u);
  EXPECT_TRUE(one("[j]\nfill_device=1\n").fill_device);
  EXPECT_TRUE(one("[j]\nfill_fs\n").fill_device);
  EXPECT_EQ(parse_err("\n[s]\nsize=2k\nbs=4k\n"), "jobs.fio:2: job 's': size (2048) is smaller than bs (4096)");
  parse_ok("[s]\nrw=read\nsize=4k\nbs=4k,1m\n");  // only the block sizes the job uses count
  EXPECT_EQ(parse_err("[o]\noffset=100\n"), "jobs.fio:1: job 'o': offset must be a multiple of 512");
}

TEST(JobParser, TimeOptionsUseFiosDefaultUnits) {
  auto j = one("[j]\nthinktime=100\nthinktime_spin=20\nthinktime_blocks=4\nlatency_target=500000\nlatency_window=5000000\n"
               "latency_percentile=99.9\nflow=2\nflow_id=7\nflow_sleep=50\nstartdelay=3\n");
  EXPECT_EQ(j.thinktime, 100us);       // microseconds without a unit
  EXPECT_EQ(j.thinktime_spin, 20us);
  EXPECT_EQ(j.thinktime_blocks, 4u);
  EXPECT_EQ(j.latency_target, 500ms);  // fio's latency-profile example: 500000 = 500 ms
  EXPECT_EQ(j.latency_window, 5s);
  EXPECT_DOUBLE_EQ(j.latency_percentile, 99.9);
  EXPECT_EQ(j.flow, 2);
  EXPECT_EQ(j.flow_id, 7u);
  EXPECT_EQ(j.flow_sleep, 50us);
  EXPECT_EQ(j.startdelay, 3s);            // seconds without a unit
  EXPECT_EQ(one("[j]\nthinktime=2ms\n").thinktime, 2ms);
  EXPECT_EQ(one("[j]\nthinktime=10\nthinktime_spin=1s\n").thinktime_spin, 10us);  // spin <= thinktime
  EXPECT_EQ(one("[j]\nthinktime_blocks=0\n").thinktime_blocks, 1u);
  EXPECT_NE(parse_err("[j]\nlatency_percentile=0\n").find("above 0"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nlatency_percentile=100.5\n").find("at most 100"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nflow=1001\n").find("between 0 and 1000"), std::string::npos);
  EXPECT_EQ(parse_err("\n\n[t]\ntime_based\n"), "jobs.fio:3: job 't': time_based needs a runtime");
}

TEST(JobParser, StartdelayRangePicksAValuePerCopy) {
  auto f = parse_ok("[j]\nstartdelay=1-3\nnumjobs=8\n");
  ASSERT_EQ(f.jobs.size(), 8u);
  bool differ = false;
  for (const auto& j : f.jobs) {
    EXPECT_GE(j.startdelay, 1s);
    EXPECT_LE(j.startdelay, 3s);
    differ |= j.startdelay != f.jobs[0].startdelay;
  }
  EXPECT_TRUE(differ);
  // Repeatable with randrepeat (the default).
  auto g = parse_ok("[j]\nstartdelay=1-3\nnumjobs=8\n");
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(g.jobs[i].startdelay, f.jobs[i].startdelay);
  EXPECT_EQ(one("[j]\nstartdelay=500ms-500ms\n").startdelay, 500ms);
  EXPECT_NE(parse_err("[j]\nstartdelay=3-1\n").find("backwards"), std::string::npos);
}

TEST(JobParser, RandomDistributions) {
  auto z = one("[j]\nrw=randread\nrandom_distribution=zipf:1.2\n");
  EXPECT_EQ(z.distribution.kind, Distribution::zipf);
  EXPECT_DOUBLE_EQ(z.distribution.param, 1.2);
  EXPECT_TRUE(z.norandommap);  // fio: no random map with a skewed distribution
  EXPECT_DOUBLE_EQ(one("[j]\nrandom_distribution=zipf\n").distribution.param, 1.1);
  EXPECT_DOUBLE_EQ(one("[j]\nrandom_distribution=pareto\n").distribution.param, 0.2);
  EXPECT_DOUBLE_EQ(one("[j]\nrandom_distribution=pareto:0.5\n").distribution.param, 0.5);
  auto n = one("[j]\nrandom_distribution=normal:10\n");
  EXPECT_EQ(n.distribution.kind, Distribution::normal);
  EXPECT_DOUBLE_EQ(n.distribution.param, 10.0);
  EXPECT_EQ(one("[j]\nrandom_distribution=gauss:5\n").distribution.kind, Distribution::normal);
  auto r = one("[j]\nrandom_distribution=random\n");
  EXPECT_EQ(r.distribution.kind, Distribution::random);
  EXPECT_FALSE(r.norandommap);

  auto zoned = one("[j]\nrandom_distribution=zoned:60/10:30/20:8/30:2/40\n");
  EXPECT_EQ(zoned.distribution.kind, Distribution::zoned);
  ASSERT_EQ(zoned.distribution.zones.size(), 4u);
  EXPECT_DOUBLE_EQ(zoned.distribution.zones[0].access_percent, 60);
  EXPECT_DOUBLE_EQ(zoned.distribution.zones[0].size, 10);
  EXPECT_DOUBLE_EQ(zoned.distribution.zones[3].size, 40);
  auto rest = one("[j]\nrandom_distribution=zoned:50/20:50/\n");  // a missing size takes the rest
  EXPECT_DOUBLE_EQ(rest.distribution.zones[1].size, 80);
  auto abs = one("[j]\nrandom_distribution=zoned_abs:60/20G:30/100G:10/500g\n");
  EXPECT_EQ(abs.distribution.kind, Distribution::zoned_abs);
  EXPECT_DOUBLE_EQ(abs.distribution.zones[1].size, 100.0 * (1ull << 30));
  // The same zones for every direction are fine, different ones are not.
  parse_ok("[j]\nrandom_distribution=zoned:60/10:40/90,60/10:40/90\n");
  EXPECT_NE(parse_err("[j]\nrandom_distribution=zoned:60/10:40/90,50/50:50/50\n").find("separate zones"), std::string::npos);
  EXPECT_EQ(parse_err("[j]\nrandom_distribution=zoned:60/10:30/20\n"),
            "jobs.fio:2: invalid value 'zoned:60/10:30/20' for 'random_distribution': the access percentages add up to 90, not 100");
  EXPECT_NE(parse_err("[j]\nrandom_distribution=zoned:50/60:50/60\n").find("more than 100"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nrandom_distribution=zoned_abs:50/1g:50/\n").find("a zone needs a size"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nrandom_distribution=zipf:1\n").find("zipf theta"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nrandom_distribution=pareto:1.5\n").find("pareto h"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nrandom_distribution=normal:100\n").find("deviation"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nrandom_distribution=zipf:1.2:0.25\n").find("center"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nrandom_distribution=lumpy\n").find("expected random, zipf"), std::string::npos);
}

TEST(JobParser, RandomSeeds) {
  auto d = one("[j]\n");
  EXPECT_TRUE(d.randrepeat);
  EXPECT_EQ(d.randseed, 0x89u);
  auto s = one("[j]\nrandrepeat=0\nrandseed=1234\n");
  EXPECT_EQ(s.randseed, 1234u);
  EXPECT_TRUE(s.randrepeat);  // an explicit seed is repeatable (fio: randseed overrides randrepeat)
  EXPECT_TRUE(one("[j]\nrandrepeat=0\nallrandrepeat=1\n").randrepeat);
  EXPECT_FALSE(one("[j]\nrandrepeat=0\nallrandrepeat=0\n").randrepeat);
}

TEST(JobParser, RatesPerDirection) {
  auto a = one("[j]\nrate=1m,500k\n");
  EXPECT_EQ(a.rate[kRead], 1u << 20);
  EXPECT_EQ(a.rate[kWrite], 500u << 10);
  EXPECT_EQ(a.rate[kTrim], 500u << 10);
  auto b = one("[j]\nrate=,500k\n");
  EXPECT_EQ(b.rate[kRead], 0u);
  EXPECT_EQ(b.rate[kWrite], 500u << 10);
  auto c = one("[j]\nrate=500k,\n");
  EXPECT_EQ(c.rate[kRead], 500u << 10);
  EXPECT_EQ(c.rate[kWrite], 0u);
  auto i = one("[j]\nrate_iops=1000\nrate_process=poisson\n");
  EXPECT_EQ(i.rate_iops[kRead], 1000u);
  EXPECT_EQ(i.rate_iops[kTrim], 1000u);
  EXPECT_EQ(i.rate_process, RateProcess::poisson);
  EXPECT_EQ(one("[j]\nrate_process=linear\n").rate_process, RateProcess::linear);
  EXPECT_EQ(parse_err("[j]\nrate=1m\nrate_iops=100\n"), "jobs.fio:1: job 'j': rate and rate_iops are mutually exclusive");
  EXPECT_NE(parse_err("[j]\nrate_process=bursty\n").find("expected linear or poisson"), std::string::npos);
}

TEST(JobParser, VerifyOptions) {
  EXPECT_EQ(one("[j]\nrw=write\nverify=crc32c-intel\n").verify, VerifyKind::crc32c);
  EXPECT_EQ(one("[j]\nrw=write\nverify=md5\n").verify, VerifyKind::md5);
  EXPECT_EQ(one("[j]\nrw=write\nverify=sha1\n").verify, VerifyKind::sha1);
  EXPECT_EQ(one("[j]\nrw=write\nverify=sha256\n").verify, VerifyKind::sha256);
  EXPECT_EQ(one("[j]\nrw=write\nverify=meta\n").verify, VerifyKind::meta);
  for (const char* off : {"0", "none", "null"}) EXPECT_EQ(one(std::string("[j]\nverify=") + off + "\n").verify, VerifyKind::none);
  EXPECT_EQ(parse_err("[j]\nverify=crc64\n"),
            "jobs.fio:2: invalid value 'crc64' for 'verify': supported: crc32c (crc32c-intel), md5, sha1, sha256, meta, "
            "pattern, 0 (none, null)");
  for (const char* bad : {"xxhash", "sha512", "sha3-256", "crc32", "crc16", "crc7"}) {
    EXPECT_NE(parse_err(std::string("[j]\nverify=") + bad + "\n").find("supported: crc32c"), std::string::npos) << bad;
  }
  auto j = one("[j]\nrw=write\nverify=crc32c\ndo_verify=0\nverify_backlog=16\nverify_interval=512\nverify_fatal=1\n");
  EXPECT_FALSE(j.do_verify);
  EXPECT_EQ(j.verify_backlog, 16u);
  EXPECT_EQ(j.verify_interval, 512u);
  EXPECT_TRUE(j.verify_fatal);
  EXPECT_TRUE(one("[j]\nrw=write\nverify=md5\nverify_only\n").verify_only);
  // verify_pattern alone means verify=pattern; with verify set, the pattern fills the data.
  auto p = one("[j]\nrw=write\nverify_pattern=0xaa555aa5\n");
  EXPECT_EQ(p.verify, VerifyKind::pattern);
  EXPECT_EQ(p.verify_pattern, (std::vector<uint8_t>{0xaa, 0x55, 0x5a, 0xa5}));
  EXPECT_EQ(one("[j]\nrw=write\nverify_pattern=0xaa\nverify=meta\n").verify, VerifyKind::meta);
  EXPECT_EQ(parse_ok("[global]\nverify=crc32c\n[j]\nrw=write\nverify_pattern=1\n").jobs[0].verify, VerifyKind::crc32c);
  EXPECT_EQ(parse_err("[j]\nrw=write\nverify=pattern\n"), "jobs.fio:1: job 'j': verify=pattern needs a verify_pattern");
  // fio's verify interval fixups: at most the smallest write, dividing every write size.
  EXPECT_EQ(one("[j]\nrw=write\nbs=4k\nverify=crc32c\nverify_interval=8k\n").verify_interval, 4096u);
  EXPECT_EQ(one("[j]\nrw=write\nbsrange=4k-12k\nverify=crc32c\n").verify_interval, 4096u);
  EXPECT_EQ(one("[j]\nrw=write\nbsrange=8k-12k\nverify=crc32c\nverify_interval=8k\n").verify_interval, 4096u);
  // Mixed reads and writes verify (fio allows it); trims do not.
  EXPECT_EQ(one("[m]\nrw=randrw\nverify=crc32c\n").verify, VerifyKind::crc32c);
  EXPECT_EQ(parse_err("[t]\nrw=randtrim\nverify=crc32c\n"),
            "jobs.fio:1: job 't': verify does not work with rw=randtrim (trimmed blocks hold no data)");
  EXPECT_NE(parse_err("[v]\nrw=write\nverify=crc32c\nnumjobs=2\nsize=1m\n").find("offset_increment"), std::string::npos);
  parse_ok("[v]\nrw=write\nverify=crc32c\nnumjobs=2\nsize=1m\noffset_increment=1m\n");
  EXPECT_EQ(parse_err("[v]\nrw=write\nverify=crc32c\nverify_only\nruntime=1\ntime_based\n"),
            "jobs.fio:1: job 'v': verify_only does not work with time_based");
  // Writing for all of runtime leaves no time to verify: fio warns, so do we.
  auto f = parse_ok("[v]\nrw=write\nverify=crc32c\nruntime=10\ntime_based\n");
  ASSERT_EQ(f.notes.size(), 1u);
  EXPECT_TRUE(starts_with(f.notes[0], "jobs.fio:1: job 'v': the verify phase never starts")) << f.notes[0];
}

TEST(JobParser, PatternsFollowFioSyntax) {
  auto pat = [](std::string_view v) { return one(std::string("[j]\nrw=write\nverify=crc32c\nverify_pattern=") + std::string(v) + "\n").verify_pattern; };
  EXPECT_EQ(pat("0xabc"), (std::vector<uint8_t>{0x0a, 0xbc}));
  EXPECT_EQ(pat("-1024"), (std::vector<uint8_t>{0x00, 0xfc, 0xff, 0xff}));
  EXPECT_EQ(pat("66"), (std::vector<uint8_t>{0x42}));
  EXPECT_EQ(pat("0"), (std::vector<uint8_t>{0x00}));
  EXPECT_EQ(pat("\"abcd\""), (std::vector<uint8_t>{'a', 'b', 'c', 'd'}));
  EXPECT_EQ(pat("0xaa\"abc\""), (std::vector<uint8_t>{0xaa, 'a', 'b', 'c'}));
  EXPECT_EQ(pat("\"123\"0xFFeeCC"), (std::vector<uint8_t>{'1', '2', '3', 0xff, 0xee, 0xcc}));
  EXPECT_EQ(pat("0xFF0X1"), (std::vector<uint8_t>{0xff, 0x01}));
  EXPECT_EQ(pat("-100xab\"1\""), (std::vector<uint8_t>{0xf6, 0xff, 0xff, 0xff, 0xab, '1'}));
  EXPECT_NE(parse_err("[j]\nverify_pattern=%o\n").find("%o (block offset) patterns are not supported"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nverify_pattern=\"abc\n").find("unterminated string"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nverify_pattern=4294967296\n").find("not an int32"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nverify_pattern=0x" + std::string(1026, 'a') + "\n").find("at most 512 bytes"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nverify_pattern=zz\n").find("unexpected 'z'"), std::string::npos);
  // 'file': the file's first bytes.
  auto path = std::filesystem::temp_directory_path() / ("rdmablk-pattern-" + std::to_string(::getpid()));
  std::ofstream(path) << "XYZ";
  EXPECT_EQ(one("[j]\nbuffer_pattern='" + path.string() + "'0x01\n").buffer_pattern, (std::vector<uint8_t>{'X', 'Y', 'Z', 0x01}));
  std::filesystem::remove(path);
  EXPECT_NE(parse_err("[j]\nbuffer_pattern='/nonexistent/pattern'\n").find("cannot open pattern file"), std::string::npos);
}

TEST(JobParser, FlushAndBufferOptions) {
  auto j = one("[j]\nrw=write\nfsync=32\nend_fsync=1\nzero_buffers\nrefill_buffers\nscramble_buffers=0\n"
               "buffer_compress_percentage=50\nbuffer_compress_chunk=4k\nbuffer_pattern=\"ab\"\n");
  EXPECT_EQ(j.fsync, 32u);
  EXPECT_TRUE(j.end_fsync);
  EXPECT_TRUE(j.zero_buffers);
  EXPECT_TRUE(j.refill_buffers);
  EXPECT_FALSE(j.scramble_buffers);
  EXPECT_EQ(j.buffer_compress_percentage, 50u);
  EXPECT_EQ(j.buffer_compress_chunk, 4096u);
  EXPECT_EQ(j.buffer_pattern, (std::vector<uint8_t>{'a', 'b'}));
  EXPECT_EQ(one("[j]\nfdatasync=8\n").fsync, 8u);
  EXPECT_TRUE(one("[j]\nfsync_on_close=1\n").end_fsync);
  EXPECT_TRUE(one("[j]\nend_fsync=1\nfsync_on_close=0\n").end_fsync);
  EXPECT_FALSE(one("[j]\n").end_fsync);
  EXPECT_TRUE(one("[j]\n").scramble_buffers);
  auto all = one("[j]\nbuffer_compress_percentage=100\n");  // fio: fully compressible = zeros
  EXPECT_TRUE(all.zero_buffers);
  EXPECT_EQ(all.buffer_compress_percentage, 0u);
  EXPECT_NE(parse_err("[j]\nbuffer_compress_percentage=101\n").find("between 0 and 100"), std::string::npos);
}

TEST(JobParser, CpuOptions) {
  auto j = one("[j]\ncpus_allowed=0,5,8-11\ncpus_allowed_policy=split\n");
  EXPECT_EQ(j.cpus_allowed, (std::vector<unsigned>{0, 5, 8, 9, 10, 11}));
  EXPECT_TRUE(j.cpus_allowed_split);
  EXPECT_FALSE(one("[j]\ncpus_allowed_policy=shared\n").cpus_allowed_split);
  EXPECT_EQ(one("[j]\ncpumask=34\n").cpus_allowed, (std::vector<unsigned>{1, 5}));
  EXPECT_EQ(one("[j]\ncpumask=0x3\n").cpus_allowed, (std::vector<unsigned>{0, 1}));
  EXPECT_NE(parse_err("[j]\ncpus_allowed=3-1\n").find("backwards"), std::string::npos);
  EXPECT_NE(parse_err("[j]\ncpus_allowed=abc\n").find("CPU numbers"), std::string::npos);
  EXPECT_NE(parse_err("[j]\ncpus_allowed_policy=spread\n").find("expected shared or split"), std::string::npos);
}

TEST(JobParser, ReportingOptions) {
  auto j = one("[j]\ndescription=A test job\ngroup_reporting\npercentile_list=99:99.9:99.99\nlat_percentiles=1\n"
               "clat_percentiles=0\nunified_rw_reporting=both\n");
  EXPECT_EQ(j.description, "A test job");
  EXPECT_TRUE(j.group_reporting);
  EXPECT_EQ(j.percentile_list, (std::vector<double>{99, 99.9, 99.99}));
  EXPECT_TRUE(j.lat_percentiles);
  EXPECT_FALSE(j.clat_percentiles);
  EXPECT_EQ(j.unified_rw_reporting, UnifiedRw::both);
  EXPECT_EQ(one("[j]\nunified_rw_reporting=1\n").unified_rw_reporting, UnifiedRw::mixed);
  EXPECT_EQ(one("[j]\nunified_rw_reporting=mixed\n").unified_rw_reporting, UnifiedRw::mixed);
  EXPECT_EQ(one("[j]\nunified_rw_reporting=0\n").unified_rw_reporting, UnifiedRw::none);
  EXPECT_EQ(one("[j]\nunified_rw_reporting=2\n").unified_rw_reporting, UnifiedRw::both);
  EXPECT_TRUE(one("[j]\n").percentile_list.empty());
  EXPECT_TRUE(one("[j]\n").clat_percentiles);
  EXPECT_FALSE(one("[j]\n").lat_percentiles);
  EXPECT_EQ(parse_err("[j]\npercentile_list=50:0\n"), "jobs.fio:2: invalid value '50:0' for 'percentile_list': 0 is not a percentile (0 < p <= 100)");
  EXPECT_NE(parse_err("[j]\npercentile_list=100.1\n").find("not a percentile"), std::string::npos);
  EXPECT_NE(parse_err("[j]\npercentile_list=1:2:3:4:5:6:7:8:9:10:11:12:13:14:15:16:17:18:19:20:21\n").find("at most 20"),
            std::string::npos);
  EXPECT_NE(parse_err("[j]\npercentile_list=99,99.9\n").find("not a number"), std::string::npos);
  EXPECT_NE(parse_err("[j]\nunified_rw_reporting=3\n").find("expected none (0), mixed (1) or both (2)"), std::string::npos);
}

TEST(JobParser, LogOptions) {
  auto f = parse_ok("[global]\nwrite_bw_log\n[a]\nname=renamed\n[b]\nwrite_lat_log=lat\nwrite_iops_log=io\nlog_avg_msec=1000\n"
                    "log_offset=1\nper_job_logs=0\n");
  ASSERT_EQ(f.jobs.size(), 2u);
  EXPECT_EQ(f.jobs[0].write_bw_log, "a");  // fio names the logs after the section
  EXPECT_EQ(f.jobs[1].write_bw_log, "b");
  EXPECT_EQ(f.jobs[0].write_lat_log, "");
  EXPECT_EQ(f.jobs[1].write_lat_log, "lat");
  EXPECT_EQ(f.jobs[1].write_iops_log, "io");
  EXPECT_EQ(f.jobs[1].log_avg_msec, 1000ms);
  EXPECT_TRUE(f.jobs[1].log_offset);
  EXPECT_FALSE(f.jobs[1].per_job_logs);
  EXPECT_TRUE(f.jobs[0].per_job_logs);
  EXPECT_EQ(one("[x]\nwrite_iops_log=\n").write_iops_log, "x");
}

TEST(JobParser, GroupsFollowStonewallAndNewGroup) {
  // ssd-test: every job has stonewall; the first one has nothing before it and stays in group 0.
  auto f = parse_ok("[a]\nstonewall\n[b]\nstonewall\n[c]\nwait_for_previous\n[d]\n");
  ASSERT_EQ(f.jobs.size(), 4u);
  EXPECT_EQ(f.jobs[0].groupid, 0u);
  EXPECT_EQ(f.jobs[1].groupid, 1u);
  EXPECT_EQ(f.jobs[2].groupid, 2u);
  EXPECT_EQ(f.jobs[3].groupid, 2u);
  EXPECT_TRUE(f.jobs[2].stonewall);
  auto g = parse_ok("[a]\nnumjobs=2\n[b]\nnew_group\nnumjobs=3\n[c]\n");
  ASSERT_EQ(g.jobs.size(), 6u);
  EXPECT_EQ(g.jobs[0].groupid, 0u);
  EXPECT_EQ(g.jobs[1].groupid, 0u);
  for (std::size_t i = 2; i < 6; ++i) EXPECT_EQ(g.jobs[i].groupid, 1u) << i;
  EXPECT_TRUE(g.jobs[2].new_group);
  EXPECT_FALSE(g.jobs[3].new_group);  // copies stay in the group and do not start another (fio)
  EXPECT_FALSE(g.jobs[4].new_group);
  EXPECT_FALSE(g.jobs[5].new_group);
  // stonewall in [global] applies to every job.
  auto h = parse_ok("[global]\nstonewall\n[a]\n[b]\n[c]\n");
  EXPECT_EQ(h.jobs[2].groupid, 2u);
}

TEST(JobParser, WaitForNamesAnEarlierJob) {
  auto f = parse_ok("[writer]\nrw=write\n[reader]\nrw=read\nwait_for=writer\n");
  EXPECT_EQ(f.jobs[1].wait_for, "writer");
  parse_ok("[w]\nname=renamed\n[r]\nwait_for=renamed\n");
  EXPECT_EQ(parse_err("[reader]\nwait_for=writer\n[writer]\n"), "jobs.fio:1: job 'reader': wait_for='writer' names no job before this one");
  EXPECT_EQ(parse_err("[r]\nwait_for=r\n"), "jobs.fio:1: job 'r': a job cannot wait for itself");
  EXPECT_EQ(parse_err("[w]\n[w]\n[r]\nwait_for=w\n"), "jobs.fio:3: job 'r': wait_for='w' is ambiguous: 2 jobs have that name");
  parse_ok("[w]\nnumjobs=4\n[r]\nwait_for=w\n");  // copies are one job
}

TEST(JobParser, GroupReportingJobsAgreeOnLatPercentiles) {
  EXPECT_EQ(parse_err("[global]\ngroup_reporting\n[a]\n[b]\nlat_percentiles=1\n"),
            "jobs.fio:4: job 'b': lat_percentiles differs from job 'a' of the same group");
  parse_ok("[global]\ngroup_reporting\n[a]\n[b]\nstonewall\nlat_percentiles=1\n");
}

TEST(JobParser, NotesForOptionsWithoutEffectOncePerKey) {
  auto f = parse_ok("[global]\ndirectory=/mnt\nioengine=libaio\ndirect=1\nthread\n[a]\ndirectory=/other\nfilename=/dev/sda\n"
                    "[b]\nioengine=io_uring\nfilename=ssd.test.file\n");
  ASSERT_EQ(f.notes.size(), 5u);
  EXPECT_EQ(f.notes[0], "jobs.fio:2: option 'directory' has no effect on NVMe-oF namespaces (it applies to local files)");
  EXPECT_EQ(f.notes[1], "jobs.fio:3: option 'ioengine' has no effect on NVMe-oF namespaces (I/O goes through rdmablk's own NVMe-oF queues)");
  EXPECT_TRUE(starts_with(f.notes[2], "jobs.fio:4: option 'direct' has no effect")) << f.notes[2];
  EXPECT_TRUE(starts_with(f.notes[3], "jobs.fio:5: option 'thread' has no effect")) << f.notes[3];
  EXPECT_EQ(f.notes[4], "jobs.fio:8: option 'filename' has no effect on NVMe-oF namespaces (it is not an rdmablk URI "
                        "tcp://ADDR:PORT/NQN[/NSID]; the namespace comes from -t/-a/-s/-n)");
  EXPECT_FALSE(f.jobs[0].filename);
  // The options are still recorded for the JSON output.
  EXPECT_EQ(f.global_options[1], (std::pair<std::string, std::string>{"ioengine", "libaio"}));
  // A local filename after a URI in [global] leaves the job without a namespace of its own.
  auto g = parse_ok("[global]\nfilename=tcp://127.0.0.1:4420/nqn.x:y\n[a]\n[b]\nfilename=/dev/sdb\n");
  EXPECT_TRUE(g.jobs[0].filename);
  EXPECT_FALSE(g.jobs[1].filename);
  auto other = parse_ok("[j]\nfilename=iscsi://127.0.0.1/iqn.2016-02.com.fio:system:fio/1\n");  // another program's URI
  EXPECT_FALSE(other.jobs[0].filename);
  EXPECT_EQ(other.notes.size(), 1u);
  auto r = one("[j]\nfilename=rdma://10.0.0.1:4420/nqn.2024-01.io.rdmablk:vol0/3\n");
  ASSERT_TRUE(r.filename);
  EXPECT_EQ(r.filename->nsid, 3u);
}

TEST(JobParser, OptionsThatWouldChangeResultsAreErrors) {
  EXPECT_EQ(parse_err("[j]\nrate_min=1m\n"), "jobs.fio:2: option 'rate_min' is not supported (minimum rates are not enforced)");
  EXPECT_EQ(parse_err("[j]\nzonemode=zbd\n"), "jobs.fio:2: option 'zonemode' is not supported (zoned I/O is not implemented)");
  EXPECT_TRUE(starts_with(parse_err("[j]\ntrim_percentage=10\n"), "jobs.fio:2: option 'trim_percentage' is not supported ("));
  EXPECT_TRUE(starts_with(parse_err("[j]\nrate_iops_min=5\n"), "jobs.fio:2: option 'rate_iops_min' is not supported ("));
  EXPECT_TRUE(starts_with(parse_err("[j]\nexec_prerun=ls\n"), "jobs.fio:2: option 'exec_prerun' is not supported ("));
}

TEST(JobParser, EnvironmentVariablesAndKeywordsExpand) {
  ::setenv("RDMABLK_TEST_BS", "16k", 1);
  ::setenv("RDMABLK_TEST_RW", "randwrite", 1);
  auto j = one("[j]\nbs=${RDMABLK_TEST_BS}\nrw=${RDMABLK_TEST_RW}\n");
  EXPECT_EQ(j.bs[kWrite].min, 16384u);
  EXPECT_EQ(j.rw, RwMode::randwrite);
  EXPECT_EQ(j.options[0], (std::pair<std::string, std::string>{"bs", "16k"}));
  ::unsetenv("RDMABLK_TEST_UNSET");
  EXPECT_EQ(parse_err("[j]\n\nsize=${RDMABLK_TEST_UNSET}\n"), "jobs.fio:3: environment variable 'RDMABLK_TEST_UNSET' is not set");
  EXPECT_EQ(one("[j]\nnumjobs=$ncpus\n").numjobs, static_cast<unsigned>(::sysconf(_SC_NPROCESSORS_CONF)));
  EXPECT_EQ(one("[j]\nbs=$pagesize\n").bs[kRead].min, static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
}

TEST(JobParser, IncludeAddsOptionsToTheSection) {
  auto dir = std::filesystem::temp_directory_path() / ("rdmablk-include-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "common.fio") << "; shared options\nbs=64k\niodepth=16\n";
  std::ofstream(dir / "bad.fio") << "[nested]\n";
  std::ofstream(dir / "main.fio") << "[global]\ninclude common.fio\n[j]\nrw=write\n";
  std::ofstream(dir / "broken.fio") << "[j]\ninclude bad.fio\n";
  auto f = parse_job_file((dir / "main.fio").string());
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->jobs[0].bs[kWrite].min, 65536u);
  EXPECT_EQ(f->jobs[0].iodepth, 16u);
  auto b = parse_job_file((dir / "broken.fio").string());
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().message, (dir / "bad.fio").string() + ":1: no sections in an included file");
  auto m = parse_err("[j]\ninclude /nonexistent/x.fio\n");
  EXPECT_TRUE(starts_with(m, "jobs.fio:2: cannot open job file '/nonexistent/x.fio'")) << m;
  std::filesystem::remove_all(dir);
}

TEST(JobParser, MissingFileIsAClearError) {
  auto r = parse_job_file("/nonexistent/dir/job.fio");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "cannot open job file '/nonexistent/dir/job.fio': No such file or directory");
}

// The block-I/O examples shipped with fio, reduced to the lines that matter here (written for this test).
TEST(JobParser, FioExamplesParse) {
  // ssd-test
  auto ssd = parse_ok("[global]\nbs=4k\nioengine=libaio\niodepth=4\nsize=10g\ndirect=1\nruntime=60\ndirectory=/mnt/ssd\n"
                      "filename=ssd.test.file\n\n[seq-read]\nrw=read\nstonewall\n\n[rand-read]\nrw=randread\nstonewall\n\n"
                      "[seq-write]\nrw=write\nstonewall\n\n[rand-write]\nrw=randwrite\nstonewall\n");
  ASSERT_EQ(ssd.jobs.size(), 4u);
  EXPECT_EQ(ssd.jobs[3].groupid, 3u);
  EXPECT_EQ(ssd.jobs[0].size, 10ull << 30);
  EXPECT_EQ(ssd.jobs[0].runtime, 60s);
  EXPECT_EQ(ssd.notes.size(), 4u);  // ioengine, direct, directory, filename
  // fio-rand-read / fio-rand-write / fio-rand-RW / fio-seq-read / fio-seq-write / fio-seq-RW
  for (const char* rw : {"randread", "randwrite", "randrw", "read", "write", "rw"}) {
    auto f = parse_ok(std::string("; fio-") + rw + ".job\n[global]\nname=fio-" + rw + "\nfilename=fio-" + rw + "\nrw=" + rw +
                      "\nrwmixread=60\nrwmixwrite=40\nbs=4K\ndirect=0\nnumjobs=4\ntime_based\nruntime=900\n\n[file1]\n"
                      "size=10G\nioengine=libaio\niodepth=16\n");
    ASSERT_EQ(f.jobs.size(), 4u) << rw;
    EXPECT_EQ(f.jobs[0].name, "file1");
    EXPECT_EQ(f.jobs[0].rwmixread, 60u);
    EXPECT_EQ(f.jobs[3].runtime, 900s);
    EXPECT_TRUE(f.jobs[3].time_based);
  }
  // basic-verify
  auto bv = one("[write-and-verify]\nrw=randwrite\nbs=4k\ndirect=1\nioengine=libaio\niodepth=16\nverify=crc32c\n"
                "filename=/dev/XXX\n");
  EXPECT_EQ(bv.verify, VerifyKind::crc32c);
  EXPECT_FALSE(bv.filename);
  // latency-profile
  auto lp = one("[global]\nbs=4k\nrw=randread\nrandom_generator=lfsr\ndirect=1\nioengine=libaio\niodepth=128\n"
                "latency_target=500000\nlatency_window=5000000\nlatency_percentile=99.9\n\n[device]\nfilename=/dev/sda\n");
  EXPECT_EQ(lp.latency_target, 500ms);
  EXPECT_EQ(lp.latency_window, 5s);
  EXPECT_EQ(lp.iodepth, 128u);
  // jesd219
  auto jf = parse_ok("[JESD219]\nioengine=libaio\ndirect=1\nrw=randrw\nnorandommap\nrandrepeat=0\nrwmixread=40\nrwmixwrite=60\n"
                     "iodepth=256\nnumjobs=4\nbssplit=512/4:1024/1:1536/1:2048/1:2560/1:3072/1:3584/1:4k/67:8k/10:16k/7:32k/3:64k/3\n"
                     "blockalign=4k\nrandom_distribution=zoned:50/5:30/15:20/80\nfilename=/dev/nvme0n1\ngroup_reporting\n");
  ASSERT_EQ(jf.jobs.size(), 4u);
  const auto& je = jf.jobs[0];
  EXPECT_EQ(je.rwmixread, 40u);
  EXPECT_EQ(je.bs[kWrite].split.size(), 12u);
  EXPECT_EQ(je.bs[kWrite].min, 512u);
  EXPECT_EQ(je.bs[kWrite].max, 65536u);
  EXPECT_EQ(je.bs[kRead].align, 4096u);
  EXPECT_EQ(je.distribution.zones.size(), 3u);
  EXPECT_TRUE(je.group_reporting);
  EXPECT_FALSE(je.randrepeat);
  // surface-scan
  auto ss = parse_ok("[global]\nthread\nbs=64k\ndirect=1\nioengine=sync\nverify=meta\nverify_pattern=0xaa555aa5\n"
                     "verify_interval=512\n\n[write-phase]\nfilename=datafile.tmp\t; or use a full disk\nrw=write\nfill_device=1\n"
                     "do_verify=0\n\n[verify-phase]\nstonewall\ncreate_serialize=0\nfilename=datafile.tmp\nrw=read\ndo_verify=1\n");
  ASSERT_EQ(ss.jobs.size(), 2u);
  EXPECT_EQ(ss.jobs[0].verify, VerifyKind::meta);
  EXPECT_EQ(ss.jobs[0].verify_pattern.size(), 4u);
  EXPECT_EQ(ss.jobs[0].verify_interval, 512u);
  EXPECT_TRUE(ss.jobs[0].fill_device);
  EXPECT_FALSE(ss.jobs[0].do_verify);
  EXPECT_EQ(ss.jobs[1].groupid, 1u);
  // tiobench-example
  auto tb = parse_ok("[global]\ndirect=1\nsize=512m\nbsrange=4k-4k\ntimeout=60\nnumjobs=4\t; 4 simultaneous threads\n\n"
                     "[f1]\nrw=write\n\n[f2]\nstonewall\nrw=randwrite\n\n[f3]\nstonewall\nrw=read\n\n[f4]\nstonewall\nrw=randread\n");
  ASSERT_EQ(tb.jobs.size(), 16u);
  EXPECT_EQ(tb.jobs[15].groupid, 3u);
  EXPECT_EQ(tb.jobs[4].bs[kWrite].max, 4096u);
  // fixed-rate-submission / poisson-rate-submission
  auto fr = one("[fixed-rate-submit]\nsize=128m\nrw=read\nioengine=libaio\niodepth=32\ndirect=1\nio_submit_mode=offload\n"
                "rate_iops=1000\n");
  EXPECT_EQ(fr.rate_iops[kRead], 1000u);
  auto pr = one("[poisson-rate-submit]\nsize=128m\nrw=randread\nioengine=libaio\niodepth=32\ndirect=1\nio_submit_mode=offload\n"
                "rate_iops=50\nrate_process=poisson\n");
  EXPECT_EQ(pr.rate_process, RateProcess::poisson);
  // backwards-read
  auto br = one("[backwards-read]\nbs=4k\n# seek -8k back for every IO\nrw=read:-8k\nfilename=128m\nsize=128m\n");
  EXPECT_EQ(br.seq_skip, -8192);
  // butterfly
  auto bf = parse_ok("[global]\nfilename=/tmp/testfile\nbs=4k\ndirect=1\n\n[forward]\nrw=read\nflow=2\n#size=50%\n\n"
                     "[backward]\nrw=read:-8k\nflow=2\n#offset=50%\n");
  ASSERT_EQ(bf.jobs.size(), 2u);
  EXPECT_EQ(bf.jobs[1].flow, 2);
  EXPECT_EQ(bf.jobs[1].seq_skip, -8192);
  EXPECT_EQ(bf.jobs[1].groupid, 0u);
}

// The same examples straight from fio's source tree, when RDMABLK_FIO_EXAMPLES names its examples folder.
TEST(JobParser, FioExampleFilesParseWhenAvailable) {
  const char* dir = std::getenv("RDMABLK_FIO_EXAMPLES");
  if (!dir || !*dir) GTEST_SKIP() << "RDMABLK_FIO_EXAMPLES is not set: no fio source (scripts/setup unpacks it; ctest sets it then)";
  for (const char* name : {"ssd-test", "fio-rand-read", "fio-rand-write", "fio-rand-RW", "fio-seq-read", "fio-seq-write",
                           "fio-seq-RW", "basic-verify", "latency-profile", "jesd219", "surface-scan", "tiobench-example",
                           "fixed-rate-submission", "poisson-rate-submission", "backwards-read", "butterfly"}) {
    auto f = parse_job_file(std::string(dir) + "/" + name + ".fio");
    EXPECT_TRUE(f) << name << ": " << (f ? "" : f.error().message);
  }
}

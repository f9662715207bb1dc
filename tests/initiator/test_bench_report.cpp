#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <regex>

#include "initiator/bench/report.h"

using namespace rdmablk::initiator::bench;

namespace {

JobResult sample_result() {
  JobResult r;
  r.spec.name = "randread-4k";
  r.spec.rw = RwMode::randread;
  r.spec.options = {{"rw", "randread"}, {"bs", "4k"}};
  r.job_start_ms = 1700000000000;
  r.job_runtime_ms = 1000;
  r.read.ios = 1000;
  r.read.bytes = 4096000;
  r.read.runtime_ns = 1000000000;
  for (uint64_t i = 0; i < 1000; ++i) r.read.clat.record(100000 + i * 100);  // 100..199.9 us
  return r;
}

}  // namespace

TEST(Num2str, FollowsFio) {
  EXPECT_EQ(num2str(419430400, 4, 1, true, N2sUnit::byte_per_sec), "400MiB/s");
  EXPECT_EQ(num2str(419430400, 4, 1, false, N2sUnit::byte_per_sec), "419MB/s");
  EXPECT_EQ(num2str(4294967296, 4, 1, true, N2sUnit::byte), "4096MiB");
  EXPECT_EQ(num2str(102400, 4, 1, false, N2sUnit::none), "102k");
  EXPECT_EQ(num2str(12345, 4, 1, false, N2sUnit::none), "12.3k");
  EXPECT_EQ(num2str(999, 4, 1, false, N2sUnit::none), "999");
  EXPECT_EQ(num2str(0, 4, 1, true, N2sUnit::byte), "0B");
  EXPECT_EQ(num2str(1536, 4, 1, true, N2sUnit::byte), "1536B");
  EXPECT_EQ(num2str(15360, 4, 1, true, N2sUnit::byte), "15.0KiB");
}

TEST(TextReport, LooksLikeFio) {
  auto text = text_report({sample_result()});
  EXPECT_NE(text.find("randread-4k: (groupid=0, jobs=1): err= 0: pid="), std::string::npos) << text;
  EXPECT_NE(text.find("  read: IOPS=1000, BW=4000KiB/s (4096kB/s)(4000KiB/1000msec)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    clat (usec): min=100, max=199, avg=149.95, stdev=28.88\n"), std::string::npos) << text;
  EXPECT_NE(text.find("     lat (usec): min=100, max=199"), std::string::npos) << text;
  EXPECT_NE(text.find("    clat percentiles (usec):\n     |  1.00th=[  102],  5.00th=[  105], 10.00th=[  110], "
                      "20.00th=[  121],\n     | 30.00th=[  130],"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("     | 99.99th=[  200]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Run status group 0 (all jobs):\n   READ: bw=4000KiB/s (4096kB/s), 4000KiB/s-4000KiB/s "
                      "(4096kB/s-4096kB/s), io=4000KiB (4096kB), run=1000-1000msec\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("WRITE:"), std::string::npos);
  // Five percentile lines of four, the last with one.
  std::regex line(R"(\n     \|( +[0-9.]+th=\[ *[0-9]+\],?)+)");
  EXPECT_EQ(std::distance(std::sregex_iterator(text.begin(), text.end(), line), std::sregex_iterator()), 5);
}

TEST(TextReport, ShowsErrors) {
  auto r = sample_result();
  r.error = 84;
  r.error_message = "verify: crc32c mismatch at byte offset 21714";
  auto text = text_report({r});
  EXPECT_NE(text.find("err=84:"), std::string::npos);
  EXPECT_NE(text.find("  error: verify: crc32c mismatch at byte offset 21714\n"), std::string::npos);
}

TEST(JsonReport, MatchesFioFieldNamesAndTypes) {
  auto when = std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000123));
  auto j = json_report({{"iodepth", "32"}}, {sample_result()}, when);
  EXPECT_TRUE(j["fio version"].is_string());
  EXPECT_EQ(j["timestamp"], 1700000000);
  EXPECT_EQ(j["timestamp_ms"], 1700000000123ull);
  EXPECT_TRUE(j["time"].is_string());
  EXPECT_EQ(j["global options"]["iodepth"], "32");
  ASSERT_TRUE(j["jobs"].is_array());
  const auto& job = j["jobs"][0];
  EXPECT_EQ(job["jobname"], "randread-4k");
  EXPECT_TRUE(job["groupid"].is_number_integer());
  EXPECT_EQ(job["error"], 0);
  EXPECT_EQ(job["job options"]["bs"], "4k");
  for (const char* dir : {"read", "write", "trim"}) {
    const auto& d = job[dir];
    for (const char* k : {"io_bytes", "io_kbytes", "bw_bytes", "bw", "runtime", "total_ios", "short_ios", "drop_ios"}) {
      EXPECT_TRUE(d[k].is_number_integer()) << dir << "." << k;
    }
    EXPECT_TRUE(d["iops"].is_number_float()) << dir;
    for (const char* lat : {"slat_ns", "clat_ns", "lat_ns"}) {
      EXPECT_TRUE(d[lat]["min"].is_number_integer());
      EXPECT_TRUE(d[lat]["max"].is_number_integer());
      EXPECT_TRUE(d[lat]["mean"].is_number_float());
      EXPECT_TRUE(d[lat]["stddev"].is_number_float());
      EXPECT_TRUE(d[lat]["N"].is_number_integer());
    }
  }
  const auto& rd = job["read"];
  EXPECT_EQ(rd["io_bytes"], 4096000);
  EXPECT_EQ(rd["io_kbytes"], 4000);
  EXPECT_EQ(rd["bw_bytes"], 4096000);
  EXPECT_EQ(rd["bw"], 4000);
  EXPECT_DOUBLE_EQ(rd["iops"].get<double>(), 1000.0);
  EXPECT_EQ(rd["runtime"], 1000);
  EXPECT_EQ(rd["total_ios"], 1000);
  EXPECT_EQ(rd["clat_ns"]["N"], 1000);
  EXPECT_EQ(rd["clat_ns"]["min"], 100000);
  const auto& pct = rd["clat_ns"]["percentile"];
  ASSERT_EQ(pct.size(), 17u);
  for (const char* key : {"1.000000", "50.000000", "99.000000", "99.500000", "99.900000", "99.950000", "99.990000"}) {
    ASSERT_TRUE(pct.contains(key)) << key;
    EXPECT_TRUE(pct[key].is_number_integer()) << key;
  }
  EXPECT_NEAR(pct["50.000000"].get<double>(), 150000, 150000 / 256.0 + 1);
  EXPECT_FALSE(job["write"]["clat_ns"].contains("percentile"));  // fio omits it without samples
  EXPECT_TRUE(job["latency_us"]["250"].is_number());
  EXPECT_NEAR(job["latency_us"]["250"].get<double>(), 100.0, 1e-9);  // every sample in [100, 250) us
  EXPECT_TRUE(job["usr_cpu"].is_number_float());
}

TEST(Report, CpuPerIoIsTheJobsCpuTimeOverItsIos) {
  auto r = sample_result();  // 1000 reads in a 1000 ms job
  r.usr_cpu = 10.0;
  r.sys_cpu = 30.0;  // 40% of 1 s = 400 ms of CPU -> 400 us per I/O
  EXPECT_DOUBLE_EQ(cpu_us_per_io(r), 400.0);
  EXPECT_NE(text_report({r}).find("  cpu per I/O  : 400.00 us\n"), std::string::npos);
  auto j = json_report({}, {r}, std::chrono::system_clock::now());
  EXPECT_DOUBLE_EQ(j["jobs"][0]["cpu_us_per_io"].get<double>(), 400.0);
  r.read.ios = 0;
  EXPECT_EQ(cpu_us_per_io(r), 0.0);
  EXPECT_EQ(text_report({r}).find("cpu per I/O"), std::string::npos);
}

namespace {

DirectionStats dir_stats(uint64_t ios, uint64_t bytes, uint64_t runtime_ms, uint64_t first_us = 100) {
  DirectionStats d;
  d.ios = ios;
  d.bytes = bytes;
  d.runtime_ns = runtime_ms * 1000000;
  for (uint64_t i = 0; i < ios; ++i) d.clat.record(first_us * 1000 + i * 100);
  return d;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

}  // namespace

TEST(BenchReport, TrimIsReportedLikeReadAndWrite) {
  auto r = sample_result();
  r.spec.rw = RwMode::randtrim;
  r.read = DirectionStats{};
  r.trim = dir_stats(500, 2048000, 1000);
  auto text = text_report({r});
  EXPECT_NE(text.find("  trim: IOPS=500, BW=2000KiB/s (2048kB/s)(2000KiB/1000msec)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("   TRIM: bw=2000KiB/s (2048kB/s), 2000KiB/s-2000KiB/s (2048kB/s-2048kB/s), io=2000KiB (2048kB), "
                      "run=1000-1000msec\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("  read:"), std::string::npos);
  EXPECT_EQ(text.find("READ:"), std::string::npos);
  auto j = json_report({}, {r}, std::chrono::system_clock::now());
  EXPECT_EQ(j["jobs"][0]["trim"]["total_ios"], 500);
  EXPECT_EQ(j["jobs"][0]["trim"]["bw_bytes"], 2048000);
  EXPECT_EQ(j["jobs"][0]["trim"]["clat_ns"]["percentile"].size(), 17u);
  EXPECT_NEAR(j["jobs"][0]["latency_us"]["250"].get<double>(), 100.0, 1e-9);  // trims count in the distribution
  r.usr_cpu = 50;  // 500 ms of CPU for 500 trims
  EXPECT_DOUBLE_EQ(cpu_us_per_io(r), 1000.0);
}

TEST(BenchReport, EachGroupHasItsRunStatusBlock) {
  auto a = sample_result();
  auto b = sample_result();
  b.spec.name = "second";
  b.spec.groupid = 1;
  b.spec.rw = RwMode::write;
  b.read = DirectionStats{};
  b.write = dir_stats(500, 2048000, 1000);
  auto text = text_report({a, b});
  EXPECT_NE(text.find("randread-4k: (groupid=0, jobs=1): err= 0:"), std::string::npos) << text;
  EXPECT_NE(text.find("second: (groupid=1, jobs=1): err= 0:"), std::string::npos) << text;
  auto g0 = text.find("Run status group 0 (all jobs):\n   READ: bw=4000KiB/s");
  auto g1 = text.find("\n\nRun status group 1 (all jobs):\n  WRITE: bw=2000KiB/s");
  ASSERT_NE(g0, std::string::npos) << text;
  ASSERT_NE(g1, std::string::npos) << text;
  EXPECT_LT(g0, g1);
  EXPECT_EQ(count(text, "READ:"), 1u);
  EXPECT_EQ(count(text, "WRITE:"), 1u);
  auto j = json_report({}, {a, b}, std::chrono::system_clock::now());
  EXPECT_EQ(j["jobs"][0]["groupid"], 0);
  EXPECT_EQ(j["jobs"][1]["groupid"], 1);
}

TEST(BenchReport, GroupReportingMergesAGroupIntoOneEntry) {
  std::vector<JobResult> rs;
  for (unsigned i = 0; i < 3; ++i) {
    auto r = sample_result();
    r.spec.group_reporting = true;
    r.spec.clone = i;
    r.read = dir_stats(1000, 4096000, i == 2 ? 2000 : 1000);
    r.job_runtime_ms = i == 2 ? 2000 : 1000;
    r.usr_cpu = i == 0 ? 10 : i == 1 ? 30 : 0;  // 100 + 300 + 0 ms of 4000 ms
    r.ctx = 5;
    rs.push_back(std::move(r));
  }
  rs[1].error = 84;
  rs[1].error_message = "verify: mismatch";
  auto other = sample_result();  // another group is reported on its own
  other.spec.name = "alone";
  other.spec.groupid = 1;
  other.spec.group_reporting = true;
  rs.push_back(other);

  auto text = text_report(rs);
  EXPECT_NE(text.find("randread-4k: (groupid=0, jobs=3): err=84:"), std::string::npos) << text;
  EXPECT_NE(text.find("  error: verify: mismatch\n"), std::string::npos) << text;
  EXPECT_EQ(count(text, "randread-4k: ("), 1u) << text;
  EXPECT_NE(text.find("  read: IOPS=1500, BW=6000KiB/s (6144kB/s)(11.7MiB/2000msec)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  cpu          : usr=10.00%, sys=0.00%, ctx=15,"), std::string::npos) << text;
  EXPECT_NE(text.find("  cpu per I/O  : 133.33 us\n"), std::string::npos) << text;
  // fio computes the group line from the merged entry: min = max.
  EXPECT_NE(text.find("Run status group 0 (all jobs):\n   READ: bw=6000KiB/s (6144kB/s), 6000KiB/s-6000KiB/s (6144kB/s-6144kB/s), "
                      "io=11.7MiB (12.3MB), run=2000-2000msec\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("alone: (groupid=1, jobs=1)"), std::string::npos) << text;

  auto j = json_report({}, rs, std::chrono::system_clock::now());
  ASSERT_EQ(j["jobs"].size(), 2u);
  const auto& m = j["jobs"][0];
  EXPECT_EQ(m["jobname"], "randread-4k");
  EXPECT_EQ(m["groupid"], 0);
  EXPECT_EQ(m["error"], 84);
  EXPECT_EQ(m["read"]["total_ios"], 3000);
  EXPECT_EQ(m["read"]["io_bytes"], 12288000);
  EXPECT_EQ(m["read"]["runtime"], 2000);
  EXPECT_EQ(m["read"]["clat_ns"]["N"], 3000);
  EXPECT_EQ(m["job_runtime"], 4000);
  EXPECT_DOUBLE_EQ(m["usr_cpu"].get<double>(), 10.0);
  EXPECT_EQ(m["ctx"], 15);
  EXPECT_EQ(j["jobs"][1]["jobname"], "alone");

  // Without group_reporting: one entry per job, and the group line spans them.
  for (auto& r : rs) r.spec.group_reporting = false;
  auto plain = text_report(rs);
  EXPECT_EQ(count(plain, "randread-4k: (groupid=0, jobs=1)"), 3u);
  EXPECT_NE(plain.find("   READ: bw=6000KiB/s (6144kB/s), 2000KiB/s-4000KiB/s (2048kB/s-4096kB/s), io=11.7MiB (12.3MB), "
                       "run=1000-2000msec\n"),
            std::string::npos)
      << plain;
  EXPECT_EQ(json_report({}, rs, std::chrono::system_clock::now())["jobs"].size(), 4u);
}

TEST(BenchReport, PercentileListReplacesFiosDefault) {
  auto r = sample_result();
  r.spec.percentile_list = {99.99, 99, 99.9};  // fio sorts the list
  auto text = text_report({r});
  EXPECT_NE(text.find("    clat percentiles (usec):\n     | 99.00th=[  "), std::string::npos) << text;
  auto p1 = text.find(" 99.00th=["), p2 = text.find(", 99.90th=["), p3 = text.find(", 99.99th=[");
  ASSERT_NE(p3, std::string::npos) << text;
  EXPECT_LT(p1, p2);
  EXPECT_LT(p2, p3);
  EXPECT_EQ(text.find(" 50.00th="), std::string::npos);
  auto j = json_report({}, {r}, std::chrono::system_clock::now());
  const auto& pct = j["jobs"][0]["read"]["clat_ns"]["percentile"];
  ASSERT_EQ(pct.size(), 3u);
  auto it = pct.begin();
  EXPECT_EQ(it.key(), "99.000000");
  EXPECT_EQ((++it).key(), "99.900000");
  EXPECT_EQ((++it).key(), "99.990000");
  // Whole numbers print without decimals, as fio's precision follows the list.
  r.spec.percentile_list = {50, 99};
  auto whole = text_report({r});
  EXPECT_NE(whole.find("     |  50th=[  "), std::string::npos) << whole;  // fio's %3.0f
  EXPECT_NE(whole.find("],  99th=[  "), std::string::npos) << whole;
  // More decimals widen the column: 99.999 -> 3 decimals.
  r.spec.percentile_list = {99.999};
  EXPECT_NE(text_report({r}).find("     | 99.999th=[  "), std::string::npos);
}

TEST(BenchReport, LatAndClatPercentileSwitches) {
  auto r = sample_result();
  r.spec.lat_percentiles = true;
  auto text = text_report({r});
  EXPECT_NE(text.find("    clat percentiles (usec):"), std::string::npos) << text;
  EXPECT_NE(text.find("\n    lat percentiles (usec):\n"), std::string::npos) << text;
  auto j = json_report({}, {r}, std::chrono::system_clock::now());
  EXPECT_EQ(j["jobs"][0]["read"]["lat_ns"]["percentile"].size(), 17u);
  EXPECT_EQ(j["jobs"][0]["read"]["lat_ns"]["percentile"], j["jobs"][0]["read"]["clat_ns"]["percentile"]);

  r.spec.lat_percentiles = false;
  r.spec.clat_percentiles = false;
  auto none = text_report({r});
  EXPECT_EQ(none.find("percentiles"), std::string::npos) << none;
  EXPECT_NE(none.find("    clat (usec): min=100"), std::string::npos);  // the summary stays
  auto k = json_report({}, {r}, std::chrono::system_clock::now());
  EXPECT_FALSE(k["jobs"][0]["read"]["clat_ns"].contains("percentile"));
  EXPECT_FALSE(k["jobs"][0]["read"]["lat_ns"].contains("percentile"));
  EXPECT_EQ(k["jobs"][0]["read"]["clat_ns"]["N"], 1000);
}

TEST(BenchReport, UnifiedRwReportingMixedSumsTheDirections) {
  auto r = sample_result();
  r.spec.rw = RwMode::randrw;
  r.write = dir_stats(500, 2048000, 1000, 300);
  r.spec.unified_rw_reporting = UnifiedRw::mixed;
  auto text = text_report({r});
  EXPECT_NE(text.find("  mixed: IOPS=1500, BW=6000KiB/s (6144kB/s)(6000KiB/1000msec)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("  read:"), std::string::npos) << text;
  EXPECT_EQ(text.find("  write:"), std::string::npos) << text;
  EXPECT_NE(text.find("    clat (usec): min=100, max=349,"), std::string::npos) << text;
  EXPECT_NE(text.find("Run status group 0 (all jobs):\n  MIXED: bw=6000KiB/s (6144kB/s), 6000KiB/s-6000KiB/s "
                      "(6144kB/s-6144kB/s), io=6000KiB (6144kB), run=1000-1000msec\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("READ:"), std::string::npos);
  auto j = json_report({}, {r}, std::chrono::system_clock::now());
  const auto& job = j["jobs"][0];
  EXPECT_FALSE(job.contains("read"));
  EXPECT_FALSE(job.contains("write"));
  EXPECT_FALSE(job.contains("trim"));
  EXPECT_EQ(job["mixed"]["total_ios"], 1500);
  EXPECT_EQ(job["mixed"]["io_bytes"], 6144000);
  EXPECT_EQ(job["mixed"]["runtime"], 1000);
  EXPECT_EQ(job["mixed"]["clat_ns"]["N"], 1500);
}

TEST(BenchReport, UnifiedRwReportingBothAddsMixedAfterTheDirections) {
  auto r = sample_result();
  r.spec.rw = RwMode::randrw;
  r.write = dir_stats(500, 2048000, 1000, 300);
  r.spec.unified_rw_reporting = UnifiedRw::both;
  auto text = text_report({r});
  auto rd = text.find("  read: IOPS=1000"), wr = text.find("  write: IOPS=500"), mx = text.find("  mixed: IOPS=1500");
  ASSERT_NE(mx, std::string::npos) << text;
  EXPECT_LT(rd, wr);
  EXPECT_LT(wr, mx);
  EXPECT_NE(text.find("   READ: bw=4000KiB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("  WRITE: bw=2000KiB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("  MIXED: bw=6000KiB/s (6144kB/s), 2000KiB/s-4000KiB/s (2048kB/s-4096kB/s), io=6000KiB (6144kB), "
                      "run=1000-1000msec\n"),
            std::string::npos)
      << text;
  auto j = json_report({}, {r}, std::chrono::system_clock::now());
  const auto& job = j["jobs"][0];
  EXPECT_EQ(job["read"]["total_ios"], 1000);
  EXPECT_EQ(job["write"]["total_ios"], 500);
  EXPECT_EQ(job["mixed"]["total_ios"], 1500);
  std::vector<std::string> keys;
  for (auto it = job.begin(); it != job.end(); ++it) keys.push_back(it.key());
  auto pos = [&](const char* k) { return std::find(keys.begin(), keys.end(), k) - keys.begin(); };
  EXPECT_LT(pos("trim"), pos("mixed"));
  EXPECT_LT(pos("mixed"), pos("job_runtime"));
}

TEST(BenchReport, DescriptionIsPrintedAndEmitted) {
  auto r = sample_result();
  r.spec.description = "4k random reads, QD 32";
  auto text = text_report({r});
  EXPECT_NE(text.find("pid=" + std::to_string(::getpid())), std::string::npos);
  auto header_end = text.find('\n');
  EXPECT_EQ(text.find("  Description  : [4k random reads, QD 32]\n"), header_end + 1) << text;
  auto j = json_report({}, {r}, std::chrono::system_clock::now());
  EXPECT_EQ(j["jobs"][0]["desc"], "4k random reads, QD 32");
  EXPECT_FALSE(json_report({}, {sample_result()}, std::chrono::system_clock::now())["jobs"][0].contains("desc"));
  EXPECT_EQ(text_report({sample_result()}).find("Description"), std::string::npos);
}

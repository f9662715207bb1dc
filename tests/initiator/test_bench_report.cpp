#include <gtest/gtest.h>

#include <regex>

#include "initiator/bench_report.h"

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

// SVG charts of `rdmablk bench --plot` (bench_plot.h): valid SVG (checked with python3's XML parser by
// tests/initiator/plot-check), the expected series and legend, escaping, scales, determinism.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "initiator/bench/plot.h"

using namespace rdmablk::initiator::bench;
namespace fs = std::filesystem;

namespace {

const fs::path kSourceDir = RDMABLK_SOURCE_DIR;  // tests/CMakeLists.txt (not __FILE__: ccache may make it relative)
const std::string kAwkward = "mix <&> \"it's\"";

std::vector<IntervalSample> timeline(uint64_t intervals, uint64_t read_ios, uint64_t write_ios, uint64_t bs) {
  std::vector<IntervalSample> t;
  for (uint64_t i = 1; i <= intervals; ++i) {
    IntervalSample s;
    s.t_ms = i * 500;
    s.ios = {read_ios + i, write_ios, 0};
    s.bytes = {(read_ios + i) * bs, write_ios * bs, 0};
    t.push_back(s);
  }
  return t;
}

JobResult job(const std::string& name, const std::string& where) {
  JobResult r;
  r.spec.name = name;
  r.spec.where = where;
  return r;
}

// seqread (reads), a mixed job with an awkward name (reads and writes), two numjobs copies of "clone"
// (writes), and a job that did no I/O.
std::vector<JobResult> sample_results() {
  std::vector<JobResult> v;
  v.push_back(job("seqread", "/jobs/mixed.fio:3"));
  v.back().timeline = timeline(10, 500, 0, 131072);
  for (uint64_t i = 0; i < 1000; ++i) v.back().read.clat.record(20000 + i * 10);  // 20..30 us
  v.push_back(job(kAwkward, "/jobs/mixed.fio:9"));
  v.back().timeline = timeline(6, 200, 300, 4096);
  for (uint64_t i = 0; i < 100000; ++i) v.back().read.clat.record(50000 + (i % 1000) * 100);  // 50..150 us
  for (uint64_t i = 0; i < 10000; ++i) v.back().write.clat.record(i == 9999 ? 90000000 : 30000);  // a 90 ms outlier
  for (unsigned c = 0; c < 2; ++c) {
    v.push_back(job("clone", "/jobs/mixed.fio:15"));
    v.back().timeline = timeline(4, 0, 100 + c, 65536);
    for (auto& s : v.back().timeline) s.ios[kRead] = s.bytes[kRead] = 0;
    v.back().write.clat.record(100000);
  }
  v.push_back(job("idle", "/jobs/mixed.fio:20"));
  return v;
}

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int run(const std::string& cmd, std::string& out) {
  std::string full = cmd + " 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class BenchPlot : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rdmablk-benchplot-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

}  // namespace

TEST(BenchPlotText, EscapesXml) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(xml_escape("plain"), "plain");
}

TEST(BenchPlotText, TitleIsTheJobFile) {
  auto r = sample_results();
  EXPECT_EQ(plot_title(r), "/jobs/mixed.fio");
  EXPECT_EQ(plot_title(r, "other.fio"), "other.fio");
  EXPECT_EQ(plot_title({}), "rdmablk bench");
}

TEST(BenchPlotText, SeriesPerJobAndDirection) {
  auto r = sample_results();
  std::string iops = iops_svg(r, "mixed.fio");
  // seqread, the mixed job's read and write, the two clones; nothing for idle.
  EXPECT_EQ(count(iops, "<polyline class=\"series\""), 5u);
  for (const char* label : {"data-label=\"seqread\"", "data-label=\"mix &lt;&amp;&gt; &quot;it&apos;s&quot; read\"",
                            "data-label=\"mix &lt;&amp;&gt; &quot;it&apos;s&quot; write\"", "data-label=\"clone (job 3)\"",
                            "data-label=\"clone (job 4)\""})
    EXPECT_NE(iops.find(label), std::string::npos) << label;
  EXPECT_EQ(iops.find(kAwkward), std::string::npos);  // never unescaped
  EXPECT_EQ(iops.find("idle"), std::string::npos);
  EXPECT_NE(iops.find("<title>IOPS: mixed.fio</title>"), std::string::npos);
  EXPECT_NE(iops.find(">time (s)<"), std::string::npos);
  // seqread peaks at 510 I/Os per 0.5 s = 1020 IOPS: nice ticks 0, 200, ... 1200; time to 5 s.
  for (const char* tick : {">0<", ">200<", ">1000<", ">1200<", ">5<"}) EXPECT_NE(iops.find(tick), std::string::npos) << tick;
  EXPECT_EQ(iops.find(">1400<"), std::string::npos);

  std::string bw = bw_svg(r, "mixed.fio");
  EXPECT_EQ(count(bw, "<polyline class=\"series\""), 5u);
  EXPECT_NE(bw.find(">MiB/s<"), std::string::npos);
  // seqread: 510 x 128 KiB per 0.5 s = 127.5 MiB/s -> ticks up to 140 in steps of 20.
  EXPECT_NE(bw.find(">140<"), std::string::npos);

  std::string clat = clat_svg(r, "mixed.fio");
  EXPECT_EQ(count(clat, "<polyline class=\"series\""), 5u);  // seqread read, mixed read + write, clone x2 write
  EXPECT_NE(clat.find("data-label=\"seqread read\""), std::string::npos);
  EXPECT_NE(clat.find("data-label=\"clone (job 4) write\""), std::string::npos);
  // 100000 samples: the nines axis goes to 99.999; the 90 ms outlier against 20 us: log scale.
  EXPECT_NE(clat.find(">99.999<"), std::string::npos);
  EXPECT_EQ(clat.find(">99.9999<"), std::string::npos);
  EXPECT_NE(clat.find("log scale"), std::string::npos);
  EXPECT_NE(clat.find("seqread read: 99.9th percentile = "), std::string::npos);
  EXPECT_EQ(clat.find("seqread read: 99.99th percentile"), std::string::npos);  // 1000 samples: up to 99.9
}

TEST(BenchPlotText, LinearLatencyScaleForANarrowRange) {
  std::vector<JobResult> r{job("one", "a.fio:1")};
  for (uint64_t i = 0; i < 100; ++i) r[0].read.clat.record(10000 + i * 100);  // 10..20 us
  std::string clat = clat_svg(r, "a.fio");
  EXPECT_EQ(clat.find("log scale"), std::string::npos);
  EXPECT_NE(clat.find(">completion latency (µs)<"), std::string::npos);
  EXPECT_NE(clat.find(">99<"), std::string::npos);
  EXPECT_EQ(clat.find(">99.9<"), std::string::npos);
}

TEST(BenchPlotText, Deterministic) {
  auto r = sample_results();
  EXPECT_EQ(iops_svg(r, "t"), iops_svg(r, "t"));
  EXPECT_EQ(clat_svg(r, "t"), clat_svg(r, "t"));
}

TEST(BenchPlotText, NoDataIsStillAChart) {
  std::string s = iops_svg({}, "empty.fio");
  EXPECT_EQ(count(s, "<polyline"), 0u);
  EXPECT_NE(s.find(">no data<"), std::string::npos);
  EXPECT_NE(s.find("</svg>"), std::string::npos);
}

TEST_F(BenchPlot, WritesTheFilesAndPythonReadsThemAsSvg) {
  auto r = sample_results();
  std::string dir = (dir_ / "a" / "b").string();
  auto w = write_plots(dir, r);
  ASSERT_TRUE(w) << w.error().message;
  std::vector<std::string> expect = {dir + "/iops.svg", dir + "/bw.svg", dir + "/clat.svg", dir + "/index.html"};
  EXPECT_EQ(*w, expect);
  std::string html = slurp(dir + "/index.html");
  for (const char* f : {"data=\"iops.svg\"", "data=\"bw.svg\"", "data=\"clat.svg\"", "<title>rdmablk bench: /jobs/mixed.fio</title>"})
    EXPECT_NE(html.find(f), std::string::npos) << f;

  std::string out;
  if (run("python3 -c 1", out) != 0) GTEST_SKIP() << "no python3 to parse the SVG: " << out;
  const std::string check = (kSourceDir / "tests/initiator/plot-check").string();
  const std::string mixed = quote(kAwkward);
  for (const char* file : {"iops.svg", "bw.svg"}) {
    out.clear();
    int rc = run("python3 " + quote(check) + " " + quote(dir + "/" + file) + " --series 5 --label seqread --label " +
                     quote(kAwkward + " read") + " --label " + quote(kAwkward + " write") +
                     " --label 'clone (job 3)' --label 'clone (job 4)' --title-contains /jobs/mixed.fio",
                 out);
    EXPECT_EQ(rc, 0) << file << ": " << out;
  }
  out.clear();
  int rc = run("python3 " + quote(check) + " " + quote(dir + "/clat.svg") + " --series 5 --label 'seqread read' --label " +
                   quote(kAwkward + " write") + " --label 'clone (job 3) write' --title-contains 'Completion latency'",
               out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "seqread read\n" + kAwkward + " read\n" + kAwkward + " write\nclone (job 3) write\nclone (job 4) write\n");

  // The checker does catch broken files.
  std::ofstream(dir_ / "bad.svg") << "<svg xmlns=\"http://www.w3.org/2000/svg\"><g></svg>";
  out.clear();
  EXPECT_NE(run("python3 " + quote(check) + " " + quote((dir_ / "bad.svg").string()), out), 0);
  EXPECT_NE(out.find("not well-formed"), std::string::npos) << out;
}

TEST_F(BenchPlot, WriteErrorNamesTheDirectory) {
  std::ofstream(dir_ / "file") << "x";
  auto w = write_plots((dir_ / "file" / "sub").string(), sample_results());
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("file/sub"), std::string::npos) << w.error().message;
}

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "initiator/bench/workload.h"

using namespace rdmablk::initiator::bench;

namespace {

constexpr uint64_t K = 1024;
constexpr uint64_t M = 1024 * 1024;

JobSpec job(RwMode rw, uint64_t bs = 4 * K) {
  JobSpec j;
  j.name = "t";
  j.rw = rw;
  for (auto& b : j.bs) b.min = b.max = bs;
  return j;
}

IoGenerator make(const JobSpec& j, uint64_t start, uint64_t len, uint64_t lba = 512, uint64_t seed = 1) {
  auto g = IoGenerator::create(j, start, len, lba, seed);
  EXPECT_TRUE(g) << (g ? "" : g.error().message);
  return std::move(*g);
}

std::string create_error(const JobSpec& j, uint64_t start, uint64_t len, uint64_t lba = 512) {
  auto g = IoGenerator::create(j, start, len, lba, 1);
  return g ? std::string() : g.error().message;
}

}  // namespace

TEST(Workload, SequentialWalksTheRegionAndWraps) {
  auto g = make(job(RwMode::read), 1 * M, 40 * K + 512);  // a 512-byte tail no 4k block fits in
  for (int pass = 0; pass < 3; ++pass)
    for (uint64_t i = 0; i < 10; ++i) {
      auto io = g.next();
      EXPECT_EQ(io.ddir, kRead);
      EXPECT_EQ(io.offset, 1 * M + i * 4 * K);
      EXPECT_EQ(io.len, 4 * K);
    }
  auto w = make(job(RwMode::write), 0, 8 * K);
  EXPECT_EQ(w.next().ddir, kWrite);
  auto t = make(job(RwMode::trim), 0, 8 * K);
  EXPECT_EQ(t.next().ddir, kTrim);
}

TEST(Workload, SeqSkipLeavesHoles) {
  auto j = job(RwMode::read);
  j.seq_skip = 8 * K;  // rw=read:8k
  auto g = make(j, 0, 64 * K);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 8; ++i) offs.push_back(g.next().offset);
  // 0, 12k, 24k, 36k, 48k, (60k + 4k fits: 60k), then 72k would cross: wrap to 0.
  EXPECT_EQ(offs, (std::vector<uint64_t>{0, 12 * K, 24 * K, 36 * K, 48 * K, 60 * K, 0, 12 * K}));
}

TEST(Workload, NegativeSeqSkipReadsBackwards) {
  auto j = job(RwMode::read);
  j.seq_skip = -8 * static_cast<int64_t>(K);  // fio's examples/backwards-read.fio: bs=4k rw=read:-8k
  auto g = make(j, 4 * M, 32 * K);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 10; ++i) offs.push_back(g.next().offset - 4 * M);
  EXPECT_EQ(offs, (std::vector<uint64_t>{28 * K, 24 * K, 20 * K, 16 * K, 12 * K, 8 * K, 4 * K, 0, 28 * K, 24 * K}));
  // A small negative skip overlaps but still goes forward.
  j.seq_skip = -2 * static_cast<int64_t>(K);
  auto o = make(j, 0, 32 * K);
  EXPECT_EQ(o.next().offset, 0u);
  EXPECT_EQ(o.next().offset, 2 * K);
  EXPECT_EQ(o.next().offset, 4 * K);
}

TEST(Workload, RandomMapVisitsEveryBlockOncePerPass) {
  const uint64_t blocks = 1000;  // not a power of two
  auto g = make(job(RwMode::randread), 64 * K, blocks * 4 * K + 1000);
  ASSERT_TRUE(g.has_random_map(kRead));
  std::vector<std::vector<uint64_t>> orders;
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<uint64_t> order;
    std::vector<int> seen(blocks, 0);
    for (uint64_t i = 0; i < blocks; ++i) {
      auto io = g.next();
      ASSERT_EQ(io.len, 4 * K);
      ASSERT_EQ((io.offset - 64 * K) % (4 * K), 0u);
      uint64_t b = (io.offset - 64 * K) / (4 * K);
      ASSERT_LT(b, blocks);
      ASSERT_EQ(seen[b]++, 0) << "block " << b << " twice in pass " << pass;
      order.push_back(b);
    }
    orders.push_back(order);
    EXPECT_EQ(g.passes(kRead), static_cast<uint64_t>(pass));
  }
  EXPECT_NE(orders[0], orders[1]);  // every pass has its own order
  // The order looks random: consecutive blocks are far apart on average (uniform pairs: n/3).
  double dist = 0;
  for (std::size_t i = 1; i < orders[0].size(); ++i)
    dist += std::abs(static_cast<double>(orders[0][i]) - static_cast<double>(orders[0][i - 1]));
  dist /= static_cast<double>(orders[0].size() - 1);
  EXPECT_NEAR(dist, blocks / 3.0, blocks * 0.05);
}

TEST(Workload, RandomMapWithMixedSizesNeverTouchesABlockTwiceInAPass) {
  auto j = job(RwMode::randwrite);
  j.bs[kWrite].min = 4 * K;
  j.bs[kWrite].max = 64 * K;
  const uint64_t blocks = 4096;
  auto g = make(j, 0, blocks * 4 * K);
  ASSERT_TRUE(g.has_random_map(kWrite));
  std::vector<int> covered(blocks, 0);
  uint64_t pass = 0, ios = 0, shortened = 0;
  while (pass < 3) {
    auto io = g.next();
    if (g.passes(kWrite) != pass) {
      for (uint64_t b = 0; b < blocks; ++b) ASSERT_EQ(covered[b], 1) << "pass " << pass << " missed block " << b;
      std::fill(covered.begin(), covered.end(), 0);
      pass = g.passes(kWrite);
    }
    ASSERT_GE(io.len, 4 * K);
    ASSERT_LE(io.len, 64 * K);
    ASSERT_EQ(io.len % (4 * K), 0u);
    ASSERT_LE(io.offset + io.len, blocks * 4 * K);
    for (uint64_t b = io.offset / (4 * K); b < (io.offset + io.len) / (4 * K); ++b) ASSERT_EQ(covered[b]++, 0);
    ++ios;
  }
  (void)shortened;
  EXPECT_LT(ios, 3 * blocks);  // larger I/Os cover several blocks
}

TEST(Workload, RandRwSharesOneMap) {
  auto j = job(RwMode::randrw);
  j.rwmixread = 70;
  const uint64_t blocks = 5000;
  auto g = make(j, 0, blocks * 4 * K);
  std::vector<int> seen(blocks, 0);
  uint64_t reads = 0;
  for (uint64_t i = 0; i < blocks; ++i) {
    auto io = g.next();
    reads += io.ddir == kRead;
    ASSERT_EQ(seen[io.offset / (4 * K)]++, 0);
  }
  EXPECT_NEAR(static_cast<double>(reads) / blocks, 0.70, 0.03);
}

TEST(Workload, NoRandomMapAndBlockalign) {
  auto j = job(RwMode::randread);
  j.norandommap = true;
  const uint64_t blocks = 1000;
  auto g = make(j, 0, blocks * 4 * K);
  EXPECT_FALSE(g.has_random_map(kRead));
  std::set<uint64_t> distinct;
  for (uint64_t i = 0; i < blocks; ++i) {
    auto io = g.next();
    ASSERT_EQ(io.offset % (4 * K), 0u);
    distinct.insert(io.offset);
  }
  // Plain random: about 1 - 1/e of the blocks in n draws.
  EXPECT_NEAR(static_cast<double>(distinct.size()) / blocks, 1 - std::exp(-1.0), 0.05);

  // blockalign below the block size turns the map off (fio) and aligns offsets to it.
  auto a = job(RwMode::randread, 8 * K);
  a.bs[kRead].align = 2 * K;
  auto ga = make(a, 0, 64 * K);
  EXPECT_FALSE(ga.has_random_map(kRead));
  std::set<uint64_t> offs;
  for (int i = 0; i < 2000; ++i) {
    auto io = ga.next();
    ASSERT_EQ(io.offset % (2 * K), 0u);
    ASSERT_LE(io.offset + io.len, 64 * K);
    offs.insert(io.offset);
  }
  EXPECT_EQ(offs.size(), (64 - 8) / 2 + 1u);  // every 2k position where 8k fits
}

TEST(Workload, RandomNrIsSequentialBetweenRandomOffsets) {
  auto j = job(RwMode::randread);
  j.random_nr = 4;  // rw=randread:4
  auto g = make(j, 0, 4 * M);
  uint64_t prev_end = 0;
  int jumps = 0;
  for (int i = 0; i < 400; ++i) {
    auto io = g.next();
    if (i % 4 != 0) {
      ASSERT_EQ(io.offset, prev_end % (4 * M)) << i;
    } else if (i > 0 && io.offset != prev_end) {
      ++jumps;
    }
    prev_end = io.offset + io.len;
  }
  EXPECT_GT(jumps, 90);
}

TEST(Workload, BssplitProportions) {
  auto j = job(RwMode::randread);
  j.bs[kRead].split = {{4 * K, 50}, {8 * K, 30}, {16 * K, 20}};
  j.norandommap = true;
  auto g = make(j, 0, 64 * M);
  std::map<uint64_t, int> n;
  const int draws = 100000;
  for (int i = 0; i < draws; ++i) n[g.next().len]++;
  EXPECT_EQ(n.size(), 3u);
  EXPECT_NEAR(n[4 * K] / double(draws), 0.50, 0.01);
  EXPECT_NEAR(n[8 * K] / double(draws), 0.30, 0.01);
  EXPECT_NEAR(n[16 * K] / double(draws), 0.20, 0.01);

  // Entries without a percentage share the rest equally (fio); any size that is a multiple of the LBA.
  j.bs[kRead].split = {{4 * K, 50}, {6 * K, 0}, {64 * K, 0}};
  auto z = make(j, 0, 64 * M);
  n.clear();
  for (int i = 0; i < draws; ++i) n[z.next().len]++;
  EXPECT_NEAR(n[4 * K] / double(draws), 0.50, 0.01);
  EXPECT_NEAR(n[6 * K] / double(draws), 0.25, 0.01);
  EXPECT_NEAR(n[64 * K] / double(draws), 0.25, 0.01);
}

TEST(Workload, BsrangeBoundsAndSteps) {
  auto j = job(RwMode::randread);
  j.bs[kRead].min = 4 * K;
  j.bs[kRead].max = 16 * K;
  j.norandommap = true;
  auto g = make(j, 0, 64 * M);
  std::map<uint64_t, int> n;
  for (int i = 0; i < 40000; ++i) {
    auto io = g.next();
    ASSERT_EQ(io.offset % (4 * K), 0u);  // blockalign defaults to the smallest size
    n[io.len]++;
  }
  ASSERT_EQ(n.size(), 4u);  // 4k, 8k, 12k, 16k uniformly
  for (auto [len, c] : n) EXPECT_NEAR(c / 40000.0, 0.25, 0.015) << len;

  j.bs[kRead].align = 8 * K;  // steps of blockalign: 4k, 12k (20k would pass the maximum)
  auto a = make(j, 0, 64 * M);
  std::set<uint64_t> lens;
  for (int i = 0; i < 1000; ++i) {
    auto io = a.next();
    ASSERT_EQ(io.offset % (8 * K), 0u);
    lens.insert(io.len);
  }
  EXPECT_EQ(lens, (std::set<uint64_t>{4 * K, 12 * K}));
}

TEST(Workload, NoIoCrossesTheRegionEnd) {
  const uint64_t start = 1 * M, len = 1 * M + 12 * K;
  for (RwMode rw : {RwMode::read, RwMode::randread, RwMode::randwrite, RwMode::rw}) {
    for (bool split : {false, true}) {
      for (bool map : {true, false}) {
        auto j = job(rw);
        for (auto& b : j.bs) {
          b.min = 4 * K;
          b.max = 64 * K;
          if (split) b.split = {{4 * K, 10}, {48 * K, 40}, {64 * K, 50}};
        }
        j.norandommap = !map;
        auto g = make(j, start, len);
        uint64_t touched_tail = 0;
        for (int i = 0; i < 20000; ++i) {
          auto io = g.next();
          ASSERT_GE(io.offset, start);
          ASSERT_LE(io.offset + io.len, start + len) << rw_name(rw) << " split " << split << " map " << map;
          ASSERT_GE(io.len, 4 * K);
          ASSERT_LE(io.len, 64 * K);
          touched_tail += io.offset + io.len > start + len - 12 * K;
        }
        EXPECT_GT(touched_tail, 0u) << rw_name(rw);
      }
    }
  }
  // A fixed size that does not fit at the end moves the I/O instead.
  auto j = job(RwMode::randread, 16 * K);
  j.norandommap = true;
  auto g = make(j, 0, 100 * K);
  for (int i = 0; i < 5000; ++i) {
    auto io = g.next();
    ASSERT_LE(io.offset + io.len, 100 * K);
    ASSERT_EQ(io.len, 16 * K);
  }
}

TEST(Workload, SameSeedSameSequence) {
  auto j = job(RwMode::randrw);
  j.bs[kRead].split = {{4 * K, 50}, {8 * K, 50}};
  auto run = [&](IoGenerator& g) {
    std::vector<std::tuple<int, uint64_t, uint64_t>> v;
    for (int i = 0; i < 5000; ++i) {
      auto io = g.next();
      v.emplace_back(io.ddir, io.offset, io.len);
    }
    return v;
  };
  for (Distribution d : {Distribution::random, Distribution::zipf, Distribution::normal}) {
    j.distribution.kind = d;
    j.distribution.param = d == Distribution::zipf ? 1.1 : 10;
    auto a = *IoGenerator::create(j, 0, 64 * M, 512, 42);
    auto b = *IoGenerator::create(j, 0, 64 * M, 512, 42);
    auto c = *IoGenerator::create(j, 0, 64 * M, 512, 43);
    auto first = run(a);
    EXPECT_EQ(first, run(b));
    EXPECT_NE(first, run(c));
    a.reset();  // a new loop: the same sequence again
    EXPECT_EQ(first, run(a));
  }
}

TEST(Workload, ZipfIsSkewedAndScattered) {
  auto j = job(RwMode::randread);
  j.distribution.kind = Distribution::zipf;
  j.distribution.param = 1.2;
  const uint64_t blocks = 10000;
  auto g = make(j, 0, blocks * 4 * K);
  EXPECT_FALSE(g.has_random_map(kRead));
  std::vector<uint64_t> hits(blocks, 0);
  const int draws = 200000;
  for (int i = 0; i < draws; ++i) hits[g.next().offset / (4 * K)]++;
  std::vector<uint64_t> order(blocks);
  for (uint64_t i = 0; i < blocks; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) { return hits[a] > hits[b]; });
  uint64_t top = 0;
  for (uint64_t i = 0; i < blocks / 10; ++i) top += hits[order[i]];
  // Zipf(1.2) over 10000 ranks: the top 10% get H(1000,1.2)/H(10000,1.2) = 0.90 of the hits, the hottest
  // block 1/H(10000,1.2) = 0.208.
  EXPECT_GT(static_cast<double>(top) / draws, 0.87);
  EXPECT_NEAR(static_cast<double>(hits[order[0]]) / draws, 0.208, 0.01);
  EXPECT_NEAR(static_cast<double>(hits[order[1]]) / draws, 0.208 * std::pow(2.0, -1.2), 0.01);
  // Hot blocks are spread over the region, not packed at its start.
  uint64_t lo = blocks, hi = 0;
  for (int i = 0; i < 20; ++i) {
    lo = std::min(lo, order[i]);
    hi = std::max(hi, order[i]);
  }
  EXPECT_GT(hi - lo, blocks / 2);

  // theta 1 is allowed (fio refuses it; rejection-inversion handles it).
  j.distribution.param = 1.0;
  EXPECT_TRUE(IoGenerator::create(j, 0, 1 * M, 512, 1));
  j.distribution.param = 0;
  EXPECT_NE(create_error(j, 0, 1 * M).find("zipf"), std::string::npos);
}

TEST(Workload, ParetoFollowsTheEightyTwentyRule) {
  auto j = job(RwMode::randread);
  j.distribution.kind = Distribution::pareto;
  j.distribution.param = 0.2;  // fio: pareto:0.2 -> 80% of accesses to 20% of the blocks
  const uint64_t blocks = 10000;
  auto g = make(j, 0, blocks * 4 * K);
  std::vector<uint64_t> hits(blocks, 0);
  const int draws = 200000;
  for (int i = 0; i < draws; ++i) hits[g.next().offset / (4 * K)]++;
  std::sort(hits.begin(), hits.end(), std::greater<>());
  uint64_t top = 0;
  for (uint64_t i = 0; i < blocks / 5; ++i) top += hits[i];
  EXPECT_NEAR(static_cast<double>(top) / draws, 0.80, 0.02);
  j.distribution.param = 1;
  EXPECT_NE(create_error(j, 0, 1 * M).find("pareto"), std::string::npos);
}

TEST(Workload, NormalIsCentred) {
  auto j = job(RwMode::randread);
  j.distribution.kind = Distribution::normal;
  j.distribution.param = 10;  // sigma = 10% of the region
  const uint64_t blocks = 100000;
  auto g = make(j, 0, blocks * 4 * K);
  const int draws = 100000;
  int within1 = 0, within2 = 0;
  double sum = 0;
  for (int i = 0; i < draws; ++i) {
    double x = static_cast<double>(g.next().offset / (4 * K)) / blocks;  // 0..1
    sum += x;
    within1 += std::fabs(x - 0.5) < 0.1;
    within2 += std::fabs(x - 0.5) < 0.2;
  }
  EXPECT_NEAR(sum / draws, 0.5, 0.005);
  EXPECT_NEAR(within1 / double(draws), 0.6827, 0.01);
  EXPECT_NEAR(within2 / double(draws), 0.9545, 0.01);
}

TEST(Workload, ZonedShares) {
  auto j = job(RwMode::randread);
  j.distribution.kind = Distribution::zoned;
  j.distribution.zones = {{60, 10}, {30, 20}, {8, 30}, {2, 40}};  // zoned:60/10:30/20:8/30:2/40
  const uint64_t blocks = 10000;
  auto g = make(j, 0, blocks * 4 * K);
  std::array<int, 4> n{};
  const int draws = 100000;
  for (int i = 0; i < draws; ++i) {
    double x = static_cast<double>(g.next().offset / (4 * K)) / blocks;
    n[x < 0.1 ? 0 : x < 0.3 ? 1 : x < 0.6 ? 2 : 3]++;
  }
  EXPECT_NEAR(n[0] / double(draws), 0.60, 0.01);
  EXPECT_NEAR(n[1] / double(draws), 0.30, 0.01);
  EXPECT_NEAR(n[2] / double(draws), 0.08, 0.01);
  EXPECT_NEAR(n[3] / double(draws), 0.02, 0.005);

  j.distribution.kind = Distribution::zoned_abs;
  j.distribution.zones = {{70, 1.0 * M}, {30, 3.0 * M}};  // zoned_abs:70/1M:30/3M
  auto a = make(j, 0, 64 * M);
  int first = 0, beyond = 0;
  for (int i = 0; i < draws; ++i) {
    auto io = a.next();
    first += io.offset < 1 * M;
    beyond += io.offset >= 4 * M;
  }
  EXPECT_NEAR(first / double(draws), 0.70, 0.01);
  EXPECT_EQ(beyond, 0);
  j.distribution.zones = {{70, 1.0 * M}, {30, 64.0 * M}};
  EXPECT_NE(create_error(j, 0, 64 * M).find("exceed the region"), std::string::npos);
}

TEST(Workload, CreateRejectsWhatTheNamespaceCannotDo) {
  auto j = job(RwMode::read, 6 * K);
  EXPECT_NE(create_error(j, 0, 1 * M, 4096).find("not a multiple of the namespace block size 4096"), std::string::npos);
  EXPECT_TRUE(IoGenerator::create(job(RwMode::read, 4 * K), 0, 1 * M, 4096, 1));
  EXPECT_NE(create_error(job(RwMode::read), 512, 1 * M, 4096).find("region start"), std::string::npos);
  EXPECT_NE(create_error(job(RwMode::read, 64 * K), 0, 32 * K).find("holds no read block"), std::string::npos);
  auto a = job(RwMode::randread);
  a.bs[kRead].align = 1000;
  EXPECT_NE(create_error(a, 0, 1 * M).find("blockalign"), std::string::npos);
  auto s = job(RwMode::read);
  s.seq_skip = 100;
  EXPECT_NE(create_error(s, 0, 1 * M).find("skip"), std::string::npos);
  // A direction the job does not use may have sizes the namespace cannot do.
  auto w = job(RwMode::read, 4 * K);
  w.bs[kWrite].min = w.bs[kWrite].max = 1000;
  EXPECT_TRUE(IoGenerator::create(w, 0, 1 * M, 512, 1));
}

TEST(Workload, SetModeSwitchesToASequentialReadPass) {
  auto j = job(RwMode::randwrite);
  auto g = make(j, 8 * K, 64 * K);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(g.next().ddir, kWrite);
  g.set_mode(RwMode::read);
  for (uint64_t i = 0; i < 16; ++i) {
    auto io = g.next();
    EXPECT_EQ(io.ddir, kRead);
    EXPECT_EQ(io.offset, 8 * K + i * 4 * K);
  }
  EXPECT_EQ(g.region_len(), 64 * K);
}

TEST(RateLimiter, LinearByBytesAndByCount) {
  auto j = job(RwMode::rw);
  j.rate[kRead] = 1 * M;        // bytes/s
  j.rate_iops[kWrite] = 1000;   // I/Os per second
  RateLimiter r(j, 1);
  EXPECT_TRUE(r.enabled());
  EXPECT_EQ(r.due_ns(kRead), 0u);
  EXPECT_EQ(r.due_ns(kTrim), 0u);
  for (int i = 1; i <= 256; ++i) r.issued(kRead, 4 * K);
  EXPECT_EQ(r.due_ns(kRead), 1'000'000'000u);  // 1 MiB at 1 MiB/s
  for (int i = 1; i <= 10; ++i) r.issued(kWrite, 128 * K);
  EXPECT_EQ(r.due_ns(kWrite), 10'000'000u);
  r.issued(kTrim, 4 * K);
  EXPECT_EQ(r.due_ns(kTrim), 0u);
  // Both limits: the stricter.
  j.rate_iops[kRead] = 10;
  RateLimiter both(j, 1);
  both.issued(kRead, 4 * K);
  EXPECT_EQ(both.due_ns(kRead), 100'000'000u);
  EXPECT_FALSE(RateLimiter(job(RwMode::read), 1).enabled());
}

TEST(RateLimiter, PoissonGapsAreExponential) {
  auto j = job(RwMode::read);
  j.rate_iops[kRead] = 1000;
  j.rate_process = RateProcess::poisson;
  RateLimiter r(j, 7);
  const int n = 100000;
  std::vector<double> gaps;
  uint64_t prev = r.due_ns(kRead);
  for (int i = 0; i < n; ++i) {
    r.issued(kRead, 4 * K);
    gaps.push_back(static_cast<double>(r.due_ns(kRead) - prev));
    prev = r.due_ns(kRead);
  }
  double mean = 0, var = 0;
  for (double g : gaps) mean += g;
  mean /= n;
  for (double g : gaps) var += (g - mean) * (g - mean);
  var /= n;
  EXPECT_NEAR(mean, 1e6, 1e6 * 0.02);
  EXPECT_NEAR(var / (mean * mean), 1.0, 0.05);  // exponential: variance = mean^2

  // rate in bytes: lambda = rate / smallest bs; same seed, same gaps.
  auto b = job(RwMode::read);
  b.rate[kRead] = 4 * M;  // 1024 I/Os of 4k per second
  b.rate_process = RateProcess::poisson;
  RateLimiter x(b, 3), y(b, 3);
  for (int i = 0; i < 10000; ++i) {
    x.issued(kRead, 4 * K);
    y.issued(kRead, 4 * K);
  }
  EXPECT_EQ(x.due_ns(kRead), y.due_ns(kRead));
  EXPECT_NEAR(static_cast<double>(x.due_ns(kRead)), 10000 * 1e9 / 1024, 10000 * 1e9 / 1024 * 0.03);
  uint64_t end = x.due_ns(kRead);
  x.reset();
  EXPECT_EQ(x.due_ns(kRead), 0u);
  for (int i = 0; i < 10000; ++i) x.issued(kRead, 4 * K);
  EXPECT_EQ(x.due_ns(kRead), end);
}

// Not a test of speed (no assertion): prints ns per next() for the report.
TEST(Workload, PrintNsPerIo) {
  auto time = [](IoGenerator& g, int n) {
    uint64_t sink = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) sink += g.next().offset;
    auto t1 = std::chrono::steady_clock::now();
    EXPECT_NE(sink, 1u);
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
  };
  const uint64_t region = 64ull << 30;  // 64 GiB: 16M 4k blocks
  auto uni = make(job(RwMode::randread), 0, region);
  auto zj = job(RwMode::randread);
  zj.distribution.kind = Distribution::zipf;
  zj.distribution.param = 1.2;
  auto zipf = make(zj, 0, region);
  auto seq = make(job(RwMode::read), 0, region);
  auto mixed = job(RwMode::randrw);
  mixed.bs[kRead].split = mixed.bs[kWrite].split = {{4 * K, 50}, {16 * K, 30}, {64 * K, 20}};
  auto mix = make(mixed, 0, 4ull << 30);
  const int n = 2'000'000;
  std::printf("[ns per IoGenerator::next()] randread 4k random map %.1f, zipf:1.2 %.1f, read %.1f, "
              "randrw bssplit + map bitmap %.1f\n",
              time(uni, n), time(zipf, n), time(seq, n), time(mix, n));
}

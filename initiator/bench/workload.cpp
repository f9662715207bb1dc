#include "initiator/bench/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "initiator/bench/mix.h"

namespace rdmablk::initiator::bench {

namespace {

uint64_t derive(uint64_t seed, uint64_t salt) noexcept {
  uint64_t x = seed ^ (salt * 0xD1B54A32D192ED03ull);
  return splitmix64(x);
}

// p in [0, 1] of the 64-bit draw range (a draw below the threshold has probability p).
uint64_t threshold(long double p) noexcept {
  if (p <= 0) return 0;
  if (p >= 1) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(p * 18446744073709551616.0L);
}

// Zipf by rejection-inversion (W. Hörmann, G. Derflinger, "Rejection-inversion to generate variates from
// monotone discrete distributions", 1996): exact for any exponent > 0, O(1) expected, no table.
double zipf_helper1(double x) noexcept {  // log1p(x) / x
  return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}
double zipf_helper2(double x) noexcept {  // expm1(x) / x
  return std::fabs(x) > 1e-8 ? std::expm1(x) / x : 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x));
}
double zipf_h(double x, double e) noexcept { return std::exp(-e * std::log(x)); }
double zipf_hintegral(double x, double e) noexcept {
  const double lx = std::log(x);
  return zipf_helper2((1 - e) * lx) * lx;
}
double zipf_hintegral_inverse(double x, double e) noexcept {
  double t = x * (1 - e);
  if (t < -1) t = -1;
  return std::exp(zipf_helper1(t) * x);
}

const char* dir_label(std::size_t d) noexcept { return ddir_name(static_cast<Ddir>(d)); }

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// BlockPermutation: rounds of (add key, multiply by an odd key, xorshift) on `bits`-bit values; each step is
// a bijection of [0, 2^bits), so their composition is one. Restricted to [0, n) by cycle walking (apply
// again until the value is below n: still a bijection, at most domain / n < 2 steps on average).

BlockPermutation::BlockPermutation(uint64_t n, uint64_t key) noexcept : n_(n ? n : 1) {
  const unsigned bits = n_ <= 1 ? 0 : static_cast<unsigned>(std::bit_width(n_ - 1));
  mask_ = bits >= 64 ? ~0ull : (1ull << bits) - 1;
  shift_ = std::max(1u, (bits + 1) / 2);
  uint64_t k = key;
  for (std::size_t i = 0; i < 3; ++i) {
    add_[i] = splitmix64(k) & mask_;
    mul_[i] = (splitmix64(k) | 1) & mask_;
  }
}

uint64_t BlockPermutation::mix(uint64_t x) const noexcept {
  for (std::size_t i = 0; i < 3; ++i) {
    x = (x + add_[i]) & mask_;
    x = (x * mul_[i]) & mask_;
    x ^= x >> shift_;
  }
  return x;
}

uint64_t BlockPermutation::operator()(uint64_t x) const noexcept {
  uint64_t v = mix(x);
  while (v >= n_) v = mix(v);
  return v;
}

// ---------------------------------------------------------------------------------------------------------
// create()

struct IoGeneratorBuilder {
  using Dir = IoGenerator::Dir;
  using Zone = IoGenerator::Zone;

  static Result<Dir> block_sizes(const BlockSizeSpec& bs, std::size_t d, uint64_t lba) {
    Dir dir;
    auto check = [&](uint64_t v, const char* what) -> Result<void> {
      if (v == 0) return make_error(fmt::format("{} ({}) must not be 0", what, dir_label(d)));
      if (v % lba)
        return make_error(fmt::format("{} ({}) {} is not a multiple of the namespace block size {}", what,
                                      dir_label(d), v, lba));
      return {};
    };
    if (!bs.split.empty()) {
      unsigned given = 0, zeros = 0;
      for (const auto& s : bs.split) {
        if (auto r = check(s.bs, "bssplit size"); !r) return tl::unexpected(r.error());
        given += s.percent;
        zeros += s.percent == 0;
      }
      if (given > 100) return make_error(fmt::format("bssplit ({}) percentages add up to {} (more than 100)", dir_label(d), given));
      // fio: entries without a percentage share what the others leave; with none, the given weights are
      // taken relative to their sum.
      const long double zero_share = zeros ? static_cast<long double>(100 - given) / zeros : 0;
      long double total = 0;
      for (const auto& s : bs.split) total += s.percent ? s.percent : zero_share;
      const bool equal = total <= 0;
      if (equal) total = static_cast<long double>(bs.split.size());
      long double cum = 0;
      dir.min = std::numeric_limits<uint64_t>::max();
      dir.max = 0;
      for (const auto& s : bs.split) {
        cum += equal ? 1 : (s.percent ? s.percent : zero_share);
        dir.split_bs.push_back(s.bs);
        dir.split_threshold.push_back(threshold(cum / total));
        dir.min = std::min(dir.min, s.bs);
        dir.max = std::max(dir.max, s.bs);
      }
      dir.split_threshold.back() = std::numeric_limits<uint64_t>::max();
      dir.size_kind = dir.min == dir.max ? Dir::SizeKind::fixed : Dir::SizeKind::split;
    } else {
      if (auto r = check(bs.min, "bs"); !r) return tl::unexpected(r.error());
      if (auto r = check(bs.max, "bs"); !r) return tl::unexpected(r.error());
      if (bs.max < bs.min)
        return make_error(fmt::format("bsrange ({}) {}-{}: the maximum is below the minimum", dir_label(d), bs.min, bs.max));
      dir.min = bs.min;
      dir.max = bs.max;
      if (bs.min == bs.max) {
        dir.size_kind = Dir::SizeKind::fixed;
      } else {
        dir.size_kind = Dir::SizeKind::range;
        dir.step = bs.align ? bs.align : bs.min;
        dir.nsteps = (bs.max - bs.min) / dir.step + 1;
      }
    }
    if (bs.align && bs.align % lba)
      return make_error(fmt::format("blockalign ({}) {} is not a multiple of the namespace block size {}", dir_label(d),
                                    bs.align, lba));
    dir.align = bs.align ? bs.align : dir.min;
    dir.align_pow2 = std::has_single_bit(dir.align);
    dir.align_shift = dir.align_pow2 ? static_cast<unsigned>(std::countr_zero(dir.align)) : 0;
    if (dir.size_kind != Dir::SizeKind::range) dir.step = dir.min;
    return dir;
  }

  static Result<void> distribution(Dir& dir, const DistributionSpec& ds, std::size_t d, uint64_t region_len,
                                   uint64_t seed) {
    const uint64_t n = dir.positions;
    switch (ds.kind) {
      case Distribution::random:
        return {};
      case Distribution::zipf: {
        if (!(ds.param > 0)) return make_error(fmt::format("random_distribution=zipf: theta {} must be above 0", ds.param));
        const double e = ds.param;
        dir.zipf_exp = e;
        dir.zipf_hx1 = zipf_hintegral(1.5, e) - 1;
        dir.zipf_hn = zipf_hintegral(static_cast<double>(n) + 0.5, e);
        dir.zipf_s = 2 - zipf_hintegral_inverse(zipf_hintegral(2.5, e) - zipf_h(2, e), e);
        dir.scatter = BlockPermutation(n, derive(seed, 0x21f0 + d));
        return {};
      }
      case Distribution::pareto:
        if (!(ds.param > 0 && ds.param < 1))
          return make_error(fmt::format("random_distribution=pareto: h {} must be between 0 and 1", ds.param));
        dir.pareto_pow = std::log(ds.param) / std::log(1 - ds.param);
        dir.scatter = BlockPermutation(n, derive(seed, 0x9a2e + d));
        return {};
      case Distribution::normal:
        if (!(ds.param >= 0 && ds.param < 100))
          return make_error(fmt::format("random_distribution=normal: deviation {} must be in [0, 100)", ds.param));
        dir.normal_sigma = static_cast<double>(n) * (ds.param > 0 ? ds.param / 100 : 1.0 / 12);
        return {};
      case Distribution::zoned:
      case Distribution::zoned_abs: {
        const bool abs = ds.kind == Distribution::zoned_abs;
        const char* name = abs ? "zoned_abs" : "zoned";
        if (ds.zones.empty()) return make_error(fmt::format("random_distribution={}: no zones", name));
        long double access = 0, size = 0;
        for (const auto& z : ds.zones) {
          if (z.access_percent < 0 || z.size < 0)
            return make_error(fmt::format("random_distribution={}: negative zone value", name));
          access += z.access_percent;
          size += z.size;
        }
        if (access <= 0) return make_error(fmt::format("random_distribution={}: the zones get no accesses", name));
        if (abs && size > static_cast<long double>(region_len))
          return make_error(fmt::format("random_distribution=zoned_abs: the zones ({} bytes) exceed the region ({} bytes)",
                                        static_cast<uint64_t>(size), region_len));
        if (!abs && size > 100.0001L)
          return make_error(fmt::format("random_distribution=zoned: zone sizes add up to {}% (more than 100)",
                                        static_cast<double>(size)));
        dir.zones.clear();
        long double cum_access = 0, cum_size = 0;
        for (const auto& z : ds.zones) {
          cum_access += z.access_percent;
          uint64_t first, end;
          if (abs) {
            const auto a = static_cast<uint64_t>(cum_size), b = static_cast<uint64_t>(cum_size + z.size);
            first = (a + dir.align - 1) / dir.align;
            end = (b + dir.align - 1) / dir.align;
          } else {
            first = static_cast<uint64_t>(cum_size / 100 * n);
            end = static_cast<uint64_t>((cum_size + z.size) / 100 * n);
          }
          cum_size += z.size;
          first = std::min(first, n - 1);
          end = std::min(end, n);
          dir.zones.push_back(Zone{threshold(cum_access / access), first, end > first ? end - first : 1});
        }
        dir.zones.back().threshold = std::numeric_limits<uint64_t>::max();
        return {};
      }
    }
    return {};
  }
};

Result<IoGenerator> IoGenerator::create(const JobSpec& spec, uint64_t region_start, uint64_t region_len,
                                        uint64_t lba_size, uint64_t seed) {
  if (lba_size == 0) return make_error("the namespace block size is 0");
  if (region_start % lba_size)
    return make_error(fmt::format("the region start {} is not a multiple of the namespace block size {}", region_start, lba_size));
  if (spec.rwmixread > 100) return make_error(fmt::format("rwmixread={} is above 100", spec.rwmixread));
  if (spec.seq_skip % static_cast<int64_t>(lba_size))
    return make_error(fmt::format("the sequential skip ({}) is not a multiple of the namespace block size {}", spec.seq_skip,
                                  lba_size));
  IoGenerator g;
  g.region_start_ = region_start;
  g.region_len_ = region_len;
  g.lba_size_ = lba_size;
  g.seed_ = seed;
  g.rwmixread_ = spec.rwmixread;
  g.seq_skip_ = spec.seq_skip;
  g.random_nr_ = std::max(1u, spec.random_nr);
  g.mode_ = spec.rw;

  std::array<bool, kDdirs> used{does_reads(spec.rw) || spec.verify != VerifyKind::none, does_writes(spec.rw),
                                 does_trims(spec.rw)};
  std::array<bool, kDdirs> valid{};
  for (std::size_t d = 0; d < kDdirs; ++d) {
    auto dir = IoGeneratorBuilder::block_sizes(spec.bs[d], d, lba_size);
    if (!dir) {
      if (used[d]) return tl::unexpected(dir.error());
      continue;
    }
    if (dir->min > region_len) {
      if (used[d])
        return make_error(fmt::format("the region ({} bytes at offset {}) holds no {} block of {} bytes", region_len,
                                      region_start, dir_label(d), dir->min));
      continue;
    }
    dir->positions = (region_len - dir->min) / dir->align + 1;
    g.dir_[d] = std::move(*dir);
    valid[d] = true;
  }
  // A direction the job does not use and whose sizes do not suit the namespace borrows a used one's.
  std::size_t fallback = 0;
  while (!valid[fallback]) ++fallback;  // at least one direction is used, hence valid
  for (std::size_t d = 0; d < kDdirs; ++d)
    if (!valid[d]) g.dir_[d] = g.dir_[fallback];

  const bool random = is_random(spec.rw);
  g.dist_ = random ? spec.distribution.kind : Distribution::random;
  if (g.dist_ != Distribution::random) {
    for (std::size_t d = 0; d < kDdirs; ++d)
      if (auto r = IoGeneratorBuilder::distribution(g.dir_[d], spec.distribution, d, region_len, seed); !r)
        return tl::unexpected(r.error());
  }

  // Random map (fio: on for uniform random offsets unless norandommap or blockalign differs from the
  // smallest block). Directions with the same smallest block share one map.
  if (random && g.dist_ == Distribution::random && !spec.norandommap) {
    const std::array<bool, kDdirs> job_dirs{does_reads(spec.rw), does_writes(spec.rw), does_trims(spec.rw)};
    for (std::size_t d = 0; d < kDdirs; ++d) {
      Dir& dir = g.dir_[d];
      if (!job_dirs[d] || dir.align != dir.min) continue;
      std::size_t m = 0;
      while (m < g.maps_.size() && g.maps_[m].gran != dir.min) ++m;
      if (m == g.maps_.size()) {
        RandomMap map;
        map.gran = dir.min;
        map.gran_pow2 = std::has_single_bit(map.gran);
        map.gran_shift = map.gran_pow2 ? static_cast<unsigned>(std::countr_zero(map.gran)) : 0;
        map.blocks = region_len / map.gran;
        map.key = derive(seed, 0x3a90 + m);
        g.maps_.push_back(std::move(map));
      }
      dir.map = static_cast<int>(m);
      if (dir.max != dir.min && g.maps_[m].covered.empty()) g.maps_[m].covered.assign((g.maps_[m].blocks + 63) / 64, 0);
    }
  }
  g.apply_mode();
  g.reset();
  return g;
}

// ---------------------------------------------------------------------------------------------------------

void IoGenerator::apply_mode() noexcept {
  random_ = is_random(mode_);
  mixed_ = mode_ == RwMode::rw || mode_ == RwMode::randrw;
  fixed_ddir_ = does_writes(mode_) ? kWrite : does_trims(mode_) ? kTrim : kRead;
}

void IoGenerator::restart_sequences() noexcept {
  for (auto& d : dir_) {
    d.started = false;
    d.last_end = 0;
  }
  countdown_ = 1;  // fio: the first I/O of a random job is random (td->ddir_seq_nr starts at 1)
}

void IoGenerator::set_mode(RwMode m) noexcept {
  mode_ = m;
  apply_mode();
  restart_sequences();
}

void IoGenerator::reset() noexcept {
  rng_ = WorkloadRng(seed_);
  have_spare_normal_ = false;
  restart_sequences();
  for (auto& m : maps_) {
    m.pass = 0;
    m.perm = BlockPermutation(m.blocks, derive(m.key, 0));
    m.cursor = 0;
    std::fill(m.covered.begin(), m.covered.end(), 0);
  }
}

uint64_t IoGenerator::passes(Ddir d) const noexcept {
  return dir_[d].map >= 0 ? maps_[static_cast<std::size_t>(dir_[d].map)].pass : 0;
}

void IoGenerator::map_new_pass(RandomMap& m) noexcept {
  ++m.pass;
  m.perm = BlockPermutation(m.blocks, derive(m.key, m.pass));
  m.cursor = 0;
  std::fill(m.covered.begin(), m.covered.end(), 0);
}

uint64_t IoGenerator::pick_len(const Dir& d) noexcept {
  uint64_t len = d.min;
  switch (d.size_kind) {
    case Dir::SizeKind::fixed:
      return len <= region_len_ ? len : fit_len(d, region_len_);
    case Dir::SizeKind::range:
      len = d.min + d.step * rng_.below(d.nsteps);
      break;
    case Dir::SizeKind::split: {
      const uint64_t r = rng_.next();
      std::size_t i = 0;
      while (r >= d.split_threshold[i] && i + 1 < d.split_bs.size()) ++i;
      len = d.split_bs[i];
      break;
    }
  }
  return len <= region_len_ ? len : fit_len(d, region_len_);
}

uint64_t IoGenerator::fit_len(const Dir& d, uint64_t room) const noexcept {
  switch (d.size_kind) {
    case Dir::SizeKind::fixed:
      return d.min;
    case Dir::SizeKind::range:
      return d.min + d.step * std::min(d.nsteps - 1, (room - d.min) / d.step);
    case Dir::SizeKind::split: {
      uint64_t best = d.min;
      for (uint64_t bs : d.split_bs)
        if (bs <= room && bs > best) best = bs;
      return best;
    }
  }
  return d.min;
}

uint64_t IoGenerator::random_position(Dir& d) noexcept {
  const uint64_t n = d.positions;
  switch (dist_) {
    case Distribution::random:
      return rng_.below(n);
    case Distribution::zipf: {
      if (n == 1) return 0;
      const double e = d.zipf_exp;
      for (;;) {
        const double u = d.zipf_hn + rng_.unit() * (d.zipf_hx1 - d.zipf_hn);
        const double x = zipf_hintegral_inverse(u, e);
        auto k = static_cast<uint64_t>(x + 0.5);
        if (k < 1) k = 1;
        if (k > n) k = n;
        const double kd = static_cast<double>(k);
        if (kd - x <= d.zipf_s || u >= zipf_hintegral(kd + 0.5, e) - zipf_h(kd, e)) return d.scatter(k - 1);
      }
    }
    case Distribution::pareto: {
      const double u = rng_.unit();
      auto rank = static_cast<uint64_t>(static_cast<double>(n - 1) * std::pow(u, d.pareto_pow));
      return d.scatter(std::min(rank, n - 1));
    }
    case Distribution::normal: {
      const double center = static_cast<double>(n) / 2;
      for (;;) {
        double g;
        if (have_spare_normal_) {
          have_spare_normal_ = false;
          g = spare_normal_;
        } else {  // Marsaglia's polar method: two normal deviates per accepted pair
          double u, v, s;
          do {
            u = 2 * rng_.unit() - 1;
            v = 2 * rng_.unit() - 1;
            s = u * u + v * v;
          } while (s >= 1 || s == 0);
          const double f = std::sqrt(-2 * std::log(s) / s);
          spare_normal_ = v * f;
          have_spare_normal_ = true;
          g = u * f;
        }
        const double x = center + d.normal_sigma * g;
        if (x >= 0 && x < static_cast<double>(n)) return std::min(static_cast<uint64_t>(x), n - 1);
      }
    }
    case Distribution::zoned:
    case Distribution::zoned_abs: {
      const uint64_t r = rng_.next();
      std::size_t i = 0;
      while (r >= d.zones[i].threshold && i + 1 < d.zones.size()) ++i;
      return d.zones[i].first + rng_.below(d.zones[i].count);
    }
  }
  return 0;
}

uint64_t IoGenerator::sequential_offset(Dir& d, uint64_t& len) noexcept {
  const uint64_t room = region_len_;  // len <= room (pick_len)
  bool to_end;
  uint64_t pos = 0;
  if (!d.started) {
    // rw=read:-8k with bs=4k walks backwards: start with the last block.
    to_end = seq_skip_ < 0 && static_cast<uint64_t>(-seq_skip_) > d.min;
  } else {
    const int64_t next = static_cast<int64_t>(d.last_end) + seq_skip_;
    to_end = next < 0;
    pos = static_cast<uint64_t>(next);
  }
  if (to_end) {
    const uint64_t last = room - len;
    return last - last % lba_size_;
  }
  if (pos <= room && room - pos >= len) return pos;
  if (pos < room && room - pos >= d.min && d.size_kind != Dir::SizeKind::fixed) {
    len = fit_len(d, room - pos);
    return pos;
  }
  return 0;  // wrap to the start
}

uint64_t IoGenerator::map_take(RandomMap& m, uint64_t& len) noexcept {
  uint64_t b;
  for (;;) {
    if (m.cursor == m.perm.domain()) map_new_pass(m);
    b = m.perm.mix(m.cursor++);
    if (b >= m.blocks) continue;
    if (!m.covered.empty() && (m.covered[b >> 6] >> (b & 63) & 1)) continue;
    break;
  }
  if (!m.covered.empty()) {
    // Cover the blocks this I/O touches; stop at the first one an earlier I/O of this pass covered (fio's
    // mark_random_map) and shorten the I/O to the run.
    const uint64_t need = m.gran_pow2 ? (len + m.gran - 1) >> m.gran_shift : (len + m.gran - 1) / m.gran;
    uint64_t run = 0;
    while (run < need && b + run < m.blocks) {
      const uint64_t x = b + run;
      uint64_t& w = m.covered[x >> 6];
      const uint64_t bit = 1ull << (x & 63);
      if (w & bit) break;
      w |= bit;
      ++run;
    }
    if (run < need) len = std::min(len, run * m.gran);
  }
  return m.gran_pow2 ? b << m.gran_shift : b * m.gran;
}

IoUnit IoGenerator::next() noexcept {
  Ddir dd = fixed_ddir_;
  if (mixed_) dd = rng_.below(100) < rwmixread_ ? kRead : kWrite;
  Dir& d = dir_[dd];
  uint64_t len = pick_len(d);
  uint64_t off;
  bool take_random = false;
  if (random_ && --countdown_ == 0) {
    countdown_ = random_nr_;
    take_random = true;
  }
  if (take_random) {
    if (d.map >= 0) {
      off = map_take(maps_[static_cast<std::size_t>(d.map)], len);
    } else {
      const uint64_t pos = random_position(d);
      off = d.align_pow2 ? pos << d.align_shift : pos * d.align;
      if (off + len > region_len_) len = fit_len(d, region_len_ - off);
    }
  } else {
    off = sequential_offset(d, len);
  }
  d.started = true;
  d.last_end = off + len;
  return IoUnit{dd, region_start_ + off, len};
}

// ---------------------------------------------------------------------------------------------------------
// RateLimiter

RateLimiter::RateLimiter(const JobSpec& spec, uint64_t seed) : poisson_(spec.rate_process == RateProcess::poisson), seed_(seed) {
  for (std::size_t d = 0; d < kDdirs; ++d) {
    Dir& r = dirs_[d];
    const uint64_t bps = spec.rate[d], iops = spec.rate_iops[d];
    if (!bps && !iops) continue;
    enabled_ = true;
    if (bps) r.ns_per_byte = 1e9 / static_cast<double>(bps);
    if (iops) r.ns_per_io = 1e9 / static_cast<double>(iops);
    // poisson: fio's lambda is rate / min_bs I/Os per second (rate_iops is turned into bytes the same way).
    double lambda = iops ? static_cast<double>(iops) : 0;
    if (bps) {
      uint64_t min_bs = spec.bs[d].min;
      if (!spec.bs[d].split.empty()) {
        min_bs = spec.bs[d].split.front().bs;
        for (const auto& s : spec.bs[d].split) min_bs = std::min(min_bs, s.bs);
      }
      const double from_bytes = static_cast<double>(bps) / static_cast<double>(std::max<uint64_t>(1, min_bs));
      lambda = lambda > 0 ? std::min(lambda, from_bytes) : from_bytes;
    }
    r.mean_gap_ns = 1e9 / lambda;
  }
  reset();
}

void RateLimiter::reset() noexcept {
  for (std::size_t d = 0; d < kDdirs; ++d) {
    Dir& r = dirs_[d];
    r.bytes = r.ios = 0;
    r.poisson_t = 0;
    r.due = 0;
    r.rng = WorkloadRng(derive(seed_, 0x7a7e + d));
  }
}

void RateLimiter::issued(Ddir d, uint64_t len) noexcept {
  Dir& r = dirs_[d];
  if (r.mean_gap_ns == 0) return;
  if (poisson_) {
    r.poisson_t += -std::log(r.rng.open_unit()) * r.mean_gap_ns;
    r.due = static_cast<uint64_t>(r.poisson_t);
    return;
  }
  r.bytes += len;
  ++r.ios;
  const double t = std::max(static_cast<double>(r.bytes) * r.ns_per_byte, static_cast<double>(r.ios) * r.ns_per_io);
  r.due = static_cast<uint64_t>(t);
}

}  // namespace rdmablk::initiator::bench

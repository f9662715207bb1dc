// What a `rdmablk bench` job issues next, with fio's meaning (io_u.c get_next_offset / get_next_buflen,
// lib/zipf.c, lib/gauss.c, the rate handling in backend.c): the data direction, the offset and the length
// of every I/O, and when a rate-limited job may issue it.
//
// Pure: no I/O, no threads, no clock (the runner passes time in), no allocation after create(), and the
// same seed gives the same sequence. The runner owns one IoGenerator and one RateLimiter per job thread.
//
// Semantics (fio's unless noted):
//   - Direction: read/randread -> read, write/randwrite -> write, trim/randtrim -> trim; rw/randrw pick
//     read with probability rwmixread% for every I/O. (fio switches direction in runs whose lengths keep
//     the same mix, and swaps to the other direction while one is rate-limited; the runner may do the
//     latter with RateLimiter::due_ns.)
//   - Length per direction: bssplit (weights; entries of 0 share what the others leave; all 0 = equal
//     shares), else bsrange min..max uniformly in steps of blockalign (0: of min), else bs. Unlike fio
//     (which rounds a bssplit size down to a multiple of the smallest one) every listed size is used as
//     given. An I/O never crosses the end of the region: a variable length is clipped to the largest
//     allowed one that fits; a fixed one moves the I/O (sequential wraps to the start).
//   - Sequential: the first I/O is at the region start; every next one at the end of the previous one
//     of the same direction plus seq_skip (rw=read:8k). A negative seq_skip larger than the block goes
//     backwards (rw=read:-8k with bs=4k reads end-4k, end-8k, ..., 0, then wraps to the end: fio reads
//     block 0 first and never the last block; we start at the end). Forward runs wrap to the start when
//     the next block would cross the end.
//   - Random: offsets are region start + k * blockalign (default: the direction's smallest block), k
//     uniform over the positions where the smallest block fits.
//     Random map (fio's default for uniform offsets): every block is visited once per pass in a
//     pseudo-random order (a keyed bijection of the block numbers, a new key per pass), then a new pass
//     starts. Directions with the same smallest block size share one map, as fio's file-wide map (rw mix:
//     reads and writes together cover the region once per pass). With variable lengths a bitmap at the
//     smallest-block granularity records what larger I/Os covered; a position already covered is skipped
//     and an I/O is shortened to the uncovered run after its start (fio's mark_random_map), so one pass
//     never touches a block twice. As in fio the map is off with norandommap, with a non-uniform
//     distribution and with a blockalign other than the smallest block size.
//     random_nr=N (rw=randread:N): I/O 1, N+1, 2N+1, ... take a random offset, the ones between continue
//     sequentially from the previous I/O of that direction (they do not use the map).
//   - Distributions (no map): zipf:theta (exact rejection-inversion sampling, theta > 0, 1 allowed) and
//     pareto:h (rank = (n-1) * u^(log h / log(1-h)), fio's formula) pick a popularity rank; ranks are
//     scattered over the region by a keyed bijection (fio hashes the rank) so hot blocks are spread out and
//     distinct ranks are distinct blocks. normal:sigma is a true Gaussian centred on the middle of the
//     region with a standard deviation of sigma percent of it (0: 100/12 percent, the spread of fio's
//     gauss without a deviation), redrawn when outside; unlike fio it is not hashed, so the hot blocks are
//     in the middle. zoned:A/S:... and zoned_abs:A/S:... pick zone i with probability A_i / sum(A) and a
//     uniform position inside it; zones follow each other from the region start, S_i in percent of the
//     region (zoned) or bytes (zoned_abs, whose zones must fit the region).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "initiator/bench/job_file.h"
#include "protocol/result.h"

namespace rdmablk::initiator::bench {

// Small, fast PRNG (wyrand): 64-bit state, one multiply per draw; deterministic for a seed.
class WorkloadRng {
 public:
  WorkloadRng() noexcept = default;
  explicit WorkloadRng(uint64_t seed) noexcept : s_(seed) {}
  uint64_t next() noexcept {
    s_ += 0xa0761d6478bd642full;
    const u128 t = static_cast<u128>(s_) * (s_ ^ 0xe7037ed1a0b428dbull);
    return static_cast<uint64_t>(t >> 64) ^ static_cast<uint64_t>(t);
  }
  // Uniform in [0, n) for n > 0 without a division (multiply-shift; the bias is below n / 2^64).
  uint64_t below(uint64_t n) noexcept { return static_cast<uint64_t>((static_cast<u128>(next()) * n) >> 64); }
  double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }             // [0, 1)
  double open_unit() noexcept { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }  // (0, 1]

 private:
  __extension__ using u128 = unsigned __int128;
  uint64_t s_ = 0;
};

// A keyed bijection of [0, 2^bits) used to walk or scatter the block numbers of a region.
class BlockPermutation {
 public:
  BlockPermutation() = default;
  BlockPermutation(uint64_t n, uint64_t key) noexcept;  // permutes [0, n)
  uint64_t size() const noexcept { return n_; }
  uint64_t domain() const noexcept { return mask_ + 1; }  // power of two >= n
  uint64_t mix(uint64_t x) const noexcept;                 // bijection of [0, domain())
  uint64_t operator()(uint64_t x) const noexcept;          // bijection of [0, n) (cycle walking), x < n
 private:
  uint64_t n_ = 1, mask_ = 0;
  unsigned shift_ = 1;
  std::array<uint64_t, 3> add_{}, mul_{1, 1, 1};
};

struct IoUnit {
  Ddir ddir;
  uint64_t offset;  // namespace byte offset
  uint64_t len;
};

class IoGenerator {
 public:
  // Region [region_start, region_start + region_len) of a namespace with lba_size-byte blocks. Errors (a
  // message naming the option) if a block size, blockalign, seq_skip or the region start is not a multiple of
  // lba_size, the region holds no block of a direction the job uses, a distribution parameter is out of
  // range, zoned_abs zones do not fit the region, ...
  static Result<IoGenerator> create(const JobSpec& spec, uint64_t region_start, uint64_t region_len,
                                    uint64_t lba_size, uint64_t seed);

  IoUnit next() noexcept;  // never ends: sequential wraps, random starts a new pass when the map is full
  // Switch the access pattern (e.g. the verify pass reads sequentially over the same region). The
  // sequential positions and the random_nr count restart; the random state goes on. Block sizes of a
  // direction the created job did not use are those of the job file (checked against lba_size at create
  // only when valid; otherwise the read direction's are used). A random mode gets a random map only if
  // create() built one (the job itself was random).
  void set_mode(RwMode m) noexcept;
  // Back to the start state: the same seed gives the same sequence again (a new loop with randrepeat;
  // the runner can also replay a write pass as reads this way).
  void reset() noexcept;

  uint64_t region_start() const noexcept { return region_start_; }
  uint64_t region_len() const noexcept { return region_len_; }
  RwMode mode() const noexcept { return mode_; }
  bool has_random_map(Ddir d) const noexcept { return dir_[d].map >= 0; }
  uint64_t passes(Ddir d) const noexcept;  // random-map passes completed (0 without a map)

 private:
  friend struct IoGeneratorBuilder;  // create()'s helpers (workload.cpp)
  struct Zone {
    uint64_t threshold;  // pick this zone when a 64-bit draw is below this (last: UINT64_MAX)
    uint64_t first;      // first position
    uint64_t count;      // positions in the zone (> 0)
  };
  struct Dir {
    enum class SizeKind : uint8_t { fixed, range, split } size_kind = SizeKind::fixed;
    uint64_t min = 4096, max = 4096;
    uint64_t step = 4096, nsteps = 1;  // range: min + step * [0, nsteps)
    std::vector<uint64_t> split_bs, split_threshold;
    uint64_t align = 4096;
    unsigned align_shift = 0;  // align == 1 << align_shift when align_pow2
    bool align_pow2 = true;
    uint64_t positions = 1;    // random offsets: 0, align, ..., (positions - 1) * align
    int map = -1;              // index into maps_, -1 = none
    // Distribution state for this direction's positions.
    BlockPermutation scatter;  // zipf / pareto rank -> position
    double zipf_s = 0, zipf_hx1 = 0, zipf_hn = 0, zipf_exp = 0;  // rejection-inversion constants
    double pareto_pow = 0;
    double normal_sigma = 0;
    std::vector<Zone> zones;
    // Sequential state.
    bool started = false;
    uint64_t last_end = 0;     // end of the previous I/O of this direction, relative to the region start
  };
  struct RandomMap {
    uint64_t gran = 4096;          // bytes per map block (the smallest block size of its directions)
    unsigned gran_shift = 0;
    bool gran_pow2 = true;
    uint64_t blocks = 0;           // map blocks in the region
    BlockPermutation perm;         // this pass's order
    uint64_t cursor = 0;           // next index into perm's domain
    uint64_t pass = 0;
    uint64_t key = 0;              // per-map seed the pass keys derive from
    std::vector<uint64_t> covered; // one bit per block; empty when every I/O is exactly one block
  };

  IoGenerator() = default;
  void apply_mode() noexcept;
  void restart_sequences() noexcept;
  uint64_t pick_len(const Dir& d) noexcept;
  uint64_t fit_len(const Dir& d, uint64_t room) const noexcept;  // largest allowed length <= room (>= d.min)
  uint64_t random_position(Dir& d) noexcept;
  uint64_t sequential_offset(Dir& d, uint64_t& len) noexcept;
  uint64_t map_take(RandomMap& m, uint64_t& len) noexcept;  // offset; may shorten len
  void map_new_pass(RandomMap& m) noexcept;

  RwMode mode_ = RwMode::read;
  bool random_ = false, mixed_ = false;
  Ddir fixed_ddir_ = kRead;
  unsigned rwmixread_ = 50;
  int64_t seq_skip_ = 0;
  unsigned random_nr_ = 1, countdown_ = 1;
  Distribution dist_ = Distribution::random;
  uint64_t region_start_ = 0, region_len_ = 0, lba_size_ = 512;
  uint64_t seed_ = 0;
  WorkloadRng rng_;
  bool have_spare_normal_ = false;
  double spare_normal_ = 0;
  std::array<Dir, kDdirs> dir_{};
  std::vector<RandomMap> maps_;
};

class RateLimiter {
 public:
  explicit RateLimiter(const JobSpec& spec, uint64_t seed);
  bool enabled() const noexcept { return enabled_; }
  // Earliest time (ns since the job's I/O started) the next I/O of `d` may be issued; 0 = no limit. A
  // time in the past means the job is behind and may issue at once (fio catches up the same way).
  uint64_t due_ns(Ddir d) const noexcept { return dirs_[d].due; }
  // Account an issued I/O. linear: the n-th byte is due at n / rate and the n-th I/O at n / rate_iops
  // (both when both are set: the stricter wins; fio uses rate and ignores rate_iops then).
  // poisson: exponentially distributed gaps with mean 1 / iops, iops = rate_iops or rate / smallest bs
  // (the smaller when both are set), as fio's usec_for_io.
  void issued(Ddir d, uint64_t len) noexcept;
  void reset() noexcept;  // back to time 0 (the same gaps again for poisson)

 private:
  struct Dir {
    double ns_per_byte = 0, ns_per_io = 0, mean_gap_ns = 0;
    uint64_t bytes = 0, ios = 0;
    double poisson_t = 0;
    uint64_t due = 0;
    WorkloadRng rng;
  };
  bool enabled_ = false, poisson_ = false;
  uint64_t seed_ = 0;
  std::array<Dir, kDdirs> dirs_{};
};

}  // namespace rdmablk::initiator::bench

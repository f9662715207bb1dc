// Write buffer contents for `rdmablk bench` jobs without verify (with verify the Verifier writes the
// blocks), with fio's options and precedence (io_u.c fill_io_buffer, get_io_u):
//   buffer_compress_percentage=P (1-99): every chunk of buffer_compress_chunk bytes (0: the whole buffer)
//       is (100-P)% fresh random bytes followed by P% zeros (or buffer_pattern), so a compressor keeps
//       about (100-P)% of a large written region; implies refill_buffers, as in fio. P=100: all zeros (or
//       buffer_pattern), fio's zero_buffers.
//   else buffer_pattern: the pattern repeated from the first byte of every buffer;
//   else zero_buffers: zeros;
//   else random bytes.
//   refill_buffers: the content is made anew for every write (new random bytes).
//   scramble_buffers (default on; off with zero_buffers, refill_buffers or a compress percentage): every
//       write changes one 8-byte word in each 4 KiB of the buffer (at a place that varies per write) to a
//       value unique to that write and 4 KiB, so no two written 4 KiB blocks are alike for a deduplicating
//       target. One store per 4 KiB (fio stores three words per 512-byte sector): O(1) for I/O up to 4 KiB.
// Pure and deterministic for a seed; no allocation after construction.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "initiator/bench/job_file.h"
#include "initiator/bench/workload.h"

namespace rdmablk::initiator::bench {

class BufferFiller {
 public:
  enum class Content : uint8_t { random, zeros, pattern, compressible };

  BufferFiller(const JobSpec& spec, uint64_t seed);

  // Once at start. buffer_size: the size of each I/O buffer inside all_buffers (0: one buffer), so that a
  // pattern starts at every buffer's first byte.
  void initial_fill(std::span<uint8_t> all_buffers, std::size_t buffer_size = 0) noexcept;
  // refill_buffers, a compress percentage or scramble_buffers need work before every write: fill().
  bool refill_each_write() const noexcept { return refill_ || scramble_; }
  // Per write when refill_each_write(): new content (refill) or a scramble of the buffer's content.
  void fill(std::span<uint8_t> buf) noexcept;
  // The configured content anew, whatever the buffer held (e.g. a read landed in a buffer that will be
  // written next).
  void restore(std::span<uint8_t> buf) noexcept;

  Content content() const noexcept { return content_; }
  bool refills() const noexcept { return refill_; }
  bool scrambles() const noexcept { return scramble_; }

 private:
  void random_bytes(uint8_t* p, std::size_t n) noexcept;
  void fixed_bytes(uint8_t* p, std::size_t n) const noexcept;  // zeros or the pattern from its start
  void scramble(std::span<uint8_t> buf) noexcept;

  Content content_ = Content::random;
  bool refill_ = false, scramble_ = false;
  unsigned compress_percent_ = 0;
  std::size_t compress_chunk_ = 0;  // 0 = the whole buffer
  std::vector<uint8_t> pattern_;
  uint64_t seed_ = 0, writes_ = 0;
  WorkloadRng rng_;
};

}  // namespace rdmablk::initiator::bench

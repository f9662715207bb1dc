// Shared by the libFuzzer harnesses (tests/fuzz/README.md).
#pragma once

#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

namespace rdmablk::fuzz {

// An invariant of the code under test: when it does not hold, the input is a finding. abort() is what
// libFuzzer reports as a crash (and writes the input out).
[[noreturn]] inline void invariant_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "INVARIANT FAILED at %s:%d: %s\n", file, line, what);
  std::abort();
}
#define FUZZ_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) ::rdmablk::fuzz::invariant_failed(#cond, __FILE__, __LINE__);            \
  } while (0)

#define FUZZ_FAIL(what) ::rdmablk::fuzz::invariant_failed(what, __FILE__, __LINE__)

// The code under test logs what it refuses; millions of refusals a minute would only slow the run.
inline void quiet_logs() { spdlog::set_level(spdlog::level::off); }

// Deterministic pseudo-random choices (chunk sizes, when to complete a send) that a harness derives from
// a seed taken from the input, so that the stream itself stays byte-for-byte what the input says.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }
  // Uniform-ish in [lo, hi].
  uint64_t range(uint64_t lo, uint64_t hi) { return lo + next() % (hi - lo + 1); }
  bool one_in(unsigned n) { return next() % n == 0; }

 private:
  uint64_t s_;
};

}  // namespace rdmablk::fuzz

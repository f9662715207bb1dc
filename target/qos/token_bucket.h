// A token bucket shared by every reactor, refilled by the steady clock, from which each reactor takes small
// batches into an allowance of its own (SPDK's per-bdev QoS, without its owner thread): the common case of a
// command is a subtraction from the reactor's allowance, no lock and no write to a shared line; a reactor
// touches the shared bucket (two or three atomic operations) once per batch, about once a millisecond of
// the rate.
//
// Units: the bucket counts micro-tokens (a token is a command or a byte; 10^6 micro-tokens each), so a
// refill adds rate x elapsed microseconds exactly and no fraction is lost however often it runs.
//
// Burst: the bucket holds at most kBurstUs of its rate; a command that costs more than there is still goes
// once the bucket is positive, leaving it in debt (negative) until the refills pay it back, so a command
// bigger than the burst is never stuck. Over any interval T the tokens granted are at most rate x T + the
// burst + one batch per reactor + one command.
#pragma once

#include <atomic>
#include <cstdint>

namespace rdmablk::target::qos {

inline constexpr int64_t kMicro = 1'000'000;   // micro-tokens per token
inline constexpr uint64_t kBurstUs = 10'000;   // the bucket holds up to 10 ms of its rate
inline constexpr uint64_t kBatchUs = 1'000;    // a reactor takes 1 ms of the rate at a time

class SharedBucket {
 public:
  // The rate in tokens per second, 0 = unlimited. Thread-safe; the tokens already there stay (capped at
  // the new burst by the next refill).
  void set_rate(uint64_t per_sec) noexcept { rate_.store(per_sec, std::memory_order_relaxed); }
  uint64_t rate() const noexcept { return rate_.load(std::memory_order_relaxed); }

  // Takes `want` micro-tokens (> 0) for a reactor's allowance, refilling first: true when granted. A grant is
  // all or nothing; it is made whenever the bucket is positive, and may leave it in debt.
  bool take(int64_t want, uint64_t now_ns) noexcept;
  // Micro-tokens in the bucket now (may be negative); for tests and statistics.
  int64_t level() const noexcept { return tokens_.load(std::memory_order_relaxed); }

 private:
  void refill(uint64_t now_ns) noexcept;

  std::atomic<uint64_t> rate_{0};
  std::atomic<int64_t> tokens_{0};
  std::atomic<uint64_t> refilled_us_{0};  // the time (steady clock, us) the bucket is refilled up to; 0 = never
};

// One reactor's allowance from one SharedBucket: micro-tokens it took and has not spent. Reactor-local.
struct Allowance {
  int64_t tokens = 0;

  // Spends `cost` tokens (not micro) when the allowance has them, topping it up from `shared` by at least
  // one batch of its rate when it does not: true when spent. A command bigger than a batch takes its whole
  // cost at once (the bucket goes into debt).
  bool spend(SharedBucket& shared, uint64_t cost, uint64_t now_ns) noexcept {
    const int64_t c = static_cast<int64_t>(cost) * kMicro;
    if (tokens < c && !top_up(shared, c, now_ns)) return false;
    tokens -= c;
    return true;
  }
  // True when spend(cost) would succeed without taking from the shared bucket.
  bool has(uint64_t cost) const noexcept { return tokens >= static_cast<int64_t>(cost) * kMicro; }
  bool top_up(SharedBucket& shared, int64_t need, uint64_t now_ns) noexcept;
};

}  // namespace rdmablk::target::qos

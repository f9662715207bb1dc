#include "target/qos/token_bucket.h"

#include <algorithm>

namespace rdmablk::target::qos {

void SharedBucket::refill(uint64_t now_ns) noexcept {
  const uint64_t now_us = now_ns / 1000;
  uint64_t last = refilled_us_.load(std::memory_order_relaxed);
  if (now_us <= last) return;
  // One reactor refills a given interval: whoever moves the mark owns [last, now_us).
  if (!refilled_us_.compare_exchange_strong(last, now_us, std::memory_order_acq_rel)) return;
  const auto rate = static_cast<int64_t>(rate_.load(std::memory_order_relaxed));
  const int64_t cap = rate * static_cast<int64_t>(kBurstUs);
  if (rate == 0) return;
  // The first refill (last == 0) starts with a full burst. A long idle time fills the bucket at most: the
  // time counted is no more than it takes to fill it from where it is (a debt included), so no overflow.
  const int64_t before = std::min(tokens_.load(std::memory_order_relaxed), cap);
  const uint64_t to_fill = static_cast<uint64_t>((cap - before) / rate) + 1;
  const uint64_t elapsed = last == 0 ? kBurstUs : std::min<uint64_t>(now_us - last, to_fill);
  const int64_t add = rate * static_cast<int64_t>(elapsed);
  int64_t level = tokens_.fetch_add(add, std::memory_order_acq_rel) + add;
  while (level > cap && !tokens_.compare_exchange_weak(level, cap, std::memory_order_acq_rel)) {
  }
}

bool SharedBucket::take(int64_t want, uint64_t now_ns) noexcept {
  refill(now_ns);
  if (tokens_.load(std::memory_order_relaxed) <= 0) return false;
  if (tokens_.fetch_sub(want, std::memory_order_acq_rel) > 0) return true;
  tokens_.fetch_add(want, std::memory_order_acq_rel);  // another reactor emptied it meanwhile: give it back
  return false;
}

bool Allowance::top_up(SharedBucket& shared, int64_t need, uint64_t now_ns) noexcept {
  const int64_t batch = static_cast<int64_t>(shared.rate()) * static_cast<int64_t>(kBatchUs);
  const int64_t want = std::max(need - tokens, batch);
  if (!shared.take(want, now_ns)) return false;
  tokens += want;
  return true;
}

}  // namespace rdmablk::target::qos

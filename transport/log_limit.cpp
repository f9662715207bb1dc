#include "transport/log_limit.h"

#include <atomic>
#include <chrono>
#include <cstdint>

namespace rdmablk::transport {

bool peer_error_log_allowed() noexcept {
  constexpr unsigned kLogBurst = 10;
  static std::atomic<int64_t> window{0};
  static std::atomic<unsigned> count{0};
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t w = window.load(std::memory_order_relaxed);
  if (w != now_s && window.compare_exchange_strong(w, now_s, std::memory_order_relaxed)) {
    count.store(0, std::memory_order_relaxed);
  }
  return count.fetch_add(1, std::memory_order_relaxed) < kLogBurst;
}

}  // namespace rdmablk::transport

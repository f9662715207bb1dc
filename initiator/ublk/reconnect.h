// When to try reconnecting after the connection under an attached volume was lost, and when to give up
// holding I/O. Like the kernel host's ctrl_loss_tmo / reconnect_delay, with a backoff in front: the first
// attempt at once (a target restart is the common case), then 1 s, 2 s, 4 s, ... capped at the reconnect
// delay. Past the loss timeout the volume fails I/O (but keeps trying, so it recovers when the target is
// back). Pure: the caller passes the clock.
#pragma once

#include <algorithm>
#include <chrono>

namespace rdmablk::initiator::ublk {

class ReconnectPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  // loss_timeout < 0: hold I/O forever.
  ReconnectPolicy(std::chrono::seconds loss_timeout, std::chrono::seconds max_delay)
      : loss_timeout_(loss_timeout), max_delay_(std::max(max_delay, std::chrono::seconds(1))) {}

  void lost(Clock::time_point now) {
    lost_at_ = now;
    next_ = now;
    delay_ = std::chrono::seconds(1);
    down_ = true;
  }
  void attempt_failed(Clock::time_point now) {
    next_ = now + delay_;
    delay_ = std::min(delay_ * 2, max_delay_);
  }
  void reconnected() { down_ = false; }

  bool down() const noexcept { return down_; }
  bool due(Clock::time_point now) const noexcept { return down_ && now >= next_; }
  Clock::time_point next_attempt() const noexcept { return next_; }
  // Held I/O must fail from now on.
  bool expired(Clock::time_point now) const noexcept {
    return down_ && loss_timeout_.count() >= 0 && now - lost_at_ >= loss_timeout_;
  }

 private:
  std::chrono::seconds loss_timeout_;
  std::chrono::seconds max_delay_;
  std::chrono::seconds delay_{1};
  Clock::time_point lost_at_{};
  Clock::time_point next_{};
  bool down_ = false;
};

}  // namespace rdmablk::initiator::ublk

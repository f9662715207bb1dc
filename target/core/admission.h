// The admission gate: whether a host may open a controller of a subsystem (its allow-list, its DH-HMAC-CHAP
// secret when the subsystem requires authentication) and the hosts refused for a while after failing
// DH-HMAC-CHAP too often, with the throttled log of those failures.
//
// Locking: its own mutex guards the failure records and the log throttle; it calls nothing outside itself
// with it held but spdlog and the `log_line` of record_failure. The Subsystem given to admit() is the
// caller's to guard (the core's control lock): the gate only reads it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace rdmablk::target {

struct HostAuth;
struct Subsystem;

// What one host NQN may fail at DH-HMAC-CHAP before its Connects are refused for a while.
struct AuthFailureLimits {
  uint32_t max_failures = 10;                         // failed transactions within `window` ...
  std::chrono::milliseconds window{60'000};
  std::chrono::milliseconds block{300'000};           // ... refuse the host's Connects this long
  uint32_t log_lines_per_second = 10;                 // failure log lines over all hosts; the rest are counted
  // The clock (steady); tests move it by hand. Empty: std::chrono::steady_clock.
  std::function<std::chrono::steady_clock::time_point()> now;
};

// Why admit() refused a host (none: admitted).
enum class AdmissionRefusal : uint8_t {
  none,
  host_not_allowed,  // not on the subsystem's allow-list
  no_secret,         // the subsystem requires authentication and the host has no DH-HMAC-CHAP secret
  blocked,           // failed DH-HMAC-CHAP too often recently
};

struct AdmissionDecision {
  AdmissionRefusal refusal = AdmissionRefusal::none;
  std::shared_ptr<const HostAuth> auth;  // admitted: the host's settings when it must authenticate, else null
};

class AdmissionGate {
 public:
  explicit AdmissionGate(AuthFailureLimits limits) : limits_(std::move(limits)) {}

  // May `hostnqn` connect to `sub`? An admin queue's Connect (`admin`) also needs a secret when the
  // subsystem requires authentication; an I/O queue's takes its controller's settings. Checked in that
  // order: allow-list, secret, block.
  AdmissionDecision admit(const Subsystem& sub, std::string_view hostnqn, bool admin);

  // True (and logs once per block) while a host is refused for failing authentication too often.
  bool blocked(const std::string& hostnqn);

  // Counts a new DH-HMAC-CHAP failure of `hostnqn`: runs `log_line` (the caller's description of it) unless
  // more than log_lines_per_second failures were logged this second (those are counted and summed up in the
  // next second's first line); starts a block when the host reached max_failures within the window.
  void record_failure(const std::string& hostnqn, const std::function<void()>& log_line);

  std::chrono::steady_clock::time_point now() const {
    return limits_.now ? limits_.now() : std::chrono::steady_clock::now();
  }

 private:
  bool blocked_locked(const std::string& hostnqn);

  struct FailureRecord {
    std::deque<std::chrono::steady_clock::time_point> recent;  // within the window
    std::chrono::steady_clock::time_point blocked_until{};
    bool block_logged = false;
  };

  const AuthFailureLimits limits_;
  std::mutex mu_;  // everything below
  std::map<std::string, FailureRecord, std::less<>> failures_;  // per host NQN
  std::chrono::steady_clock::time_point log_second_{};
  uint32_t log_lines_ = 0;
  uint64_t log_suppressed_ = 0;
};

}  // namespace rdmablk::target

// The admission gate (admission.h): allow-list, required secret, and the block after repeated DH-HMAC-CHAP
// failures.
#include "target/core/admission.h"

#include <spdlog/spdlog.h>

#include "target/core/subsystem.h"

namespace rdmablk::target {

AdmissionDecision AdmissionGate::admit(const Subsystem& sub, std::string_view hostnqn, bool admin) {
  AdmissionDecision d;
  if (!sub.host_allowed(hostnqn)) {
    d.refusal = AdmissionRefusal::host_not_allowed;
    return d;
  }
  if (admin) {
    d.auth = sub.auth_for(hostnqn);
    if (!d.auth && sub.require_authentication) {
      d.refusal = AdmissionRefusal::no_secret;
      return d;
    }
  }
  if (blocked(std::string(hostnqn))) {
    d.refusal = AdmissionRefusal::blocked;
    d.auth.reset();
  }
  return d;
}

bool AdmissionGate::blocked(const std::string& hostnqn) {
  std::lock_guard lock(mu_);
  return blocked_locked(hostnqn);
}

bool AdmissionGate::blocked_locked(const std::string& hostnqn) {
  auto it = failures_.find(hostnqn);
  if (it == failures_.end()) return false;
  FailureRecord& rec = it->second;
  if (rec.blocked_until == std::chrono::steady_clock::time_point{} || now() >= rec.blocked_until) return false;
  if (!rec.block_logged) {
    rec.block_logged = true;
    spdlog::warn("host {}: {} DH-HMAC-CHAP failures within {} s: its connections are refused for {} s", hostnqn,
                 limits_.max_failures, std::chrono::duration_cast<std::chrono::seconds>(limits_.window).count(),
                 std::chrono::duration_cast<std::chrono::seconds>(limits_.block).count());
  }
  return true;
}

void AdmissionGate::record_failure(const std::string& host, const std::function<void()>& log_line) {
  const auto now = this->now();
  std::lock_guard lock(mu_);
  // Bounded memory: forget hosts with no recent failure and no block when the table grows large.
  if (failures_.size() >= 4096 && failures_.find(host) == failures_.end()) {
    std::erase_if(failures_, [&](const auto& e) {
      return e.second.blocked_until <= now && (e.second.recent.empty() || e.second.recent.back() + limits_.window <= now);
    });
  }
  FailureRecord& rec = failures_[host];
  while (!rec.recent.empty() && rec.recent.front() + limits_.window <= now) rec.recent.pop_front();
  rec.recent.push_back(now);

  // One line per failure, at most log_lines_per_second over all hosts (the others are counted).
  if (now - log_second_ >= std::chrono::seconds(1)) {
    if (log_suppressed_ != 0) spdlog::warn("{} more DH-HMAC-CHAP failures were not logged", log_suppressed_);
    log_second_ = now;
    log_lines_ = 0;
    log_suppressed_ = 0;
  }
  if (log_lines_ < limits_.log_lines_per_second) {
    ++log_lines_;
    if (log_line) log_line();
  } else {
    ++log_suppressed_;
  }
  if (limits_.max_failures != 0 && rec.recent.size() >= limits_.max_failures) {
    rec.recent.clear();
    rec.blocked_until = now + limits_.block;
    rec.block_logged = false;
    (void)blocked_locked(host);  // logs the block
  }
}

}  // namespace rdmablk::target

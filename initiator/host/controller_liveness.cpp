// What keeps a controller alive and informed between commands: Keep Alive every KATO/2 and one
// Asynchronous Event Request outstanding (ANA Change notices), both driven by service() from the
// owner's poll loop without blocking.
#include <fmt/format.h>

#include <cstring>

#include "initiator/host/controller.h"

namespace rdmablk::initiator {

using namespace std::chrono_literals;
using protocol::Cqe;
using transport::HostCommand;

void Controller::on_keep_alive(HostCommand& cmd, const Cqe& cqe) noexcept {
  auto* self = static_cast<Controller*>(cmd.context);
  self->keep_alive_outstanding_ = false;
  if (!cqe.get_status().ok() && !self->failed_) {
    self->failed_ = true;
    try {
      self->failure_ = self->where() + ": Keep Alive failed: " + describe_status(cqe.get_status());
    } catch (...) {
    }
  }
}

void Controller::on_async_event(HostCommand& cmd, const Cqe& cqe) noexcept {
  auto* self = static_cast<Controller*>(cmd.context);
  self->aer_outstanding_ = false;
  const protocol::Status st = cqe.get_status();
  if (!st.ok()) {
    // Refused (Asynchronous Event Request Limit Exceeded, or unsupported) or the connection closing:
    // re-arming would only repeat it. Keep-alive decides whether the controller is alive.
    self->aer_enabled_ = false;
    return;
  }
  const uint32_t dw0 = cqe.dw0.get();
  if (protocol::async_event_type(dw0) == protocol::AsyncEventType::notice &&
      protocol::async_event_info(dw0) == static_cast<uint8_t>(protocol::AsyncEventNotice::ana_change)) {
    self->ana_changed_ = true;
  }
}

void Controller::arm_async_event() noexcept {
  if (!aer_enabled_ || aer_outstanding_ || !admin_ || failed_) return;
  aer_cmd_ = HostCommand{};
  aer_cmd_.sqe = protocol::make_async_event_request(0);
  aer_cmd_.on_complete = &on_async_event;
  aer_cmd_.context = this;
  if (admin_->submit(aer_cmd_).ok()) aer_outstanding_ = true;
}

Result<void> Controller::enable_ana_events() {
  auto cmd = protocol::make_set_features(0, protocol::FeatureId::async_event_configuration, protocol::kAecAnaChange);
  auto r = admin(protocol::to_sqe(cmd));
  if (!r) return tl::unexpected(r.error());
  aer_enabled_ = true;
  arm_async_event();
  return {};
}

void Controller::service() noexcept {
  if (!admin_ || failed_) return;
  if (opts_.kato_ms == 0 && !aer_enabled_ && !aer_outstanding_) return;
  if (keep_alive_outstanding_ || aer_outstanding_) {
    int rc = admin_->poll(0, 0ms);
    if (rc < 0) {
      failed_ = true;
      try {
        failure_ = fmt::format("{}: admin queue lost ({})", where(), std::strerror(-rc));
      } catch (...) {
      }
      return;
    }
  }
  auto now = std::chrono::steady_clock::now();
  if (opts_.kato_ms != 0 && keep_alive_outstanding_ && now - keep_alive_sent_ >= std::chrono::milliseconds(opts_.kato_ms)) {
    // A target that stopped answering (frozen, or a black-holed path with the TCP connection still up)
    // must not hold the host forever: the Linux host gives up after one KATO too.
    failed_ = true;
    try {
      failure_ = fmt::format("{}: Keep Alive unanswered for {} ms", where(), opts_.kato_ms);
    } catch (...) {
    }
    return;
  }
  arm_async_event();
  if (opts_.kato_ms == 0 || keep_alive_outstanding_ || now < next_keep_alive_) return;
  keep_alive_cmd_ = HostCommand{};
  keep_alive_cmd_.sqe = protocol::make_keep_alive(0);
  keep_alive_cmd_.on_complete = &on_keep_alive;
  keep_alive_cmd_.context = this;
  if (admin_->submit(keep_alive_cmd_).ok()) {
    keep_alive_outstanding_ = true;
    keep_alive_sent_ = now;
  }
  next_keep_alive_ = now + std::chrono::milliseconds(opts_.kato_ms / 2);
}

}  // namespace rdmablk::initiator

// The reservations of one namespace as the core runs them (namespace_reservations.h).
#include "target/reservations/namespace_reservations.h"

#include <spdlog/spdlog.h>

namespace rdmablk::target::reservations {

namespace st = protocol::status;

NamespaceReservations::NamespaceReservations(std::unique_ptr<ReservationStore> store, std::string label)
    : store_(std::move(store)), label_(std::move(label)) {}

void NamespaceReservations::load() {
  if (store_ == nullptr) return;
  auto saved = store_->load();
  std::lock_guard lock(mu_);
  state_ = ReservationState{};
  if (!saved) {
    spdlog::error("{}: reservations: {}; starting without reservations", label_, saved.error().message);
  } else if (saved->has_value() && (*saved)->ptpl) {
    state_ = std::move(**saved);
    spdlog::info("{}: reservations restored: {} registrant(s), type {}, generation {}", label_,
                 state_.registrants.size(), static_cast<int>(state_.type), state_.generation);
  }
  reserved_.store(state_.type != ReservationType::none, std::memory_order_release);
}

uint8_t NamespaceReservations::rescap() const noexcept {
  const auto all = static_cast<uint8_t>(protocol::rescap::kAll & ~protocol::rescap::kPersistThroughPowerLoss);
  return static_cast<uint8_t>(all | (ptpl_supported() ? protocol::rescap::kPersistThroughPowerLoss : 0));
}

protocol::Status NamespaceReservations::check_locked(const HostId& host, Access access) const noexcept {
  std::lock_guard lock(mu_);
  return check_access(state_, host, access);
}

template <typename Command>
Outcome NamespaceReservations::run(Command&& command) {
  std::lock_guard lock(mu_);
  const ReservationState before = state_;
  Outcome out = command(state_);
  // PTPL cleared before and after: nothing is saved, so nothing to write (the store holds no file then).
  const bool persisted = before.ptpl || state_.ptpl;
  if (out.changed && store_ != nullptr && persisted) {
    if (auto saved = store_->save(state_); !saved) {
      spdlog::error("{}: reservations: {}; the command fails and the state stays as it was", label_,
                    saved.error().message);
      state_ = before;
      Outcome failed;
      failed.status = st::internal_error;
      return failed;
    }
  }
  reserved_.store(state_.type != ReservationType::none, std::memory_order_release);
  return out;
}

Outcome NamespaceReservations::register_key(const HostId& host, const RegisterRequest& req) {
  return run([&](ReservationState& s) { return reservation_register(s, host, req, ptpl_supported()); });
}

Outcome NamespaceReservations::acquire(const HostId& host, const AcquireRequest& req) {
  return run([&](ReservationState& s) { return reservation_acquire(s, host, req); });
}

Outcome NamespaceReservations::release(const HostId& host, const ReleaseRequest& req) {
  return run([&](ReservationState& s) { return reservation_release(s, host, req); });
}

Outcome NamespaceReservations::set_ptpl(bool ptpl) {
  return run([&](ReservationState& s) { return reservations::set_ptpl(s, ptpl, ptpl_supported()); });
}

bool NamespaceReservations::ptpl() const {
  std::lock_guard lock(mu_);
  return state_.ptpl;
}

tl::expected<std::vector<uint8_t>, protocol::Status> NamespaceReservations::report(
    std::span<const ControllerOfHost> controllers, bool extended, uint64_t max_bytes) const {
  std::lock_guard lock(mu_);
  return build_report(state_, controllers, extended, max_bytes);
}

ReservationState NamespaceReservations::snapshot() const {
  std::lock_guard lock(mu_);
  return state_;
}

}  // namespace rdmablk::target::reservations

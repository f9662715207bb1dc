// The reservations of one namespace as the core runs them (namespace_reservations.h).
#include "target/reservations/namespace_reservations.h"

#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include <algorithm>

#include "target/reservations/state_format.h"

namespace rdmablk::target::reservations {

namespace st = protocol::status;

NamespaceReservations::NamespaceReservations(std::unique_ptr<ReservationStore> store, std::string label)
    : store_(std::move(store)), label_(std::move(label)) {}

NamespaceReservations::~NamespaceReservations() {
  shared_ = nullptr;
  store_.reset();
}

void NamespaceReservations::load() {
  if (shared_ != nullptr) {
    refresh_shared();
    return;
  }
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

namespace {

Outcome internal_error() {
  Outcome failed;
  failed.status = st::internal_error;
  return failed;
}

}  // namespace

template <typename Command>
Outcome NamespaceReservations::run(Command&& command) {
  if (shared_ != nullptr) return run_shared(std::forward<Command>(command));
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
      return internal_error();
    }
  }
  reserved_.store(state_.type != ReservationType::none, std::memory_order_release);
  return out;
}

namespace {

constexpr int kSharedAttempts = 16;
constexpr std::chrono::milliseconds kSharedNotifyTimeout{10'000};

}  // namespace

bool NamespaceReservations::share(GroupListener listener) {
  backend::RadosObject* object = store_ != nullptr ? store_->shared_object() : nullptr;
  if (object == nullptr) return false;
  if (auto c = object->create(); !c) {
    spdlog::error("{}: reservations: {}; not shared with the group", label_, c.error().message);
    return false;
  }
  if (auto w = object->watch([this](bool lost) {
        if (lost) watch_lost_ = true;
        refresh_shared();
      });
      !w) {
    spdlog::error("{}: reservations: {}; not shared with the group", label_, w.error().message);
    return false;
  }
  listener_ = std::move(listener);
  shared_ = object;
  return true;
}

Result<ReservationState> NamespaceReservations::read_shared(backend::RadosObject::Snapshot* seen,
                                                            std::vector<GroupEvent>* events) const {
  auto snap = shared_->read();
  if (!snap) return tl::unexpected(snap.error());
  ReservationState state;
  events->clear();
  if (snap->exists && !snap->bytes.empty()) {
    auto parsed = parse_state(snap->bytes, events);
    if (!parsed) {
      return make_error(fmt::format("{}: not a reservation state ({})", shared_->object(),
                                    state_format_problem_name(parsed.error().problem)),
                        EINVAL);
    }
    state = std::move(*parsed);
  }
  *seen = std::move(*snap);
  return state;
}

void NamespaceReservations::recheck_shared() {
  if (shared_ == nullptr) return;
  if (watch_lost_.exchange(false)) {
    if (auto w = shared_->rewatch(); !w) {
      watch_lost_ = true;
      spdlog::error("{}: reservations: {}; rereading it every few seconds", label_, w.error().message);
    }
  }
  refresh_shared();
}

// On a librados thread (the watch), at load() and at recheck_shared(). In a group the state is kept whatever PTPL says: a
// member that restarts is not the subsystem losing power.
void NamespaceReservations::refresh_shared() {
  backend::RadosObject::Snapshot seen;
  std::vector<GroupEvent> events;
  auto state = read_shared(&seen, &events);
  if (!state) {
    spdlog::error("{}: reservations: {}; keeping the state known here", label_, state.error().message);
    return;
  }
  std::vector<GroupEvent> fresh;
  {
    std::lock_guard lock(mu_);
    state_ = std::move(*state);
    reserved_.store(state_.type != ReservationType::none, std::memory_order_release);
    fresh = take_new_events_locked(events);
  }
  if (!fresh.empty() && listener_) listener_(fresh);
}

std::vector<GroupEvent> NamespaceReservations::take_new_events_locked(const std::vector<GroupEvent>& events) {
  std::vector<GroupEvent> fresh;
  if (events.empty()) {
    events_read_ = true;
    return fresh;
  }
  const bool first = !events_read_;
  events_read_ = true;
  // Sequence numbers wrap: newer = ahead by less than half the space.
  const auto newer = [](uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; };
  for (const GroupEvent& e : events) {
    if (first || !newer(e.seq, last_event_)) continue;
    if (std::find(own_events_.begin(), own_events_.end(), e.seq) == own_events_.end()) fresh.push_back(e);
  }
  if (first || newer(events.back().seq, last_event_)) last_event_ = events.back().seq;
  std::erase_if(own_events_, [&](uint32_t seq) { return !newer(seq, last_event_); });
  return fresh;
}

namespace {

// The events a command adds for the other members, numbered after `events`' newest (or `last` without any).
void append_command_events(std::vector<GroupEvent>& events, uint32_t last, const Outcome& out) {
  uint32_t seq = events.empty() ? last : events.back().seq;
  for (const Notice& n : out.notices) events.push_back({++seq, n.host, n.type});
  for (const HostId& h : out.abort_hosts) events.push_back({++seq, h, ReservationNotice::empty});
  if (events.size() > kMaxGroupEvents)
    events.erase(events.begin(), events.end() - static_cast<std::ptrdiff_t>(kMaxGroupEvents));
}

}  // namespace

template <typename Command>
Outcome NamespaceReservations::run_shared(Command&& command) {
  std::unique_lock lock(mu_);
  for (int attempt = 0; attempt < kSharedAttempts; ++attempt) {
    backend::RadosObject::Snapshot seen;
    std::vector<GroupEvent> events;
    auto current = read_shared(&seen, &events);
    if (!current) {
      spdlog::error("{}: reservations: {}; the command fails", label_, current.error().message);
      return internal_error();
    }
    ReservationState next = *current;
    Outcome out = command(next);
    std::vector<GroupEvent> all = events;
    if (out.changed) {
      append_command_events(all, last_event_, out);
      const std::vector<uint8_t> bytes = serialize_state(next, all);
      auto written = shared_->write_if(seen, bytes);
      if (!written && written.error().errno_value == ECANCELED) continue;  // another member was first: again
      if (!written) {
        spdlog::error("{}: reservations: {}; the command fails and the state stays as it was", label_,
                      written.error().message);
        return internal_error();
      }
    }
    state_ = out.changed ? std::move(next) : std::move(*current);
    reserved_.store(state_.type != ReservationType::none, std::memory_order_release);
    // This member's own events (the newest of `all`) reach its controllers from the command: the watch passes
    // them over.
    const std::size_t added = out.changed ? std::min(all.size(), out.notices.size() + out.abort_hosts.size()) : 0;
    for (std::size_t i = all.size() - added; i < all.size(); ++i) own_events_.push_back(all[i].seq);
    lock.unlock();
    // Every member has taken the change in when this returns: what the host is told next holds everywhere.
    if (out.changed) {
      if (auto n = shared_->notify(kSharedNotifyTimeout); !n)
        spdlog::warn("{}: reservations: {}", label_, n.error().message);
    }
    return out;
  }
  spdlog::error("{}: reservations: {} conflicting changes in a row; the command fails", label_, kSharedAttempts);
  return internal_error();
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

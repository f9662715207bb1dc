// The reservations of one namespace as the target core runs them: the model's state (reservation_model.h)
// behind a small lock of its own, the store that keeps it across a power loss (ptpl_store.h), and the one
// atomic the I/O path reads.
//
// The I/O path pays one relaxed-acquire load per command while no reservation is held: without a
// reservation every host may read and write whatever it registered (the access table has no row for "no
// reservation"), so check() only takes the lock while a reservation exists. The reservation commands run
// one at a time under the lock; one that changed the state saves it before it answers, and when the save
// fails the state goes back to what it was and the command fails (Internal Error): a host is never told that
// a registration took when a restart would lose it.
//
// Shared by every Namespace object of one namespace (a resize makes another with the same reservations); a
// reload that replaces a namespace's backend starts it from its saved state.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backend/rados_object.h"
#include "target/reservations/ptpl_store.h"
#include "target/reservations/reservation_model.h"

namespace rdmablk::target::reservations {

class NamespaceReservations {
 public:
  // `store`: where the state persists; null = the namespace cannot persist it (RESCAP PTPL cleared, CPTPL
  // set refused). `label` names the namespace in log lines ("nqn.x ns 1").
  NamespaceReservations(std::unique_ptr<ReservationStore> store, std::string label);
  ~NamespaceReservations();  // the store (and its watch) first: no callback runs on a half-destroyed object
  NamespaceReservations(const NamespaceReservations&) = delete;
  NamespaceReservations& operator=(const NamespaceReservations&) = delete;

  // A gateway group member: this namespace's state is the group's, in the store's shared object (RBD), read
  // before and written with a version check by every command, and watched. False when the store has no
  // shared object (the namespace keeps its own state). Before load().
  bool share();
  // Reads the saved state (at open). An unusable saved state is logged and the namespace starts without
  // reservations (ptpl_store.h's recovery rules); a state saved with PTPL cleared is not kept either.
  void load();

  bool ptpl_supported() const noexcept { return store_ != nullptr; }
  // Identify Namespace RESCAP.
  uint8_t rescap() const noexcept;

  // The I/O path: may `host` do `access` now? Reservation Conflict where the access table says so.
  protocol::Status check(const HostId& host, Access access) const noexcept {
    if (access == Access::none || !reserved_.load(std::memory_order_acquire)) return protocol::status::success;
    return check_locked(host, access);
  }

  // The commands (reservation_model.h); they save the state when it changed.
  Outcome register_key(const HostId& host, const RegisterRequest& req);
  Outcome acquire(const HostId& host, const AcquireRequest& req);
  Outcome release(const HostId& host, const ReleaseRequest& req);
  Outcome set_ptpl(bool ptpl);
  bool ptpl() const;
  tl::expected<std::vector<uint8_t>, protocol::Status> report(std::span<const ControllerOfHost> controllers,
                                                              bool extended, uint64_t max_bytes) const;
  ReservationState snapshot() const;

 private:
  protocol::Status check_locked(const HostId& host, Access access) const noexcept;
  // Runs `command` on the state under the lock and saves a changed state (see the class comment).
  template <typename Command>
  Outcome run(Command&& command);
  // run() for a shared state: read, decide, write if unchanged meanwhile (else again), notify the members.
  template <typename Command>
  Outcome run_shared(Command&& command);
  // The shared object's current state (none when absent or empty); the snapshot it came from in *seen.
  Result<ReservationState> read_shared(backend::RadosObject::Snapshot* seen) const;
  void refresh_shared();  // a member changed it: take it in (on a librados thread)

  mutable std::mutex mu_;
  ReservationState state_;
  std::atomic<bool> reserved_{false};  // state_.type != none, for check()'s fast path
  std::unique_ptr<ReservationStore> store_;
  backend::RadosObject* shared_ = nullptr;  // the group's state (share()), owned by store_
  std::string label_;
};

}  // namespace rdmablk::target::reservations

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
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backend/rados_object.h"
#include "target/reservations/ptpl_store.h"
#include "target/reservations/reservation_model.h"
#include "target/reservations/state_format.h"

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
  //
  // A command's notices and preempted hosts are written with the state as events (state_format.h
  // GroupEvent); every other member passes the events it had not seen to its listener from the watch, before
  // it acknowledges the notification: its controllers of those hosts get their notices, and the writes of a
  // preempted host end there too, before the Acquire completes through the member it came through.
  using GroupListener = std::function<void(std::span<const GroupEvent> events)>;
  bool share(GroupListener listener = {});
  // A group member's periodic check (DaemonGroup): rereads the shared state, after setting a broken watch up
  // again, so that a change whose notification never came (its member died between storing it and
  // notifying) holds here too. Nothing without a shared state.
  void recheck_shared();
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
  // The shared object's current state (none when absent or empty) and events; the snapshot it came from in
  // *seen.
  Result<ReservationState> read_shared(backend::RadosObject::Snapshot* seen, std::vector<GroupEvent>* events) const;
  void refresh_shared();  // a member changed it: take it in (on a librados thread)
  // The events of `events` the watch had not brought yet, except this member's own (mu_ held); the first
  // read takes them all as seen.
  std::vector<GroupEvent> take_new_events_locked(const std::vector<GroupEvent>& events);

  mutable std::mutex mu_;
  ReservationState state_;
  std::atomic<bool> reserved_{false};  // state_.type != none, for check()'s fast path
  std::unique_ptr<ReservationStore> store_;
  backend::RadosObject* shared_ = nullptr;  // the group's state (share()), owned by store_
  std::atomic<bool> watch_lost_{false};      // the watch broke: recheck_shared() sets it up again
  GroupListener listener_;                   // share()'s
  bool events_read_ = false;                 // under mu_: the shared events were read once
  uint32_t last_event_ = 0;                  // under mu_: the newest event the watch brought
  std::vector<uint32_t> own_events_;         // under mu_: events written here, newer than last_event_
  std::string label_;
};

}  // namespace rdmablk::target::reservations

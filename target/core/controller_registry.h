// The controllers of the target by controller ID (CNTLID): allocation of the IDs from a subsystem's range
// (the discovery controllers from the whole range), lookup, removal, and the asynchronous events queued on
// one controller.
//
// Locking: none of its own. It is guarded by the core's control lock (TargetCore::mu_), like the (mu) fields
// of the Controllers it holds: teardown, events and reloads walk it together with them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "target/core/controller.h"

namespace rdmablk::target {

// Events queued on `ctrl` up to `upto` (its event_seq then) may go out: delivered on its admin queue's
// thread. The list a change collects while it queues (EventReleases) is released this way once the change
// is in effect everywhere.
struct EventRelease {
  std::shared_ptr<Controller> ctrl;
  uint64_t upto = 0;
};
using EventReleases = std::vector<EventRelease>;

class ControllerRegistry {
 public:
  using Map = std::map<uint16_t, std::shared_ptr<Controller>>;

  // A free controller ID in [min, max] (within kMinCntlid..kMaxCntlid), searching from `next` (advanced
  // past it, wrapping around to min); 0 when all are taken. IDs are unique across the target.
  uint16_t allocate(uint16_t min, uint16_t max, uint16_t& next) const noexcept;
  // The same for a discovery controller: the whole range, from the registry's own cursor.
  uint16_t allocate_discovery() noexcept { return allocate(kMinCntlid, kMaxCntlid, next_discovery_); }

  void add(std::shared_ptr<Controller> ctrl);  // under its cntlid, which allocate() returned
  void remove(uint16_t cntlid) noexcept { controllers_.erase(cntlid); }
  std::shared_ptr<Controller> find(uint16_t cntlid) const;
  std::size_t size() const noexcept { return controllers_.size(); }

  // In CNTLID order. remove() invalidates only the iterator of the removed controller: a walk that tears
  // controllers down advances before it does (`auto ctrl = it++->second;`).
  Map::const_iterator begin() const noexcept { return controllers_.begin(); }
  Map::const_iterator end() const noexcept { return controllers_.end(); }

  // Queues an asynchronous event on `ctrl` unless it is dead, the host did not enable it (`aec_bit` of
  // AEC; 0: an event AEC has no bit for, always enabled) or one of its type (`mask_bit`) waits for its log
  // page to be read.
  static void queue_event(Controller& ctrl, uint32_t dw0, uint32_t mask_bit, uint32_t aec_bit);
  // Adds `changed` (sorted NSIDs) to the controller's Changed Namespace List and queues the Namespace
  // Attribute Changed event.
  static void note_changed_namespaces(Controller& ctrl, const std::vector<uint32_t>& changed);
  // The events queued on `ctrl` so far.
  static EventRelease release_of(const std::shared_ptr<Controller>& ctrl) { return {ctrl, ctrl->event_seq}; }

 private:
  Map controllers_;
  uint16_t next_discovery_ = kMinCntlid;
};

}  // namespace rdmablk::target

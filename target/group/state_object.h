// A gateway group's shared state (issue 28; docs/DESIGN.md "Gateway groups"): one RADOS object,
// rdmablk.group.GROUP, that every member reads whole, changes with an optimistic version check and
// watches for the others' changes.
//
// Why an object version and not a lock: a change is one small write, and two members changing the group
// at once must not both win. write_if() asserts the version the writer last read (the OSD compares and
// writes atomically), so the second writer gets a conflict, rereads and decides again; nobody waits on a
// lock that a dead member might hold. notify() then tells the watching members, and waits for their
// acknowledgements, so a change is applied everywhere before the API answers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backend/rados_cluster.h"
#include "protocol/result.h"
#include "target/group/group_place.h"

namespace rdmablk::target::group {

class StateObject {
 public:
  // The object as read: its bytes and version (exists = false: never written; version 0).
  struct Snapshot {
    bool exists = false;
    uint64_t version = 0;
    std::vector<uint8_t> bytes;
  };

  // Called on a librados thread when another member (or this one) notified a change, or when the watch
  // broke (`lost`: notifications may have been missed; rewatch(), then reread everything). Must not block
  // for long, nor call this object's watch functions.
  using Changed = std::function<void(bool lost)>;

  static Result<std::unique_ptr<StateObject>> open(std::shared_ptr<backend::RadosCluster> cluster, const GroupPlace& o);
  ~StateObject();  // unwatches and waits for a callback in flight
  StateObject(const StateObject&) = delete;
  StateObject& operator=(const StateObject&) = delete;

  Result<Snapshot> read();
  // Replaces the state with `bytes` if it is still as `seen` (same version; or still absent when `seen`
  // did not exist). The new version, or ECANCELED ("changed by another member since it was read").
  Result<uint64_t> write_if(const Snapshot& seen, std::span<const uint8_t> bytes);
  // Tells every watcher that the state changed; waits up to `timeout` for their acknowledgements
  // (ETIMEDOUT names no member: some did not answer in time).
  Result<void> notify(std::chrono::milliseconds timeout);
  // Creates the object empty unless it exists (a watch needs an object; empty reads as no state yet).
  Result<void> create();
  // Starts watching (once): `changed` runs on every notification.
  Result<void> watch(Changed changed);
  // After a lost watch: drops it and watches again with the same callback.
  Result<void> rewatch();

  const std::string& object() const noexcept { return object_; }

 private:
  StateObject(std::shared_ptr<backend::RadosCluster> cluster, rados_ioctx_t io, GroupPlace o);
  static void on_notify(void* arg, uint64_t notify_id, uint64_t handle, uint64_t notifier, void* data, size_t len);
  static void on_watch_error(void* arg, uint64_t handle, int err);

  std::shared_ptr<backend::RadosCluster> cluster_;  // outlives the ioctx
  rados_ioctx_t io_;
  GroupPlace place_;
  std::string object_;
  std::mutex version_mu_;  // rados_get_last_version is the ioctx's, not the call's
  Changed changed_;
  uint64_t watch_cookie_ = 0;
  bool watching_ = false;
};

// rdmablk.group.GROUP
std::string state_object_name(const std::string& group);

}  // namespace rdmablk::target::group

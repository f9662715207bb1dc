// A RADOS object that several processes read whole, change with an optimistic version check and watch
// for each other's changes: a gateway group's state (target/group/state_object.h) and, in a group, a
// shared namespace's reservation state (target/reservations/shared_store.h).
//
// Why an object version and not a lock: a change is one small write, and two writers at once must not
// both win. write_if() asserts the version the writer last read (the OSD compares and writes atomically),
// so the second writer gets a conflict, rereads and decides again; nobody waits on a lock that a dead
// process might hold. notify() then tells the watchers and waits for their acknowledgements, each sent
// after the watcher's callback ran, so a change has been taken in everywhere when notify() returns.
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

namespace rdmablk::backend {

class RadosObject {
 public:
  // The object as read: its bytes and version (exists = false: never written; version 0).
  struct Snapshot {
    bool exists = false;
    uint64_t version = 0;
    std::vector<uint8_t> bytes;
  };

  // Called on a librados thread when a watcher's notify() came (or this process's own), or when the watch
  // broke (`lost`: notifications may have been missed; rewatch(), then reread everything). Must not call
  // this object's watch functions.
  using Changed = std::function<void(bool lost)>;

  // Takes `io` (destroyed with the object). `what` and `where` name it in messages: "group state",
  // "rbd/rdmablk.group.g".
  RadosObject(std::shared_ptr<RadosCluster> cluster, rados_ioctx_t io, std::string oid, std::string what,
              std::string where);
  virtual ~RadosObject();  // unwatches and waits for a callback in flight
  RadosObject(const RadosObject&) = delete;
  RadosObject& operator=(const RadosObject&) = delete;

  Result<Snapshot> read();
  // Replaces the object with `bytes` if it is still as `seen` (same version; or still absent when `seen`
  // did not exist). The new version, or ECANCELED ("changed by another member since it was read").
  Result<uint64_t> write_if(const Snapshot& seen, std::span<const uint8_t> bytes);
  // Creates it empty unless it exists (a watch needs an object).
  Result<void> create();
  // Tells every watcher that it changed; waits up to `timeout` for their acknowledgements.
  Result<void> notify(std::chrono::milliseconds timeout);
  // Starts watching (once): `changed` runs on every notification.
  Result<void> watch(Changed changed);
  // After a lost watch: drops it and watches again with the same callback.
  Result<void> rewatch();

  const std::string& object() const noexcept { return object_; }

 private:
  static void on_notify(void* arg, uint64_t notify_id, uint64_t handle, uint64_t notifier, void* data, size_t len);
  static void on_watch_error(void* arg, uint64_t handle, int err);

  std::shared_ptr<RadosCluster> cluster_;  // outlives the ioctx
  rados_ioctx_t io_;
  std::string object_;
  std::string what_;
  std::string where_;
  std::mutex version_mu_;  // rados_get_last_version is the ioctx's, not the call's
  Changed changed_;
  uint64_t watch_cookie_ = 0;
  bool watching_ = false;
};

}  // namespace rdmablk::backend

// A gateway group's shared definition (issue 28; docs/gateway-groups.md): the management API's edits
// (subsystems, namespaces, hosts, masking, QoS) kept in the group's state object in RADOS
// (target/group/state_object.h) instead of each member's overlay file, and replayed by every member on its
// own YAML, which keeps what is local (listeners, reactors, control, metrics).
//
// A change through any member's API: read the state (version V), replay it with the new edit, write it
// only if the object is still at V (a member that lost the race gets a conflict and nothing of its change
// lands), apply it here, then notify: every member's watch wakes its control thread, which rereads and
// applies. A member that starts reads the state whole; a lost watch is set up again and the state reread;
// and the reader rereads it every few seconds anyway, so that a change whose notification never came (its
// member died between storing and notifying) still reaches every member.
// A state that does not parse or no longer applies is refused with a message, and the member keeps what
// it runs. The last state a member applied is kept in its overlay file, so that it can start when the
// state object is unreadable.
#pragma once

#include <nlohmann/json.hpp>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "protocol/result.h"
#include "target/config/config.h"
#include "target/group/state_object.h"
#include "target/manage/managed_config.h"

namespace rdmablk::target {

class GroupEdits {
 public:
  static Result<std::unique_ptr<GroupEdits>> open(const GroupConfig& group);
  ~GroupEdits();
  GroupEdits(const GroupEdits&) = delete;
  GroupEdits& operator=(const GroupEdits&) = delete;

  // `running` with the group's edits (its own replaced). An unreadable or invalid state is an error naming
  // the object; the caller keeps what it has.
  Result<manage::ManagedConfig> load(const manage::ManagedConfig& running);
  // A management verb for the whole group: the next state, stored in RADOS (ECANCELED when another member
  // changed the group since it was read; EINVAL for a verb that is local or a secret given inline).
  Result<manage::Proposal> propose(const manage::ManagedConfig& running, const std::string& verb,
                                   const nlohmann::json& params);
  // Tells the other members (waits a bounded time for their acknowledgement; a member that does not
  // answer rereads at its next periodic check).
  void notify_members();
  // The fd the control loop polls: readable when the reader thread has read a state newer than the one
  // applied (after a notification, a lost watch set up again, or its periodic reread).
  int fd() const noexcept { return fd_; }
  // Clears fd(); `running` with the newer state the reader thread read (nullopt: nothing new). An error: the
  // state does not parse or no longer applies (the caller keeps what it runs). No RADOS call: the control
  // thread never waits for the cluster here.
  std::optional<Result<manage::ManagedConfig>> take_change(const manage::ManagedConfig& running);
  // The version of the state `running` now has (after load(), propose() or take_change() was applied).
  void applied(uint64_t version);
  uint64_t last_version() const;
  const std::string& where() const noexcept { return where_; }

 private:
  explicit GroupEdits(std::unique_ptr<group::StateObject> object, std::string where);
  void read_loop();  // the reader thread: rewatches and rereads on each wake-up
  Result<manage::ManagedConfig> replay(const manage::ManagedConfig& running, const group::StateObject::Snapshot& s);

  std::unique_ptr<group::StateObject> object_;
  std::string where_;
  int fd_ = -1;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool notified_ = false;
  bool lost_ = false;
  bool stopping_ = false;
  group::StateObject::Snapshot last_;           // as this member last read or wrote it
  std::optional<group::StateObject::Snapshot> fresh_;  // read by the reader thread, not yet taken
  uint64_t applied_version_ = 0;
  std::thread reader_;
};

}  // namespace rdmablk::target

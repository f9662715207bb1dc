// The daemon's side of a gateway group (issue 28; docs/gateway-groups.md): it runs the group member
// (target/group/group_member.h) and turns what the member owns into ANA states on this target's io
// listeners: an owned group optimized, every other group of the group's in the standby state
// (inaccessible unless the config says non_optimized).
//
// Two paths set ANA states and must not undo each other: the member's thread (a takeover, a fence) calls
// the core's set_ana_state, and a reload or a management verb hands the core a whole config. Both go
// through hold(): the config the core gets carries the ownership of the moment (overlay_locked), and a
// change of ownership waits for a reload in progress and then applies on top of it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "protocol/result.h"
#include "target/config/config.h"
#include "target/group/group_member.h"

namespace rdmablk::target {

class TargetCore;

// The group's Ceph connection (the process's shared one for the same user, as the rbd namespaces use) and
// where its objects live. Errors start with "group: ".
Result<std::shared_ptr<backend::RadosCluster>> group_cluster(const GroupConfig& g);
group::GroupPlace group_place(const GroupConfig& g);

class DaemonGroup {
 public:
  // Sets `config`'s ANA states as a member that owns none of its groups yet sees them: every ANA group
  // a namespace uses or the member serves is inaccessible on every io listener. Before the core exists.
  static void start_fenced(TargetConfig& config);
  // Connects to the group's cluster and starts the member, which takes its lease on its own thread.
  // `config` is the config as the core applied it.
  static Result<std::unique_ptr<DaemonGroup>> start(const TargetConfig& config, TargetCore& core);
  ~DaemonGroup();  // stop(true)

  // Held while the core applies a new config: overlay_locked() gives it the current ownership, and
  // applied_locked() records the listeners it now has.
  std::unique_lock<std::mutex> hold() { return std::unique_lock(mu_); }
  void overlay_locked(TargetConfig& config) const;
  void applied_locked(const TargetConfig& config);
  // `ctl group status`.
  nlohmann::json status_json() const;
  // `ctl group handback MEMBER` (failback: manual).
  Result<void> hand_back(const std::string& member) { return member_->hand_back_now(member); }
  // Stops the member; `release`: hands its leases to the survivors at once (a clean shutdown).
  void stop(bool release);

 private:
  explicit DaemonGroup(TargetCore& core) : core_(core) {}
  void owned_changed(const group::GroupOwnership& o);
  void recheck_loop();  // the shared reservations, every kRecheck (recheck_shared_reservations)

  TargetCore& core_;
  protocol::AnaState standby_ = protocol::AnaState::inaccessible;  // the groups it does not own
  mutable std::mutex mu_;
  group::GroupOwnership ownership_;   // as last published by the member
  std::set<uint32_t> config_groups_;  // the ANA groups the config's namespaces use and its home groups
  std::vector<std::string> io_listeners_;  // "ADDR:PORT" of the io listeners the core has
  std::unique_ptr<group::GroupMember> member_;
  std::mutex recheck_mu_;
  std::condition_variable recheck_wake_;
  bool recheck_stopping_ = false;  // under recheck_mu_
  std::thread recheck_;
};

}  // namespace rdmablk::target

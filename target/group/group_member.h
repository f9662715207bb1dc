// A gateway group member at run time (issue 28; docs/gateway-groups.md): it holds its own lease, takes over
// the leases of members that died, hands them back when they return, and tells the daemon which ANA groups
// it serves as optimized.
//
// Ownership is lease holding: a member serves the home ANA groups of every member whose lease it holds
// (its own, and those it took over). The OSD lets one process hold a lease, so two members never both
// claim a group. Two locks live on each member's object: `lease` (who serves the member's groups) and
// `alive` (the member's own process is up; only it takes that one). A survivor takes over the lease of a
// member that is not alive once the lease lapsed, and blocklists that member's Ceph client first; with
// failback automatic it releases the lease again when the member is alive (it stops serving the groups
// before it releases).
//
// No split brain: each successful renewal extends the lease by `lease` from before the call, and a
// member stops serving a lease's groups `lease - fence_margin` after the start of its last successful
// renewal, on its own clock, whether or not the renewal call has returned (a partitioned member's call
// hangs until the op timeout). The OSD frees the lease no earlier than `lease` after it received that
// renewal, and a survivor takes it only then.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/rados_cluster.h"
#include "protocol/result.h"
#include "target/group/group_place.h"
#include "target/group/member_lease.h"
#include "target/group/member_registry.h"

namespace rdmablk::target::group {

enum class Failback : uint8_t { automatic, manual };
const char* failback_name(Failback f) noexcept;

struct GroupMemberOptions {
  GroupPlace place;
  std::string member;
  std::vector<uint32_t> home_groups;  // the ANA groups this member serves while it is up
  std::vector<MemberListener> listeners;  // its io listeners, for the other members' discovery
  std::chrono::seconds lease{10};
  Failback failback = Failback::automatic;
  bool blocklist = true;                  // blocklist a dead member's Ceph client before serving its groups
  uint32_t blocklist_seconds = 3600;      // how long the OSDs refuse it (a restarted member has a new client)
};

// What the member serves: `owned` optimized, the rest of `managed` inaccessible on its listeners.
struct GroupOwnership {
  std::set<uint32_t> owned;
  std::set<uint32_t> managed;  // every member's home groups that this member knows of
  std::vector<MemberListener> peer_listeners;  // the io listeners of the other members that are alive
  friend bool operator==(const GroupOwnership&, const GroupOwnership&) = default;
};

// One line of the member's history (ctl group status).
struct GroupEvent {
  int64_t unix_ms = 0;
  std::string what;  // "took over gw-a's lease (groups 2): it lapsed 0.4 s ago" ...
};

struct GroupMemberStatus {
  std::string group;
  std::string member;
  std::string where;  // pool[/namespace]
  std::chrono::seconds lease{0};
  Failback failback = Failback::automatic;
  GroupOwnership ownership;
  struct Member {
    MemberRecord record;
    bool alive = false;
    std::string lease_holder;  // "" when the lease is free
  };
  std::vector<Member> members;  // as of the last tick
  std::string last_error;       // the last failed RADOS step, "" when the last tick went through
  std::vector<GroupEvent> events;  // newest last, at most 32
};

class GroupMember {
 public:
  // Called with the new ownership whenever it changes (on the member's threads, one call at a time). The
  // first call comes from start(): nothing owned yet.
  using OwnershipChanged = std::function<void(const GroupOwnership&)>;

  // Publishes the member's record and starts its threads. The first lease is taken by the first tick, on
  // the member's thread: a cluster that is down makes the member wait (and retry), not fail to start.
  static Result<std::unique_ptr<GroupMember>> start(std::shared_ptr<backend::RadosCluster> cluster,
                                                    GroupMemberOptions options, OwnershipChanged changed);
  ~GroupMember();  // stop(true)
  GroupMember(const GroupMember&) = delete;
  GroupMember& operator=(const GroupMember&) = delete;

  // Stops the threads; `release`: gives up every lease (a clean shutdown: survivors take over at their
  // next tick instead of waiting for the leases to lapse). Idempotent.
  void stop(bool release);
  GroupMemberStatus status() const;
  // Manual failback (`ctl group handback MEMBER`): stops serving `member`'s groups and releases its lease,
  // which the member, when alive, takes at its next tick. Error when this member does not hold it.
  Result<void> hand_back_now(const std::string& member);

 private:
  struct Held {
    std::shared_ptr<MemberLease> lease;
    std::vector<uint32_t> groups;                      // that member's home groups
    std::chrono::steady_clock::time_point valid_until;  // serve its groups until then
    bool fenced = false;                               // past valid_until, waiting for a renewal
  };

  GroupMember(std::shared_ptr<backend::RadosCluster> cluster, std::unique_ptr<MemberRegistry> registry,
              GroupMemberOptions options, OwnershipChanged changed);
  void run();         // the tick thread
  void run_fences();  // the fence thread: drops leases past their validity
  void tick();
  void keep_alive();
  void keep_own_lease();
  void renew_held();
  void watch_others(const std::vector<MemberRecord>& records);
  void take_over(const MemberRecord& r);
  void hand_back(const std::string& member);
  // Under mu_: recompute the ownership and call changed_ when it moved.
  void publish_locked();
  void event_locked(std::string what);
  LeaseOptions lease_options(const std::string& member, const char* lock) const;
  std::chrono::milliseconds fence_margin() const;

  std::shared_ptr<backend::RadosCluster> cluster_;
  std::unique_ptr<MemberRegistry> registry_;
  GroupMemberOptions options_;
  OwnershipChanged changed_;
  MemberRecord record_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::shared_ptr<MemberLease> alive_;
  std::map<std::string, Held> held_;  // by member
  std::set<uint32_t> known_groups_;   // every record's home groups seen
  GroupOwnership published_;
  std::vector<GroupMemberStatus::Member> members_;
  std::string last_error_;
  std::vector<GroupEvent> events_;
  std::string waiting_for_;
  bool blocklisted_ = false;  // who holds our own lease while we wait for it
  std::thread ticker_;
  std::thread fencer_;
};

}  // namespace rdmablk::target::group

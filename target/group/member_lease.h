// A gateway group member's lease (issue 28; docs/DESIGN.md "Gateway groups"): the exclusive cls_lock "lease"
// on the RADOS object rdmablk.group.GROUP.member.MEMBER, taken with a duration and renewed before it ends.
//
// Why a RADOS lock: the OSD keeps the clock and the holder, so a member that is dead, hung or cut off from
// the cluster loses its lease without anyone's help, and exactly one process can hold it. A renewal uses
// LIBRADOS_LOCK_FLAG_MUST_RENEW: it fails once the lease lapsed, taken by a survivor or not, so a member
// learns that it must stop serving its groups as optimized (it fences itself) rather than taking the lease
// back behind a survivor's back. A survivor takes a lapsed lease with take_over(): the OSD refuses it while
// the holder's lock lives (EBUSY), so "taken over" means "the member's lease had lapsed".
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "backend/rados_cluster.h"
#include "protocol/result.h"
#include "target/group/group_place.h"

namespace rdmablk::target::group {

struct LeaseOptions {
  GroupPlace place;
  std::string member;  // whose lease
  // How long the lease lives after each take or renewal: the bound on detecting a dead member. Renew
  // well within it (a third of it leaves two renewals of slack).
  std::chrono::seconds duration{15};
  // The lock's name on the member's object: kLeaseLock (who serves the member's ANA groups) or kAliveLock
  // (the member's own process is up; only it takes it).
  std::string lock = "lease";
};

inline constexpr const char* kLeaseLock = "lease";
inline constexpr const char* kAliveLock = "alive";

class MemberLease {
 public:
  ~MemberLease();
  MemberLease(const MemberLease&) = delete;
  MemberLease& operator=(const MemberLease&) = delete;

  // Takes `o.member`'s lease for this process. EBUSY (an error naming the holder) while another holds it.
  static Result<std::unique_ptr<MemberLease>> acquire(std::shared_ptr<backend::RadosCluster> cluster,
                                                      const LeaseOptions& o);
  // A survivor `taker` takes `o.member`'s lease once it lapsed. EBUSY while the member still holds it.
  static Result<std::unique_ptr<MemberLease>> take_over(std::shared_ptr<backend::RadosCluster> cluster,
                                                        const LeaseOptions& o, const std::string& taker);

  // Extends the lease by its duration from now. Error (ENOENT: "lost") once it lapsed or was taken: the
  // holder must stop acting as the member's owner; the lease is not ours any more.
  Result<void> renew();
  // Gives it up at once (a clean shutdown: survivors may take it without waiting for it to lapse).
  Result<void> release();

  const std::string& object() const noexcept { return object_; }
  const std::string& cookie() const noexcept { return cookie_; }
  const std::string& member() const noexcept { return options_.member; }

 private:
  MemberLease(std::shared_ptr<backend::RadosCluster> cluster, rados_ioctx_t io, LeaseOptions o, std::string cookie);
  static Result<std::unique_ptr<MemberLease>> lock(std::shared_ptr<backend::RadosCluster> cluster,
                                                   const LeaseOptions& o, const std::string& holder);

  std::shared_ptr<backend::RadosCluster> cluster_;  // outlives the ioctx
  rados_ioctx_t io_;
  LeaseOptions options_;
  std::string object_;
  std::string cookie_;
  bool held_ = true;
};

// rdmablk.group.GROUP.member.MEMBER
std::string lease_object(const std::string& group, const std::string& member);

// A lock on a member's object as the OSD lists it.
struct LockHolder {
  bool held = false;
  std::string holder;  // the member that holds it (the cookie's part before '@'), "" when free
  std::string cookie;
  std::string address;
};

// Who holds `lock` on `object` (not held when the object does not exist); the librados error otherwise.
Result<LockHolder> lock_holder(rados_ioctx_t io, const std::string& object, const std::string& lock);

}  // namespace rdmablk::target::group

// Who is in a gateway group (issue 28; docs/gateway-groups.md): one record per member in the omap of the
// RADOS object rdmablk.group.GROUP.members, and who holds each member's locks.
//
// Why an omap: each member writes only its own key, so members that start at once never conflict, and a
// survivor reads every record in one operation. A record says what a survivor needs when the member is
// gone: its home ANA groups (to serve them) and its Ceph client's address (to blocklist it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/rados_cluster.h"
#include "protocol/result.h"
#include "target/group/group_place.h"
#include "target/group/member_lease.h"

namespace rdmablk::target::group {

// An io listener of a member, as other members' discovery controllers list it.
struct MemberListener {
  std::string transport;  // "tcp" / "rdma"
  std::string address;
  uint16_t port = 0;
  std::string tls = "none";  // none / optional / required
  friend bool operator==(const MemberListener&, const MemberListener&) = default;
};

struct MemberRecord {
  std::string member;
  std::vector<MemberListener> listeners;  // its io listeners (for the group's discovery)
  std::vector<uint32_t> ana_groups;  // its home ANA groups, ascending
  std::string address;               // its Ceph client instance ("IP:PORT/NONCE"), for blocklisting
  int64_t started_unix_ms = 0;       // when this incarnation of the member started
  // Written before a clean stop releases the member's locks: a survivor that takes its lease then has
  // nothing to fence (blocklisting it would break the member's own shutdown: its images' last flush).
  bool stopped_cleanly = false;
  friend bool operator==(const MemberRecord&, const MemberRecord&) = default;
};

class MemberRegistry {
 public:
  static Result<std::unique_ptr<MemberRegistry>> open(std::shared_ptr<backend::RadosCluster> cluster,
                                                      const GroupPlace& place);
  ~MemberRegistry();
  MemberRegistry(const MemberRegistry&) = delete;
  MemberRegistry& operator=(const MemberRegistry&) = delete;

  // Writes (replaces) this member's record.
  Result<void> publish(const MemberRecord& r);
  // Every member's record, by member name. A record that does not parse is skipped with a log line (a hand
  // edit must not stop the group from failing over the others).
  Result<std::vector<MemberRecord>> list();
  // One member's record (nullopt when it has none).
  Result<std::optional<MemberRecord>> find(const std::string& member);
  // Who holds `lock` (kLeaseLock / kAliveLock) on `member`'s object now (lapsed locks count as free).
  Result<LockHolder> holder(const std::string& member, const std::string& lock);
  // This process's Ceph client instance address, as the OSDs see it.
  std::string client_address() const;
  // Blocklists a member's Ceph client instance: the OSDs refuse its operations from now on (fencing).
  Result<void> blocklist(const std::string& address, uint32_t expire_seconds);

 private:
  MemberRegistry(std::shared_ptr<backend::RadosCluster> cluster, rados_ioctx_t io, GroupPlace place);

  std::shared_ptr<backend::RadosCluster> cluster_;
  rados_ioctx_t io_;
  GroupPlace place_;
  std::string object_;
};

// rdmablk.group.GROUP.members
std::string registry_object(const std::string& group);
// A record as stored (JSON) and back; nullopt-like error for bytes that are not one.
std::string encode_record(const MemberRecord& r);
Result<MemberRecord> decode_record(const std::string& member, const std::string& bytes);

}  // namespace rdmablk::target::group

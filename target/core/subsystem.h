// Subsystems and namespaces as the target core serves them, built from the TargetConfig.
//
// A Namespace owns its Backend (shared by every reactor) and is immutable once built: a reload that changes
// a namespace replaces it. The namespace set of a subsystem is published as an immutable NamespaceTable
// snapshot; each reactor keeps its own copy of the pointer (refreshed by message), so the I/O path looks
// namespaces up without a lock, and a removed namespace's backend lives until the last reactor that used
// it has drained its I/O.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "protocol/auth.h"
#include "protocol/result.h"
#include "security/dhchap_key.h"
#include "target/core/range_lock.h"
#include "target/config/config.h"
#include "target/qos/namespace_qos.h"
#include "target/reservations/namespace_reservations.h"

namespace rdmablk::target {

struct Namespace {
  uint32_t nsid = 0;
  NamespaceConfig config;
  std::shared_ptr<const backend::Backend> backend;
  backend::Geometry geometry;  // copy of backend->geometry()
  bool read_only = false;
  uint8_t lbads = 9;           // log2(block size)
  // The ANA group: config.ana_group when opened, then moved by a reload in place (the one mutable field;
  // the I/O path reads it without a lock).
  std::atomic<uint32_t> ana_group{kDefaultAnaGroup};
  // Range locks over its blocks (fused Compare and Write), shared with the namespace a resize makes of it.
  std::shared_ptr<RangeLocks> range_locks = std::make_shared<RangeLocks>();
  // Its persistent reservations (never null; open_namespace gives it its store), shared likewise.
  std::shared_ptr<reservations::NamespaceReservations> reservations =
      std::make_shared<reservations::NamespaceReservations>(nullptr, "namespace");
  // Its QoS limits as the reactors enforce them (never null; unlimited when config.qos has none), shared
  // with the namespace a resize, a mask or a limit change makes of it (target/qos/namespace_qos.h).
  std::shared_ptr<qos::NamespaceQos> qos = std::make_shared<qos::NamespaceQos>(NamespaceQosConfig{});

  bool volatile_cache() const noexcept { return geometry.caps.volatile_write_cache; }
  // True when the same config would produce the same namespace (reload keeps the namespace as it is).
  bool same_config(const NamespaceConfig& other) const noexcept;
};

// What opening a namespace needs besides its config.
struct NamespaceHooks {
  // Handed to the backend's watch_size() (may be empty): runs on a library thread when the store may have
  // been resized.
  std::function<void()> on_resize;
  // Where reservation state persists (TargetConfig::state_dir); empty: nowhere (no PTPL).
  std::filesystem::path state_dir;
  // A gateway group member (TargetConfig::group): reservations of namespaces whose store several targets
  // share (RBD) are read and written through the group's coherent protocol (namespace_reservations.h).
  bool group = false;
  // In a group: the reservation events another member wrote for namespace `nsid` of `subnqn` (its notices
  // for this target's controllers, its preempted hosts), on a librados thread before the member's command
  // completes (NamespaceReservations::share). `locks`: the namespace's range locks.
  std::function<void(const std::string& subnqn, uint32_t nsid, RangeLocks& locks,
                     std::span<const reservations::GroupEvent> events)>
      on_group_reservation_events;
};

// Opens the backend a namespace config describes, and loads the namespace's saved reservations (a file
// in hooks.state_dir named after `subnqn` and the NSID).
Result<std::shared_ptr<Namespace>> open_namespace(const NamespaceConfig& config, std::string_view subnqn,
                                                  const NamespaceHooks& hooks = {});
// The same namespace (config, backend, ANA group) with another size: what a resize publishes.
std::shared_ptr<Namespace> resized_namespace(const Namespace& ns, uint64_t num_blocks);
// The same namespace seen by other hosts (NamespaceConfig::hosts, sorted): what a mask change publishes.
std::shared_ptr<Namespace> masked_namespace(const Namespace& ns, std::vector<std::string> hosts);
// The same namespace with other QoS limits: its NamespaceQos changed in place when the per-host entries name
// the same hosts (the budgets go on), else a new one.
std::shared_ptr<Namespace> qos_namespace(const Namespace& ns, const NamespaceQosConfig& qos);

namespace testing {
// Test seam: every backend opened from now on is passed through `wrap` (e.g. to delay its completions).
// Empty = none. Not thread-safe: set it before creating the core.
using BackendWrapper = std::function<std::unique_ptr<backend::Backend>(std::unique_ptr<backend::Backend>)>;
void set_backend_wrapper(BackendWrapper wrap);
}  // namespace testing

// An immutable snapshot of a subsystem's namespaces, sorted by NSID.
struct NamespaceTable {
  uint64_t generation = 0;
  std::vector<std::shared_ptr<Namespace>> namespaces;

  const std::shared_ptr<Namespace>* find(uint32_t nsid) const noexcept;
  std::vector<uint32_t> nsids() const;
  uint32_t max_nsid() const noexcept { return namespaces.empty() ? 0 : namespaces.back()->nsid; }
  bool any_volatile_cache() const noexcept;
};

// A host's DH-HMAC-CHAP settings (from its HostConfig with a dhchap_key). Immutable: a reload makes new
// ones, so a controller keeps the settings it connected with.
struct HostAuth {
  std::shared_ptr<const security::dhchap::DhchapKey> key;       // the host's secret
  std::shared_ptr<const security::dhchap::DhchapKey> ctrl_key;  // null: no bidirectional authentication
  std::vector<protocol::auth::HashId> hashes;                   // allowed, best first
  std::vector<protocol::auth::DhGroupId> dh_groups;
  std::string key_source;       // DhchapSecretConfig::describe(): "set" / "file PATH", for status output
  std::string ctrl_key_source;  // likewise, "none" without a controller secret
};

// The authentication settings of every host of a subsystem config that has a secret, by host NQN.
std::map<std::string, std::shared_ptr<const HostAuth>, std::less<>> host_auth_of(const SubsystemConfig& config);

// Host NQN -> where its TLS PSK comes from, for the hosts of a subsystem config that have one.
std::map<std::string, std::string, std::less<>> tls_psk_sources_of(const SubsystemConfig& config);

// The mutable state of a subsystem lives behind the core's control-path mutex.
struct Subsystem {
  std::string nqn;
  std::string serial;
  std::string model;
  bool allow_any_host = false;
  std::vector<std::string> hosts;
  bool require_authentication = false;  // a host without a secret is refused
  std::map<std::string, std::shared_ptr<const HostAuth>, std::less<>> host_auth;  // hosts with a secret
  // Hosts with a TLS PSK: where it comes from (TlsPskConfig::describe(): "set" / "file PATH"), for status
  // output; the keys themselves live in the daemon's TlsPskStore.
  std::map<std::string, std::string, std::less<>> tls_psk_sources;
  std::shared_ptr<const NamespaceTable> table;  // replaced (never modified) on reload
  bool removed = false;                         // taken out by a reload
  uint16_t cntlid_min = kConfigCntlidMin;       // controller IDs it hands out
  uint16_t cntlid_max = kConfigCntlidMax;
  uint16_t next_cntlid = kConfigCntlidMin;      // where the next search for a free ID starts

  bool host_allowed(std::string_view hostnqn) const noexcept;
  // The host's authentication settings; nullptr when it has no secret.
  std::shared_ptr<const HostAuth> auth_for(std::string_view hostnqn) const;
};

// Builds a subsystem (opening every namespace's backend, see open_namespace) from its config.
Result<std::shared_ptr<Subsystem>> build_subsystem(const SubsystemConfig& config, uint64_t generation,
                                                   const NamespaceHooks& hooks = {});

}  // namespace rdmablk::target

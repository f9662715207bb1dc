// The target's YAML configuration: the model, the parser and its validation.
//
// Parsing is pure (text in, TargetConfig or one error out) so that every rule is testable without a
// file system or a network; validate_environment() does the checks that look at the machine (files
// that must exist, ports that must be free, CPUs that must be online). Every error is one line:
//
//     FILE:LINE:COL: FIELD: problem
//
// e.g. "/etc/rdmablk/target.yaml:14:7: subsystems[0].namespaces[1].nsid: duplicate NSID 1 (first at
// line 9)". Line and column are 1-based. configs/target.yaml documents every key and its default.
//
// Listener model: as in Linux nvmet, every listener serves the discovery controller
// (nqn.2014-08.org.nvmexpress.discovery) - `nvme discover -t rdma` connects to 4420 - and an `io`
// listener also serves every subsystem and is what the discovery log lists. A `discovery` listener
// (conventionally TCP port 8009) serves the discovery controller only and is never listed as a path to
// a subsystem.
#pragma once

#include <spdlog/common.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "config/source_location.h"
#include "protocol/ana.h"
#include "protocol/auth.h"
#include "protocol/defaults.h"
#include "protocol/result.h"
#include "security/tls_psk.h"
#include "transport/address.h"
#include "transport/tcp/c2h_success.h"
#include "transport/tcp/tcp_tls.h"

namespace rdmablk::security::dhchap {
class DhchapKey;
}

namespace rdmablk::target {

inline constexpr const char* kDefaultConfigPath = "/etc/rdmablk/target.yaml";
// Where the control socket is unless `control: {socket: ...}` says otherwise (systemd's RuntimeDirectory).
inline constexpr const char* kDefaultControlSocketPath = "/run/rdmablk/target.sock";
// The Prometheus endpoint's port unless `metrics: {port: ...}` says otherwise.
inline constexpr uint16_t kDefaultMetricsPort = 9464;

// Where a value came from in the YAML file (1-based); line 0 = not from a file (a default).
using SourceLocation = config::SourceLocation;

// Asymmetric Namespace Access: group IDs are 1..kAnaGroupMax (protocol/ana.h). ANA is always reported, as
// nvmet does: with no `ana_group` and no `ana` keys every namespace is in group 1, optimized on every
// listener, so a host can use native multipath as it is.
using protocol::kAnaGroupMax;
inline constexpr uint32_t kDefaultAnaGroup = 1;
// Controller IDs a subsystem hands out (cntlid_min / cntlid_max): the whole range unless configured.
inline constexpr uint16_t kConfigCntlidMin = 1;
inline constexpr uint16_t kConfigCntlidMax = 0xFFEF;

// One `ana:` entry of a listener: the state of a group on that listener.
struct AnaGroupState {
  uint32_t group = kDefaultAnaGroup;
  protocol::AnaState state = protocol::AnaState::optimized;
  SourceLocation at;  // the entry's key
  friend bool operator==(const AnaGroupState& a, const AnaGroupState& b) noexcept {
    return a.group == b.group && a.state == b.state;
  }
};
// Parses a state name as the config and the control socket write it: optimized, non_optimized, inaccessible,
// persistent_loss, change. Error: "unknown ANA state 'x' (expected ...)".
Result<protocol::AnaState> parse_ana_state(std::string_view name);
const char* ana_state_config_name(protocol::AnaState s) noexcept;  // the config's spelling

enum class ListenerRole : uint8_t {
  io,         // the subsystems and the discovery controller; listed in the discovery log
  discovery,  // the discovery controller only
};
const char* listener_role_name(ListenerRole r) noexcept;  // "io" / "discovery"

struct ListenerConfig {
  transport::TransportType transport = transport::TransportType::tcp;
  std::string address;                        // an IPv4 or IPv6 literal; 0.0.0.0 / :: = every local address
  uint16_t port = transport::kDefaultIoPort;  // default 4420, or 8009 for role: discovery
  ListenerRole role = ListenerRole::io;
  // NVMe/TCP only: TLS 1.3 with a PSK before ICReq (none / optional / required). The discovery log entry's
  // TREQ and TSAS say it.
  transport::tcp::TlsPolicy tls = transport::tcp::TlsPolicy::none;
  // NVMe/TCP only: when a read's last C2HData PDU carries SUCCESS in place of a CapsuleResp (auto: on
  // queues whose host disabled SQ flow control; always: every read, as SPDK's target; off: never).
  transport::tcp::C2hSuccess c2h_success = transport::tcp::C2hSuccess::sq_flow_disabled;
  // `ana: {2: inaccessible, 3: non_optimized}`: the ANA state of groups on this listener (the "port" of nvmet),
  // ascending by group, each group once; a group not listed is optimized here. io listeners only.
  std::vector<AnaGroupState> ana;

  // The state of `group` on this listener.
  protocol::AnaState ana_state(uint32_t group) const noexcept;

  SourceLocation at;          // the listener's mapping
  SourceLocation address_at;  // its `address` value
  SourceLocation port_at;     // its `port` value (or the mapping when defaulted)
};

// QoS limits of a namespace, or of one host on it (`qos:`; SPDK's four per-bdev limits). 0 = unlimited.
// Only Read and Write commands count; bandwidth counts their data (NLB x block size), in MB of 10^6 bytes.
struct QosLimits {
  uint64_t iops = 0;        // reads + writes per second
  uint64_t mbps = 0;        // read + write MB/s
  uint64_t read_mbps = 0;   // read MB/s
  uint64_t write_mbps = 0;  // write MB/s

  bool any() const noexcept { return iops != 0 || mbps != 0 || read_mbps != 0 || write_mbps != 0; }
  friend bool operator==(const QosLimits&, const QosLimits&) = default;
};

// One host's own limits on a namespace (on top of the namespace's).
struct HostQosConfig {
  std::string host;  // host NQN
  QosLimits limits;
  SourceLocation at;  // its entry
  friend bool operator==(const HostQosConfig& a, const HostQosConfig& b) noexcept {
    return a.host == b.host && a.limits == b.limits;
  }
};

// A namespace's `qos:`: its limits and per-host ones (hosts in the order given, each once).
struct NamespaceQosConfig {
  QosLimits limits;
  std::vector<HostQosConfig> hosts;
  SourceLocation at;  // the `qos` value (line 0 when not given)

  bool any() const noexcept {
    return limits.any() || std::any_of(hosts.begin(), hosts.end(), [](const auto& h) { return h.limits.any(); });
  }
  friend bool operator==(const NamespaceQosConfig& a, const NamespaceQosConfig& b) noexcept {
    return a.limits == b.limits && a.hosts == b.hosts;
  }
};

enum class BackendKind : uint8_t { file, ram, null, rbd };
const char* backend_kind_name(BackendKind k) noexcept;  // "file" / "ram" / "null" / "rbd"

struct NamespaceConfig {
  uint32_t nsid = 0;  // 1..0xFFFFFFFE, unique within its subsystem
  BackendKind backend = BackendKind::file;
  std::string path;         // file: a regular file or a block device; load_config() makes it absolute
                            // (relative to the config file's directory)
  uint64_t size = 0;        // bytes; file: 0 = the existing file's size (a missing file is created sparse
                            // when size > 0); ram/null: required
  uint32_t block_size = 0;  // a power of two in [512, 65536]; 0 (file only) = the device's logical
                            // block size, 512 for a regular file; ram/null default 512; rbd 512 or 4096
  bool direct = true;       // file: O_DIRECT
  // rbd: the image POOL/[NAMESPACE/]IMAGE of the cluster that ceph_conf names, as cephx user client.<client>
  std::string pool;
  std::string image;
  std::string rados_namespace;  // `namespace`: a RADOS namespace in the pool; empty = the default one
  std::string ceph_conf;        // load_config() makes it absolute like `path`; default /etc/ceph/ceph.conf
  std::string client;           // cephx id; default admin
  std::string keyring;          // empty = the conf's `keyring`; made absolute like `path`
  bool read_only = false;
  // ANA group (1..kAnaGroupMax): its state on each listener is that listener's `ana` entry for the group.
  // Moving a namespace to another group on reload keeps its backend (no Namespace Attribute Changed event,
  // an ANA Change event instead).
  uint32_t ana_group = kDefaultAnaGroup;
  std::array<uint8_t, 16> uuid{};   // as configured, else derived from (subsystem NQN, NSID)
  std::array<uint8_t, 16> nguid{};  // likewise: stable across restarts
  bool uuid_configured = false;
  bool nguid_configured = false;
  // Namespace masking: the host NQNs that see this namespace, sorted; empty = every host the subsystem
  // allows. The others get it as an inactive NSID (Identify, I/O, logs).
  std::vector<std::string> hosts;
  // QoS limits (docs/configuration.md#qos); changed live by a reload (change::QosChanged).
  NamespaceQosConfig qos;

  // Whether a host sees it.
  bool visible_to(std::string_view hostnqn) const noexcept {
    return hosts.empty() || std::binary_search(hosts.begin(), hosts.end(), hostnqn);
  }

  SourceLocation at;       // the namespace's mapping
  SourceLocation nsid_at;  // its `nsid` value
  SourceLocation path_at;  // its `path` value
  SourceLocation size_at;  // its `size` value (line 0 when not given)
  SourceLocation image_at;  // rbd: its `image` value
  SourceLocation hosts_at;  // its `hosts` value (line 0 when not given)
};

// A DH-HMAC-CHAP secret of a host entry: given inline (`dhchap_key: "DHHC-1:..."`) or in a file
// (`dhchap_key_file: PATH`, read by load_config(): parse_config() only records the path).
struct DhchapSecretConfig {
  std::shared_ptr<const security::dhchap::DhchapKey> key;  // null: none (or its file not read yet)
  std::string file;                                         // the key file; empty when inline or none
  SourceLocation at;                                        // the value in the YAML

  bool configured() const noexcept { return key != nullptr || !file.empty(); }
  // What logs, --check-config and ctl may show: "none", "set" or "file PATH" - never the secret.
  std::string describe() const;
};

// A host's NVMe/TCP TLS PSK in the interchange format (`tls_psk: "NVMeTLSkey-1:01:...:"`, from
// `nvme gen-tls-key`) or in a file (`tls_psk_file: PATH`, read by load_config() with the same checks as a
// DH-HMAC-CHAP key file).
struct TlsPskConfig {
  std::shared_ptr<const security::ConfiguredPsk> key;  // null: none (or its file not read yet)
  std::string file;
  SourceLocation at;

  bool configured() const noexcept { return key != nullptr || !file.empty(); }
  // "none", "set" or "file PATH" - never the key.
  std::string describe() const;
};

// One entry of a subsystem's `hosts:` list: a plain NQN, or a mapping with the host's DH-HMAC-CHAP
// settings (NVMe Base 2.0 8.13.5). A host with a dhchap_key must authenticate every queue.
struct HostConfig {
  std::string nqn;
  DhchapSecretConfig dhchap_key;       // the host's secret (it proves itself with it)
  DhchapSecretConfig dhchap_ctrl_key;  // the controller's secret, for bidirectional authentication
  TlsPskConfig tls_psk;                // the host's TLS PSK on this subsystem (NVMe/TCP listeners with tls)
  // Allowed hash functions and DH groups, best first (the controller picks the first the host offers).
  std::vector<protocol::auth::HashId> dhchap_hashes{protocol::auth::HashId::sha256, protocol::auth::HashId::sha384,
                                                    protocol::auth::HashId::sha512};
  std::vector<protocol::auth::DhGroupId> dhchap_dhgroups{
      protocol::auth::DhGroupId::null,      protocol::auth::DhGroupId::ffdhe2048, protocol::auth::DhGroupId::ffdhe3072,
      protocol::auth::DhGroupId::ffdhe4096, protocol::auth::DhGroupId::ffdhe6144, protocol::auth::DhGroupId::ffdhe8192};
  SourceLocation at;  // the entry
};

struct SubsystemConfig {
  std::string nqn;
  std::string serial;              // <= 20 printable ASCII; default: 16 hex digits derived from the NQN
  std::string model = "rdmablk";   // <= 40 printable ASCII
  bool allow_any_host = false;     // false: only `hosts` may connect (and `hosts` must not be empty)
  std::vector<std::string> hosts;  // host NQNs
  // One per `hosts` entry, in the same order (a plain NQN gives one without secrets).
  std::vector<HostConfig> host_configs;
  // A host without a configured dhchap_key is refused at Connect (allow_any_host then admits only listed
  // hosts with a secret).
  bool require_authentication = false;
  std::vector<NamespaceConfig> namespaces;
  // Controller IDs come from [cntlid_min, cntlid_max] only (nvmet's attr_cntlid_min/max): several targets
  // exporting one NQN for multipath give each a disjoint range, so a host never sees two controllers of the
  // subsystem with the same ID. A reload changes the range for new controllers.
  uint16_t cntlid_min = kConfigCntlidMin;
  uint16_t cntlid_max = kConfigCntlidMax;

  SourceLocation at;      // the subsystem's mapping
  SourceLocation nqn_at;  // its `nqn` value

  // The entry of a host NQN, or nullptr.
  const HostConfig* find_host(std::string_view hostnqn) const noexcept;
};

struct KeepAliveConfig {
  // KATO applied when a host connects to the discovery controller with KATO 0 (nvmet: 120 s).
  uint32_t discovery_timeout_ms = 120'000;
  // A larger KATO asked for in Connect or Set Features is clamped to this.
  uint32_t max_timeout_ms = 3'600'000;
  // CTRATT.TBKAS: any command resets the timer, not only Keep Alive (avoids spurious expiries under
  // load; the Linux host then sends Keep Alive every KATO/4 only when idle).
  bool traffic_based = true;
};

// What one host, or everyone, may hold at once: connections are refused at accept time (NVMe/TCP: the socket
// is closed; RDMA: the CM request is rejected) with a rate-limited log line naming the limit. 0 = no limit.
struct ConnectionLimits {
  // Open connections (TCP sockets, RDMA queue pairs) on one listener. Each holds a file descriptor or a QP,
  // so the daemon also raises its RLIMIT_NOFILE soft limit to the hard one.
  uint32_t per_listener = 4096;
  // Open connections from one host address (before Connect a host is only its address), over all listeners.
  // A Linux host opens 1 + nr_io_queues (one per CPU, at most max_io_queues) per controller.
  uint32_t per_host = 1024;
  // A connection must complete its transport handshake (NVMe/TCP ICReq) and Fabrics Connect within this,
  // or it is closed: a socket that never speaks holds nothing for long. Hosts send both at once.
  uint32_t connect_timeout_ms = 10'000;
};

struct QueueLimits {
  uint32_t io_queue_depth = 128;      // entries per I/O queue (CAP.MQES + 1), 2..1024
  uint32_t admin_queue_depth = 32;    // entries on the admin queue, 32..1024 (the Linux host uses 32)
  uint32_t max_io_queues = 64;        // I/O queues per controller (Set Features Number of Queues)
  uint32_t max_io_size = 1u << 20;    // bytes per command, a power of two >= 4096 (MDTS derives from it)
  // In-capsule data on the admin queue and on I/O queues (IOCCSZ = (64 + this) / 16); why these sizes:
  // protocol/defaults.h.
  uint32_t admin_inline_data = protocol::defaults::kAdminInCapsule;
  uint32_t io_inline_data = protocol::defaults::kTargetIoInCapsule;
  // Pool buffer bytes one queue (connection) may hold at once, counted as buffers (a command of up to 16 KiB
  // takes a small buffer, a longer one a max_io_size buffer). Commands beyond wait on their own queue, so a
  // host that stops reading its responses (or floods large I/O) cannot take every buffer of its reactor
  // (64 MiB of large ones) from the other queues there. One command always fits. In-capsule data is not
  // counted: the queue depth times the in-capsule size bounds it.
  uint64_t queue_buffer_bytes = 32u << 20;
  KeepAliveConfig keep_alive;
  ConnectionLimits connections;
};

// The local control socket (JSON lines: status, statistics, reload). Not reloadable.
struct ControlConfig {
  bool enabled = true;                                  // `control: {enabled: false}` turns it off
  std::string socket_path = kDefaultControlSocketPath;  // absolute (relative paths are refused), <= 107 bytes
  SourceLocation at;                                    // the `control` mapping (line 0 when absent)
  SourceLocation socket_at;                             // its `socket` value (line 0 when defaulted)
};

// The Prometheus HTTP endpoint (GET /metrics). Off unless the file has a `metrics:` mapping. Not reloadable.
struct MetricsConfig {
  bool enabled = false;                 // a `metrics:` mapping turns it on, unless it says `enabled: false`
  std::string address;                  // an IPv4 or IPv6 literal, required when enabled; 0.0.0.0 / :: = every address
  uint16_t port = kDefaultMetricsPort;  // 1..65535; never the address:port of a TCP listener
  SourceLocation at;                    // the `metrics` mapping
  SourceLocation address_at;            // its `address` value
  SourceLocation port_at;               // its `port` value (or the mapping when defaulted)
};

// `group:` (docs/gateway-groups.md): this target is a member of a gateway group on Ceph. Members hold leases
// in RADOS; a member serves its home ANA groups as optimized while it holds its own lease, and a survivor
// serves a dead member's. With a group, ANA states are the group's: listeners take no `ana:` key. Restart only.
enum class GroupFailback : uint8_t { automatic, manual };
struct GroupConfig {
  bool enabled = false;  // a `group:` mapping
  std::string name;      // the group's name, in every RADOS object name: [A-Za-z0-9_.-], at most 64
  std::string member;    // this member's name in the group (default: the host name); same alphabet
  std::string pool;      // where the group's objects live
  std::string rados_namespace;
  std::string ceph_conf = "/etc/ceph/ceph.conf";
  std::string client = "admin";  // cephx id; needs `osd blocklist` (mon 'profile rbd' has it)
  std::string keyring;
  unsigned lease_seconds = 10;          // 2..600: a dead member's groups move after at most lease + lease/3
  std::vector<uint32_t> ana_groups;     // this member's home ANA groups (1..kAnaGroupMax)
  GroupFailback failback = GroupFailback::automatic;
  bool blocklist = true;  // blocklist a dead member's Ceph client before serving its groups
  // The state of the groups a member does not own on its listeners: inaccessible (I/O goes through the
  // owner only, as Ceph's gateway does) or non_optimized (every member serves every namespace, the owner
  // preferred; reservations and CAW hold across members).
  protocol::AnaState standby_state = protocol::AnaState::inaccessible;
  SourceLocation at;
};

struct TargetConfig {
  std::string source;  // the file name used in messages
  std::vector<ListenerConfig> listeners;
  std::vector<SubsystemConfig> subsystems;
  unsigned reactors = 0;  // reactor threads; 0 = one per online CPU (reactor_cpus.size() when pinned)
  // `reactors: [2, 3, 6-7]` or "2,3,6-7": reactor i runs pinned to reactor_cpus[i]; empty = not pinned.
  // Distinct; that they are online and allowed for this process is validate_environment()'s check.
  std::vector<int> reactor_cpus;
  std::vector<SourceLocation> reactor_cpus_at;  // where each was written (a range's CPUs share its entry)
  // Reactors keep polling this long after the last work before they sleep (0: sleep at once): longer than
  // a fast device's read (an NVMe SSD's ~80 us, the page cache's less), so that a QD1 command does not pay a
  // sleep and a wake-up, yet short enough that an idle target sleeps at once.
  unsigned busy_poll_us = 200;
  spdlog::level::level_enum log_level = spdlog::level::info;
  // How TLS PSKs become the handshake's key: standard (TP 8011, current libnvme and the kernel) or
  // libnvme_compat (keys a libnvme before its HKDF-label fix inserted, nvme-cli's --compat). Restart only.
  security::PskDerivation tls_psk_derivation = security::PskDerivation::standard;
  SourceLocation tls_psk_derivation_at;
  QueueLimits limits;
  ControlConfig control;
  MetricsConfig metrics;
  // Where namespaces keep their persistent-reservation state (one file per namespace with PTPL set).
  // Absolute; created (0700) when first needed. Restart only. Two targets must not share one.
  std::string state_dir = "/var/lib/rdmablk";
  SourceLocation state_dir_at;
  GroupConfig group;
  // Things that are allowed but probably not meant (logged at startup), each "FILE:LINE:COL: ...".
  std::vector<std::string> warnings;
};

// Reads and parses `path`, then makes relative namespace paths absolute (relative to the file's
// directory) and reads the DH-HMAC-CHAP key files and TLS PSK files (relative to it too): each must be a regular file that
// other users cannot read or write (0600 / 0400; a group may read it, not write it), holding one
// "DHHC-1:XX:...:" secret; an error names the YAML line of the `dhchap_*_key_file` value. Does not look at
// namespace files or ports: see validate_environment().
Result<TargetConfig> load_config(const std::string& path);

// Parses YAML text; `name_for_messages` is the FILE part of error messages. Key files are not read here.
Result<TargetConfig> parse_config(std::string_view yaml_text, const std::string& name_for_messages);

// The CPUs reactors may be pinned to.
struct CpuAvailability {
  std::vector<int> online;   // ascending: the CPUs the kernel has online
  std::vector<int> allowed;  // ascending: those this process may run on (sched_getaffinity: taskset,
                             // systemd's CPUAffinity=, cgroup cpusets)
};
// This machine's: /sys/devices/system/cpu/online (else CPUs 0..sysconf(_SC_NPROCESSORS_CONF)-1), and the
// main thread's affinity mask (else all of the online ones). Read it before any thread is pinned.
CpuAvailability machine_cpus();

// The checks that depend on this machine: every file namespace's path exists or can be created (a
// missing file needs a size), is not a directory, is accessible; every reactor CPU is online and in the
// process's allowed set; every TCP listener's address:port and the metrics endpoint's can be bound
// (tried with SO_REUSEADDR and released at once). RDMA listeners are not checked.
struct EnvironmentChecks {
  bool ports = true;  // off for a reload: the running daemon holds its ports
  bool rbd = true;    // rbd namespaces: connect to the cluster and open the image read-only
  // The CPUs to check reactor_cpus against; unset = machine_cpus() (read only when reactors are pinned).
  std::optional<CpuAvailability> cpus = std::nullopt;
};
Result<void> validate_environment(const TargetConfig& config, EnvironmentChecks checks = {});

// The settings that only take effect at the next restart and differ between the running configuration
// and a reread one, by key in file order: "reactors" (count or CPUs), "busy_poll_us", "control",
// "metrics", "tls_psk_derivation". Empty when a reload applies everything (listeners are opened, closed
// and changed live).
std::vector<std::string> restart_only_changes(const TargetConfig& running, const TargetConfig& reread);
// "10.0.0.1:4420", "[::1]:4420": how messages, `ctl ana set` and the core name an endpoint.
std::string host_port(const std::string& address, uint16_t port);

// Whether two listeners agree on everything but `ana`: the endpoint, its role and its TCP settings.
bool same_listener_settings(const ListenerConfig& a, const ListenerConfig& b) noexcept;

// One line for the startup log: listeners, subsystems, namespaces, reactors (and their CPUs), log level,
// limits, control socket, metrics endpoint.
std::string describe(const TargetConfig& config);

// A CPU list as the kernel writes it (/sys/devices/system/cpu/online) and taskset -c and systemd's
// CPUAffinity= take it: "0-3,6", comma-separated entries (spaces around them allowed), each a CPU number
// or an inclusive range A-B. The CPUs in the order written. Empty text (the kernel's empty mask) is an
// empty list; a malformed entry, a negative number, a backwards range or a CPU listed twice is an error
// "invalid CPU list 'TEXT': ...".
Result<std::vector<int>> parse_cpu_list(std::string_view text);
// The reverse, in the given order: runs of consecutive ascending CPUs become ranges ([2, 3, 6, 7, 1] ->
// "2-3,6-7,1"); an empty list is "".
std::string format_cpu_list(std::span<const int> cpus);

// "1073741824", "1GiB", "512M", "4 KiB": a byte count with an optional binary unit (K, M, G, T, P with
// or without "iB", any case; "B" alone = bytes). "GB" and friends are refused as ambiguous.
Result<uint64_t> parse_size(std::string_view text);
// 268435456 -> "256 MiB"; a size that is not a whole number of its largest unit stays in bytes.
std::string format_size(uint64_t bytes);

// Total namespaces across subsystems.
std::size_t namespace_count(const TargetConfig& config) noexcept;

// The backend options a namespace maps onto.
backend::FileOptions file_options(const NamespaceConfig& ns);
backend::MemoryOptions memory_options(const NamespaceConfig& ns);
backend::RbdOptions rbd_options(const NamespaceConfig& ns);
// "rbd POOL/[NS/]IMAGE (client ID)": where an rbd namespace's data lives, for messages.
std::string rbd_location(const NamespaceConfig& ns);

// The derivations used for defaults (exposed for tests and for tools that must agree with them).
std::string derive_serial(std::string_view subsystem_nqn);
std::array<uint8_t, 16> derive_uuid(std::string_view subsystem_nqn, uint32_t nsid);
std::array<uint8_t, 16> derive_nguid(std::string_view subsystem_nqn, uint32_t nsid);
std::string format_uuid(const std::array<uint8_t, 16>& uuid);  // 8-4-4-4-12 lower-case hex

}  // namespace rdmablk::target

// A point-in-time picture of the running target, for the control socket and the Prometheus endpoint:
// what is configured and exported, who is connected, and the I/O statistics. Plain values, built by the
// daemon on the control thread (TargetCore::status + the daemon's own fields); nothing here is live.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "target/core/stats.h"

namespace rdmablk::target {

struct ListenerStatus {
  std::string transport;  // "tcp" / "rdma"
  std::string address;
  uint16_t port = 0;
  std::string role;  // "io" / "discovery"
};

struct NamespaceStatus {
  std::string subsystem;  // NQN
  uint32_t nsid = 0;
  std::string backend;  // "file" / "ram" / "null" / "rbd"
  std::string path;     // file backend; rbd: "rbd POOL/[NS/]IMAGE (client ID)"
  uint64_t size_bytes = 0;
  uint32_t block_size = 0;
  bool read_only = false;
  bool direct = false;          // file backend: O_DIRECT
  uint32_t ana_group = 1;       // its ANA group
  bool volatile_cache = false;  // a volatile write cache is reported (Flush needed for durability)
  std::string uuid;             // 8-4-4-4-12
  std::string nguid;            // 32 hex digits
};

struct SubsystemStatus {
  std::string nqn;
  std::string serial;
  std::string model;
  bool allow_any_host = false;
  std::vector<std::string> hosts;
  std::vector<NamespaceStatus> namespaces;
  // DH-HMAC-CHAP: whether a host needs a secret, and where each host's secrets come from ("set" /
  // "file PATH" / "none"), never the secrets.
  bool require_authentication = false;
  struct DhchapHost {
    std::string nqn;
    std::string dhchap_key;
    std::string dhchap_ctrl_key;
  };
  std::vector<DhchapHost> dhchap_hosts;
  // NVMe/TCP TLS: hosts with a PSK and where it comes from ("set" / "file PATH"), never the key.
  struct TlsPskHost {
    std::string nqn;
    std::string tls_psk;
  };
  std::vector<TlsPskHost> tls_psk_hosts;
};

struct ControllerStatus {
  uint16_t cntlid = 0;
  bool discovery = false;
  std::string subsystem;  // NQN (the discovery NQN for a discovery controller)
  std::string hostnqn;
  std::string hostid;     // 8-4-4-4-12
  std::string peer;       // "10.0.0.2:53211"
  std::string transport;  // "tcp" / "rdma"
  uint16_t io_queues = 0;        // connected I/O queues
  uint16_t io_queue_depth = 0;   // entries of the largest connected I/O queue
  uint32_t kato_ms = 0;
  int64_t connected_since_unix_ms = 0;
  uint64_t in_flight = 0;        // commands received and not yet completed, over all its queues
};

// The daemon process, as Prometheus' standard process collector reports it (process_* metrics). Zero =
// unknown (not read).
struct ProcessStatus {
  double cpu_seconds = 0;           // user + system
  uint64_t resident_bytes = 0;
  uint64_t virtual_bytes = 0;
  uint64_t open_fds = 0;
  uint64_t max_fds = 0;
  double start_time_unix_s = 0;
  uint64_t threads = 0;
  // malloc's view (glibc mallinfo2, every arena): bytes allocated and not yet freed (a leak makes this grow),
  // and bytes freed but kept by the allocator for reuse (why RSS stays up after a burst of connections).
  uint64_t heap_in_use_bytes = 0;
  uint64_t heap_free_bytes = 0;
};

// Reads /proc/self (stat, fd/, limits) and malloc's statistics.
ProcessStatus read_process_status(double start_time_unix_s);

struct TargetStatus {
  std::string version;
  int pid = 0;
  double uptime_s = 0;
  std::string config_path;
  int64_t config_loaded_unix_ms = 0;
  std::vector<ListenerStatus> listeners;
  std::vector<stats::ReactorStats> reactors;
  ProcessStatus process;
  std::vector<SubsystemStatus> subsystems;
  std::vector<ControllerStatus> controllers;
  std::vector<stats::NamespaceStats> namespace_stats;   // every namespace, also those without I/O yet
  std::vector<stats::ControllerStats> controller_stats; // every I/O controller
};

}  // namespace rdmablk::target

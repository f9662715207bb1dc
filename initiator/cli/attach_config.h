// The configuration of one attached volume: what `rdmablk attach --config FILE` reads, one file per
// volume, so that the systemd template unit rdmablk-attach@NAME.service attaches
// /etc/rdmablk/attach/NAME.yaml at boot. configs/attach.yaml documents every key and its default.
//
// Parsing is pure (text in, AttachConfig or one error out). Every error is one line, in the same form
// as the target's configuration (target/config/config.h):
//
//     FILE:LINE:COL: FIELD: problem
//
// e.g. "/etc/rdmablk/attach/vol1.yaml:4:11: queue_size: 4096 is out of range (expected 2..1024)".
// Unknown keys, duplicate keys, missing required keys, wrong types and out-of-range values are errors:
// a typo never silently falls back to a default on a volume that must come up at boot.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/result.h"
#include "transport/address.h"

namespace rdmablk::initiator {

// The defaults and limits follow the Linux host's (nvme-cli connect options -i -Q -l -c -k), so that
// `mode: kernel` and `mode: userspace` behave alike for the same file.
struct AttachConfig {
  enum class Mode : uint8_t {
    userspace,  // ublk: /dev/ublkbN served by the rdmablk process itself (rdmablk attach --userspace)
    kernel,     // the kernel's NVMe-oF host (nvme-tcp / nvme-rdma): /dev/nvmeXnY
  };

  transport::TransportAddress address;    // transport (default tcp), address (required), port (4420)
  // Every path to the subsystem, in order (userspace multipath): `paths` (a list of address, port,
  // transport; top-level port / transport are their defaults), or the one `address`. paths[0] == address.
  std::vector<transport::TransportAddress> paths;
  std::string subnqn;                     // `nqn`, required
  uint32_t nsid = 1;                      // the namespace exposed as the block device
  Mode mode = Mode::userspace;
  std::optional<std::string> hostnqn;     // unset: /etc/nvme/hostnqn, ... (resolve_host_identity)
  std::optional<std::string> hostid;      // a UUID; unset: /etc/nvme/hostid, ...
  uint16_t nr_io_queues = 0;              // 0 = one per CPU, capped by the controller
  uint16_t queue_size = 128;              // entries per I/O queue, 2..1024
  int ctrl_loss_tmo_s = 600;              // give up reconnecting after this long; -1 = retry forever
  unsigned reconnect_delay_s = 10;        // between reconnect attempts, >= 1
  unsigned keep_alive_tmo_s = 5;          // Connect KATO; 0 = no keep-alive
  // DH-HMAC-CHAP secrets (DHHC-1 text, checked), from `dhchap_secret` / `dhchap_ctrl_secret` or read from
  // `dhchap_secret_file` / `dhchap_ctrl_secret_file` (an absolute path to a file that is not world-readable).
  // Empty: none. Never printed.
  std::string dhchap_secret;
  std::string dhchap_ctrl_secret;
  // NVMe/TCP over TLS 1.3: `tls: true`, and the PSK (NVMeTLSkey-1 text, checked) from `tls_key` or
  // `tls_key_file` (which imply tls). userspace needs the key; kernel takes it from the .nvme keyring.
  bool tls = false;
  std::string tls_key;
  std::string source;                     // the file name used in messages
};

// The ranges parse_attach_config() enforces, for the CLI's flags to check the same.
inline constexpr uint16_t kAttachMaxIoQueues = 4096;        // ublk_drv's UBLK_MAX_NR_QUEUES
inline constexpr uint16_t kAttachMinQueueSize = 2;
inline constexpr uint16_t kAttachMaxQueueSize = 1024;       // the Linux host's NVMF_MAX_QUEUE_SIZE
inline constexpr unsigned kAttachMaxReconnectDelay = 3600;  // seconds

const char* attach_mode_name(AttachConfig::Mode m) noexcept;  // "userspace" / "kernel"

// One path as the CLI takes it (`attach --userspace -a VALUE`, repeatable): ADDR, ADDR:PORT, [IPv6] or
// [IPv6]:PORT; a bare IPv6 literal (two colons or more) has no port. `default_port` is for a value without
// one. The address is checked as a config file's is.
Result<transport::TransportAddress> parse_path_value(std::string_view value, transport::TransportType type,
                                                     uint16_t default_port);
// Two paths that are the same transport, address and port.
bool same_path(const transport::TransportAddress& a, const transport::TransportAddress& b) noexcept;

// Reads and parses `path` (an unreadable file is one line "PATH: cannot read ...: reason").
Result<AttachConfig> load_attach_config(const std::string& path);

// Parses YAML text; `name_for_messages` is the FILE part of error messages.
Result<AttachConfig> parse_attach_config(std::string_view yaml_text, std::string_view name_for_messages);

}  // namespace rdmablk::initiator

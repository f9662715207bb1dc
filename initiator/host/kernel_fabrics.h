// The Linux kernel's NVMe-oF host, driven the way nvme-cli/libnvme drive it: a connect is one write of an
// option string to /dev/nvme-fabrics (the reply, read back from the same open file, names the new
// controller instance), controllers and namespaces are read from sysfs, and a disconnect is a "1" written
// to /sys/class/nvme/nvmeN/delete_controller. Every path is injectable so that tests run on a fake tree.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/result.h"

namespace rdmablk::initiator {

struct KernelFabricsPaths {
  std::string fabrics_device = "/dev/nvme-fabrics";
  std::string sysfs_nvme = "/sys/class/nvme";              // nvmeN: one per controller
  std::string sysfs_subsys = "/sys/class/nvme-subsystem";  // nvme-subsysK: multipath heads nvmeKnY live here
  std::string dev_dir = "/dev";                            // where block device nodes appear
};

// What `nvme connect` passes to the kernel. Empty strings / absent optionals are left out of the option
// string, and the kernel applies its defaults (its own host NQN, 128 entries per queue, ...).
struct KernelConnectParams {
  std::string transport;  // "tcp" or "rdma"
  std::string traddr;
  std::string trsvcid;
  std::string nqn;  // subsystem NQN
  std::string hostnqn;
  std::string hostid;  // UUID text
  std::string dhchap_secret;       // DHHC-1 host secret (nvme-cli --dhchap-secret); never in messages
  std::string dhchap_ctrl_secret;  // DHHC-1 controller secret (--dhchap-ctrl-secret); never in messages
  std::optional<unsigned> nr_io_queues;
  std::optional<unsigned> queue_size;
  std::optional<unsigned> keep_alive_tmo;   // seconds
  std::optional<unsigned> reconnect_delay;  // seconds
  std::optional<int> ctrl_loss_tmo;         // seconds; -1 = reconnect forever
  // NVMe/TCP over TLS (nvme-cli --tls): the kernel asks tlshd for the handshake with the PSK its .nvme keyring
  // holds for (hostnqn, subnqn).
  bool tls = false;
};

// "nqn=...,transport=...,traddr=...,trsvcid=...,hostnqn=...,hostid=...,dhchap_secret=...,
// dhchap_ctrl_secret=...,nr_io_queues=N,queue_size=N,keep_alive_tmo=S,reconnect_delay=S,ctrl_loss_tmo=S", in
// libnvme's order (build_options()). Rejects a missing or unknown transport, a missing address or NQN, an
// invalid NQN, values the kernel's option parser would split (',' '=' or a newline; a secret may hold the
// base64 '=' padding, the kernel takes the rest of the option after the first '='), a secret that is not a
// valid DHHC-1 key (without quoting it), a controller secret without a host secret and numbers outside the
// kernel's accepted ranges.
Result<std::string> build_connect_options(const KernelConnectParams& p);

// The kernel's reply to a connect: "instance=N,cntlid=M\n" (the controller is /dev/nvmeN).
struct ConnectReply {
  unsigned instance = 0;
  unsigned cntlid = 0;
};
Result<ConnectReply> parse_connect_reply(std::string_view reply);

// What a failed write of the option string means (errno as the kernel's nvmf_dev_write returns it).
std::string describe_connect_errno(int err, const KernelConnectParams& p);

// Opens `device` O_RDWR, writes `options` in one write() and reads the reply. Errors: ENOENT/ENODEV/ENXIO
// on open -> the kernel host is missing (with the ublk hint); a failed write -> describe_connect_errno.
Result<std::string> fabrics_device_exchange(const std::string& device, const std::string& options,
                                            const KernelConnectParams& p);

struct KernelNamespace {
  uint32_t nsid = 0;
  std::string name;          // nvme0n1 (the block device's name; a multipath head's for native multipath)
  std::string block_device;  // dev_dir/name
  uint64_t size_bytes = 0;   // sysfs `size` (512-byte sectors) * 512
  bool node_present = false; // the device node exists under dev_dir
  // Native multipath: this controller's hidden path to the head `name` (nvme2c4n1); empty for a plain disk.
  std::string path;
  // ANA as the kernel sees it on this path (sysfs ana_state: optimized, non-optimized, inaccessible,
  // persistent-loss, change) and the namespace's ANA group; empty / absent when the controller has no ANA.
  std::string ana_state;
  std::optional<uint32_t> ana_grpid;
};

struct KernelController {
  std::string name;       // nvme0
  unsigned instance = 0;  // 0 for nvme0
  std::string transport;  // tcp, rdma, fc, loop, pcie
  std::string address;    // "traddr=127.0.0.1,trsvcid=4420,src_addr=127.0.0.1"
  std::string traddr;     // parsed from `address`
  std::string trsvcid;
  std::string state;  // live, connecting, resetting, deleting, ...
  std::string subsysnqn;
  std::optional<unsigned> cntlid;
  std::string model;
  std::string serial;
  std::vector<KernelNamespace> namespaces;  // sorted by nsid
};

// One path of a native-multipath device: the controller it goes through and the namespace's ANA state there.
struct KernelPath {
  std::string controller;  // nvme4
  std::string path;        // nvme2c4n1
  std::string transport;
  std::string address;
  std::string state;  // the controller's: live, connecting, resetting, ...
  std::optional<unsigned> cntlid;
  std::string ana_state;
  std::optional<uint32_t> ana_grpid;
};

// A native-multipath head (/dev/nvmeKnY, what users open) and its paths, one per controller.
struct KernelMultipathDevice {
  std::string name;          // nvme2n1
  std::string block_device;  // dev_dir/name
  uint32_t nsid = 0;
  uint64_t size_bytes = 0;
  std::string subsysnqn;
  std::vector<KernelPath> paths;  // in the order of `controllers` (by instance)
};

// Groups the multipath namespaces of `controllers` (those with a hidden path) by head, sorted by head name
// (subsystem instance, then head instance); plain disks are left out.
std::vector<KernelMultipathDevice> multipath_devices(const std::vector<KernelController>& controllers);

// One key of a sysfs `address` ("traddr=..,trsvcid=..,src_addr=.."); empty when absent.
std::string address_field(std::string_view address, std::string_view key);

// Every controller under sysfs_nvme, sorted by instance; PCIe controllers only with include_pcie.
std::vector<KernelController> list_controllers(const KernelFabricsPaths& paths, bool include_pcie = false);
Result<KernelController> read_controller(const KernelFabricsPaths& paths, const std::string& name);

// Connect: the option string, the exchange with the fabrics device, then wait (polling sysfs every 50 ms,
// up to `ns_timeout`) until the controller has namespaces whose device nodes all exist. A controller whose
// namespaces have not appeared by then is returned as it is (it is connected: the caller reports it).
Result<KernelController> connect_controller(const KernelFabricsPaths& paths, const KernelConnectParams& p,
                                            std::chrono::milliseconds ns_timeout);

// "nvme0", "/dev/nvme0" -> the controller; "nvme0n1", "/dev/nvme0n1" -> every controller with that
// namespace block device (one, or each path of a multipath head). Errors for a malformed name or no match.
Result<std::vector<std::string>> controllers_for_device(const KernelFabricsPaths& paths, std::string_view device);

// Writes "1" to delete_controller of each controller; returns the names disconnected. Errors when nothing
// matches (the message names what was looked for) or a delete_controller write fails.
Result<std::vector<std::string>> disconnect_nqn(const KernelFabricsPaths& paths, std::string_view nqn);
Result<std::vector<std::string>> disconnect_device(const KernelFabricsPaths& paths, std::string_view device);

}  // namespace rdmablk::initiator

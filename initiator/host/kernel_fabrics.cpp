#include "initiator/host/kernel_fabrics.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>
#include <utility>

#include "initiator/host/controller.h"
#include "initiator/host/first_line.h"
#include "protocol/fabrics.h"

namespace rdmablk::initiator {

namespace fs = std::filesystem;

namespace {

// Matches the kernel's nvmf option table: NVMF_MIN/MAX_QUEUE_SIZE.
constexpr unsigned kMinQueueSize = 16;
constexpr unsigned kMaxQueueSize = 1024;

// nvmeN (a controller), nvmeXnY (a disk), nvmeXcZnY (a hidden path of a native-multipath head).
const std::regex kControllerName{R"(nvme(\d+))"};
const std::regex kNamespaceName{R"(nvme(\d+)(c\d+)?n(\d+))"};

// A sysfs attribute's first line, without the trailing newline and padding ("" when unreadable).
std::string read_attr(const fs::path& p) { return read_first_line(p.string()).value_or(std::string()); }

template <typename T>
std::optional<T> parse_number(std::string_view s) {
  T v{};
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

Result<void> check_value(std::string_view key, std::string_view value) {
  // The kernel splits the option string at ',' and each option at '=' (match_token), and stops at '\n'.
  if (value.find_first_of(",=\n\r") != std::string_view::npos) {
    return make_error(fmt::format("invalid {} '{}': it must not contain ',', '=' or a newline", key, value));
  }
  return {};
}

// Names the connection in every connect error: "tcp 127.0.0.1:4420 nqn...".
std::string where(const KernelConnectParams& p) {
  return fmt::format("{} {}:{} {}", p.transport, p.traddr, p.trsvcid.empty() ? "(default port)" : p.trsvcid, p.nqn);
}

std::string host_missing_message(const std::string& device, int err) {
  return fmt::format(
      "{}: {}: the kernel NVMe-oF host is not available (modprobe nvme-fabrics nvme-tcp|nvme-rdma); use "
      "`rdmablk attach --userspace` (ublk) instead",
      device, std::strerror(err));
}

KernelNamespace read_namespace(const fs::path& dir, std::string name, const KernelFabricsPaths& paths) {
  KernelNamespace ns;
  ns.nsid = parse_number<uint32_t>(read_attr(dir / "nsid")).value_or(0);
  ns.size_bytes = parse_number<uint64_t>(read_attr(dir / "size")).value_or(0) * 512;
  ns.block_device = (fs::path(paths.dev_dir) / name).string();
  std::error_code ec;
  ns.node_present = fs::exists(ns.block_device, ec);
  ns.name = std::move(name);
  return ns;
}

// The ANA attributes the kernel shows on a path (or a plain disk) of a controller that uses ANA
// (drivers/nvme/host/sysfs.c: ana_grpid, ana_state; hidden when the controller has no ANA).
void read_ana(const fs::path& dir, KernelNamespace& ns) {
  ns.ana_state = read_attr(dir / "ana_state");
  ns.ana_grpid = parse_number<uint32_t>(read_attr(dir / "ana_grpid"));
}

// nvme2n1 -> (2, 1) for sorting heads by subsystem, then head instance; (max, max) when unparsable.
std::pair<unsigned, unsigned> head_order(const std::string& name) {
  std::smatch m;
  if (!std::regex_match(name, m, kNamespaceName)) return {~0u, ~0u};
  return {parse_number<unsigned>(m[1].str()).value_or(~0u), parse_number<unsigned>(m[3].str()).value_or(~0u)};
}

// The namespaces of a controller directory. Without native multipath the disks nvmeXnY are children of
// the controller. With it the controller has hidden paths nvmeKcZnY, and the disk users see is the head
// nvmeKnY, a child of the subsystem device under sysfs_subsys.
std::vector<KernelNamespace> scan_namespaces(const fs::path& ctrl_dir, const KernelFabricsPaths& paths) {
  std::vector<KernelNamespace> out;
  std::set<std::string> seen;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ctrl_dir, ec)) {
    std::string n = e.path().filename().string();
    std::smatch m;
    if (!std::regex_match(n, m, kNamespaceName)) continue;
    if (!m[2].matched) {
      if (!seen.insert(n).second) continue;
      out.push_back(read_namespace(e.path(), n, paths));
      read_ana(e.path(), out.back());
      continue;
    }
    std::string head = fmt::format("nvme{}n{}", m[1].str(), m[3].str());
    if (!seen.insert(head).second) continue;
    fs::path head_dir = fs::path(paths.sysfs_subsys) / fmt::format("nvme-subsys{}", m[1].str()) / head;
    out.push_back(read_namespace(fs::exists(head_dir, ec) ? head_dir : e.path(), head, paths));
    out.back().path = n;
    read_ana(e.path(), out.back());  // per path: the head has no ANA state of its own
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.nsid < b.nsid; });
  return out;
}

Result<void> delete_controllers(const KernelFabricsPaths& paths, const std::vector<std::string>& names) {
  for (const auto& n : names) {
    fs::path p = fs::path(paths.sysfs_nvme) / n / "delete_controller";
    int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return make_error(fmt::format("cannot disconnect {}: {}: {}", n, p.string(), std::strerror(errno)), errno);
    ssize_t w = ::write(fd, "1", 1);
    int err = errno;
    ::close(fd);
    // ENODEV/ENOENT: the controller went away on its own meanwhile, which is what was asked for.
    if (w != 1 && err != ENODEV && err != ENOENT) {
      return make_error(fmt::format("cannot disconnect {}: write to {}: {}", n, p.string(), std::strerror(err)), err);
    }
  }
  return {};
}

}  // namespace

Result<std::string> build_connect_options(const KernelConnectParams& p) {
  if (p.transport != "tcp" && p.transport != "rdma") {
    return make_error(fmt::format("unsupported transport '{}' (tcp or rdma)", p.transport));
  }
  if (p.traddr.empty()) return make_error("a transport address (-a/--traddr) is required");
  if (p.nqn.empty()) return make_error("a subsystem NQN (-n/--nqn) is required");
  if (!protocol::valid_nqn(p.nqn)) return make_error(fmt::format("invalid subsystem NQN '{}'", p.nqn));
  if (!p.hostnqn.empty() && !protocol::valid_nqn(p.hostnqn)) {
    return make_error(fmt::format("invalid host NQN '{}'", p.hostnqn));
  }
  if (p.nr_io_queues && *p.nr_io_queues == 0) return make_error("nr_io_queues must be at least 1");
  if (p.queue_size && (*p.queue_size < kMinQueueSize || *p.queue_size > kMaxQueueSize)) {
    return make_error(fmt::format("queue_size {} is out of range ({}..{})", *p.queue_size, kMinQueueSize, kMaxQueueSize));
  }
  if (p.reconnect_delay && *p.reconnect_delay == 0) return make_error("reconnect_delay must be at least 1 second");
  if (p.ctrl_loss_tmo && *p.ctrl_loss_tmo < -1) return make_error("ctrl_loss_tmo must be -1 (forever) or more");
  // The secrets are checked as keys (which also keeps ',' and newlines out) and never quoted.
  if (auto d = make_dhchap_settings(p.dhchap_secret, p.dhchap_ctrl_secret); !d) return tl::unexpected(d.error());

  std::string s;
  Result<void> bad;
  auto add = [&](std::string_view key, const std::string& value) {
    if (value.empty() || !bad) return;
    bad = check_value(key, value);
    s += fmt::format("{}{}={}", s.empty() ? "" : ",", key, value);
  };
  auto add_num = [&](std::string_view key, const auto& value) {
    if (value) s += fmt::format(",{}={}", key, *value);
  };
  add("nqn", p.nqn);
  add("transport", p.transport);
  add("traddr", p.traddr);
  add("trsvcid", p.trsvcid);
  add("hostnqn", p.hostnqn);
  add("hostid", p.hostid);
  if (!bad) return tl::unexpected(bad.error());
  // A key file's trailing newline would end the kernel's option string early.
  auto trimmed = [](std::string_view v) { return v.substr(0, v.find_last_not_of(" \t\r\n") + 1); };
  if (!p.dhchap_secret.empty()) s += fmt::format(",dhchap_secret={}", trimmed(p.dhchap_secret));
  if (!p.dhchap_ctrl_secret.empty()) s += fmt::format(",dhchap_ctrl_secret={}", trimmed(p.dhchap_ctrl_secret));
  add_num("nr_io_queues", p.nr_io_queues);
  add_num("queue_size", p.queue_size);
  add_num("keep_alive_tmo", p.keep_alive_tmo);
  add_num("reconnect_delay", p.reconnect_delay);
  add_num("ctrl_loss_tmo", p.ctrl_loss_tmo);
  if (p.tls) s += ",tls";  // libnvme: the boolean options come last
  return s;
}

Result<ConnectReply> parse_connect_reply(std::string_view reply) {
  std::optional<unsigned> instance, cntlid;
  std::string_view rest = reply;
  while (!rest.empty()) {
    std::size_t end = rest.find_first_of(",\n");
    std::string_view item = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    if (item.empty()) continue;
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    auto key = item.substr(0, eq);
    auto value = parse_number<unsigned>(item.substr(eq + 1));
    if (key == "instance") instance = value;
    if (key == "cntlid") cntlid = value;
  }
  if (!instance || !cntlid) {
    std::string shown(reply.substr(0, 80));
    std::replace(shown.begin(), shown.end(), '\n', ' ');
    return make_error(fmt::format("cannot parse the kernel's connect reply '{}' (expected instance=N,cntlid=M)", shown));
  }
  return ConnectReply{*instance, *cntlid};
}

std::string describe_connect_errno(int err, const KernelConnectParams& p) {
  std::string what;
  switch (err) {
    case EALREADY:
      what = "already connected (the kernel has a controller to this subsystem at this address; `rdmablk list`)";
      break;
    case EINVAL:
      what = fmt::format("invalid arguments/configuration (an option the kernel rejects, or no nvme-{} module: "
                         "modprobe nvme-{}; dmesg says which)",
                         p.transport, p.transport);
      break;
    case EADDRINUSE:
      what = "hostnqn already in use (another host identity uses this host NQN or host ID)";
      break;
    case ENODEV:
      what = "invalid interface (no such host interface or device)";
      break;
    case EOPNOTSUPP:
      what = "not supported by this kernel";
      break;
    case ECONNREFUSED:
      what = "connection refused (nothing listening there, or the target rejected the host NQN / subsystem NQN)";
      break;
    case EADDRNOTAVAIL:
      what = "cannot assign requested address";
      break;
    case ENOKEY:
      what = "no key for authentication / TLS";
      break;
    case EKEYREJECTED:
      what = p.dhchap_secret.empty()
                 ? "authentication failed: the controller requires authentication (pass --dhchap-secret)"
                 : "authentication failed (wrong --dhchap-secret, or the controller failed --dhchap-ctrl-secret)";
      break;
    case EIO:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
      what = fmt::format("{} (the connection or the NVMe-oF Connect failed; dmesg has the kernel's reason)",
                         std::strerror(err));
      break;
    default:
      what = fmt::format("failed to write to the nvme-fabrics device: {}", std::strerror(err));
  }
  if (p.tls) {
    what += "; with --tls the kernel needs tlshd (ktls-utils, not in Debian 12) and the PSK in its .nvme keyring "
            "(nvme tls-key --import); `rdmablk attach --userspace --tls-key-file FILE` runs TLS itself";
  }
  return fmt::format("connect {}: {}", where(p), what);
}

Result<std::string> fabrics_device_exchange(const std::string& device, const std::string& options,
                                            const KernelConnectParams& p) {
  int fd = ::open(device.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ENODEV || err == ENXIO) return make_error(host_missing_message(device, err), err);
    return make_error(fmt::format("cannot open {}: {}", device, std::strerror(err)), err);
  }
  // The kernel parses one write() as the whole option string: it must not be split.
  ssize_t w = ::write(fd, options.data(), options.size());
  if (w != static_cast<ssize_t>(options.size())) {
    int err = w < 0 ? errno : EIO;
    ::close(fd);
    return make_error(describe_connect_errno(err, p), err);
  }
  char buf[4096];
  ssize_t r;
  do {
    r = ::read(fd, buf, sizeof(buf) - 1);
  } while (r < 0 && errno == EINTR);
  int err = errno;
  ::close(fd);
  if (r < 0) return make_error(fmt::format("cannot read the connect reply from {}: {}", device, std::strerror(err)), err);
  return std::string(buf, static_cast<std::size_t>(r));
}

std::string address_field(std::string_view address, std::string_view key) {
  std::string_view rest = address;
  while (!rest.empty()) {
    std::size_t end = rest.find(',');
    std::string_view item = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    if (item.size() > key.size() && item.substr(0, key.size()) == key && item[key.size()] == '=') {
      return std::string(item.substr(key.size() + 1));
    }
  }
  return {};
}

Result<KernelController> read_controller(const KernelFabricsPaths& paths, const std::string& name) {
  std::smatch m;
  if (!std::regex_match(name, m, kControllerName)) return make_error(fmt::format("'{}' is not a controller name", name));
  fs::path dir = fs::path(paths.sysfs_nvme) / name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return make_error(fmt::format("no NVMe controller {}", name), ENOENT);
  KernelController c;
  c.name = name;
  c.instance = parse_number<unsigned>(m[1].str()).value_or(0);
  c.transport = read_attr(dir / "transport");
  c.address = read_attr(dir / "address");
  c.traddr = address_field(c.address, "traddr");
  c.trsvcid = address_field(c.address, "trsvcid");
  c.state = read_attr(dir / "state");
  c.subsysnqn = read_attr(dir / "subsysnqn");
  c.cntlid = parse_number<unsigned>(read_attr(dir / "cntlid"));
  c.model = read_attr(dir / "model");
  c.serial = read_attr(dir / "serial");
  c.namespaces = scan_namespaces(dir, paths);
  return c;
}

std::vector<KernelController> list_controllers(const KernelFabricsPaths& paths, bool include_pcie) {
  std::vector<KernelController> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(paths.sysfs_nvme, ec)) {
    std::string n = e.path().filename().string();
    if (!std::regex_match(n, kControllerName)) continue;
    auto c = read_controller(paths, n);
    if (!c || (!include_pcie && c->transport == "pcie")) continue;
    out.push_back(std::move(*c));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.instance < b.instance; });
  return out;
}

std::vector<KernelMultipathDevice> multipath_devices(const std::vector<KernelController>& controllers) {
  std::vector<KernelMultipathDevice> out;
  for (const auto& c : controllers) {
    for (const auto& n : c.namespaces) {
      if (n.path.empty()) continue;
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& d) { return d.name == n.name; });
      if (it == out.end()) {
        out.push_back(KernelMultipathDevice{n.name, n.block_device, n.nsid, n.size_bytes, c.subsysnqn, {}});
        it = out.end() - 1;
      }
      it->paths.push_back(KernelPath{c.name, n.path, c.transport, c.address, c.state, c.cntlid, n.ana_state,
                                     n.ana_grpid});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return head_order(a.name) < head_order(b.name); });
  return out;
}

Result<KernelController> connect_controller(const KernelFabricsPaths& paths, const KernelConnectParams& p,
                                            std::chrono::milliseconds ns_timeout) {
  auto options = build_connect_options(p);
  if (!options) return tl::unexpected(options.error());
  auto reply = fabrics_device_exchange(paths.fabrics_device, *options, p);
  if (!reply) return tl::unexpected(reply.error());
  auto parsed = parse_connect_reply(*reply);
  if (!parsed) return tl::unexpected(parsed.error());
  std::string name = fmt::format("nvme{}", parsed->instance);

  // The kernel scans namespaces asynchronously after the connect returns, and udev (or devtmpfs) creates
  // the nodes after that: poll until every namespace seen has its node, and the set stopped growing.
  auto deadline = std::chrono::steady_clock::now() + ns_timeout;
  std::size_t last_count = 0;
  for (;;) {
    auto c = read_controller(paths, name);
    bool ready = c && !c->namespaces.empty() &&
                 std::all_of(c->namespaces.begin(), c->namespaces.end(), [](const auto& n) { return n.node_present; });
    bool settled = ready && c->namespaces.size() == last_count;
    if (c) last_count = c->namespaces.size();
    if (settled || std::chrono::steady_clock::now() >= deadline) {
      if (!c) return make_error(fmt::format("the kernel created {} but it is not in {}", name, paths.sysfs_nvme));
      if (!c->cntlid) c->cntlid = parsed->cntlid;
      return c;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Result<std::vector<std::string>> controllers_for_device(const KernelFabricsPaths& paths, std::string_view device) {
  std::string name(device);
  if (name.rfind("/dev/", 0) == 0) name = name.substr(5);
  if (std::regex_match(name, kControllerName)) {
    auto c = read_controller(paths, name);
    if (!c) return make_error(fmt::format("no NVMe controller {} (see `rdmablk list`)", device), ENOENT);
    return std::vector<std::string>{name};
  }
  if (!std::regex_match(name, kNamespaceName)) {
    return make_error(fmt::format("'{}' is not an NVMe controller or namespace device (nvme0, /dev/nvme0n1)", device));
  }
  std::vector<std::string> out;
  for (const auto& c : list_controllers(paths, true)) {
    for (const auto& n : c.namespaces) {
      if (n.name == name) {
        out.push_back(c.name);
        break;
      }
    }
  }
  if (out.empty()) return make_error(fmt::format("no NVMe controller has namespace {} (see `rdmablk list`)", device), ENOENT);
  return out;
}

Result<std::vector<std::string>> disconnect_nqn(const KernelFabricsPaths& paths, std::string_view nqn) {
  std::vector<std::string> names;
  for (const auto& c : list_controllers(paths, true)) {
    if (c.subsysnqn == nqn) names.push_back(c.name);
  }
  if (names.empty()) return make_error(fmt::format("no NVMe controller connected to {}", nqn), ENOENT);
  auto r = delete_controllers(paths, names);
  if (!r) return tl::unexpected(r.error());
  return names;
}

Result<std::vector<std::string>> disconnect_device(const KernelFabricsPaths& paths, std::string_view device) {
  auto names = controllers_for_device(paths, device);
  if (!names) return names;
  auto r = delete_controllers(paths, *names);
  if (!r) return tl::unexpected(r.error());
  return names;
}

}  // namespace rdmablk::initiator

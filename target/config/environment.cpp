#include "target/config/parser.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

namespace rdmablk::target {

using namespace config_impl;

namespace {

Result<void> check_namespace_file(const TargetConfig& config, const NamespaceConfig& ns, const std::string& field) {
  auto error = [&](SourceLocation at, const std::string& f, const std::string& problem, int err = 0) {
    return make_error(format_message(config.source, at, f, problem), err);
  };
  const std::string& p = ns.path;
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    int err = errno;
    if (err != ENOENT) return error(ns.path_at, field + ".path", "cannot access " + p + ": " + errno_text(err), err);
    if (ns.size == 0) {
      return error(ns.path_at, field + ".path", p + " does not exist and no size is given to create it", ENOENT);
    }
    if (ns.read_only) {
      return error(ns.path_at, field + ".path", p + " does not exist (a read-only namespace is never created)", ENOENT);
    }
    std::filesystem::path parent = std::filesystem::path(p).parent_path();
    if (parent.empty()) parent = ".";
    struct stat dir {};
    if (::stat(parent.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode)) {
      return error(ns.path_at, field + ".path",
                   "cannot create " + p + ": directory " + parent.string() + " does not exist", ENOENT);
    }
    if (::access(parent.c_str(), W_OK | X_OK) != 0) {
      int e = errno;
      return error(ns.path_at, field + ".path", "cannot create " + p + ": " + parent.string() + ": " + errno_text(e),
                   e);
    }
    return {};
  }
  if (S_ISDIR(st.st_mode)) return error(ns.path_at, field + ".path", p + " is a directory", EISDIR);
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return error(ns.path_at, field + ".path", p + " is neither a regular file nor a block device", EINVAL);
  }
  if (::access(p.c_str(), ns.read_only ? R_OK : R_OK | W_OK) != 0) {
    int e = errno;
    return error(ns.path_at, field + ".path",
                 std::string("cannot open ") + p + (ns.read_only ? " for reading: " : " for reading and writing: ") +
                     errno_text(e),
                 e);
  }
  uint64_t existing = static_cast<uint64_t>(st.st_size);
  if (S_ISBLK(st.st_mode)) {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    uint64_t bytes = 0;
    if (fd >= 0 && ::ioctl(fd, BLKGETSIZE64, &bytes) == 0) existing = bytes;
    if (fd >= 0) ::close(fd);
    if (ns.size > existing && existing != 0) {
      return error(ns.size_at, field + ".size",
                   "size " + format_size(ns.size) + " exceeds the device " + p + " (" + format_size(existing) + ")",
                   EINVAL);
    }
    return {};
  }
  if (ns.size == 0) {
    uint32_t bs = block_size_or_default(ns);
    if (existing == 0) return error(ns.path_at, field + ".path", p + " is empty and no size is given", EINVAL);
    if (existing % bs != 0) {
      return error(
          ns.path_at, field + ".path",
          p + " is " + std::to_string(existing) + " bytes, not a multiple of the block size " + std::to_string(bs),
          EINVAL);
    }
  } else if (ns.read_only && ns.size > existing) {
    return error(ns.size_at, field + ".size",
                 "size " + format_size(ns.size) + " exceeds " + p + " (" + format_size(existing) +
                     ") and a read-only namespace cannot grow it",
                 EINVAL);
  }
  return {};
}

// A TCP address:port from the file that must be free: a listener's or the metrics endpoint's.
struct BindCheck {
  const std::string& address;
  uint16_t port;
  SourceLocation address_at;
  SourceLocation port_at;
  std::string field;  // "listeners[1]", "metrics"
  std::string shown;  // "tcp 127.0.0.1:4420"
};

Result<void> check_port(const TargetConfig& config, const BindCheck& l) {
  const std::string& field = l.field;
  auto ip = parse_ip(l.address);
  if (!ip) return make_error(format_message(config.source, l.address_at, field + ".address", "not an IP address"));
  int fd = ::socket(ip->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    return make_error(format_message(config.source, l.address_at, field + ".address",
                                     "cannot open a socket for " + l.shown + ": " + errno_text(e)),
                      e);
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (ip->family == AF_INET) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(l.port);
    std::memcpy(&sa.sin_addr, ip->bytes.data(), 4);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  } else {
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(l.port);
    std::memcpy(&sa.sin6_addr, ip->bytes.data(), 16);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  }
  int e = rc == 0 ? 0 : errno;
  ::close(fd);
  switch (e) {
    case 0:
      return {};
    case EADDRINUSE:
      return make_error(format_message(config.source, l.port_at, field + ".port", l.shown + " is already in use"), e);
    case EADDRNOTAVAIL:
      return make_error(format_message(config.source, l.address_at, field + ".address",
                                       l.address + " is not an address of this host"),
                        e);
    case EACCES:
      return make_error(
          format_message(config.source, l.port_at, field + ".port",
                         "port " + std::to_string(l.port) + " is below 1024 and needs CAP_NET_BIND_SERVICE"),
          e);
    default:
      return make_error(
          format_message(config.source, l.port_at, field + ".port", "cannot bind " + l.shown + ": " + errno_text(e)),
          e);
  }
}

// Each reactor CPU online and allowed, else an error at the entry that named it.
Result<void> check_reactor_cpus(const TargetConfig& config, const CpuAvailability& cpus) {
  for (std::size_t i = 0; i < config.reactor_cpus.size(); ++i) {
    int cpu = config.reactor_cpus[i];
    SourceLocation at = i < config.reactor_cpus_at.size() ? config.reactor_cpus_at[i] : SourceLocation{};
    if (!std::binary_search(cpus.online.begin(), cpus.online.end(), cpu)) {
      return make_error(format_message(config.source, at, "reactors",
                                       "CPU " + std::to_string(cpu) + " is not online on this machine (online: " +
                                           format_cpu_list(cpus.online) + ")"),
                        EINVAL);
    }
    if (!std::binary_search(cpus.allowed.begin(), cpus.allowed.end(), cpu)) {
      return make_error(format_message(config.source, at, "reactors",
                                       "CPU " + std::to_string(cpu) + " is outside the CPUs this process may run on (" +
                                           format_cpu_list(cpus.allowed) +
                                           ": see taskset, systemd's CPUAffinity= or the cgroup's cpuset)"),
                        EINVAL);
    }
  }
  return {};
}

std::vector<int> online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  if (in && std::getline(in, text)) {
    if (auto cpus = parse_cpu_list(text); cpus && !cpus->empty()) {
      std::sort(cpus->begin(), cpus->end());
      return *cpus;
    }
  }
  long n = ::sysconf(_SC_NPROCESSORS_CONF);
  std::vector<int> out;
  for (long i = 0; i < std::max(n, 1L); ++i) out.push_back(static_cast<int>(i));
  return out;
}

// The main thread's affinity mask (what taskset and systemd's CPUAffinity= set); empty if unreadable.
std::vector<int> allowed_cpus() {
  for (int size = 1024; size <= (1 << 20); size *= 2) {
    cpu_set_t* set = CPU_ALLOC(size);
    if (!set) return {};
    std::size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, set);
    if (::sched_getaffinity(::getpid(), bytes, set) == 0) {
      std::vector<int> out;
      for (int cpu = 0; cpu < size; ++cpu) {
        if (CPU_ISSET_S(cpu, bytes, set)) out.push_back(cpu);
      }
      CPU_FREE(set);
      return out;
    }
    int e = errno;
    CPU_FREE(set);
    if (e != EINVAL) return {};  // EINVAL: the kernel's mask is larger than ours
  }
  return {};
}

}  // namespace

Result<void> validate_environment(const TargetConfig& config, EnvironmentChecks checks) {
  for (std::size_t s = 0; s < config.subsystems.size(); ++s) {
    const auto& sub = config.subsystems[s];
    for (std::size_t n = 0; n < sub.namespaces.size(); ++n) {
      const auto& ns = sub.namespaces[n];
      const std::string field = "subsystems[" + std::to_string(s) + "].namespaces[" + std::to_string(n) + "]";
      if (ns.backend == BackendKind::rbd) {
        if (!checks.rbd) continue;
        // Connect and open the image read-only (no exclusive lock taken): the cluster answers, the
        // user may read the image, its size fits the block size. The connection is dropped again.
        backend::RbdOptions o = rbd_options(ns);
        o.read_only = true;
        auto b = backend::open_rbd_backend(o);
        if (!b) return make_error(format_message(config.source, ns.image_at, field, b.error().message), b.error().errno_value);
        continue;
      }
      if (ns.backend != BackendKind::file) continue;
      auto ok = check_namespace_file(config, ns, field);
      if (!ok) return ok;
    }
  }
  if (!config.reactor_cpus.empty()) {
    auto ok = check_reactor_cpus(config, checks.cpus ? *checks.cpus : machine_cpus());
    if (!ok) return ok;
  }
  for (std::size_t i = 0; checks.ports && i < config.listeners.size(); ++i) {
    const auto& l = config.listeners[i];
    if (l.transport != transport::TransportType::tcp) continue;  // rdma_cm is checked when it binds
    auto ok = check_port(config, BindCheck{l.address, l.port, l.address_at, l.port_at,
                                           "listeners[" + std::to_string(i) + "]", endpoint(l)});
    if (!ok) return ok;
  }
  if (checks.ports && config.metrics.enabled) {
    const auto& m = config.metrics;
    auto ok = check_port(config, BindCheck{m.address, m.port, m.address_at, m.port_at, "metrics",
                                           "metrics " + host_port(m.address, m.port)});
    if (!ok) return ok;
  }
  return {};
}

CpuAvailability machine_cpus() {
  CpuAvailability cpus;
  cpus.online = online_cpus();
  cpus.allowed = allowed_cpus();
  if (cpus.allowed.empty()) cpus.allowed = cpus.online;
  return cpus;
}

bool same_listener_settings(const ListenerConfig& a, const ListenerConfig& b) noexcept {
  return a.transport == b.transport && a.address == b.address && a.port == b.port && a.role == b.role &&
         a.tls == b.tls && a.c2h_success == b.c2h_success;
}

std::vector<std::string> restart_only_changes(const TargetConfig& running, const TargetConfig& reread) {
  std::vector<std::string> keys;
  if (running.reactors != reread.reactors || running.reactor_cpus != reread.reactor_cpus) keys.emplace_back("reactors");
  if (running.busy_poll_us != reread.busy_poll_us) keys.emplace_back("busy_poll_us");
  if (running.state_dir != reread.state_dir) keys.emplace_back("state_dir");
  const auto& c = running.control;
  const auto& c2 = reread.control;
  if (c.enabled != c2.enabled || (c.enabled && c.socket_path != c2.socket_path)) keys.emplace_back("control");
  const auto& m = running.metrics;
  const auto& m2 = reread.metrics;
  if (m.enabled != m2.enabled || (m.enabled && (m.address != m2.address || m.port != m2.port))) {
    keys.emplace_back("metrics");
  }
  if (running.tls_psk_derivation != reread.tls_psk_derivation) keys.emplace_back("tls_psk_derivation");
  const auto& g = running.group;
  const auto& g2 = reread.group;
  if (g.enabled != g2.enabled || g.name != g2.name || g.member != g2.member || g.pool != g2.pool ||
      g.rados_namespace != g2.rados_namespace || g.ceph_conf != g2.ceph_conf || g.client != g2.client ||
      g.keyring != g2.keyring || g.lease_seconds != g2.lease_seconds || g.ana_groups != g2.ana_groups ||
      g.failback != g2.failback || g.blocklist != g2.blocklist || g.standby_state != g2.standby_state) {
    keys.emplace_back("group");
  }
  return keys;
}

std::string TlsPskConfig::describe() const {
  if (!file.empty()) return "file " + file;
  return key ? "set" : "none";
}

std::string DhchapSecretConfig::describe() const {
  if (!file.empty()) return "file " + file;
  return key ? "set" : "none";
}

const HostConfig* SubsystemConfig::find_host(std::string_view hostnqn) const noexcept {
  for (const auto& h : host_configs) {
    if (h.nqn == hostnqn) return &h;
  }
  return nullptr;
}

std::size_t namespace_count(const TargetConfig& config) noexcept {
  std::size_t n = 0;
  for (const auto& sub : config.subsystems) n += sub.namespaces.size();
  return n;
}

std::string describe(const TargetConfig& config) {
  std::string out =
      std::to_string(config.listeners.size()) + (config.listeners.size() == 1 ? " listener (" : " listeners (");
  for (std::size_t i = 0; i < config.listeners.size(); ++i) {
    const auto& l = config.listeners[i];
    out += (i ? ", " : "") + endpoint(l) + (l.role == ListenerRole::discovery ? " discovery" : "");
    if (l.tls != transport::tcp::TlsPolicy::none) out += std::string(" tls ") + transport::tcp::to_string(l.tls);
  }
  out +=
      "), " + std::to_string(config.subsystems.size()) + (config.subsystems.size() == 1 ? " subsystem" : " subsystems");
  std::size_t n = namespace_count(config);
  out += ", " + std::to_string(n) + (n == 1 ? " namespace" : " namespaces");
  std::size_t secrets = 0;
  for (const auto& sub : config.subsystems) {
    for (const auto& h : sub.host_configs) secrets += h.dhchap_key.configured() ? 1 : 0;
  }
  if (secrets != 0) {
    out += ", DH-HMAC-CHAP for " + std::to_string(secrets) + (secrets == 1 ? " host" : " hosts");
  }
  std::size_t psks = 0;
  for (const auto& sub : config.subsystems) {
    for (const auto& h : sub.host_configs) psks += h.tls_psk.configured() ? 1 : 0;
  }
  if (psks != 0) out += ", TLS PSKs for " + std::to_string(psks) + (psks == 1 ? " host" : " hosts");
  out += ", reactors " + (config.reactors ? std::to_string(config.reactors) : std::string("auto"));
  if (!config.reactor_cpus.empty()) out += " on CPUs " + format_cpu_list(config.reactor_cpus);
  out += ", log " + std::string(spdlog::level::to_string_view(config.log_level).data(),
                                spdlog::level::to_string_view(config.log_level).size());
  const auto& q = config.limits;
  out += ", queues " + std::to_string(q.max_io_queues) + "x" + std::to_string(q.io_queue_depth) + ", max I/O " +
         format_size(q.max_io_size) + ", inline " + format_size(q.admin_inline_data) + "/" +
         format_size(q.io_inline_data);
  auto limit = [](uint32_t count) { return count == 0 ? std::string("unlimited") : std::to_string(count); };
  out += ", connections " + limit(q.connections.per_listener) + "/listener " + limit(q.connections.per_host) +
         "/host, Connect within " + std::to_string(q.connections.connect_timeout_ms) + " ms, queue buffers " +
         format_size(q.queue_buffer_bytes);
  out += ", control " + (config.control.enabled ? config.control.socket_path : std::string("off"));
  out += ", metrics " + (config.metrics.enabled
                             ? "http://" + host_port(config.metrics.address, config.metrics.port) + "/metrics"
                             : std::string("off"));
  return out;
}

}  // namespace rdmablk::target

// attach / detach: a volume as a local block device from a small config or the command line.
//   attach --userspace  /dev/ublkbN served by this process through ublk (initiator/ublk/volume.h);
//                       without --foreground it forks once the arguments are checked, and the parent
//                       returns when the device exists, printing its path (the last line of stdout).
//   attach (kernel)     `mode: kernel` in a config: the kernel NVMe-oF host, held until SIGTERM (so the
//                       same systemd template unit serves both modes).
//   detach DEV|NQN      SIGTERM to the serving process (found in the attachment registry, or through the
//                       ublk driver's record of the server pid), wait until the device is gone.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/syslog_sink.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "initiator/cli/attach_config.h"
#include "initiator/cli/attach_registry.h"
#include "initiator/cli/common.h"
#include "initiator/host/kernel_fabrics.h"
#include "initiator/ublk/volume.h"

namespace rdmablk::initiator::cli {

namespace {

constexpr std::chrono::seconds kDetachTimeout{30};

struct AttachFlags {
  ConnFlags conn;
  std::vector<std::string> traddrs;  // -a, repeatable: one per path
  bool userspace = false;
  bool foreground = false;
  std::string config;
  uint32_t nsid = 1;
  Tuning tuning;  // unset: AttachConfig's defaults, the same as a config file's
};

struct DetachFlags {
  std::string target;
  unsigned timeout_s = kDetachTimeout.count();
};

// Flags or config file -> the one description both modes start from.
Result<AttachConfig> attach_config_from(const AttachFlags& f, const CLI::App& app) {
  if (!f.config.empty()) {
    for (const char* flag : {"--traddr", "--nqn", "--trsvcid", "--nsid", "--userspace", "--nr-io-queues",
                             "--queue-size", "--ctrl-loss-tmo", "--reconnect-delay", "--keep-alive-tmo", "--kato",
                             "--dhchap-secret", "--dhchap-ctrl-secret", "--tls", "--tls-key", "--tls-key-file"}) {
      if (app.count(flag) != 0) {
        return make_error(fmt::format("{} and --config both given: the config file says where to attach", flag));
      }
    }
    return load_attach_config(f.config);
  }
  if (!f.userspace) {
    return make_error("attach without --config needs --userspace (ublk); the kernel host path is `rdmablk connect`");
  }
  if (f.traddrs.empty() || f.conn.nqn.empty()) return make_error("attach --userspace needs -a/--traddr and -n/--nqn");
  AttachConfig c;
  auto type = transport::parse_transport_type(f.conn.transport);
  if (!type) return tl::unexpected(type.error());
  uint16_t default_port = transport::kDefaultIoPort;
  if (!f.conn.trsvcid.empty()) {
    auto p = transport::parse_port(f.conn.trsvcid);
    if (!p) return tl::unexpected(p.error());
    default_port = *p;
  }
  // Several -a: one path each (multipath), -s the port of those without one.
  for (const auto& value : f.traddrs) {
    auto a = parse_path_value(value, *type, default_port);
    if (!a) return tl::unexpected(a.error());
    for (const auto& p : c.paths) {
      if (same_path(p, *a)) return make_error(fmt::format("-a {}: the same path is given twice", value), EINVAL);
    }
    c.paths.push_back(std::move(*a));
  }
  c.address = c.paths.front();
  c.subnqn = f.conn.nqn;
  c.nsid = f.nsid;
  c.mode = AttachConfig::Mode::userspace;
  if (!f.conn.hostnqn.empty()) c.hostnqn = f.conn.hostnqn;
  if (!f.conn.hostid.empty()) c.hostid = f.conn.hostid;
  if (auto d = make_dhchap_settings(f.conn.dhchap_secret, f.conn.dhchap_ctrl_secret); !d) {
    return tl::unexpected(d.error());
  }
  c.dhchap_secret = f.conn.dhchap_secret;
  c.dhchap_ctrl_secret = f.conn.dhchap_ctrl_secret;
  c.tls_key = f.conn.tls_key;
  if (!f.conn.tls_key_file.empty()) {
    auto text = read_tls_key_file(f.conn.tls_key_file);
    if (!text) return tl::unexpected(text.error());
    c.tls_key = std::move(*text);
  }
  c.tls = f.conn.tls || !c.tls_key.empty();
  if (c.tls && c.tls_key.empty()) return make_error("--tls needs --tls-key or --tls-key-file (userspace TLS)");
  if (!c.tls_key.empty()) {
    if (auto k = parse_tls_key(c.tls_key, "--tls-key"); !k) return tl::unexpected(k.error());
  }
  const Tuning& t = f.tuning;
  // The limits a config file has (initiator/cli/attach_config.h).
  if (t.nr_io_queues && *t.nr_io_queues > kAttachMaxIoQueues) {
    return make_error(fmt::format("--nr-io-queues {} is out of range (0 = one per CPU, up to {})", *t.nr_io_queues,
                                  kAttachMaxIoQueues));
  }
  if (t.queue_size && (*t.queue_size < kAttachMinQueueSize || *t.queue_size > kAttachMaxQueueSize)) {
    return make_error(fmt::format("--queue-size {} is out of range ({}..{})", *t.queue_size, kAttachMinQueueSize,
                                  kAttachMaxQueueSize));
  }
  if (t.ctrl_loss_tmo && *t.ctrl_loss_tmo < -1) {
    return make_error(fmt::format("--ctrl-loss-tmo {} is out of range (-1 = forever, or seconds)", *t.ctrl_loss_tmo));
  }
  if (t.reconnect_delay && (*t.reconnect_delay < 1 || *t.reconnect_delay > kAttachMaxReconnectDelay)) {
    return make_error(fmt::format("--reconnect-delay {} is out of range (1..{} seconds)", *t.reconnect_delay,
                                  kAttachMaxReconnectDelay));
  }
  if (t.nr_io_queues) c.nr_io_queues = static_cast<uint16_t>(*t.nr_io_queues);
  if (t.queue_size) c.queue_size = static_cast<uint16_t>(*t.queue_size);
  if (t.ctrl_loss_tmo) c.ctrl_loss_tmo_s = *t.ctrl_loss_tmo;
  if (t.reconnect_delay) c.reconnect_delay_s = *t.reconnect_delay;
  if (t.keep_alive_tmo) c.keep_alive_tmo_s = *t.keep_alive_tmo;
  if (f.conn.kato_s) c.keep_alive_tmo_s = *f.conn.kato_s;
  return c;
}

// SIGTERM/SIGINT as a readable descriptor; blocked first so that every thread started later inherits
// the mask and the signal can only arrive here.
// `previous` receives the mask to restore once done.
int block_stop_signals(sigset_t& previous) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, &previous);
  return ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

// Undo block_stop_signals, for a caller that goes on (nothing was served). Signals that arrived meanwhile
// are consumed first: unblocking a pending SIGTERM would kill the process (exit 143 instead of 0).
void release_stop_signals(int fd, const sigset_t& previous) {
  signalfd_siginfo si{};
  while (::read(fd, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
  }
  ::close(fd);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

// After serving: the process is on its way out (disconnect, deregister, exit), so the stop signals stay
// blocked. A second SIGTERM is common - timeout(1) sends one to its child and another to the child's
// process group, systemd may repeat it - and once unblocked it would kill the process halfway through
// detaching (seen in the VM lab under load: exit 143, the kernel controller left connected).
void close_stop_signals(int fd) {
  ::close(fd);
}

// What the background child tells the waiting parent: "R/dev/ublkbN" or "E<message>".
void tell_parent(int& fd, char kind, const std::string& text) {
  if (fd < 0) return;
  std::string msg = kind + text;
  (void)!::write(fd, msg.data(), msg.size());
  ::close(fd);
  fd = -1;
}

// Logs go to stderr and, for a background process whose terminal is gone, to syslog (the journal).
void log_to_syslog_too() {
  auto logger = std::make_shared<spdlog::logger>(
      "rdmablk", spdlog::sinks_init_list{std::make_shared<spdlog::sinks::stderr_color_sink_mt>(),
                                         std::make_shared<spdlog::sinks::syslog_sink_mt>("rdmablk-attach", LOG_PID,
                                                                                         LOG_DAEMON, false)});
  logger->set_pattern("%^%l%$: %v");
  spdlog::set_default_logger(logger);
}

AttachmentRecord record_for(const AttachConfig& c, const ublk::AttachedVolume& v, std::string_view state) {
  AttachmentRecord r;
  r.device = v.device;
  r.dev_id = static_cast<int>(v.dev_id);
  r.pid = ::getpid();
  // The top-level address is the path in use (the first when none is): what single-path readers show.
  transport::TransportAddress shown = c.address;
  for (const auto& p : v.paths) {
    if (p.in_use) shown = p.address;
  }
  r.transport = transport::transport_name(shown.type);
  r.traddr = shown.traddr;
  r.trsvcid = std::to_string(shown.trsvcid);
  r.subnqn = c.subnqn;
  r.nsid = c.nsid;
  r.state = std::string(state);
  if (c.paths.size() > 1) {
    for (const auto& p : v.paths) {
      AttachmentPath ap;
      ap.transport = transport::transport_name(p.address.type);
      ap.traddr = p.address.traddr;
      ap.trsvcid = std::to_string(p.address.trsvcid);
      ap.state = ublk::path_connection_name(p.connection);
      ap.ana = ublk::ana_state_text(p.ana);
      ap.in_use = p.in_use;
      r.paths.push_back(std::move(ap));
    }
  }
  return r;
}

// The ublk path; runs in the process that will serve the device. `ready_fd`: the parent's pipe, or -1.
int serve_userspace(const AttachConfig& c, const CliEnv& env, int ready_fd, bool foreground) {
  // A failure before the device is up: told to the waiting parent (which prints it), else printed here.
  auto fail = [&](const std::string& message, int code) {
    if (ready_fd >= 0) {
      tell_parent(ready_fd, 'E', message);
      return code;
    }
    return report_error(env, message, code);
  };
  auto host = resolve_host_identity(c.hostnqn, c.hostid, env.host_sources);
  if (!host) return fail(host.error().message, 2);
  ublk::AttachOptions o;
  o.controller.address = c.address;
  o.paths = c.paths;
  o.controller.subnqn = c.subnqn;
  o.controller.host = *host;
  o.controller.kato_ms = c.keep_alive_tmo_s * 1000;
  auto dhchap = make_dhchap_settings(c.dhchap_secret, c.dhchap_ctrl_secret, "dhchap_secret", "dhchap_ctrl_secret");
  if (!dhchap) return fail(dhchap.error().message, 2);
  o.controller.dhchap = std::move(*dhchap);
  if (!c.tls_key.empty()) {
    auto psk = parse_tls_key(c.tls_key, "tls_key");
    if (!psk) return fail(psk.error().message, 2);
    o.controller.tls.psk = std::move(*psk);
  }
  o.controller.connector = env.connector;
  o.nsid = c.nsid;
  o.io_queues = c.nr_io_queues;
  o.queue_size = c.queue_size;
  o.ctrl_loss_tmo = std::chrono::seconds(c.ctrl_loss_tmo_s);
  o.reconnect_delay = std::chrono::seconds(c.reconnect_delay_s);
  if (const char* p = std::getenv("RDMABLK_UBLK_CONTROL")) o.control_path = p;  // tests: a missing driver

  // A server must not die writing to a reader that went away (the parent interrupted while waiting, a
  // restarted journald): that would leave a device without its server.
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t previous_mask;
  int stop_fd = block_stop_signals(previous_mask);
  if (stop_fd < 0) return fail(fmt::format("signalfd: {}", std::strerror(errno)), 1);
  int registered = -1;
  ublk::VolumeEvents ev;
  ev.ready = [&](const ublk::AttachedVolume& v) {
    registered = static_cast<int>(v.dev_id);
    if (auto r = write_attachment(record_for(c, v, "live")); !r) {
      spdlog::warn("{}: not recorded for `rdmablk list`: {}", v.device, r.error().message);
    }
    sd_notifyf(0, "READY=1\nSTATUS=%s attached from %s", v.device.c_str(), v.where.c_str());
    if (foreground) {
      *env.out << v.device << std::endl;
    } else {
      tell_parent(ready_fd, 'R', v.device);
      // The parent has returned: the terminal is no longer ours.
      int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      if (null >= 0) {
        ::dup2(null, STDERR_FILENO);
        ::close(null);
      }
    }
  };
  ev.state = [&](const ublk::AttachedVolume& v, std::string_view state) {
    (void)write_attachment(record_for(c, v, state));
    sd_notifyf(0, "STATUS=%s %.*s (%s)", v.device.c_str(), static_cast<int>(state.size()), state.data(),
               v.where.c_str());
  };
  auto r = ublk::serve_volume(o, stop_fd, ev);
  if (registered < 0) {
    release_stop_signals(stop_fd, previous_mask);  // never served (e.g. no ublk driver): the caller goes on
  } else {
    close_stop_signals(stop_fd);
  }
  if (registered >= 0) remove_attachment(registered);
  if (!r) return fail(r.error().message, 1);
  sd_notify(0, "STOPPING=1");
  spdlog::info("detached");
  return 0;
}

// `mode: kernel` under the systemd unit: connect through the kernel host, hold until SIGTERM, disconnect.
int serve_kernel(const AttachConfig& c, const CliEnv& env) {
  auto host = resolve_host_identity(c.hostnqn, c.hostid, env.host_sources);
  if (!host) return report_error(env, host.error().message, 2);
  KernelConnectParams p;
  p.transport = transport::transport_name(c.address.type);
  p.traddr = c.address.traddr;
  p.trsvcid = std::to_string(c.address.trsvcid);
  p.nqn = c.subnqn;
  p.hostnqn = host->hostnqn;
  p.hostid = format_uuid(host->hostid);
  p.dhchap_secret = c.dhchap_secret;
  p.dhchap_ctrl_secret = c.dhchap_ctrl_secret;
  p.tls = c.tls;
  if (c.nr_io_queues != 0) p.nr_io_queues = c.nr_io_queues;
  p.queue_size = c.queue_size;
  p.ctrl_loss_tmo = c.ctrl_loss_tmo_s;
  p.reconnect_delay = c.reconnect_delay_s;
  p.keep_alive_tmo = c.keep_alive_tmo_s;
  sigset_t previous_mask;
  int stop_fd = block_stop_signals(previous_mask);
  if (stop_fd < 0) return report_error(env, fmt::format("signalfd: {}", std::strerror(errno)));
  auto ctrl = connect_controller(env.kernel_paths, p, std::chrono::seconds(30));
  if (!ctrl) {
    release_stop_signals(stop_fd, previous_mask);
    return report_error(env, ctrl.error().message);
  }
  for (const auto& ns : ctrl->namespaces) *env.out << ns.block_device << "\n";
  env.out->flush();
  sd_notifyf(0, "READY=1\nSTATUS=%s connected to %s", ctrl->name.c_str(), c.subnqn.c_str());
  pollfd pfd{stop_fd, POLLIN, 0};
  while (::poll(&pfd, 1, -1) < 0 && errno == EINTR) {
  }
  close_stop_signals(stop_fd);
  sd_notify(0, "STOPPING=1");
  auto gone = disconnect_device(env.kernel_paths, ctrl->name);
  if (!gone) return report_error(env, gone.error().message);
  return 0;
}

int run_attach(const AttachFlags& f, const CLI::App& app, const CliEnv& env) {
  auto cfg = attach_config_from(f, app);
  if (!cfg) return report_error(env, cfg.error().message, 2);
  if (cfg->mode == AttachConfig::Mode::kernel) return serve_kernel(*cfg, env);
  if (f.foreground) return serve_userspace(*cfg, env, -1, true);

  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return report_error(env, fmt::format("pipe: {}", std::strerror(errno)));
  env.out->flush();
  env.err->flush();
  pid_t pid = ::fork();
  if (pid < 0) return report_error(env, fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    ::close(pipefd[0]);
    ::setsid();
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      ::dup2(null, STDIN_FILENO);
      ::dup2(null, STDOUT_FILENO);
      ::close(null);
    }
    if (::chdir("/") != 0) {  // do not pin the caller's working directory's filesystem
    }
    log_to_syslog_too();
    std::_Exit(serve_userspace(*cfg, env, pipefd[1], false));
  }
  ::close(pipefd[1]);
  std::string msg;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(pipefd[0], buf, sizeof(buf));
    if (n > 0) {
      msg.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(pipefd[0]);
  if (!msg.empty() && msg[0] == 'R') {
    *env.out << msg.substr(1) << "\n";
    return 0;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);  // it failed: reap it
  if (!msg.empty() && msg[0] == 'E') return report_error(env, msg.substr(1));
  return report_error(env, "the attach process ended before the device was ready (see the system log)");
}

bool is_rdmablk_process(pid_t pid) {
  char comm[64] = {};
  int fd = ::open(fmt::format("/proc/{}/comm", pid).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::read(fd, comm, sizeof(comm) - 1);
  ::close(fd);
  return n > 0 && std::string_view(comm, static_cast<std::size_t>(n)) == "rdmablk\n";
}

// No registry record (another tool's run dir, or a crash): the ublk driver knows the server's pid.
Result<std::string> detach_without_record(const std::string& target, std::chrono::seconds timeout) {
  auto id = ublk::parse_block_device(target);
  if (!id) return make_error(fmt::format("no attachment matches '{}' (see `rdmablk list`)", target), ENOENT);
  auto control = ublk::Control::open();
  if (!control) return tl::unexpected(control.error());
  auto info = (*control)->info(*id);
  if (!info) return make_error(fmt::format("{}: {}", target, info.error().message), info.error().errno_value);
  const std::string dev = ublk::block_device_path(*id);
  if (info->ublksrv_pid > 0 && process_alive(info->ublksrv_pid)) {
    // The driver keeps the pid of a server that died: it may name another process by now.
    if (!is_rdmablk_process(info->ublksrv_pid)) {
      return make_error(fmt::format("{} is served by pid {}, which is not an rdmablk process: not signalling it",
                                    dev, info->ublksrv_pid),
                        EPERM);
    }
    AttachmentRecord r;
    r.device = dev;
    r.dev_id = static_cast<int>(*id);
    r.pid = info->ublksrv_pid;
    if (auto s = stop_attachment(r, timeout); !s) return tl::unexpected(s.error());
    return dev;
  }
  // Its server died without cleaning up: remove the device ourselves.
  (void)(*control)->stop(*id);
  if (auto s = (*control)->remove(*id); !s) return tl::unexpected(s.error());
  return dev + " (its server was gone)";
}

int run_detach(const DetachFlags& f, const CliEnv& env) {
  const auto timeout = std::chrono::seconds(f.timeout_s);
  auto records = matching_attachments(f.target);
  if (records.empty()) {
    auto r = detach_without_record(f.target, timeout);
    if (!r) return report_error(env, r.error().message);
    *env.out << "detached " << *r << "\n";
    return 0;
  }
  int status = 0;
  for (const auto& rec : records) {
    if (auto s = stop_attachment(rec, std::chrono::duration_cast<std::chrono::milliseconds>(timeout)); !s) {
      status = report_error(env, fmt::format("{}: {}", rec.device, s.error().message));
      continue;
    }
    *env.out << "detached " << rec.device << "\n";
  }
  return status;
}

}  // namespace

void add_attach_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out) {
  auto af = std::make_shared<AttachFlags>();
  auto* attach = app.add_subcommand("attach", "attach a namespace as a local block device (ublk with --userspace)");
  add_connection_flags(attach, af->conn, false, false);
  // -a repeats here: one path each (userspace multipath).
  attach->remove_option(attach->get_option("--traddr"));
  attach->add_option("-a,--traddr", af->traddrs,
                     "transport address: ADDR, ADDR:PORT or [IPv6]:PORT; repeat for several paths (multipath, "
                     "--userspace)");
  attach->add_flag("--userspace", af->userspace, "serve the volume from this process through ublk (/dev/ublkbN)");
  attach->add_option("--nsid", af->nsid, "the namespace to attach")->capture_default_str()->check(CLI::Range(1u, 0xFFFFFFFEu));
  add_tuning_flags(attach, af->tuning);  // ublk queues = I/O queues; I/O is held while reconnecting
  attach->add_flag("--foreground", af->foreground, "stay in the foreground (systemd); default: return once attached");
  attach->add_option("--config", af->config, "attach as a config file says (configs/attach.yaml)");
  out.push_back({attach, [af, attach, &env] { return run_attach(*af, *attach, env); }});

  auto df = std::make_shared<DetachFlags>();
  auto* detach = app.add_subcommand("detach", "detach a userspace (ublk) volume: /dev/ublkbN or a subsystem NQN");
  detach->add_option("target", df->target, "/dev/ublkbN, ublkbN or the subsystem NQN")->required();
  detach->add_option("--timeout", df->timeout_s, "seconds to wait for the serving process")->capture_default_str();
  out.push_back({detach, [df, &env] { return run_detach(*df, env); }});
}

}  // namespace rdmablk::initiator::cli

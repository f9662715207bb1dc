#include "target/daemon/daemon.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "target/control/control_api.h"
#include "target/control/control_server.h"
#include "target/core/core.h"
#include "target/core/core_reactor.h"
#include "target/daemon/daemon_group.h"
#include "target/daemon/group_edits.h"
#include "target/daemon/listener_set.h"
#include "target/manage/config_edits.h"
#include "target/manage/managed_config.h"
#include "target/metrics/metrics.h"
#include "target/metrics/metrics_http.h"
#include "target/daemon/transport_options.h"
#include "transport/buffer_pool.h"
#include "transport/reactor.h"
#include "transport/rdma/rdma_target.h"
#include "transport/tcp/tcp_target.h"

namespace rdmablk::target {

// What a reactor last told the control thread when it ran the periodic probe (heartbeat for the watchdog,
// buffer pool use, which only its own thread may read).
struct ReactorProbe {
  std::atomic<uint64_t> answered{0};  // the last probe sequence number it ran
  std::atomic<uint32_t> free_buffers{0};
};

// The eventfd a backend's library thread writes when its store may have been resized (CoreOptions::
// on_namespace_resize); the control loop polls it. Shared with the callbacks, so that it stays open until
// the last backend that could call is gone.
struct ResizeSignal {
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ~ResizeSignal() {
    if (fd >= 0) ::close(fd);
  }
  void raise() const noexcept {
    const uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(fd, &one, sizeof one);
  }
  void clear() const noexcept {
    uint64_t v;
    [[maybe_unused]] auto r = ::read(fd, &v, sizeof v);
  }
};

struct Daemon::Impl {
  DaemonOptions options;
  TargetConfig config;           // as applied (the listeners as started)
  manage::ManagedConfig managed;  // the config file and the management API's overlay on it
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  int64_t config_loaded_unix_ms = 0;
  int64_t started_unix_ms = 0;
  std::vector<std::unique_ptr<ReactorProbe>> probes;
  uint64_t probe_seq = 0;     // the last probe posted
  uint64_t periodic_seq = 0;  // the last one periodic() posted (what the watchdog waits for)
  unsigned buffers_per_pool = 0;  // as created (queue limits are not reloadable)
  // The previous periodic sample: busy ratios and IOPS are computed over the interval since.
  std::chrono::steady_clock::time_point last_sample{};
  std::vector<uint64_t> last_busy_ns;
  std::vector<double> recent_busy;
  uint64_t last_commands = 0;
  double recent_iops = 0;
  bool watchdog_withheld = false;
  std::unique_ptr<ControlServer> control;
  std::unique_ptr<MetricsHttpServer> metrics;
  std::vector<std::unique_ptr<transport::Reactor>> reactors;
  std::vector<std::unique_ptr<transport::BufferPool>> pools;
  std::vector<std::unique_ptr<ReactorAdapter>> adapters;
  std::vector<std::thread> threads;
  std::shared_ptr<ResizeSignal> resize = std::make_shared<ResizeSignal>();
  std::unique_ptr<TargetCore> core;
  // The TLS PSKs the listeners' server context looks up (a reload swaps the table).
  std::shared_ptr<TlsPskStore> tls_psks = std::make_shared<TlsPskStore>();
  std::unique_ptr<ListenerSet> listeners;
  std::unique_ptr<DaemonGroup> group;        // a gateway group member (config `group:`): leases, ANA
  std::unique_ptr<GroupEdits> group_edits;  // and the group's shared definition
  bool stopped = false;

  ~Impl() { stop_reactors(); }

  // Daemon::start's steps, in order (daemon.cpp); each returns the first error, naming the config place.
  Result<void> create_reactors();  // the reactors and their buffer pools (not running yet)
  Result<void> create_core();
  Result<void> open_listeners();
  Result<std::string> apply_config(const TargetConfig& next);  // reload and the management verbs
  // A gateway group member: the group's shared edits in place of its overlay's, before the core starts.
  Result<void> join_group_state();
  // The control loop: a newer group state the reader thread read, applied (or refused with a log line).
  void apply_group_change();
  // `next` (the group's state `group_edits` last read) is what runs now: noted, and cached in the overlay.
  void took_group_state(manage::ManagedConfig next);
  // Only a socket the config or the command line names is an error when it cannot open.
  Result<void> open_control_socket(ControlHooks hooks);
  Result<void> open_metrics(std::function<TargetStatus()> status);

  void stop_reactors() {
    for (auto& r : reactors) r->stop();
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
    threads.clear();
  }
};

namespace {


unsigned reactor_count(const TargetConfig& config) {
  if (!config.reactor_cpus.empty()) return static_cast<unsigned>(config.reactor_cpus.size());
  if (config.reactors != 0) return config.reactors;
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

unsigned live_connections() {
  return transport::tcp::live_tcp_target_connections() + transport::rdma::live_rdma_target_queues();
}

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every connection holds a file descriptor (a socket, or an RDMA CM id's): the soft RLIMIT_NOFILE (1024
// under systemd unless LimitNOFILE= says otherwise) would refuse connections long before the configured
// limits. Raise it to the hard limit, as systemd.exec(5) advises a program that needs many files to do,
// and say when the limits still do not fit.
void raise_open_file_limit(const TargetConfig& config) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const rlim_t before = rl.rlim_cur;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) rl.rlim_cur = before;
  }
  if (rl.rlim_cur != before) spdlog::info("open files limit raised from {} to {}", before, rl.rlim_cur);
  const uint64_t per_listener = config.limits.connections.per_listener;
  const uint64_t want = per_listener == 0 ? 0 : per_listener * config.listeners.size() + 64;
  if (rl.rlim_cur != RLIM_INFINITY && (want == 0 || want > rl.rlim_cur)) {
    // Info, not a warning: the kernel's default hard limit for a process outside systemd is 4096.
    spdlog::info("open files limit is {}: fewer connections than limits.connections.per_listener ({} on {} "
                 "listeners) allows will fit; raise LimitNOFILE= or lower the limit",
                 rl.rlim_cur, per_listener == 0 ? std::string("unlimited") : std::to_string(per_listener),
                 config.listeners.size());
  }
}

// "1.2k" style numbers for the systemd STATUS= line.
std::string short_number(double v) {
  if (v >= 1e6) return fmt::format("{:.1f}M", v / 1e6);
  if (v >= 1e4) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

// The signals the control loop reads from a signalfd; every thread blocks them (block_daemon_signals).
sigset_t daemon_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void block_daemon_signals() {
  const sigset_t set = daemon_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

Result<void> Daemon::Impl::create_reactors() {
  const unsigned n = reactor_count(config);
  for (unsigned i = 0; i < n; ++i) {
    transport::ReactorOptions ro;
    ro.name = "reactor" + std::to_string(i);
    ro.busy_poll = std::chrono::microseconds(config.busy_poll_us);
    if (!config.reactor_cpus.empty()) ro.cpu = config.reactor_cpus[i];
    auto reactor = transport::Reactor::create(ro);
    if (!reactor) return make_error("reactor " + std::to_string(i) + ": " + reactor.error().message);
    auto pool = transport::BufferPool::create(buffer_pool_options(config.limits));
    if (!pool) return make_error("buffer pool for reactor " + std::to_string(i) + ": " + pool.error().message);
    adapters.push_back(std::make_unique<ReactorAdapter>(**reactor, pool->get()));
    reactors.push_back(std::move(*reactor));
    pools.push_back(std::move(*pool));
    probes.push_back(std::make_unique<ReactorProbe>());
  }
  const auto po = buffer_pool_options(config.limits);
  buffers_per_pool = po.small_count + po.large_count;
  last_busy_ns.assign(n, 0);
  recent_busy.assign(n, 0.0);
  return {};
}

Result<void> Daemon::Impl::create_core() {
  std::vector<CoreReactor*> core_reactors;
  for (auto& a : adapters) core_reactors.push_back(a.get());
  if (resize->fd < 0) return make_error(fmt::format("eventfd: {}", std::strerror(errno)));
  CoreOptions core_options;
  core_options.on_namespace_resize = [resize = resize] { resize->raise(); };
  auto created = TargetCore::create(config, core_reactors, std::move(core_options));
  if (!created) return tl::unexpected(created.error());
  core = std::move(*created);
  return {};
}

Result<void> Daemon::Impl::open_listeners() {
  std::vector<transport::ReactorSlot> slots;
  for (std::size_t i = 0; i < reactors.size(); ++i) slots.push_back({reactors[i].get(), pools[i].get()});
  tls_psks->update(config);
  listeners = std::make_unique<ListenerSet>(std::move(slots), *core, config.limits, tls_psks, config.tls_psk_derivation);
  auto plan = listeners->prepare(config);
  if (!plan) return tl::unexpected(plan.error());
  listeners->commit(std::move(*plan));
  return {};
}

Result<void> Daemon::Impl::open_control_socket(ControlHooks hooks) {
  if (!config.control.enabled && options.control_socket.empty()) return {};
  const std::string socket_path = options.control_socket.empty() ? config.control.socket_path : options.control_socket;
  auto server = ControlServer::create(
      socket_path, [hooks = std::move(hooks)](const std::string& line) { return handle_control_request(hooks, line); });
  if (server) {
    control = std::move(*server);
    spdlog::info("control socket {}", control->path());
    return {};
  }
  if (!options.control_socket.empty()) return make_error("--control-socket: " + server.error().message);
  if (config.control.socket_at.line != 0) {
    return make_error(config.source + ":" + std::to_string(config.control.socket_at.line) + ":" +
                      std::to_string(config.control.socket_at.column) + ": control.socket: " + server.error().message);
  }
  // The default path: a second target on the machine, or one run without root (no /run/rdmablk), still
  // starts; the control socket is then off, and the log says how to have one.
  spdlog::warn("control socket off: {} (set control.socket in the config, or --control-socket)",
               server.error().message);
  return {};
}

Result<void> Daemon::Impl::open_metrics(std::function<TargetStatus()> status) {
  if (!config.metrics.enabled) return {};
  auto server = MetricsHttpServer::create(config.metrics.address, config.metrics.port, MetricsHttpLimits{},
                                          [status = std::move(status)] { return render_prometheus(status()); });
  if (!server) {
    return make_error(config.source + ":" + std::to_string(config.metrics.at.line) + ":" +
                      std::to_string(config.metrics.at.column) + ": metrics: " + server.error().message);
  }
  metrics = std::move(*server);
  spdlog::info("Prometheus metrics on http://{}/metrics", metrics->bound_address());
  return {};
}


Result<std::unique_ptr<Daemon>> Daemon::start(manage::ManagedConfig managed, const DaemonOptions& options) {
  std::unique_ptr<Daemon> d(new Daemon());
  d->impl_ = std::make_unique<Impl>();
  Impl& s = *d->impl_;
  s.options = options;
  s.config = managed.config;
  s.managed = std::move(managed);
  if (auto r = s.join_group_state(); !r) return tl::unexpected(r.error());
  DaemonGroup::start_fenced(s.config);  // a member serves nothing until it holds a lease
  const TargetConfig& config = s.config;
  raise_open_file_limit(config);
  s.started_unix_ms = unix_ms_now();
  s.config_loaded_unix_ms = s.started_unix_ms;
  if (auto r = s.create_reactors(); !r) return tl::unexpected(r.error());
  if (auto r = s.create_core(); !r) return tl::unexpected(r.error());
  // Reactors run before the listeners exist so that accepted connections find them running.
  for (auto& r : s.reactors) {
    transport::Reactor* reactor = r.get();
    s.threads.emplace_back([reactor] { reactor->run(); });
  }
  if (auto r = s.open_listeners(); !r) return tl::unexpected(r.error());
  if (config.group.enabled) {
    auto group = DaemonGroup::start(config, *s.core);
    if (!group) return tl::unexpected(group.error());
    s.group = std::move(*group);
  }
  Daemon* self = d.get();
  ControlHooks hooks{
      .status = [self] { return self->status(); },
      .reload = [self] { return self->reload_notifying("control socket"); },
      .disconnect_host = [self](const std::string& host) { return self->impl_->core->disconnect_host(host); },
      .disconnect_controller = [self](uint16_t id) { return self->impl_->core->disconnect_controller(id); },
      .manage = [self](const std::string& verb, const nlohmann::json& params) { return self->manage(verb, params); },
      .managed = [self] { return manage::overlay_json(self->impl_->managed); },
      .group_status = [self]() -> Result<nlohmann::json> {
        if (!self->impl_->group) return make_error("this target is not in a gateway group (no `group:` in its config)");
        return self->impl_->group->status_json();
      },
      .group_handback = [self](const std::string& member) -> Result<void> {
        if (!self->impl_->group) return make_error("this target is not in a gateway group (no `group:` in its config)");
        return self->impl_->group->hand_back(member);
      },
  };
  if (auto r = s.open_control_socket(std::move(hooks)); !r) return tl::unexpected(r.error());
  if (auto r = s.open_metrics([self] { return self->status(); }); !r) return tl::unexpected(r.error());
  return d;
}

Daemon::~Daemon() { stop(); }

Result<std::string> Daemon::reload() {
  Impl& s = *impl_;
  auto next = manage::reload_base(s.managed);
  if (!next) return tl::unexpected(next.error());
  auto summary = s.apply_config(next->config);
  if (!summary) return tl::unexpected(summary.error());
  s.managed = std::move(*next);
  spdlog::info("reloaded {}: {}", s.options.config_path, *summary);
  s.config_loaded_unix_ms = unix_ms_now();
  return summary;
}

// What a reload and a management verb share: `next` checked against the machine and carried out by the
// core. On error nothing changed.
Result<std::string> Daemon::Impl::apply_config(const TargetConfig& next_config) {
  TargetConfig next = next_config;
  EnvironmentChecks checks;
  checks.ports = false;
  if (auto env = validate_environment(next, checks); !env) return tl::unexpected(env.error());
  // Reactors, the control socket and the metrics endpoint stay as started.
  std::string at_restart;
  if (auto pending = restart_only_changes(config, next); !pending.empty()) {
    for (const auto& k : pending) at_restart += (at_restart.empty() ? "" : ", ") + k;
    spdlog::warn("changes to {} take effect at the next restart", at_restart);
  }
  // New endpoints are bound before the core hears of them (a port in use fails the change here) and accept
  // only once it has (so a connection on a new listener meets its role); removed ones close after.
  auto listener_plan = listeners->prepare(next);
  if (!listener_plan) return tl::unexpected(listener_plan.error());
  std::unique_lock<std::mutex> group_held;  // the group's ANA states, as of now, go with the new config
  if (group) {
    group_held = group->hold();
    group->overlay_locked(next);
  }
  auto summary = core->reload(next);
  if (!summary) return tl::unexpected(summary.error());  // the plan, dropped, closes what it bound
  if (group) group->applied_locked(next);
  tls_psks->update(next);  // before a new TLS listener accepts; connections up keep their PSKs
  listeners->commit(std::move(*listener_plan));
  // A file or block device grown since it was opened (rbd images tell by themselves): like nvmet's
  // revalidate_size, a reload is the moment to look.
  core->refresh_namespace_sizes();
  for (const auto& warning : next.warnings) spdlog::warn("{}", warning);
  config = std::move(next);
  return summary->describe() + (at_restart.empty() ? "" : "; at the next restart: " + at_restart);
}

Result<nlohmann::json> Daemon::manage(const std::string& verb, const nlohmann::json& params) {
  Impl& s = *impl_;
  if (s.group_edits) return manage_group(verb, params);
  auto proposal = manage::propose_edit(s.managed, verb, params);
  if (!proposal) return tl::unexpected(proposal.error());
  const nlohmann::json shown = manage::redact_secrets(params);
  if (!proposal->changed) {
    spdlog::info("ctl {} {}: nothing to change", verb, shown.dump());
    return nlohmann::json{{"changed", false}};
  }
  // Saved first, so that what hosts see live is never lost at a restart; put back if the core refuses.
  if (auto saved = manage::save_overlay(proposal->next); !saved) return tl::unexpected(saved.error());
  auto summary = s.apply_config(proposal->next.config);
  if (!summary) {
    if (auto undone = manage::save_overlay(s.managed); !undone) {
      spdlog::error("{}: could not put the overlay back: {}", verb, undone.error().message);
    }
    return tl::unexpected(summary.error());
  }
  s.managed = std::move(proposal->next);
  spdlog::info("ctl {} {}: {}", verb, shown.dump(), *summary);
  return nlohmann::json{{"changed", true}, {"summary", *summary}};
}

// A verb in a gateway group: stored in the group's state first (with its version check), then applied
// here, then the other members are told. The overlay file keeps the last state applied.
Result<nlohmann::json> Daemon::manage_group(const std::string& verb, const nlohmann::json& params) {
  Impl& s = *impl_;
  auto proposal = s.group_edits->propose(s.managed, verb, params);
  if (!proposal) return tl::unexpected(proposal.error());
  const nlohmann::json shown = manage::redact_secrets(params);
  if (!proposal->changed) {
    spdlog::info("ctl {} {}: nothing to change", verb, shown.dump());
    return nlohmann::json{{"changed", false}};
  }
  auto summary = s.apply_config(proposal->next.config);
  if (!summary) {
    s.group_edits->notify_members();
    return make_error(fmt::format("stored in the {} for every member, but this member could not apply it: {}",
                                  s.group_edits->where(), summary.error().message));
  }
  s.took_group_state(std::move(proposal->next));
  spdlog::info("ctl {} {} (for the group): {}", verb, shown.dump(), *summary);
  s.group_edits->notify_members();
  return nlohmann::json{{"changed", true}, {"summary", *summary}, {"group_version", s.group_edits->last_version()}};
}

Result<void> Daemon::Impl::join_group_state() {
  if (!config.group.enabled) return {};
  auto edits = GroupEdits::open(config.group);
  if (!edits) return tl::unexpected(edits.error());
  group_edits = std::move(*edits);
  auto loaded = group_edits->load(managed);
  if (!loaded) {
    // Unreadable or not valid: the member starts with what it last applied (its overlay file).
    spdlog::error("{}; starting with the state this member last applied ({} edits)", loaded.error().message,
                  managed.edits.size());
    return {};
  }
  took_group_state(std::move(*loaded));
  config = managed.config;
  spdlog::info("{}: version {}, {} edits", group_edits->where(), group_edits->last_version(), managed.edits.size());
  return {};
}

void Daemon::Impl::took_group_state(manage::ManagedConfig next) {
  managed = std::move(next);
  group_edits->applied(group_edits->last_version());
  if (auto saved = manage::save_overlay(managed); !saved) spdlog::warn("group state cache: {}", saved.error().message);
}

void Daemon::Impl::apply_group_change() {
  auto next = group_edits->take_change(managed);
  if (!next) return;
  if (!*next) {
    spdlog::error("{} (version {}) is refused, this member keeps the state it runs: {}", group_edits->where(),
                  group_edits->last_version(), next->error().message);
    return;
  }
  auto summary = apply_config((*next)->config);
  if (!summary) {
    spdlog::error("{} (version {}) cannot be applied here, this member keeps the state it runs: {}",
                  group_edits->where(), group_edits->last_version(), summary.error().message);
    return;
  }
  took_group_state(std::move(**next));
  spdlog::info("{} version {} applied: {}", group_edits->where(), group_edits->last_version(), *summary);
}

Result<std::string> Daemon::reload_notifying(const char* why) {
  sd_notify(0, "RELOADING=1");
  spdlog::info("{}: reloading {}", why, impl_->options.config_path);
  auto r = reload();
  if (!r) spdlog::error("reload failed, configuration unchanged: {}", r.error().message);
  sd_notify(0, "READY=1");
  return r;
}

TargetStatus Daemon::status() const {
  const Impl& s = *impl_;
  // Fresh buffer-pool numbers: the reactors answer a probe within microseconds unless stuck (then the last
  // known numbers are shown and the reactor is reported unresponsive).
  const uint64_t seq = post_probes();
  const auto probe_deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  auto all_answered = [&] {
    for (const auto& p : s.probes)
      if (p->answered.load(std::memory_order_acquire) < seq) return false;
    return true;
  };
  while (!all_answered() && std::chrono::steady_clock::now() < probe_deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  const auto now = std::chrono::steady_clock::now();
  const double since_sample = s.last_sample == std::chrono::steady_clock::time_point{}
                                  ? 0.0
                                  : std::chrono::duration<double>(now - s.last_sample).count();
  TargetStatus out;
  out.version = kTargetVersion;
  out.pid = static_cast<int>(::getpid());
  out.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count();
  out.config_path = s.options.config_path;
  out.config_loaded_unix_ms = s.config_loaded_unix_ms;
  for (const auto& l : s.config.listeners) {
    out.listeners.push_back({transport::transport_name(l.transport), l.address, l.port, listener_role_name(l.role)});
  }
  for (std::size_t i = 0; i < s.reactors.size(); ++i) {
    stats::ReactorStats r;
    r.index = static_cast<unsigned>(i);
    r.cpu = s.reactors[i]->cpu();
    r.busy_ns = static_cast<uint64_t>(s.reactors[i]->busy_time().count());
    r.uptime_ns = static_cast<uint64_t>(s.reactors[i]->age().count());
    // Busy share since the last periodic sample when that is long enough to mean something, else over the
    // interval before it.
    r.recent_busy_ratio = since_sample >= 1.0 ? std::min(1.0, static_cast<double>(r.busy_ns - s.last_busy_ns[i]) /
                                                                    (since_sample * 1e9))
                                              : s.recent_busy[i];
    r.responsive = s.probes[i]->answered.load(std::memory_order_acquire) >= seq;
    r.buffers_total = s.buffers_per_pool;
    const uint64_t free = s.probes[i]->free_buffers.load(std::memory_order_relaxed);
    r.buffers_in_use = r.buffers_total > free ? r.buffers_total - free : 0;
    r.buffer_bytes = s.pools[i]->region().iov_len;
    out.reactors.push_back(r);
  }
  out.process = read_process_status(static_cast<double>(s.started_unix_ms) / 1e3);
  s.core->fill_status(out);
  return out;
}

uint64_t Daemon::post_probes() const {
  Impl& s = *impl_;
  const uint64_t seq = ++s.probe_seq;
  for (std::size_t i = 0; i < s.reactors.size(); ++i) {
    ReactorProbe* probe = s.probes[i].get();
    transport::BufferPool* pool = s.pools[i].get();
    s.reactors[i]->post([probe, pool, seq] {
      probe->free_buffers.store(pool->free_small() + pool->free_large(), std::memory_order_relaxed);
      probe->answered.store(seq, std::memory_order_release);
    });
  }
  return seq;
}

void Daemon::periodic() {
  Impl& s = *impl_;
  const auto now = std::chrono::steady_clock::now();
  // 1. Watchdog: ping systemd only when every reactor ran the previous probe (a stuck reactor, or a frozen
  // process, lets the watchdog fire).
  bool all_answered = true;
  for (std::size_t i = 0; i < s.probes.size(); ++i) {
    if (s.probes[i]->answered.load(std::memory_order_acquire) < s.periodic_seq) {
      all_answered = false;
      if (!s.watchdog_withheld) spdlog::warn("reactor {} did not answer its heartbeat: watchdog ping withheld", i);
    }
  }
  s.watchdog_withheld = !all_answered;
  if (all_answered) sd_notify(0, "WATCHDOG=1");
  // 2. The next probe.
  s.periodic_seq = post_probes();
  // 3. Busy ratios and IOPS over the interval, and the STATUS= line.
  const double dt = s.last_sample == std::chrono::steady_clock::time_point{}
                        ? 0.0
                        : std::chrono::duration<double>(now - s.last_sample).count();
  for (std::size_t i = 0; i < s.reactors.size(); ++i) {
    const uint64_t busy = static_cast<uint64_t>(s.reactors[i]->busy_time().count());
    if (dt > 0) s.recent_busy[i] = std::min(1.0, static_cast<double>(busy - s.last_busy_ns[i]) / (dt * 1e9));
    s.last_busy_ns[i] = busy;
  }
  TargetStatus st;
  s.core->fill_status(st);
  uint64_t commands = 0;
  for (const auto& ns : st.namespace_stats) commands += ns.io.total_commands();
  if (dt > 0) s.recent_iops = static_cast<double>(commands >= s.last_commands ? commands - s.last_commands : 0) / dt;
  s.last_commands = commands;
  s.last_sample = now;
  std::size_t io_controllers = 0;
  for (const auto& c : st.controllers) io_controllers += c.discovery ? 0 : 1;
  const std::string line = fmt::format("STATUS={} controllers, {} subsystems, {} IOPS", io_controllers,
                                       st.subsystems.size(), short_number(s.recent_iops));
  sd_notify(0, line.c_str());
}

void Daemon::stop() {
  if (!impl_ || impl_->stopped) return;
  Impl& s = *impl_;
  s.stopped = true;
  // A member first stops serving its groups (hosts get the ANA change while still connected) and hands
  // its leases to the survivors.
  if (s.group) s.group->stop(true);
  if (s.listeners) s.listeners->stop_all();
  if (s.core) {
    s.core->shutdown("target shutting down");
    // Queues close on their reactors; wait until the transports report every connection gone.
    auto deadline = std::chrono::steady_clock::now() + s.options.drain_timeout;
    while ((s.core->controller_count() > 0 || live_connections() > 0) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (live_connections() > 0) {
      spdlog::warn("stopping with {} connections still draining after {} ms", live_connections(),
                   s.options.drain_timeout.count());
    }
  }
  // RDMA verbs objects (PD, CQ, MR) live on their reactors and are freed there, and so are the TCP listeners'
  // acceptors once their cancelled accept completes (stopping the reactors first leaked them: LeakSanitizer).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while ((transport::rdma::live_rdma_reactor_contexts() > 0 || transport::tcp::live_tcp_acceptors() > 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  s.control.reset();
  s.metrics.reset();
  s.stop_reactors();
  s.listeners.reset();
  s.group.reset();
  s.group_edits.reset();
  s.core.reset();
  // rbd images are closed on a background thread (their rbd cache flushed): wait for that before exiting.
  if (!backend::wait_for_rbd_closes(std::chrono::seconds(60)))
    spdlog::warn("stopping before every rbd image was closed (the cluster does not answer)");
}

namespace {

// The periodic sample: often enough to ping a watchdog well within its timeout, else every 5 s (the
// STATUS= line). Idle, the control thread and each reactor wake once per period.
std::chrono::milliseconds sample_period() {
  std::chrono::milliseconds period{5000};
  uint64_t watchdog_usec = 0;
  if (sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0) {
    period = std::min(period, std::chrono::milliseconds(std::max<uint64_t>(watchdog_usec / 4000, 100)));
    spdlog::info("systemd watchdog: {} ms, pinged every {} ms while every reactor answers", watchdog_usec / 1000,
                 period.count());
  }
  return period;
}

}  // namespace

// Reads the pending signals: SIGHUP reloads; SIGTERM/SIGINT stop the daemon and return true.
bool Daemon::handle_signals(int sfd) {
  signalfd_siginfo info{};
  while (::read(sfd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    if (info.ssi_signo == SIGHUP) {
      (void)reload_notifying("SIGHUP");
      continue;
    }
    spdlog::info("{}: draining in-flight I/O and disconnecting hosts", info.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
    sd_notify(0, "STOPPING=1");
    stop();
    spdlog::info("rdmablk-target stopped");
    return true;
  }
  return false;
}

int Daemon::run() {
  Impl& s = *impl_;
  const sigset_t signals = daemon_signals();
  const int sfd = ::signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    spdlog::error("signalfd: {}", std::strerror(errno));
    stop();
    return 1;
  }
  const std::chrono::milliseconds period = sample_period();
  periodic();
  sd_notify(0, "READY=1");
  spdlog::info("rdmablk-target ready");
  auto next_sample = std::chrono::steady_clock::now() + period;
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({sfd, POLLIN, 0});
    fds.push_back({s.resize->fd, POLLIN, 0});
    fds.push_back({s.group_edits ? s.group_edits->fd() : -1, POLLIN, 0});
    if (s.control) s.control->add_pollfds(fds);
    if (s.metrics) s.metrics->add_pollfds(fds);
    auto now = std::chrono::steady_clock::now();
    int timeout = static_cast<int>(
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(next_sample - now).count() + 1));
    if (s.control) {
      const int t = s.control->poll_timeout_ms(now);
      if (t >= 0) timeout = std::min(timeout, t);
    }
    if (s.metrics) {
      const auto t = s.metrics->next_timeout(now);
      if (t < std::chrono::milliseconds(timeout)) timeout = static_cast<int>(t.count());
    }
    const int rc = ::poll(fds.data(), fds.size(), timeout);
    if (rc < 0 && errno != EINTR) {
      spdlog::error("control loop: poll: {}", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    now = std::chrono::steady_clock::now();
    if (rc > 0 && (fds[0].revents & POLLIN) != 0 && handle_signals(sfd)) {
      ::close(sfd);
      return 0;
    }
    if (rc > 0 && (fds[1].revents & POLLIN) != 0) {
      s.resize->clear();
      s.core->refresh_namespace_sizes();
    }
    if (rc > 0 && (fds[2].revents & POLLIN) != 0) s.apply_group_change();
    if (rc > 0) {
      if (s.control) s.control->handle(fds, now);
      if (s.metrics) s.metrics->handle(fds, now);
    } else if (rc == 0) {
      if (s.control) s.control->handle({}, now);  // idle timeouts
      if (s.metrics) s.metrics->handle(std::span<const pollfd>(), now);
    }
    if (now >= next_sample) {
      periodic();
      next_sample = now + period;
    }
  }
}

}  // namespace rdmablk::target

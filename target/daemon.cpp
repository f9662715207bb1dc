#include "target/daemon.h"

#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "target/core.h"
#include "target/core_reactor.h"
#include "target/transport_options.h"
#include "transport/buffer_pool.h"
#include "transport/reactor.h"
#include "transport/rdma/rdma_target.h"
#include "transport/tcp/tcp_target.h"

namespace rdmablk::target {

struct Daemon::Impl {
  DaemonOptions options;
  TargetConfig config;
  std::vector<std::unique_ptr<transport::Reactor>> reactors;
  std::vector<std::unique_ptr<transport::BufferPool>> pools;
  std::vector<std::unique_ptr<ReactorAdapter>> adapters;
  std::vector<std::thread> threads;
  std::unique_ptr<TargetCore> core;
  std::vector<std::unique_ptr<transport::tcp::TcpListener>> tcp_listeners;
  std::vector<std::unique_ptr<transport::rdma::RdmaListener>> rdma_listeners;
  bool stopped = false;

  ~Impl() { stop_reactors(); }

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
  if (config.reactors != 0) return config.reactors;
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

unsigned live_connections() {
  return transport::tcp::live_tcp_target_connections() + transport::rdma::live_rdma_target_queues();
}

}  // namespace

void block_daemon_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

Result<std::unique_ptr<Daemon>> Daemon::start(const TargetConfig& config, const DaemonOptions& options) {
  std::unique_ptr<Daemon> d(new Daemon());
  d->impl_ = std::make_unique<Impl>();
  Impl& s = *d->impl_;
  s.options = options;
  s.config = config;

  const unsigned n = reactor_count(config);
  for (unsigned i = 0; i < n; ++i) {
    transport::ReactorOptions ro;
    ro.name = "reactor" + std::to_string(i);
    ro.busy_poll = std::chrono::microseconds(config.busy_poll_us);
    auto reactor = transport::Reactor::create(ro);
    if (!reactor) return make_error("reactor " + std::to_string(i) + ": " + reactor.error().message);
    auto pool = transport::BufferPool::create(buffer_pool_options(config.limits));
    if (!pool) return make_error("buffer pool for reactor " + std::to_string(i) + ": " + pool.error().message);
    s.adapters.push_back(std::make_unique<ReactorAdapter>(**reactor, pool->get()));
    s.reactors.push_back(std::move(*reactor));
    s.pools.push_back(std::move(*pool));
  }
  std::vector<CoreReactor*> core_reactors;
  for (auto& a : s.adapters) core_reactors.push_back(a.get());
  auto core = TargetCore::create(config, core_reactors);
  if (!core) return tl::unexpected(core.error());
  s.core = std::move(*core);

  // Reactors run before the listeners exist so that accepted connections find them running.
  for (auto& r : s.reactors) {
    transport::Reactor* reactor = r.get();
    s.threads.emplace_back([reactor] { reactor->run(); });
  }

  std::vector<transport::ReactorSlot> slots;
  for (std::size_t i = 0; i < s.reactors.size(); ++i) slots.push_back({s.reactors[i].get(), s.pools[i].get()});
  for (const auto& l : config.listeners) {
    const std::string where = config.source + ":" + std::to_string(l.at.line) + ":" + std::to_string(l.at.column);
    transport::TransportAddress address{l.transport, l.address, l.port};
    const transport::TransportAddress* bound = nullptr;
    if (l.transport == transport::TransportType::tcp) {
      auto listener = transport::tcp::TcpListener::create(address, slots, *s.core, tcp_target_options(config.limits));
      if (!listener) return make_error(where + ": listeners: " + listener.error().message);
      bound = &(*listener)->address();
      s.tcp_listeners.push_back(std::move(*listener));
    } else {
      auto listener =
          transport::rdma::RdmaListener::create(address, slots, *s.core, rdma_target_options(config.limits));
      if (!listener) return make_error(where + ": listeners: " + listener.error().message);
      bound = &(*listener)->address();
      s.rdma_listeners.push_back(std::move(*listener));
    }
    spdlog::info("listening on {} ({})", transport::to_uri(*bound), listener_role_name(l.role));
  }
  return d;
}

Daemon::~Daemon() { stop(); }

Result<void> Daemon::reload() {
  Impl& s = *impl_;
  auto config = load_config(s.options.config_path);
  if (!config) return tl::unexpected(config.error());
  if (auto env = validate_environment(*config, {.ports = false}); !env) return tl::unexpected(env.error());
  // The sockets stay as bound at startup, so the core keeps serving (and advertising, and enforcing the
  // roles of) the listeners that really exist.
  auto same_listener = [](const ListenerConfig& a, const ListenerConfig& b) {
    return a.transport == b.transport && a.address == b.address && a.port == b.port && a.role == b.role;
  };
  if (!std::equal(config->listeners.begin(), config->listeners.end(), s.config.listeners.begin(),
                  s.config.listeners.end(), same_listener)) {
    spdlog::warn("listener changes take effect at the next restart");
    config->listeners = s.config.listeners;
  }
  if (config->reactors != s.config.reactors || config->busy_poll_us != s.config.busy_poll_us) {
    spdlog::warn("reactor changes (reactors, busy_poll_us) take effect at the next restart");
  }
  auto summary = s.core->reload(*config);
  if (!summary) return tl::unexpected(summary.error());
  for (const auto& warning : config->warnings) spdlog::warn("{}", warning);
  spdlog::info("reloaded {}: {}", s.options.config_path, summary->describe());
  s.config = std::move(*config);
  return {};
}

void Daemon::stop() {
  if (!impl_ || impl_->stopped) return;
  Impl& s = *impl_;
  s.stopped = true;
  for (auto& l : s.tcp_listeners) l->stop();
  for (auto& l : s.rdma_listeners) l->stop();
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
  // RDMA verbs objects (PD, CQ, MR) live on their reactors and are freed there.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (transport::rdma::live_rdma_reactor_contexts() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  s.stop_reactors();
  s.tcp_listeners.clear();
  s.rdma_listeners.clear();
  s.core.reset();
}

int Daemon::run() {
  sd_notify(0, "READY=1");
  spdlog::info("rdmablk-target ready");
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  for (;;) {
    siginfo_t info{};
    int sig = sigwaitinfo(&set, &info);
    if (sig < 0) continue;  // EINTR
    if (sig == SIGHUP) {
      sd_notify(0, "RELOADING=1");
      spdlog::info("SIGHUP: reloading {}", impl_->options.config_path);
      if (auto r = reload(); !r) spdlog::error("reload failed, configuration unchanged: {}", r.error().message);
      sd_notify(0, "READY=1");
      continue;
    }
    spdlog::info("{}: draining in-flight I/O and disconnecting hosts", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    sd_notify(0, "STOPPING=1");
    stop();
    spdlog::info("rdmablk-target stopped");
    return 0;
  }
}

}  // namespace rdmablk::target

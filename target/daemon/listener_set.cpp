#include "target/daemon/listener_set.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "security/tls_session.h"

namespace rdmablk::target {

struct ListenerSet::Open {
  ListenerConfig config;
  std::unique_ptr<transport::tcp::TcpListener> tcp;
  std::unique_ptr<transport::rdma::RdmaListener> rdma;

  transport::ReactorListener& socket() const {
    if (tcp) return *tcp;
    return *rdma;
  }
};

struct ListenerSet::Plan {
  std::vector<Open> added;               // bound, not accepting yet
  std::vector<std::size_t> removed;      // indexes into open_
  std::vector<std::size_t> changed;      // indexes into open_ whose role or TCP settings change
  std::vector<ListenerConfig> next;      // the listeners as `next` has them, in its order
};

namespace {

bool same_endpoint(const ListenerConfig& a, const ListenerConfig& b) {
  return a.transport == b.transport && a.address == b.address && a.port == b.port;
}

std::string place(const std::string& source, const ListenerConfig& l) {
  if (l.at.line == 0) return source;  // added through the management API: no line in the file
  return fmt::format("{}:{}:{}", source, l.at.line, l.at.column);
}

std::string describe(const ListenerConfig& l, const transport::TransportAddress& bound) {
  return fmt::format("{} ({}{})", transport::to_uri(bound), listener_role_name(l.role),
                     l.tls == transport::tcp::TlsPolicy::none
                         ? ""
                         : ", tls " + std::string(transport::tcp::to_string(l.tls)));
}

// A listener's endpoint is closed within microseconds once reactors[0] runs the stop; this only ends a
// wait on a reactor that is stuck (the watchdog reports that one).
constexpr std::chrono::seconds kCloseWait{10};

}  // namespace

ListenerSet::ListenerSet(std::vector<transport::ReactorSlot> slots, transport::TargetQueueHandler& handler,
                         const QueueLimits& limits, std::shared_ptr<TlsPskStore> psks,
                         security::PskDerivation derivation)
    : slots_(std::move(slots)),
      handler_(handler),
      limits_(limits),
      gate_(transport::ConnectionGate::create(connection_limit_options(limits))),
      psks_(std::move(psks)),
      derivation_(derivation) {}

ListenerSet::~ListenerSet() = default;

void ListenerSet::PlanDeleter::operator()(Plan* plan) const noexcept { delete plan; }

Result<void> ListenerSet::ensure_tls_context(const TargetConfig& next) {
  const bool any_tls = std::any_of(next.listeners.begin(), next.listeners.end(),
                                   [](const ListenerConfig& l) { return l.tls != transport::tcp::TlsPolicy::none; });
  if (!any_tls || tls_context_) return {};
  auto context = tls_server_context(psks_, derivation_);
  if (!context) return make_error("TLS: " + context.error().message);
  tls_context_ = std::move(*context);
  const auto& ktls = security::probe_ktls();
  spdlog::info("TLS: {} derivation; records in {} ({})",
               derivation_ == security::PskDerivation::standard ? "standard" : "libnvme_compat",
               ktls.available ? "the kernel (kTLS)" : "userspace", ktls.reason);
  return {};
}

Result<ListenerSet::Open> ListenerSet::open(const ListenerConfig& l, const std::string& source) {
  transport::TransportAddress address{l.transport, l.address, l.port};
  Open o;
  o.config = l;
  if (l.transport == transport::TransportType::tcp) {
    auto tcp_options = tcp_target_options(limits_);
    tcp_options.tls = tls_server_options(l, tls_context_);
    tcp_options.c2h_success = l.c2h_success;
    auto listener = transport::tcp::TcpListener::create(address, slots_, handler_, tcp_options, gate_);
    if (!listener) return make_error(place(source, l) + ": listeners: " + listener.error().message);
    o.tcp = std::move(*listener);
  } else {
    auto listener =
        transport::rdma::RdmaListener::create(address, slots_, handler_, rdma_target_options(limits_), gate_);
    if (!listener) return make_error(place(source, l) + ": listeners: " + listener.error().message);
    o.rdma = std::move(*listener);
  }
  return o;
}

Result<ListenerSet::PlanPtr> ListenerSet::prepare(const TargetConfig& next) {
  if (auto tls = ensure_tls_context(next); !tls) return tl::unexpected(tls.error());
  PlanPtr plan(new Plan());
  plan->next = next.listeners;
  for (std::size_t i = 0; i < open_.size(); ++i) {
    const ListenerConfig& running = open_[i].config;
    auto n = std::find_if(next.listeners.begin(), next.listeners.end(),
                          [&](const ListenerConfig& l) { return same_endpoint(l, running); });
    if (n == next.listeners.end()) {
      plan->removed.push_back(i);
    } else if (!same_listener_settings(*n, running)) {
      plan->changed.push_back(i);
    }
  }
  for (const auto& l : next.listeners) {
    const bool exists =
        std::any_of(open_.begin(), open_.end(), [&](const Open& o) { return same_endpoint(o.config, l); });
    if (exists) continue;
    // Bound now: a port in use fails the whole change here. (Moving a port from a wildcard address to a
    // specific one on the same port takes two steps: remove, then add.)
    auto opened = open(l, next.source);
    if (!opened) return tl::unexpected(opened.error());
    plan->added.push_back(std::move(*opened));
  }
  return plan;
}

void ListenerSet::commit(PlanPtr plan) {
  for (std::size_t i : plan->changed) {
    Open& o = open_[i];
    const ListenerConfig& now = *std::find_if(plan->next.begin(), plan->next.end(),
                                              [&](const ListenerConfig& l) { return same_endpoint(l, o.config); });
    if (o.tcp && (now.tls != o.config.tls || now.c2h_success != o.config.c2h_success)) {
      auto tcp_options = tcp_target_options(limits_);
      tcp_options.tls = tls_server_options(now, tls_context_);
      tcp_options.c2h_success = now.c2h_success;
      // Checked by prepare() (the TLS context exists); only out of memory is left.
      if (auto set = o.tcp->set_options(tcp_options); !set) {
        spdlog::error("listener {}: its new settings are not applied: {}", transport::to_uri(o.tcp->address()),
                      set.error().message);
        continue;
      }
    }
    o.config = now;
    spdlog::info("listener {}: changed; new connections get the new settings",
                 describe(o.config, o.socket().address()));
  }
  // Closed before the new ones start, from the back so that the indexes stay valid.
  std::sort(plan->removed.begin(), plan->removed.end());
  for (auto it = plan->removed.rbegin(); it != plan->removed.rend(); ++it) {
    Open& o = open_[*it];
    const std::string what = describe(o.config, o.socket().address());
    if (!o.socket().stop_and_wait(kCloseWait)) {
      spdlog::warn("listener {}: still closing after {} s (reactor 0 busy?)", what, kCloseWait.count());
    }
    spdlog::info("stopped listening on {}", what);
    open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(*it));
  }
  for (auto& o : plan->added) {
    if (!o.socket().start()) {
      spdlog::error("listener {}: cannot start accepting (out of memory)", transport::to_uri(o.socket().address()));
    }
    spdlog::info("listening on {}", describe(o.config, o.socket().address()));
    open_.push_back(std::move(o));
  }
  plan->added.clear();
  // In the configuration's order, for status and the next plan.
  std::vector<Open> ordered;
  for (const auto& l : plan->next) {
    auto it = std::find_if(open_.begin(), open_.end(), [&](const Open& o) { return same_endpoint(o.config, l); });
    if (it != open_.end()) ordered.push_back(std::move(*it));
  }
  open_ = std::move(ordered);
}

void ListenerSet::stop_all() {
  for (auto& o : open_) o.socket().stop();
}

}  // namespace rdmablk::target

#include "target/core/subsystem.h"

#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "target/core/reload_plan.h"
#include "target/reservations/object_store.h"

namespace rdmablk::target {

bool Namespace::same_config(const NamespaceConfig& o) const noexcept { return same_backend(config, o); }

namespace {
testing::BackendWrapper& backend_wrapper() {
  static testing::BackendWrapper wrap;
  return wrap;
}
}  // namespace

void testing::set_backend_wrapper(BackendWrapper wrap) { backend_wrapper() = std::move(wrap); }

Result<std::shared_ptr<Namespace>> open_namespace(const NamespaceConfig& config, std::string_view subnqn,
                                                  const NamespaceHooks& hooks) {
  Result<std::unique_ptr<backend::Backend>> b = make_error("unknown backend kind");
  switch (config.backend) {
    case BackendKind::file:
      b = backend::open_file_backend(file_options(config));
      break;
    case BackendKind::ram:
      b = backend::make_ram_backend(memory_options(config));
      break;
    case BackendKind::null:
      b = backend::make_null_backend(memory_options(config));
      break;
    case BackendKind::rbd:
      b = backend::open_rbd_backend(rbd_options(config));
      break;
  }
  if (!b) return make_error(fmt::format("namespace {}: {}", config.nsid, b.error().message), b.error().errno_value);
  if (backend_wrapper()) *b = backend_wrapper()(std::move(*b));
  auto ns = std::make_shared<Namespace>();
  ns->nsid = config.nsid;
  ns->config = config;
  ns->backend = std::shared_ptr<const backend::Backend>(std::move(*b));
  ns->geometry = ns->backend->geometry();
  ns->read_only = config.read_only || ns->geometry.caps.read_only;
  ns->lbads = static_cast<uint8_t>(std::countr_zero(ns->geometry.block_size));
  ns->ana_group.store(config.ana_group, std::memory_order_relaxed);
  ns->qos = std::make_shared<qos::NamespaceQos>(config.qos);
  if (hooks.on_resize) ns->backend->watch_size(hooks.on_resize);
  ns->reservations = std::make_shared<reservations::NamespaceReservations>(
      reservations::reservation_store_for(*ns->backend, hooks.state_dir, subnqn, config.nsid),
      fmt::format("{} namespace {}", subnqn, config.nsid));
  reservations::NamespaceReservations::GroupListener listener;
  if (hooks.on_group_reservation_events) {
    listener = [on = hooks.on_group_reservation_events, nqn = std::string(subnqn), nsid = config.nsid,
                locks = ns->range_locks](std::span<const reservations::GroupEvent> events) {
      on(nqn, nsid, *locks, events);
    };
  }
  if (hooks.group && ns->reservations->share(std::move(listener))) {
    spdlog::info("{} namespace {}: reservations shared with the gateway group", subnqn, config.nsid);
  }
  ns->reservations->load();
  return ns;
}

namespace {
// Another Namespace object of the same namespace: the same backend, blocks, locks and reservations.
std::shared_ptr<Namespace> copy_namespace(const Namespace& ns) {
  auto out = std::make_shared<Namespace>();
  out->nsid = ns.nsid;
  out->config = ns.config;
  out->backend = ns.backend;
  out->geometry = ns.geometry;
  out->read_only = ns.read_only;
  out->lbads = ns.lbads;
  out->ana_group.store(ns.ana_group.load(std::memory_order_relaxed), std::memory_order_relaxed);
  out->range_locks = ns.range_locks;
  out->reservations = ns.reservations;
  out->qos = ns.qos;
  return out;
}
}  // namespace

std::shared_ptr<Namespace> resized_namespace(const Namespace& ns, uint64_t num_blocks) {
  auto out = copy_namespace(ns);
  out->geometry.num_blocks = num_blocks;
  return out;
}

std::shared_ptr<Namespace> masked_namespace(const Namespace& ns, std::vector<std::string> hosts) {
  auto out = copy_namespace(ns);
  out->config.hosts = std::move(hosts);
  return out;
}

std::shared_ptr<Namespace> qos_namespace(const Namespace& ns, const NamespaceQosConfig& qos) {
  auto out = copy_namespace(ns);
  out->config.qos = qos;
  if (ns.qos->same_hosts(qos)) {
    ns.qos->set(qos);
  } else {
    out->qos = std::make_shared<qos::NamespaceQos>(qos);
  }
  return out;
}

const std::shared_ptr<Namespace>* NamespaceTable::find(uint32_t nsid) const noexcept {
  auto it = std::lower_bound(namespaces.begin(), namespaces.end(), nsid,
                             [](const std::shared_ptr<Namespace>& ns, uint32_t id) { return ns->nsid < id; });
  if (it == namespaces.end() || (*it)->nsid != nsid) return nullptr;
  return &*it;
}

std::vector<uint32_t> NamespaceTable::nsids() const {
  std::vector<uint32_t> out;
  out.reserve(namespaces.size());
  for (const auto& ns : namespaces) out.push_back(ns->nsid);
  return out;
}

bool NamespaceTable::any_volatile_cache() const noexcept {
  return std::any_of(namespaces.begin(), namespaces.end(),
                     [](const std::shared_ptr<Namespace>& ns) { return ns->volatile_cache(); });
}

bool Subsystem::host_allowed(std::string_view hostnqn) const noexcept {
  if (allow_any_host) return true;
  return std::find(hosts.begin(), hosts.end(), hostnqn) != hosts.end();
}

std::shared_ptr<const HostAuth> Subsystem::auth_for(std::string_view hostnqn) const {
  auto it = host_auth.find(hostnqn);
  return it == host_auth.end() ? nullptr : it->second;
}

std::map<std::string, std::shared_ptr<const HostAuth>, std::less<>> host_auth_of(const SubsystemConfig& config) {
  std::map<std::string, std::shared_ptr<const HostAuth>, std::less<>> out;
  for (const HostConfig& h : config.host_configs) {
    if (!h.dhchap_key.key) continue;  // no secret (a key file is read by load_config)
    auto a = std::make_shared<HostAuth>();
    a->key = h.dhchap_key.key;
    a->ctrl_key = h.dhchap_ctrl_key.key;
    a->hashes = h.dhchap_hashes;
    a->dh_groups = h.dhchap_dhgroups;
    a->key_source = h.dhchap_key.describe();
    a->ctrl_key_source = h.dhchap_ctrl_key.describe();
    out.emplace(h.nqn, std::move(a));
  }
  return out;
}

std::map<std::string, std::string, std::less<>> tls_psk_sources_of(const SubsystemConfig& config) {
  std::map<std::string, std::string, std::less<>> out;
  for (const auto& h : config.host_configs) {
    if (h.tls_psk.configured()) out.emplace(h.nqn, h.tls_psk.describe());
  }
  return out;
}

Result<std::shared_ptr<Subsystem>> build_subsystem(const SubsystemConfig& config, uint64_t generation,
                                                   const NamespaceHooks& hooks) {
  auto sub = std::make_shared<Subsystem>();
  sub->nqn = config.nqn;
  sub->serial = config.serial.empty() ? derive_serial(config.nqn) : config.serial;
  sub->model = config.model;
  sub->allow_any_host = config.allow_any_host;
  sub->hosts = config.hosts;
  sub->require_authentication = config.require_authentication;
  sub->host_auth = host_auth_of(config);
  sub->tls_psk_sources = tls_psk_sources_of(config);
  sub->cntlid_min = config.cntlid_min;
  sub->cntlid_max = config.cntlid_max;
  sub->next_cntlid = config.cntlid_min;
  auto table = std::make_shared<NamespaceTable>();
  table->generation = generation;
  for (const auto& nc : config.namespaces) {
    auto ns = open_namespace(nc, config.nqn, hooks);
    if (!ns) return make_error(fmt::format("subsystem {}: {}", config.nqn, ns.error().message), ns.error().errno_value);
    table->namespaces.push_back(std::move(*ns));
  }
  std::sort(table->namespaces.begin(), table->namespaces.end(),
            [](const auto& a, const auto& b) { return a->nsid < b->nsid; });
  sub->table = std::move(table);
  return sub;
}

}  // namespace rdmablk::target

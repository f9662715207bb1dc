#include "target/daemon/transport_options.h"

#include <algorithm>

#include "protocol/defaults.h"
#include "protocol/fabrics.h"

namespace rdmablk::target {

transport::BufferPoolOptions buffer_pool_options(const QueueLimits& limits) {
  transport::BufferPoolOptions o;
  // Small buffers carry in-capsule data and small I/O; large ones anything up to the max I/O size.
  o.small_size = std::max<std::size_t>(protocol::defaults::kSmallBufferBytes,
                                       std::max(limits.admin_inline_data, limits.io_inline_data));
  o.small_count = 1024;
  o.large_size = limits.max_io_size;
  // About 64 MiB of large buffers per reactor: enough for a queue depth of data at 512 KiB each.
  o.large_count = std::max(16u, static_cast<unsigned>((64u << 20) / limits.max_io_size));
  return o;
}

namespace {

// The queue limits both transports' target options share (TcpTargetOptions and RdmaTargetOptions have the
// same fields for them).
template <typename Options>
Options queue_options(const QueueLimits& limits) {
  Options o;
  o.admin_in_capsule = limits.admin_inline_data;
  // Equal to what Identify's IOCCSZ advertises, so hosts never send more in-capsule data than we accept.
  o.io_in_capsule = limits.io_inline_data;
  o.max_queue_depth = static_cast<uint16_t>(std::max(limits.io_queue_depth, limits.admin_queue_depth));
  o.max_data_transfer = limits.max_io_size;
  o.max_buffer_bytes = limits.queue_buffer_bytes;
  return o;
}

}  // namespace

transport::tcp::TcpTargetOptions tcp_target_options(const QueueLimits& limits) {
  return queue_options<transport::tcp::TcpTargetOptions>(limits);
}

transport::rdma::RdmaTargetOptions rdma_target_options(const QueueLimits& limits) {
  return queue_options<transport::rdma::RdmaTargetOptions>(limits);
}

transport::ConnectionLimitOptions connection_limit_options(const QueueLimits& limits) {
  transport::ConnectionLimitOptions o;
  o.per_listener = limits.connections.per_listener;
  o.per_host = limits.connections.per_host;
  return o;
}

void TlsPskStore::update(const TargetConfig& config) {
  auto table = std::make_shared<Table>();
  for (const auto& sub : config.subsystems) {
    for (const auto& host : sub.host_configs) {
      if (!host.tls_psk.key) continue;
      table->by_pair.emplace(std::pair{host.nqn, sub.nqn}, host.tls_psk.key);
      table->first_by_host.emplace(host.nqn, host.tls_psk.key);
    }
  }
  std::lock_guard lock(mu_);
  table_ = std::move(table);
}

std::optional<security::ConfiguredPsk> TlsPskStore::find(const security::PskIdentity& identity) const {
  std::shared_ptr<const Table> table;
  {
    std::lock_guard lock(mu_);
    table = table_;
  }
  if (identity.subnqn == protocol::kDiscoveryNqn) {
    auto it = table->first_by_host.find(identity.hostnqn);
    if (it == table->first_by_host.end()) return std::nullopt;
    return *it->second;
  }
  auto it = table->by_pair.find(std::pair{identity.hostnqn, identity.subnqn});
  if (it == table->by_pair.end()) return std::nullopt;
  return *it->second;
}

std::size_t TlsPskStore::size() const {
  std::lock_guard lock(mu_);
  return table_->by_pair.size();
}

Result<std::shared_ptr<const security::TlsContext>> tls_server_context(std::shared_ptr<const TlsPskStore> store,
                                                                     security::PskDerivation derivation) {
  security::TlsServerConfig config;
  config.derivation = derivation;
  config.lookup = [store = std::move(store)](const security::PskIdentity& identity) { return store->find(identity); };
  auto context = security::TlsContext::server(std::move(config));
  if (!context) return tl::unexpected(context.error());
  return std::shared_ptr<const security::TlsContext>(std::move(*context));
}

transport::tcp::TcpTlsServerOptions tls_server_options(const ListenerConfig& listener,
                                                       std::shared_ptr<const security::TlsContext> context) {
  transport::tcp::TcpTlsServerOptions o;
  o.policy = listener.tls;
  if (o.policy != transport::tcp::TlsPolicy::none) o.context = std::move(context);
  return o;
}

}  // namespace rdmablk::target

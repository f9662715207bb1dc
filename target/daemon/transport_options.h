// How the target sizes its transports from the configuration's queue limits: each reactor's buffer pool and
// the NVMe/TCP and RDMA queue options. The daemon uses these; so do benchmarks that build a target in-process,
// so that they measure what the daemon runs.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "security/tls_session.h"
#include "target/config/config.h"
#include "transport/buffer_pool.h"
#include "transport/connection_limits.h"
#include "transport/rdma/rdma_queue.h"
#include "transport/tcp/tcp_target_queue.h"

namespace rdmablk::target {

transport::BufferPoolOptions buffer_pool_options(const QueueLimits& limits);
transport::tcp::TcpTargetOptions tcp_target_options(const QueueLimits& limits);
transport::rdma::RdmaTargetOptions rdma_target_options(const QueueLimits& limits);
transport::ConnectionLimitOptions connection_limit_options(const QueueLimits& limits);

// The TLS PSKs of the running configuration, as the NVMe/TCP listeners' server context looks them up: by the
// identity's (host NQN, subsystem NQN), from the subsystem's host entry with a tls_psk. An identity for the
// discovery NQN gets the host's first PSK in file order (the host has no PSK of its own for discovery).
// Lookups run on the reactors while a reload replaces the table: they copy a shared pointer under a mutex and
// read an immutable table.
class TlsPskStore {
 public:
  void update(const TargetConfig& config);
  std::optional<security::ConfiguredPsk> find(const security::PskIdentity& identity) const;
  std::size_t size() const;

 private:
  struct Table {
    std::map<std::pair<std::string, std::string>, std::shared_ptr<const security::ConfiguredPsk>> by_pair;
    std::map<std::string, std::shared_ptr<const security::ConfiguredPsk>> first_by_host;
  };
  mutable std::mutex mu_;
  std::shared_ptr<const Table> table_ = std::make_shared<Table>();
};

// A server TLS context whose lookup reads `store` (kept alive by the context).
Result<std::shared_ptr<const security::TlsContext>> tls_server_context(std::shared_ptr<const TlsPskStore> store,
                                                                     security::PskDerivation derivation);
// A listener's TLS options: its policy and the shared context (null when the policy is none).
transport::tcp::TcpTlsServerOptions tls_server_options(const ListenerConfig& listener,
                                                       std::shared_ptr<const security::TlsContext> context);

}  // namespace rdmablk::target

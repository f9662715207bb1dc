// The daemon's listening sockets, opened, changed and closed as the configuration says: at start, on reload
// and through the management API. A change runs in two steps around the core's: prepare() binds the new
// endpoints (so a port in use fails the change before anything moved) and commit() closes the removed ones
// and starts accepting on the new ones once the core knows them.
#pragma once

#include <memory>
#include <vector>

#include "protocol/result.h"
#include "security/tls_session.h"
#include "target/config/config.h"
#include "target/daemon/transport_options.h"
#include "transport/connection_limits.h"
#include "transport/rdma/rdma_target.h"
#include "transport/reactor.h"
#include "transport/tcp/tcp_target.h"

namespace rdmablk::target {

class ListenerSet {
 public:
  // `psks` is the table the TLS context looks hosts' PSKs up in (the daemon updates it); `derivation` is
  // fixed for the process (tls_psk_derivation is restart-only).
  ListenerSet(std::vector<transport::ReactorSlot> slots, transport::TargetQueueHandler& handler,
              const QueueLimits& limits, std::shared_ptr<TlsPskStore> psks, security::PskDerivation derivation);
  ~ListenerSet();
  ListenerSet(const ListenerSet&) = delete;
  ListenerSet& operator=(const ListenerSet&) = delete;

  // A change from the open listeners to a configuration's. Dropped without commit(), it closes what it
  // opened and the open listeners stay as they were.
  struct Plan;
  struct PlanDeleter {
    void operator()(Plan* plan) const noexcept;
  };
  using PlanPtr = std::unique_ptr<Plan, PlanDeleter>;
  // Binds every endpoint `next` has and the set has not (they do not accept yet) and gets the TLS context
  // ready. Error (naming the file, line and listener): nothing changed.
  Result<PlanPtr> prepare(const TargetConfig& next);
  // Carries out a prepared plan once the core serves `next`: removed listeners closed (each waited for, so
  // that its endpoint can be bound again at once; their controllers are the core's to drop), changed TCP
  // settings given to the connections accepted from now on, new listeners accepting. Logs what it did.
  void commit(PlanPtr plan);

  // Stop accepting everywhere (shutdown; the reactors keep running until the sockets are closed).
  void stop_all();

 private:
  struct Open;
  Result<Open> open(const ListenerConfig& l, const std::string& source);
  Result<void> ensure_tls_context(const TargetConfig& next);

  std::vector<transport::ReactorSlot> slots_;
  transport::TargetQueueHandler& handler_;
  QueueLimits limits_;
  // One gate for every listener: a host's connections count together wherever they arrive.
  std::shared_ptr<transport::ConnectionGate> gate_;
  std::shared_ptr<TlsPskStore> psks_;
  security::PskDerivation derivation_;
  std::shared_ptr<const security::TlsContext> tls_context_;  // created once a listener offers TLS
  std::vector<Open> open_;
};

}  // namespace rdmablk::target

// NVMe-oF RDMA transport binding (NVMe over Fabrics 1.1, 7.3), controller side: an rdma_cm listener that
// accepts queue pairs and spreads them over reactors, and per reactor the verbs objects the queues share.
//
// Threading (same conventions as transport/tcp/tcp_target.h):
//   - The listener's rdma_cm event channel is watched on reactors[0] (io_uring POLL_ADD on its fd). A
//     CONNECT_REQUEST is validated there (private data RECFMT/QID/HRQSIZE/HSQSIZE, IRD/ORD, device
//     limits; refused with rdma_reject carrying the binding's status) and handed round robin to a
//     reactor by post(); that reactor migrates the new cm_id to its own event channel, creates the QP,
//     posts the RECVs and accepts with CRQSIZE. From then on everything the queue does happens on that
//     reactor's thread, and the core's callbacks arrive there.
//   - Per reactor and device: one PD, the reactor BufferPool's region registered once (ibv_reg_mr; also
//     io_uring fixed buffer 0 of the backends = zero copy), one completion channel and one CQ shared by
//     the reactor's queues. Adaptive polling: a reactor Poller busy-polls the CQ while completions flow;
//     after a short idle spell it arms ibv_req_notify_cq and the reactor may sleep: the completion
//     channel's fd (POLL_ADD on the reactor's io_uring) wakes it. Idle connections cost no CPU.
//   - These per-reactor objects live while a listener or a queue uses them, and are freed on the reactor
//     thread afterwards (so reactors must keep running until live_rdma_reactor_contexts() is 0).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "protocol/result.h"
#include "transport/address.h"
#include "transport/buffer_pool.h"
#include "transport/connection_limits.h"
#include "transport/rdma/rdma_queue.h"
#include "transport/reactor.h"
#include "transport/reactor_listener.h"
#include "transport/target_queue.h"

namespace rdmablk::transport::rdma {

// A reactor a listener may place queues on, with the reactor's buffer pool.
class RdmaListener : public ReactorListener {
 public:
  // Creates the event channel and the cm_id, binds (RDMA_PS_TCP) and listens now, so an address without
  // an RDMA device or a port in use is reported to the caller (port 0 picks one: see address()).
  static Result<std::unique_ptr<RdmaListener>> create(const TransportAddress& address,
                                                      std::vector<ReactorSlot> reactors,
                                                      TargetQueueHandler& handler,
                                                      const RdmaTargetOptions& opts = {},
                                                      std::shared_ptr<ConnectionGate> gate = nullptr);
  // start(): connect requests are taken on reactors[0] from then on.
  // stop(): the cm_id and the channel are destroyed on reactors[0].

  struct Impl;

 private:
  RdmaListener() = default;
};

// Per-reactor verbs contexts alive in this process (tests wait for teardown with it).
unsigned live_rdma_reactor_contexts() noexcept;

}  // namespace rdmablk::transport::rdma

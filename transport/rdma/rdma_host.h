// NVMe-oF RDMA transport binding, host side. connect_host_queue() (transport/host_queue.h) calls
// connect_rdma_host_queue() for TransportType::rdma.
//
// A queue: its own rdma_cm event channel and cm_id (RDMA_PS_TCP), PD, completion channel, CQ and RC QP.
// rdma_resolve_addr/route, then rdma_connect with the binding's private data (QID, HRQSIZE = entries,
// HSQSIZE = entries - 1) and responder resources = the device's max_qp_rd_atom (the target RDMA-READs
// write data from us); the accept's CRQSIZE may shrink the queue. One 16-byte RECV per entry for CQEs;
// per entry a registered capsule buffer (64-byte SQE + in-capsule data) sent with one SEND. Slots, CIDs,
// failing outstanding commands and poll()'s loop are HostQueueBase's (transport/host_queue_base.h).
//
// Data: writes no longer than the in-capsule limit (set_in_capsule_limit, from IOCCSZ) are copied into
// the capsule (SGL 0x01, offset 0); everything else is described by a keyed SGL 0x40 (address, length,
// rkey) and moved by the target with RDMA READ/WRITE straight from/to HostCommand::data. Memory
// registration: a buffer inside a region given to register_host_buffer() uses that region's MR (no cost
// per I/O: what the bench does); any other buffer is registered for the command and deregistered when
// it completes. There is deliberately no implicit registration cache: a cached MR pins the pages it saw,
// and a buffer freed and mapped again at the same address would silently move data to the old pages.
//
// CIDs are slot indices. A CQE whose CID names no command, a failed work completion or a CM
// DISCONNECTED fails every outstanding command once with Transient Transport Error (no DNR) and poll()
// returns -errno. poll() reaps the CQ; with nothing there it keeps polling it for HostQueueOptions::busy_poll
// after the last completion, then arms it and sleeps in poll(2) on the completion channel (and the CM
// channel, the wake fd) up to the timeout. submit() on a full queue returns Command Interrupted.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <span>

#include "protocol/result.h"
#include "transport/host_queue.h"

namespace rdmablk::transport::rdma {

Result<std::unique_ptr<HostQueue>> connect_rdma_host_queue(const HostQueueOptions& opts);

// Register `buffer` with the queue's PD for the queue's lifetime: commands whose data lies inside it need
// no registration. EINVAL when `queue` is not an RDMA queue.
Result<void> register_host_buffer(HostQueue& queue, std::span<uint8_t> buffer);

// The verbs objects of a queue made elsewhere (tests: fakes whose ibv_context ops stand in for a device).
struct RdmaHostVerbs {
  ibv_pd* pd = nullptr;
  ibv_comp_channel* cc = nullptr;  // its fd is what a blocking poll() sleeps on
  ibv_cq* cq = nullptr;            // sends and receives
  ibv_qp* qp = nullptr;
  ibv_mr* region_mr = nullptr;     // stands for the registration of the queue's capsule region
  uint32_t max_msg = 0;
};

// A connected queue over `verbs` (no CM: no Connect exchange, entries = opts.entries) that destroys none of
// them: the RDMA data path and poll() without a device (tests).
Result<std::unique_ptr<HostQueue>> adopt_rdma_host_queue(const HostQueueOptions& opts, const RdmaHostVerbs& verbs);

// Host queues alive in this process (tests).
unsigned live_rdma_host_queues() noexcept;

}  // namespace rdmablk::transport::rdma

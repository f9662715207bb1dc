// The seam between a transport and the target core (modelled on the kernel's nvmet_fabrics_ops).
//
// The transport owns the connection (a TCP socket, an RDMA QP) and a preallocated array of
// TargetRequests, one per command slot (queue depth). When a capsule arrives it validates the
// binding-level fields (PDU / SGL shape), fills a TargetRequest (SQE, data length and direction,
// in-capsule data) and calls TargetQueueHandler::on_command. Everything NVMe (Connect, admin, discovery,
// I/O) is the core's; the core asks the transport for three things only:
//   fetch_data()            host -> controller data into req.data (RDMA READ, R2T + H2CData, or nothing
//                           when it came in the capsule); then handler->on_data_ready(req, status)
//   complete(req, true)     controller -> host data from req.data (RDMA WRITE / C2HData), then the CQE
//   complete(req, false)    the CQE only
// After complete() the transport owns the request again (it recycles the slot once the send is done).
// A protocol violation makes the transport close the connection: it calls on_queue_closed once, after
// which no callback for that queue arrives; requests the core still holds (backend I/O in flight) are
// handed back with release() when their I/O ends, and the transport frees the queue after the last one.
// Just before on_queue_closed, every request the core is waiting data for (fetch_data called, data not
// arrived) gets on_data_ready(req, transient transport error): the core may complete() it (the transport
// then just recycles it) or release() it. All callbacks run on the queue's reactor thread, and the core
// calls the queue only from that thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/status.h"
#include "transport/address.h"
#include "transport/buffer_pool.h"

namespace rdmablk::transport {

enum class DataDirection : uint8_t { none, host_to_controller, controller_to_host };

// Which way a command's data flows, as every binding needs to know before parsing its data SGL.
// `bidirectional` is set (and none returned) for opcodes with bits 1:0 = 11b, which fabrics do not carry.
DataDirection command_direction(const protocol::Sqe& sqe, bool& bidirectional) noexcept;

class TargetQueue;

// What a queue's secure channel (NVMe/TCP TLS 1.3 with a PSK) authenticated: the PSK identity's NQNs. The
// core checks the Connect's host and subsystem NQNs against them.
struct TlsIdentity {
  std::string identity;  // "NVMe1R01 <hostnqn> <subnqn> <digest>"
  std::string hostnqn;
  std::string subnqn;
  bool ktls = false;  // records in the kernel (kTLS) or in userspace
};

struct TargetRequest {
  protocol::Sqe sqe{};  // the command, copied out of the capsule
  protocol::Cqe cqe{};  // the completion the core fills (cid/sqid/sqhd are set by the transport)

  // Data transfer as the command's data SGL describes it (validated by the transport).
  DataDirection direction = DataDirection::none;
  uint32_t data_length = 0;  // bytes (the SGL's length)
  uint8_t* data = nullptr;   // data_length bytes: in-capsule data or a buffer from the reactor's pool
  bool data_in_capsule = false;  // host -> controller data already in `data`
  int fixed_buffer_index = -1;   // io_uring fixed buffer index covering `data`, or -1

  TargetQueue* queue = nullptr;
  uint16_t tag = 0;  // index in the queue's request array

  // Scratch space for the core's per-request state, so it needs no allocation per command.
  alignas(16) std::array<std::byte, 192> core{};
};

class TargetQueue {
 public:
  virtual ~TargetQueue() = default;
  virtual void fetch_data(TargetRequest& req) noexcept = 0;
  virtual void complete(TargetRequest& req, bool with_data) noexcept = 0;
  // Give back a request after on_queue_closed (its completion can no longer be sent).
  virtual void release(TargetRequest& req) noexcept = 0;
  // Terminate the connection (fatal controller error, keep-alive expiry, shutdown). Idempotent.
  virtual void close(const char* reason) noexcept = 0;

  // The core tells the transport what Connect established (queue id and size, 1-based entries, whether the
  // host disabled SQ flow control), so it can size in-capsule data (admin vs I/O), check SQ flow control
  // and know when a response may be folded into the data (NVMe/TCP C2HData SUCCESS).
  virtual void set_connected(uint16_t qid, uint16_t sq_entries, bool sq_flow_control_disabled) noexcept = 0;

  virtual TransportType transport_type() const noexcept = 0;
  virtual const TransportAddress& local_address() const noexcept = 0;  // the listener it came in on
  virtual const std::string& peer_name() const noexcept = 0;           // "10.0.0.2:53211", for logs
  // The TLS identity the connection was set up with (before ICReq, so before any command); nullopt: plain.
  virtual std::optional<TlsIdentity> tls_identity() const { return std::nullopt; }

  // Owned by the core (its per-queue state); the transport never touches it.
  void* core_queue = nullptr;
};

class TargetQueueHandler {
 public:
  virtual ~TargetQueueHandler() = default;
  // A new connection on a reactor: the core may set queue.core_queue.
  virtual void on_queue_created(TargetQueue& queue) noexcept = 0;
  virtual void on_command(TargetRequest& req) noexcept = 0;
  virtual void on_data_ready(TargetRequest& req, protocol::Status status) noexcept = 0;
  virtual void on_queue_closed(TargetQueue& queue) noexcept = 0;
};

}  // namespace rdmablk::transport

// The initiator's side of a transport: one NVMe queue (admin or I/O) to a remote controller.
// The mirror image of target_queue.h: submit a command with a buffer, get a completion. The bench, the
// CLI and the ublk attach sit on it, unaware of the transport. Everything NVMe (the fabrics Connect that
// follows queue creation, Identify, ...) is the initiator library's; the transport only moves capsules
// and data (ICReq/ICResp and R2T/H2CData/C2HData for TCP; CM private data, keyed SGLs and memory
// registration for RDMA).
//
// Single-threaded: a queue belongs to the thread that polls it. No allocation per command.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/result.h"
#include "protocol/status.h"
#include "transport/address.h"
#include "transport/target_queue.h"  // DataDirection

namespace rdmablk::transport {

namespace tcp {
struct TcpTlsClientOptions;  // transport/tcp/tcp_tls.h
}

struct HostCommand {
  protocol::Sqe sqe{};                   // the queue sets cid and the data SGL
  DataDirection direction = DataDirection::none;
  std::span<uint8_t> data;               // write: the data to send; read: where the data lands
  void (*on_complete)(HostCommand& cmd, const protocol::Cqe& cqe) noexcept = nullptr;
  void* context = nullptr;               // the caller's
};

struct HostQueueOptions {
  TransportAddress address;
  uint16_t qid = 0;                    // 0 = admin queue
  uint16_t entries = 32;               // queue size, 1-based (the Connect's SQSIZE is entries - 1)
  bool header_digest = false;          // NVMe/TCP
  bool data_digest = false;            // NVMe/TCP
  uint32_t in_capsule_limit = 0;       // bytes of write data sent in the capsule (from IOCCSZ); 0 = none
  // poll() keeps trying without sleeping this long before it blocks: a benchmark trades CPU for latency
  // and throughput (no sleep/wake-up per completion), the CLI and attach keep 0 (sleep at once).
  std::chrono::microseconds busy_poll{0};
  std::chrono::milliseconds connect_timeout{5000};
  // NVMe/TCP: TLS 1.3 with a PSK before ICReq (transport/tcp/tcp_tls.h); null = plain TCP.
  std::shared_ptr<const tcp::TcpTlsClientOptions> tls;
};

class HostQueue {
 public:
  virtual ~HostQueue() = default;
  // Queue a command. Fails (without calling on_complete) when the queue is full or disconnected.
  virtual protocol::Status submit(HostCommand& cmd) noexcept = 0;
  // Queue a fused operation (NVMe Base 2.0, 3.4.2; the caller set FUSE 01b in `first`, 10b in `second`):
  // one unit, both or neither, in adjacent submission queue entries with no other command between them
  // on the wire. Fails like submit() (no callback runs), also when only one of them would fit. A queue
  // is single-threaded, so nothing else can be queued between the two inside this call. Transports that
  // cannot promise adjacency (the default) answer Invalid Field.
  virtual protocol::Status submit_fused(HostCommand& first, HostCommand& second) noexcept {
    (void)first;
    (void)second;
    return protocol::status::invalid_field;
  }
  // Drive the connection: send what is queued, receive, run completion callbacks. Waits up to
  // `timeout` for at least one completion when min_completions > 0. Returns completions run, or
  // -errno when the connection failed (every outstanding command then completes with a transport
  // error status, once).
  virtual int poll(unsigned min_completions, std::chrono::milliseconds timeout) noexcept = 0;
  virtual unsigned outstanding() const noexcept = 0;
  virtual uint16_t entries() const noexcept = 0;
  // Limits negotiated at connection time (RDMA max SGE), for the caller's MDTS logic. TCP: UINT32_MAX
  // (MAXH2CDATA only sizes H2CData PDUs; the queue splits writes itself), so MDTS alone decides.
  virtual uint32_t max_transfer() const noexcept = 0;
  virtual void set_in_capsule_limit(uint32_t bytes) noexcept = 0;  // after Identify (IOCCSZ)
  virtual const TransportAddress& address() const noexcept = 0;
  virtual void close() noexcept = 0;

  // Register a region that later commands' data lies in, for the queue's lifetime (RDMA: one MR instead
  // of one per command). Transports that need nothing accept it as is.
  virtual Result<void> register_buffer(std::span<uint8_t> region) { (void)region; return {}; }

  // An extra descriptor poll() also waits on: a blocking poll() returns early (0 completions) when it
  // becomes readable. Lets a thread that serves another event source (the ublk attach's io_uring) sleep
  // on both. -1 = none. The caller keeps it open while set.
  void set_wake_fd(int fd) noexcept { wake_fd_ = fd; }

 protected:
  int wake_fd_ = -1;
};

// Connect one queue (TCP: socket + ICReq/ICResp; RDMA: CM connect with private data). The caller then
// sends the fabrics Connect command on it.
Result<std::unique_ptr<HostQueue>> connect_host_queue(const HostQueueOptions& opts);

}  // namespace rdmablk::transport

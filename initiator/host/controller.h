// A host-side NVMe-oF controller session over transport::HostQueues, brought up the way the Linux host
// does it (drivers/nvme/host/fabrics.c + core.c):
//   admin queue (qid 0, 32 entries) -> fabrics Connect (hostid, CNTLID 0xFFFF, SUBNQN, HOSTNQN, KATO)
//   -> [AUTHREQ.ATR in the Connect response: DH-HMAC-CHAP with Authentication Send / Receive, as on every
//   I/O queue after its Connect] -> Property Get CAP, VS -> Property Set CC (IOSQES 6, IOCQES 4, EN 1) -> poll CSTS.RDY (CAP.TO)
//   -> Identify Controller (CNTLID must match the Connect's) -> [I/O controllers] Set Features Number of
//   Queues, Identify active namespace list + Identify Namespace (+ descriptor list).
// Then: keep-alive every KATO/2 from the owner's poll loop (service()), I/O queues (Connect with qid,
// SQSIZE and the admin CNTLID), shutdown (CC.SHN normal, wait CSTS.SHST complete) and disconnect.
//
// Control path: synchronous, Result<T>. Data path: IoQueue::submit_* with caller-owned HostCommands and
// completion callbacks, noexcept, no allocation.
//
// MDTS: this layer does NOT split. IoQueue::submit_* refuse a transfer above max_transfer_bytes() (MDTS
// and the transport's limit) with Invalid Field; callers (the bench) size their I/O to fit.
//
// Threading: a Controller and its IoQueues belong to one thread at a time (HostQueue is single-threaded).
//
// Where it is: controller.cpp (bring-up, synchronous execution, teardown), controller_auth.cpp
// (DH-HMAC-CHAP), controller_admin.cpp (admin commands), controller_liveness.cpp (keep-alive, AEN),
// io_queue.cpp (IoQueue).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "initiator/host/credentials.h"
#include "initiator/host/host_identity.h"
#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/fabrics.h"
#include "protocol/identify.h"
#include "protocol/log_pages.h"
#include "protocol/properties.h"
#include "protocol/result.h"
#include "protocol/status.h"
#include "transport/host_queue.h"

namespace rdmablk::initiator {

// ---------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------

// "Connect Invalid Host (SCT 0x1 SC 0x84, DNR)"
std::string describe_status(protocol::Status s);

// How a queue gets connected: transport::connect_host_queue in the binary, a fake in tests. (Kept as a
// parameter so that the library links without a transport.)
using QueueConnector =
    std::function<Result<std::unique_ptr<transport::HostQueue>>(const transport::HostQueueOptions&)>;

// ---------------------------------------------------------------------------------------------------------
// Options and results
// ---------------------------------------------------------------------------------------------------------

struct ControllerOptions {
  transport::TransportAddress address;
  std::string subnqn;                       // the discovery NQN for a discovery controller
  HostIdentity host;
  uint32_t kato_ms = 5000;                  // Connect KATO; 0 = no keep-alive (discovery default)
  uint16_t admin_entries = 32;
  uint16_t io_queues = 1;                   // requested through Set Features Number of Queues
  bool header_digest = false;
  bool data_digest = false;
  bool disable_sq_flow_control = true;      // Connect CATTR bit 2, as the Linux host sends it
  bool scan_namespaces = true;              // Identify active NS list + each namespace (I/O controllers)
  std::chrono::milliseconds command_timeout{10000};
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::microseconds io_busy_poll{0};  // I/O queues: HostQueueOptions::busy_poll
  DhchapSettings dhchap;                    // used only when a queue's Connect response requires it
  TlsSettings tls;                          // NVMe/TCP only
  QueueConnector connector;                 // required
};

struct NamespaceInfo {
  uint32_t nsid = 0;
  protocol::IdentifyNamespace id{};
  uint64_t size_blocks = 0;      // NSZE
  uint64_t capacity_blocks = 0;  // NCAP
  uint64_t utilization_blocks = 0;
  uint32_t block_size = 0;       // 2^LBADS of the formatted LBA format
  std::optional<std::array<uint8_t, 8>> eui64;
  std::optional<std::array<uint8_t, 16>> nguid;
  std::optional<std::array<uint8_t, 16>> uuid;
};

struct DiscoveryLog {
  uint64_t genctr = 0;
  uint16_t recfmt = 0;
  std::vector<protocol::DiscoveryLogEntry> entries;
  unsigned reads = 0;  // passes made (1 unless the generation counter changed under us)
};

class Controller;
namespace detail {
struct SyncSlot;  // one synchronous command in flight on a queue
}

// One I/O queue of a controller. Owned by the thread that polls it.
class IoQueue {
 public:
  IoQueue(Controller& ctrl, std::unique_ptr<transport::HostQueue> queue, uint16_t qid) noexcept;
  ~IoQueue();
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;

  uint16_t qid() const noexcept { return qid_; }
  transport::HostQueue& queue() noexcept { return *queue_; }
  uint32_t max_transfer_bytes() const noexcept { return max_transfer_; }

  // Async data path. `cmd` (and its buffer) must stay alive until on_complete runs; the caller sets
  // cmd.on_complete / cmd.context first. Returns the submit status (the callback does not run on failure).
  protocol::Status submit_read(transport::HostCommand& cmd, uint32_t nsid, uint64_t slba, uint32_t blocks,
                               std::span<uint8_t> buffer, bool fua = false) noexcept;
  protocol::Status submit_write(transport::HostCommand& cmd, uint32_t nsid, uint64_t slba, uint32_t blocks,
                                std::span<uint8_t> buffer, bool fua = false) noexcept;
  protocol::Status submit_flush(transport::HostCommand& cmd, uint32_t nsid) noexcept;
  protocol::Status submit_write_zeroes(transport::HostCommand& cmd, uint32_t nsid, uint64_t slba, uint32_t blocks,
                                       bool deallocate = false) noexcept;
  // `ranges` holds whole protocol::DsmRange entries (16 bytes each, 1..256 of them).
  protocol::Status submit_dsm(transport::HostCommand& cmd, uint32_t nsid, std::span<uint8_t> ranges,
                              uint32_t attributes = protocol::DsmCommand::kDeallocate) noexcept;

  // Compare (05h): `buffer` holds the blocks the namespace is expected to hold; a mismatch completes with
  // Compare Failure (SCT 2h SC 85h).
  protocol::Status submit_compare(transport::HostCommand& cmd, uint32_t nsid, uint64_t slba, uint32_t blocks,
                                  std::span<uint8_t> buffer) noexcept;
  // Copy (19h), source range descriptor format 0: `ranges` holds whole protocol::CopySourceRange entries
  // (32 bytes each, 1..256 of them; encode_copy_ranges in shared_volume.h makes them).
  protocol::Status submit_copy(transport::HostCommand& cmd, uint32_t nsid, uint64_t sdlba, std::span<uint8_t> ranges,
                               bool fua = false) noexcept;
  // Fused Compare and Write (Base 2.0, 3.4.2): a Compare (FUSE 01b, `first`, `compare_buf`) and a Write
  // (FUSE 10b, `second`, `write_buf`) over the same blocks, queued as one unit in adjacent submission
  // entries (HostQueue::submit_fused): both are queued or neither. Each completes on its own callback. A
  // match: both succeed, the data is written. A mismatch: the Compare completes with Compare Failure, the
  // Write with Command Aborted due to Failed Fused Command (SCT 0 SC 09h), nothing written.
  protocol::Status submit_compare_and_write(transport::HostCommand& first, transport::HostCommand& second,
                                            uint32_t nsid, uint64_t slba, uint32_t blocks,
                                            std::span<uint8_t> compare_buf, std::span<uint8_t> write_buf,
                                            bool fua = false) noexcept;

  int poll(unsigned min_completions, std::chrono::milliseconds timeout) noexcept {
    return queue_->poll(min_completions, timeout);
  }

  // Synchronous helper (tests, tools): any I/O command.
  Result<protocol::Cqe> execute(const protocol::Sqe& sqe, std::span<uint8_t> data, transport::DataDirection dir);

  // Fabrics Disconnect on this queue (best effort), then close it.
  void disconnect() noexcept;

 private:
  friend class Controller;
  Controller& ctrl_;
  std::unique_ptr<transport::HostQueue> queue_;
  uint16_t qid_;
  uint32_t max_transfer_;
  std::unique_ptr<detail::SyncSlot> sync_;
};

class Controller {
 public:
  // Full bring-up (see the top of this file). Errors name the address and the failing step.
  static Result<std::unique_ptr<Controller>> connect(const ControllerOptions& opts);
  // A discovery controller: subnqn = the discovery NQN, KATO as given (default 0), no namespace scan.
  static Result<std::unique_ptr<Controller>> connect_discovery(ControllerOptions opts);

  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // --- Synchronous control path -------------------------------------------------------------------------
  // Submit `sqe` on `queue`, poll until it completes or `timeout` passes. A non-success NVMe status is an
  // error naming the status. On timeout or connection loss the queue is closed (a command that never
  // completed must not be answered into freed memory) and the controller marked failed.
  Result<protocol::Cqe> execute(transport::HostQueue& queue, const protocol::Sqe& sqe, std::span<uint8_t> data,
                                transport::DataDirection dir, std::chrono::milliseconds timeout);
  Result<protocol::Cqe> admin(const protocol::Sqe& sqe, std::span<uint8_t> data = {},
                              transport::DataDirection dir = transport::DataDirection::none);

  Result<uint64_t> property_get(uint32_t offset, bool eight_bytes);
  Result<void> property_set(uint32_t offset, uint64_t value, bool eight_bytes);
  Result<protocol::IdentifyController> identify_controller();
  Result<std::vector<uint32_t>> active_namespaces();
  Result<NamespaceInfo> identify_namespace(uint32_t nsid);
  // Granted I/O queue count (min of submission and completion queues granted, 1-based).
  Result<uint16_t> set_number_of_queues(uint16_t count);
  Result<std::vector<uint8_t>> get_log_page(protocol::LogPageId lid, uint64_t offset, uint32_t bytes,
                                            uint32_t nsid = 0);
  // Discovery log: header first (numrec), then the entries in dword-aligned chunks of at most
  // `chunk_bytes` (capped by the transfer limit); re-read from the start if GENCTR changed meanwhile.
  Result<DiscoveryLog> discovery_log(uint32_t chunk_bytes = 4096, unsigned max_passes = 10);

  // --- I/O queues ---------------------------------------------------------------------------------------
  // Connect I/O queue `qid` (1..granted) with `entries` slots (capped by CAP.MQES + 1).
  Result<std::unique_ptr<IoQueue>> connect_io_queue(uint16_t qid, uint16_t entries);

  // --- Keep-alive and liveness --------------------------------------------------------------------------
  // Call from the owning thread's poll loop: sends Keep Alive when KATO/2 has passed since the last one
  // and reaps its completion without blocking; marks the controller failed when one goes unanswered
  // for a whole KATO. Cheap when nothing is due.
  // It also reaps and re-arms the Asynchronous Event Request once enable_ana_events() was called.
  void service() noexcept;
  bool failed() const noexcept { return failed_; }

  // --- ANA (multipath) ----------------------------------------------------------------------------------
  // The controller reports Asymmetric Namespace Access (Identify CMIC bit 3).
  bool reports_ana() const noexcept { return (id_.cmic & protocol::idctl::kCmicAna) != 0; }
  // Asks for ANA Change notices (Set Features Asynchronous Event Configuration) and keeps one
  // Asynchronous Event Request outstanding from then on, as the Linux host does (nvme_enable_aen).
  Result<void> enable_ana_events();
  // The ANA log page (LID 0Ch, with NSID lists), sized from Identify as the Linux host sizes it: header,
  // NANAGRPID descriptors, MNAN (else NN) NSIDs; capped by the transfer limit. Reading it (RAE clear)
  // re-enables the next ANA Change notice on the controller.
  Result<std::vector<uint8_t>> read_ana_log();
  // Whether an ANA Change notice arrived since the last call (which clears it).
  bool take_ana_change() noexcept {
    const bool c = ana_changed_;
    ana_changed_ = false;
    return c;
  }
  const std::string& failure() const noexcept { return failure_; }

  // --- Teardown -------------------------------------------------------------------------------------------
  // CC.SHN = normal, wait for CSTS.SHST = complete (up to `timeout`), then close the admin queue.
  Result<void> shutdown(std::chrono::milliseconds timeout = std::chrono::milliseconds{5000});
  void disconnect() noexcept;  // close the admin queue without a shutdown

  // --- What bring-up learned ------------------------------------------------------------------------------
  const ControllerOptions& options() const noexcept { return opts_; }
  uint16_t cntlid() const noexcept { return cntlid_; }
  protocol::Cap cap() const noexcept { return cap_; }
  protocol::Vs vs() const noexcept { return vs_; }
  const protocol::IdentifyController& identity() const noexcept { return id_; }
  const std::vector<NamespaceInfo>& namespaces() const noexcept { return namespaces_; }
  const NamespaceInfo* find_namespace(uint32_t nsid) const noexcept;
  uint16_t granted_io_queues() const noexcept { return granted_queues_; }
  // min(MDTS in bytes, the transport's limit); 0 = no limit known.
  uint32_t max_transfer_bytes() const noexcept { return max_transfer_; }
  // Write data bytes that fit in an I/O command capsule (IOCCSZ * 16 - 64).
  uint32_t io_in_capsule_bytes() const noexcept;
  std::string where() const;  // "tcp://127.0.0.1:4420 nqn...."

 private:
  explicit Controller(ControllerOptions opts);
  // Bring-up, step by step (see the top of this file).
  Result<void> bring_up();
  Result<void> prepare_tls();        // the TLS client options every queue shares
  Result<void> open_admin_queue();
  Result<void> enable();             // CAP, VS, CC.EN, wait for CSTS.RDY
  Result<void> identify();           // Identify Controller, the transfer limit
  Result<void> scan_io_resources();  // I/O queue count, namespaces
  Result<void> wait_ready(bool ready, std::chrono::milliseconds timeout);
  Result<void> do_connect(transport::HostQueue& queue, detail::SyncSlot& slot, uint16_t qid, uint16_t entries,
                          uint32_t kato_ms);
  // The DH-HMAC-CHAP transaction on a queue whose Connect asked for it (t_id = qid).
  Result<void> authenticate(transport::HostQueue& queue, detail::SyncSlot& slot, uint16_t qid);
  tl::unexpected<Error> fail(std::string message, int errno_value = 0);
  static void on_keep_alive(transport::HostCommand& cmd, const protocol::Cqe& cqe) noexcept;
  static void on_async_event(transport::HostCommand& cmd, const protocol::Cqe& cqe) noexcept;
  void arm_async_event() noexcept;

  friend class IoQueue;

  ControllerOptions opts_;
  std::unique_ptr<detail::SyncSlot> sync_;  // declared before the queue: outlives it
  transport::HostCommand keep_alive_cmd_{};
  bool keep_alive_outstanding_ = false;
  std::chrono::steady_clock::time_point next_keep_alive_{};
  std::chrono::steady_clock::time_point keep_alive_sent_{};
  transport::HostCommand aer_cmd_{};
  bool aer_enabled_ = false;      // keep an Asynchronous Event Request outstanding
  bool aer_outstanding_ = false;
  bool ana_changed_ = false;
  std::unique_ptr<transport::HostQueue> admin_;
  std::shared_ptr<const transport::tcp::TcpTlsClientOptions> tls_;  // shared by every queue; null: plain
  uint16_t cntlid_ = 0;
  protocol::Cap cap_{};
  protocol::Vs vs_{};
  protocol::IdentifyController id_{};
  std::vector<NamespaceInfo> namespaces_;
  uint16_t granted_queues_ = 0;
  uint32_t max_transfer_ = 0;
  bool failed_ = false;
  std::string failure_;
};

}  // namespace rdmablk::initiator

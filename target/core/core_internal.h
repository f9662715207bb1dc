// Internal state of the target core shared by core.cpp and the command handlers; not for the daemon.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "protocol/command.h"
#include "protocol/status.h"
#include "security/dhchap_session.h"
#include "target/core/controller.h"
#include "target/core/core.h"
#include "target/core/core_reactor.h"
#include "target/core/range_lock.h"
#include "target/core/stats.h"
#include "target/core/subsystem.h"
#include "target/qos/namespace_qos.h"
#include "transport/reactor.h"
#include "transport/slot_fifo.h"
#include "transport/target_queue.h"

namespace rdmablk::target {

namespace st = protocol::status;
using protocol::Status;
using transport::TargetRequest;

// Steady clock in ns for latency statistics.
inline uint64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// The link of a command parked on its channel (RequestState::next_parked).
TargetRequest*& next_parked_of(TargetRequest& req) noexcept;

// One backend queue of one namespace on one reactor, opened the first time an I/O queue of that reactor
// needs it. Owned by the reactor's ReactorState; used on that thread only.
struct NsChannel {
  std::shared_ptr<Namespace> ns;  // keeps the backend alive while I/O is in flight
  std::unique_ptr<backend::Queue> queue;
  bool fixed_buffers = false;  // opened with the reactor's registered buffers (buf_index 0 usable)
  uint32_t in_flight = 0;
  bool retired = false;  // no longer in any table: freed once drained
  // Commands waiting for room in a full backend queue, first come first served (linked through
  // RequestState::next_parked). Never empty unless requests are in flight: their completions make room.
  transport::PtrFifo<TargetRequest, &next_parked_of> parked;
  // The reactor's watch on queue->event_fd() (watched = registered): wakes the reactor when completions are
  // due, so that it can sleep while I/O is in flight.
  struct Watch {
    transport::IoOp op;
    NsChannel* channel = nullptr;
  } watch;
  bool watched = false;
  // QoS (qos_gate.cpp): ns->qos, this reactor's allowances from it, and the commands over its limits, in
  // arrival order per host and direction (a write waiting for write_mbps holds back no read):
  // [2 * (1 + i) + write] for the host with limits i, [write] for the others.
  qos::NamespaceQos* qos = nullptr;
  qos::ReactorQos qos_local;
  std::vector<transport::PtrFifo<TargetRequest, &next_parked_of>> qos_waiting;
  uint32_t qos_parked = 0;      // commands in qos_waiting
  uint64_t qos_timer = 0;       // the release timer while commands wait (0 = none)
  uint32_t qos_first_list = 0;  // where the next release starts: each list goes first in turn
};

struct NsSlot {
  uint32_t nsid = 0;
  std::shared_ptr<Namespace> ns;
  NsChannel* channel = nullptr;     // opened lazily
  stats::IoStats* stats = nullptr;  // this reactor's statistics of (subsystem, nsid)
};

// A reactor's copy of one subsystem's namespace table.
struct SubsystemView {
  std::shared_ptr<Subsystem> subsys;
  std::shared_ptr<const NamespaceTable> table;
  std::vector<NsSlot> slots;  // sorted by NSID

  NsSlot* find(uint32_t nsid) noexcept;
};

// Per-reactor state of the core: namespace views, backend queues, and the poller that reaps them.
class ReactorState final : public transport::Poller {
 public:
  ReactorState(TargetCore& core, CoreReactor& reactor, unsigned backend_depth)
      : core_(core), reactor_(reactor), backend_depth_(backend_depth) {}
  ~ReactorState() override;

  CoreReactor& reactor() noexcept { return reactor_; }
  // Now, for latency statistics: the reactor's turn clock (free), else the clock.
  uint64_t now_ns() const noexcept { return turn_clock_ != nullptr ? *turn_clock_ : monotonic_ns(); }
  // On this reactor's thread. Creates the view from `table` if there is none yet.
  SubsystemView* view(const std::shared_ptr<Subsystem>& subsys, const std::shared_ptr<const NamespaceTable>& table);
  // On this reactor's thread: a newer table for a subsystem (ignored when older than the one in use).
  void update(const std::shared_ptr<Subsystem>& subsys, const std::shared_ptr<const NamespaceTable>& table);
  // The channel for a slot, opening the backend queue on first use (nullptr when it cannot be opened).
  NsChannel* channel(NsSlot& slot) noexcept;
  // Reaps one channel's completions and hands them to the core. Returns how many.
  unsigned reap(NsChannel& ch) noexcept;
  // Runs a validated command's backend requests (see RequestState) on its channel, and completes the command
  // when the last one ends (at once when it has none). A full backend queue never fails a command: the
  // command waits on the channel and goes on when a completion makes room.
  void submit(CoreQueue& q, TargetRequest& req) noexcept;
  // From any thread: the range lock `req` waited for let it go (TargetCore::range_granted on this thread).
  void post_range_granted(TargetRequest& req) noexcept;
  // QoS (qos_gate.cpp): true when a Read or Write may go to the backend now; false when it waits for its
  // namespace's (or host's) budget, in arrival order, and a timer hands it to TargetCore::submit_admitted.
  bool qos_admit(CoreQueue& q, TargetRequest& req) noexcept;
  bool poll() noexcept override;
  void detach() noexcept;  // remove the poller and the fd watches (destruction)

  // This reactor's statistics block of a namespace, created on first use (reactor thread, control path).
  // Kept by (subsystem NQN, NSID), so they go on across a reload that replaces the backend.
  stats::IoStats* namespace_stats(const std::string& nqn, uint32_t nsid);
  // Adds this reactor's block of (nqn, nsid), if any, to `out` (any thread).
  void collect_namespace_stats(const std::string& nqn, uint32_t nsid, stats::IoStatsSnapshot& out) const;

 private:
  void unwatch(NsChannel& ch) noexcept;
  // Submits req's backend requests from RequestState::next on. Returns false when the command parked on
  // the channel, keeping its hold on RequestState::pending; otherwise drops that hold (which may complete it).
  bool submit_from_next(CoreQueue& q, TargetRequest& req, bool resumed) noexcept;
  void park(NsChannel& ch, CoreQueue& q, TargetRequest& req, bool front) noexcept;
  // After a reap made room: parked commands go on, in order, until the backend queue is full again.
  void resume_parked(NsChannel& ch) noexcept;
  // QoS: releases what the budget allows now from each of the channel's waiting lists; re-arms the timer.
  void qos_release(NsChannel& ch) noexcept;
  void qos_arm(NsChannel& ch) noexcept;

  TargetCore& core_;
  CoreReactor& reactor_;
  const uint64_t* turn_clock_ = reactor_.turn_clock();
  unsigned backend_depth_;
  std::unordered_map<const Subsystem*, std::unique_ptr<SubsystemView>> views_;
  std::vector<std::unique_ptr<NsChannel>> channels_;
  bool poller_added_ = false;
  // Blocks are written by this reactor without a lock; the mutex guards the map only (creating an entry here,
  // looking one up from the control thread).
  mutable std::mutex ns_stats_mu_;
  std::map<std::pair<std::string, uint32_t>, std::unique_ptr<stats::IoStats>> ns_stats_;
};

enum class QueueState : uint8_t { unconnected, admin, io };

// The core's state for one transport queue (TargetQueue::core_queue points at it). Used on the queue's
// reactor thread only, except the fields the control path reads under the mutex.
struct CoreQueue {
  transport::TargetQueue* tq = nullptr;
  transport::TransportAddress local;  // tq->local_address(), readable by the control path under the mutex
  ReactorState* rs = nullptr;
  QueueState state = QueueState::unconnected;
  uint16_t qid = 0;
  uint16_t sq_entries = 0;
  std::shared_ptr<Controller> ctrl;
  SubsystemView* view = nullptr;  // I/O queues: this reactor's view of the subsystem
  // The ANA states of the listener the queue came in on (set at creation; never null): I/O to a namespace
  // whose group cannot be reached through it completes with an ANA status.
  std::shared_ptr<const AnaPort> ana_port;
  bool closed = false;            // on_queue_closed seen: complete() becomes release()
  uint32_t backend_in_flight = 0;
  uint32_t parked = 0;  // commands waiting for room in a full backend queue or for a range lock
  // The first half of a fused pair, held until the next command on this queue says whether it is the
  // second half (commands/fused.cpp); released when the queue closes.
  TargetRequest* fused_first = nullptr;
  uint64_t connect_timer = 0;  // closes the queue unless Fabrics Connect succeeds first (0 = none)
  // I/O queues: what this queue completed (written on its reactor only, read by the control path).
  stats::IoStats io_stats;
  // Commands received and completed (relaxed single-writer counters): their difference is in flight.
  std::atomic<uint64_t> commands_received{0};
  std::atomic<uint64_t> commands_completed{0};
  // DH-HMAC-CHAP (commands/auth.cpp), on the queue's reactor: `auth` is set when the host must authenticate
  // this queue (the controller's settings); until `authenticated`, only fabrics commands run (nvmet).
  std::shared_ptr<const HostAuth> auth;
  std::unique_ptr<security::dhchap::ControllerAuthSession> auth_session;  // made by the first Auth Send
  bool authenticated = false;
  std::shared_ptr<CoreQueue> self;  // keeps this alive until closed and drained
};

// Per-request state kept in TargetRequest::core (no allocation per command).
//
// An I/O command's lifecycle (commands/io.cpp): handle_io validates it and fills this state, in one place; a
// command with host data fetches it and io_data_ready checks the access again (the namespace may have changed
// meanwhile); then ReactorState::submit runs its backend requests - `count` of them: one for Read, Write,
// Flush and Write Zeroes (op, slba, blocks, fua), one per non-empty range for a DSM deallocate, none for DSM
// hints - parking the command on its channel while the backend queue is full; the last completion (or the
// first refusal) completes it through TargetCore::io_request_done.
// Reservation Register, Acquire and Release run once their data is here (stage reservation), Report at once.
enum class Stage : uint8_t { none, connect, write, dsm, auth_send, compare, copy, reservation, reservation_report };
// Where a command that reads before it completes or writes is (commands/compare_copy.cpp, fused.cpp):
// Compare reads the blocks into `scratch` and compares; fused Compare and Write locks the range, reads,
// compares and writes the Write's data; Copy reads every source range into `scratch`, then writes it.
// A backend that compares and writes atomically itself (rbd) takes the pair in one request: caw_native.
enum class Phase : uint8_t { single, compare_read, caw_read, caw_write, caw_native, copy_read, copy_write };
struct RequestState {
  NsChannel* channel;
  TargetRequest* next_parked;  // the next command waiting on channel->parked
  uint64_t slba;
  uint32_t blocks;
  uint32_t pending;       // backend requests outstanding (DSM: one per range), + 1 while submitting or parked
  uint16_t status_field;  // first error's status field, 0 = none
  uint16_t count;         // backend requests the command needs (DSM deallocate: its range count)
  uint16_t next;          // the next of them to submit
  Stage stage;
  uint8_t opcode;
  backend::Op op;  // Read, Write, Flush, Write Zeroes: the backend operation
  bool fua;
  uint64_t arrived_ns;          // steady clock when the command arrived (latency statistics)
  stats::IoStats* ns_stats;     // I/O commands on an active namespace: its statistics on this reactor
  // Compare, Copy and fused Compare and Write (commands/compare_copy.cpp, fused.cpp).
  Phase phase;
  bool data_here;          // a fused half: its data arrived (or failed: status_field says)
  bool range_registered;   // `range` is in its namespace's RangeLocks (a write or a lock)
  uint8_t* scratch;        // blocks read from the namespace (aligned_alloc), freed when the command ends
  TargetRequest* fused;    // a fused pair: the other half, until both complete
  uint64_t copy_blocks;    // Copy: blocks read so far (the next range's place in `scratch`)
  RangeWaiter range;       // writes and fused pairs: their entry in the namespace's RangeLocks
  uint64_t qos_since_ns;   // QoS: when it began waiting for its namespace's (or host's) budget
  int32_t qos_host;        // QoS: its host's index in NamespaceQos (-1: the namespace's limits only)
};
static_assert(sizeof(RequestState) <= sizeof(TargetRequest::core));
static_assert(alignof(RequestState) <= 16);

inline RequestState& request_state(TargetRequest& req) noexcept {
  return *std::launder(reinterpret_cast<RequestState*>(req.core.data()));
}
inline TargetRequest*& next_parked_of(TargetRequest& req) noexcept { return request_state(req).next_parked; }
inline RequestState& reset_request_state(TargetRequest& req) noexcept {
  return *new (req.core.data()) RequestState{};
}
// A fabrics command with host data (Connect, Authentication Send) enters `stage`: true when the data came in
// the capsule and the command goes on now; otherwise the queue fetches it and on_data_ready goes on.
inline bool data_in_capsule_or_fetch(TargetRequest& req, Stage stage) noexcept {
  request_state(req).stage = stage;
  if (req.data_in_capsule) return true;
  req.queue->fetch_data(req);
  return false;
}
inline CoreQueue& core_queue(TargetRequest& req) noexcept { return *static_cast<CoreQueue*>(req.queue->core_queue); }

// The namespace `nsid` as the queue's host sees it: null when there is none, or when it is masked from this
// host (NamespaceConfig::hosts): to that host it is an inactive NSID.
inline NsSlot* find_slot(CoreQueue& q, uint32_t nsid) noexcept {
  NsSlot* const slot = q.view->find(nsid);
  return slot != nullptr && slot->ns->config.visible_to(q.ctrl->hostnqn) ? slot : nullptr;
}

// Authentication Required (SCT 1h, SC 91h, DNR): a command other than a fabrics one on a queue that has not
// authenticated yet (nvmet: NVME_SC_AUTH_REQUIRED | NVME_STATUS_DNR).
inline constexpr Status kAuthRequired{protocol::StatusCodeType::command_specific, 0x91, true};
// Connect response DW0 AUTHREQ (bits 31:16) ATR, bit 17 of DW0: the host must authenticate the queue.
inline constexpr uint16_t kAuthreqAtr = 0x0002;

// Fabrics commands want SGLs for their data and no fused operations (nvmet_req_init): Invalid Field otherwise.
inline Status check_common_flags(const protocol::SqeHeader& h) noexcept {
  if (h.fuse() != protocol::FusedOperation::normal) return st::invalid_field;
  if (h.psdt() != protocol::Psdt::sgl_mptr_contiguous) return st::invalid_field;
  return st::success;
}

// The listener a connection came in on, given the connection's real local address: a listener on that
// address and port, else one bound to the wildcard address (0.0.0.0 / ::) with that port, of the same
// transport. Returns its index in `listeners`, or -1 when none matches.
int find_listener(std::span<const ListenerConfig> listeners, const transport::TransportAddress& local) noexcept;

// VS / Identify VER.
uint32_t target_version() noexcept;

// Checks that a command transferring `needed` bytes in `dir` got a transfer of exactly that length (the
// transport already checked the SGL itself). Returns success or the status to complete with.
Status check_data(const TargetRequest& req, transport::DataDirection dir, uint32_t needed) noexcept;

}  // namespace rdmablk::target

// Internal state of the target core shared by core.cpp and the command handlers; not for the daemon.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "protocol/command.h"
#include "protocol/status.h"
#include "target/controller.h"
#include "target/core.h"
#include "target/core_reactor.h"
#include "target/subsystem.h"
#include "transport/reactor.h"
#include "transport/target_queue.h"

namespace rdmablk::target {

namespace st = protocol::status;
using protocol::Status;
using transport::TargetRequest;

// One backend queue of one namespace on one reactor, opened the first time an I/O queue of that reactor
// needs it. Owned by the reactor's ReactorState; used on that thread only.
struct NsChannel {
  std::shared_ptr<Namespace> ns;  // keeps the backend alive while I/O is in flight
  std::unique_ptr<backend::Queue> queue;
  bool fixed_buffers = false;  // opened with the reactor's registered buffers (buf_index 0 usable)
  uint32_t in_flight = 0;
  bool retired = false;  // no longer in any table: freed once drained
  // The reactor's watch on queue->event_fd() (watched = registered): wakes the reactor when completions are
  // due, so that it can sleep while I/O is in flight.
  struct Watch {
    transport::IoOp op;
    NsChannel* channel = nullptr;
  } watch;
  bool watched = false;
};

struct NsSlot {
  uint32_t nsid = 0;
  std::shared_ptr<Namespace> ns;
  NsChannel* channel = nullptr;  // opened lazily
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
  // On this reactor's thread. Creates the view from `table` if there is none yet.
  SubsystemView* view(const std::shared_ptr<Subsystem>& subsys, const std::shared_ptr<const NamespaceTable>& table);
  // On this reactor's thread: a newer table for a subsystem (ignored when older than the one in use).
  void update(const std::shared_ptr<Subsystem>& subsys, const std::shared_ptr<const NamespaceTable>& table);
  // The channel for a slot, opening the backend queue on first use (nullptr when it cannot be opened).
  NsChannel* channel(NsSlot& slot) noexcept;
  // Reaps one channel's completions and hands them to the core. Returns how many.
  unsigned reap(NsChannel& ch) noexcept;
  bool poll() noexcept override;
  void detach() noexcept;  // remove the poller and the fd watches (destruction)

 private:
  void unwatch(NsChannel& ch) noexcept;

  TargetCore& core_;
  CoreReactor& reactor_;
  unsigned backend_depth_;
  std::unordered_map<const Subsystem*, std::unique_ptr<SubsystemView>> views_;
  std::vector<std::unique_ptr<NsChannel>> channels_;
  bool poller_added_ = false;
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
  bool closed = false;            // on_queue_closed seen: complete() becomes release()
  uint32_t backend_in_flight = 0;
  IoCounters counters;
  std::shared_ptr<CoreQueue> self;  // keeps this alive until closed and drained
};

// Per-request state kept in TargetRequest::core (no allocation per command).
enum class Stage : uint8_t { none, connect, write, dsm };
struct RequestState {
  NsChannel* channel;
  uint64_t slba;
  uint32_t blocks;
  uint32_t pending;       // backend requests outstanding (DSM: one per range)
  uint16_t status_field;  // first error's status field, 0 = none
  Stage stage;
  uint8_t opcode;
};
static_assert(sizeof(RequestState) <= sizeof(TargetRequest::core));
static_assert(alignof(RequestState) <= 16);

inline RequestState& request_state(TargetRequest& req) noexcept {
  return *std::launder(reinterpret_cast<RequestState*>(req.core.data()));
}
inline RequestState& reset_request_state(TargetRequest& req) noexcept {
  return *new (req.core.data()) RequestState{};
}
inline CoreQueue& core_queue(TargetRequest& req) noexcept { return *static_cast<CoreQueue*>(req.queue->core_queue); }

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

// Checks that a command transferring `needed` bytes in `dir` has a data SGL of exactly that length, of a
// type the queue's transport accepts. Returns success or the status to complete with.
Status check_data(const TargetRequest& req, transport::DataDirection dir, uint32_t needed) noexcept;

}  // namespace rdmablk::target

// Command dispatch: a command from a transport goes to its handler in the command table
// (commands/command_table.h), or completes with the status the spec gives when the table has no entry for it
// where it arrived. The order of the checks decides the status of a command with several faults.
#include "target/commands/command_table.h"
#include "target/core/core_internal.h"

namespace rdmablk::target {

namespace {

// The queue a request arrived on, or nullptr when that queue is closing: the request is then released
// without a completion.
CoreQueue* open_queue_or_release(TargetRequest& req) noexcept {
  auto* q = static_cast<CoreQueue*>(req.queue->core_queue);
  if (q != nullptr && !q->closed) return q;
  req.queue->release(req);
  return nullptr;
}

}  // namespace

void TargetCore::on_command(TargetRequest& req) noexcept {
  CoreQueue* const qp = open_queue_or_release(req);
  if (qp == nullptr) return;
  CoreQueue& q = *qp;
  RequestState& rs = reset_request_state(req);
  rs.opcode = req.sqe.hdr.opcode;
  rs.arrived_ns = q.rs->now_ns();
  q.commands_received.store(q.commands_received.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (req.sqe.hdr.opcode == protocol::kFabricsOpcode) {
    handle_fabrics(q, req);
    return;
  }
  if (q.auth && !q.authenticated && q.state != QueueState::unconnected) {
    finish(req, kAuthRequired);  // DH-HMAC-CHAP first (nvmet_check_auth_status)
    return;
  }
  switch (q.state) {
    case QueueState::unconnected:
      finish(req, st::command_sequence_error);  // nothing but Connect before Connect
      return;
    case QueueState::admin:
      handle_admin(q, req);
      return;
    case QueueState::io:
      handle_io(q, req);
      return;
  }
}

void TargetCore::on_data_ready(TargetRequest& req, Status status) noexcept {
  CoreQueue* const qp = open_queue_or_release(req);
  if (qp == nullptr) return;
  CoreQueue& q = *qp;
  RequestState& rs = request_state(req);
  if (rs.fused != nullptr) {
    fused_data_ready(q, req, status);  // a half of a fused pair waits for the other (commands/fused.cpp)
    return;
  }
  if (!status.ok()) {
    finish(req, status);
    return;
  }
  switch (rs.stage) {
    case Stage::connect:
      connect_with_data(q, req);
      return;
    case Stage::write:
    case Stage::dsm:
    case Stage::compare:
    case Stage::copy:
    case Stage::reservation:
      io_data_ready(q, req, status);
      return;
    case Stage::auth_send:
      auth_send_with_data(q, req);
      return;
    case Stage::none:
    case Stage::reservation_report:
      break;
  }
  finish(req, st::internal_error);
}

void TargetCore::handle_fabrics(CoreQueue& q, TargetRequest& req) noexcept {
  const CommandEntry* const cmd = find_command(CommandSet::fabrics, protocol::as<protocol::FabricsCommand>(req.sqe).fctype);
  const uint8_t here = q.state == QueueState::unconnected ? runs_on::kUnconnectedQueue
                       : q.state == QueueState::admin     ? runs_on::kAdminQueue
                                                          : runs_on::kIoQueue;
  if (cmd == nullptr || (cmd->runs_on & here) == 0) {
    // Nothing but Connect before Connect, and Connect only once; the rest (Disconnect, properties on an I/O
    // queue) is not supported where it arrived.
    const bool connect_only = cmd != nullptr && cmd->runs_on == runs_on::kUnconnectedQueue;
    finish(req, here == runs_on::kUnconnectedQueue || connect_only ? st::command_sequence_error : st::invalid_opcode);
    return;
  }
  if (q.ctrl) q.ctrl->touch_if_traffic_based();
  (this->*cmd->handler)(q, req);
}

void TargetCore::handle_admin(CoreQueue& q, TargetRequest& req) noexcept {
  Controller& ctrl = *q.ctrl;
  if (Status s = check_common_flags(req.sqe.hdr); !s.ok()) {
    finish(req, s);
    return;
  }
  if (!ctrl.ready.load(std::memory_order_relaxed)) {
    finish(req, st::command_sequence_error);  // CC.EN = 0 or CSTS.RDY = 0
    return;
  }
  ctrl.touch_if_traffic_based();
  const CommandEntry* const cmd = find_command(CommandSet::admin, req.sqe.hdr.opcode);
  const uint8_t here = ctrl.discovery ? runs_on::kDiscoveryController : runs_on::kIoController;
  if (cmd == nullptr || (cmd->runs_on & here) == 0) {
    finish(req, st::invalid_opcode);
    return;
  }
  (this->*cmd->handler)(q, req);
}

}  // namespace rdmablk::target

#include "initiator/host/sync_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "initiator/host/controller.h"

namespace rdmablk::initiator::detail {

using namespace std::chrono_literals;
using protocol::Cqe;
using protocol::Sqe;
using protocol::Status;
using transport::DataDirection;
using transport::HostCommand;
using transport::HostQueue;

namespace {

void sync_complete(HostCommand& cmd, const Cqe& cqe) noexcept {
  auto* slot = static_cast<SyncSlot*>(cmd.context);
  slot->cqe = cqe;
  slot->done = true;
}

}  // namespace

SyncOutcome run_sync(HostQueue& q, SyncSlot& slot, const Sqe& sqe, std::span<uint8_t> data, DataDirection dir,
                     std::chrono::milliseconds timeout) {
  slot.done = false;
  slot.cmd = HostCommand{};
  slot.cmd.sqe = sqe;
  slot.cmd.direction = dir;
  slot.cmd.data = data;
  slot.cmd.on_complete = &sync_complete;
  slot.cmd.context = &slot;
  SyncOutcome out;
  Status st = q.submit(slot.cmd);
  if (!st.ok()) {
    out.failure = SyncFailure::submit;
    out.message = "could not be queued: " + describe_status(st);
    return out;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!slot.done) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) {
      q.close();
      out.failure = SyncFailure::timeout;
      out.message = fmt::format("timed out after {} ms", timeout.count());
      return out;
    }
    int rc = q.poll(1, std::min<std::chrono::milliseconds>(left, 100ms));
    if (rc < 0) {
      if (slot.done && slot.cqe.get_status().ok()) break;
      q.close();
      out.failure = SyncFailure::connection;
      out.message = fmt::format("connection lost ({})", std::strerror(-rc));
      return out;
    }
  }
  out.cqe = slot.cqe;
  return out;
}

}  // namespace rdmablk::initiator::detail

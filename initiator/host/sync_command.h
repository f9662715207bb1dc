// One command run to completion on a queue: the control path's building block (bring-up, admin commands,
// authentication, IoQueue::execute). Internal to the host library.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "transport/host_queue.h"

namespace rdmablk::initiator::detail {

// The command and where its completion lands; one per queue (synchronous commands do not overlap).
struct SyncSlot {
  transport::HostCommand cmd{};
  protocol::Cqe cqe{};
  bool done = false;
};

enum class SyncFailure { none, submit, timeout, connection };

struct SyncOutcome {
  SyncFailure failure = SyncFailure::none;
  protocol::Cqe cqe{};  // valid when failure == none (any NVMe status)
  std::string message;  // what went wrong otherwise
};

// Runs one command to completion on `q`. Closes the queue on timeout or connection loss: a command that
// never completed must not be answered into freed memory.
SyncOutcome run_sync(transport::HostQueue& q, SyncSlot& slot, const protocol::Sqe& sqe, std::span<uint8_t> data,
                     transport::DataDirection dir, std::chrono::milliseconds timeout);

}  // namespace rdmablk::initiator::detail

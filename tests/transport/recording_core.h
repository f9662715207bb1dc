// A TargetQueueHandler for transport state-machine tests: records what the queue hands the core and, unless
// told to hold, answers like a trivial core (writes fetch their data, reads return 0xAB bytes).
#pragma once

#include <cstring>
#include <utility>
#include <vector>

#include "protocol/status.h"
#include "transport/target_queue.h"

namespace rdmablk::transport {

// A core that records what it sees; with `hold`, commands stay with it until the test acts.
class RecordingCore final : public TargetQueueHandler {
 public:
  void on_queue_created(TargetQueue&) noexcept override { ++created; }
  void on_command(TargetRequest& req) noexcept override {
    commands.push_back(&req);
    if (hold) return;
    if (req.direction == DataDirection::host_to_controller && req.data_length != 0) {
      req.queue->fetch_data(req);
      return;
    }
    if (req.direction == DataDirection::controller_to_host && req.data_length != 0) {
      std::memset(req.data, 0xAB, req.data_length);
      req.queue->complete(req, true);
      return;
    }
    req.queue->complete(req, false);
  }
  void on_data_ready(TargetRequest& req, protocol::Status st) noexcept override {
    data_ready.push_back({&req, st});
    if (hold_data) return;
    req.cqe.set_status(st);
    req.queue->complete(req, false);
  }
  void on_queue_closed(TargetQueue&) noexcept override { ++closed; }

  bool hold = false;
  bool hold_data = false;
  int created = 0;
  int closed = 0;
  std::vector<TargetRequest*> commands;
  std::vector<std::pair<TargetRequest*, protocol::Status>> data_ready;
};

}  // namespace rdmablk::transport

// An attached volume: a remote NVMe-oF namespace served as /dev/ublkbN by this process.
//
// serve_volume() runs the whole life of one attachment on the calling thread (the supervisor), with one
// thread per ublk queue (ublk/queue.h):
//   /dev/ublk-control (clear error when ublk is missing) -> Controller::connect (Identify tells size,
//   block size, MDTS, VWC, ONCS) -> one I/O queue per ublk queue -> ADD_DEV, SET_PARAMS -> queue threads
//   fetch -> START_DEV -> on_ready -> supervise: keep-alive, reconnection, stop -> STOP_DEV, DEL_DEV,
//   controller shutdown.
// A lost connection (keep-alive failure, a queue error) drops every queue's connection, holds I/O and
// reconnects with ReconnectPolicy's backoff; past ctrl_loss_tmo held and new I/O fail with EIO until the
// target is back. Stop: `stop_fd` readable (the CLI's signalfd for SIGTERM/SIGINT) or the device
// stopped from outside.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "initiator/controller.h"
#include "initiator/ublk/control.h"
#include "initiator/ublk/geometry.h"

namespace rdmablk::initiator::ublk {

struct AttachOptions {
  ControllerOptions controller;  // address, subnqn, host identity, KATO, connector
  uint32_t nsid = 1;
  uint16_t io_queues = 0;        // ublk queues = NVMe I/O queues; 0 = one per CPU (capped by the controller)
  uint16_t queue_size = 128;     // entries per I/O queue; the ublk queue depth follows
  std::chrono::seconds ctrl_loss_tmo{600};   // negative = hold I/O forever
  std::chrono::seconds reconnect_delay{10};  // the backoff's ceiling
  std::string control_path = kControlPath;
};

struct AttachedVolume {
  std::string device;  // /dev/ublkbN
  uint32_t dev_id = 0;
  uint16_t queues = 0;
  uint16_t depth = 0;
  Geometry geometry;
  std::string where;   // "tcp://ADDR:PORT NQN"
};

struct VolumeEvents {
  std::function<void(const AttachedVolume&)> ready;                   // the block device exists
  std::function<void(const AttachedVolume&, std::string_view)> state;  // "live", "reconnecting", "failed"
};

// Returns once the volume is detached again (stop_fd or an outside stop), or an error if it could not
// be attached. Signals meant for stop_fd must be blocked in the calling thread before the call (the
// queue threads inherit the mask).
Result<void> serve_volume(const AttachOptions& opts, int stop_fd, const VolumeEvents& events);

}  // namespace rdmablk::initiator::ublk

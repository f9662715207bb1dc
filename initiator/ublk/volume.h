// An attached volume: a remote NVMe-oF namespace served as /dev/ublkbN by this process.
//
// serve_volume() runs the whole life of one attachment on the calling thread (the supervisor), with one
// thread per ublk queue (ublk/queue.h):
//   /dev/ublk-control (clear error when ublk is missing) -> Controller::connect (Identify tells size,
//   block size, MDTS, VWC, ONCS) -> one I/O queue per ublk queue -> ADD_DEV, SET_PARAMS -> queue threads
//   fetch -> START_DEV -> on_ready -> supervise: keep-alive, reconnection, stop -> STOP_DEV, DEL_DEV,
//   controller shutdown.
// Several paths (ublk/multipath.h): every path's controller is connected and watched (keep-alive, ANA
// log, ANA Change notices); I/O goes down the best usable one. A lost path (keep-alive failure, a queue
// error) reconnects in the background with its own ReconnectPolicy backoff while I/O moves to another
// usable path at once (held requests are resubmitted there); a better path coming back takes the I/O
// again. Only while NO path is usable is I/O held, and past ctrl_loss_tmo held and new I/O fail with EIO
// until a path is back. Stop: `stop_fd` readable (the CLI's signalfd for SIGTERM/SIGINT) or the device
// stopped from outside.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "initiator/host/controller.h"
#include "initiator/ublk/control.h"
#include "initiator/ublk/geometry.h"
#include "initiator/ublk/multipath.h"

namespace rdmablk::initiator::ublk {

struct AttachOptions {
  ControllerOptions controller;  // address, subnqn, host identity, KATO, connector
  // The paths, in order of preference among equals; empty: controller.address alone.
  std::vector<transport::TransportAddress> paths;
  uint32_t nsid = 1;
  uint16_t io_queues = 0;        // ublk queues = NVMe I/O queues; 0 = one per CPU (capped by the controller)
  uint16_t queue_size = 128;     // entries per I/O queue; the ublk queue depth follows
  std::chrono::seconds ctrl_loss_tmo{600};   // negative = hold I/O forever
  std::chrono::seconds reconnect_delay{10};  // the backoff's ceiling
  std::string control_path = kControlPath;
};

// One path as `rdmablk list` shows it.
struct PathView {
  transport::TransportAddress address;
  PathConnection connection = PathConnection::connecting;
  std::optional<protocol::AnaState> ana;  // nullopt: not known / not reported
  bool in_use = false;
};

struct AttachedVolume {
  std::string device;  // /dev/ublkbN
  uint32_t dev_id = 0;
  uint16_t queues = 0;
  uint16_t depth = 0;
  Geometry geometry;
  std::string where;   // "tcp://ADDR:PORT NQN" of the path in use
  std::vector<PathView> paths;
};

struct VolumeEvents {
  std::function<void(const AttachedVolume&)> ready;                   // the block device exists
  // "live", "reconnecting" (no usable path: I/O held), "failed" (past ctrl_loss_tmo); also called when
  // only a path's state changed.
  std::function<void(const AttachedVolume&, std::string_view)> state;
};

// Returns once the volume is detached again (stop_fd or an outside stop), or an error if it could not
// be attached. Signals meant for stop_fd must be blocked in the calling thread before the call (the
// queue threads inherit the mask).
Result<void> serve_volume(const AttachOptions& opts, int stop_fd, const VolumeEvents& events);

}  // namespace rdmablk::initiator::ublk

// When a read's last C2HData PDU carries SUCCESS in place of a CapsuleResp (NVMe/TCP 1.0, 3.6.2.8): a
// target option (TcpTargetOptions, the listener's `c2h_success` key), here on its own so the config model
// can name it without the queue's header.
#pragma once

#include <cstdint>

namespace rdmablk::transport::tcp {

enum class C2hSuccess : uint8_t {
  off,
  sq_flow_disabled,  // only on queues whose Connect disabled SQ flow control (the default, as nvmet-tcp)
  always,            // every read, as SPDK's target by default
};

}  // namespace rdmablk::transport::tcp

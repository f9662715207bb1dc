#include "transport/target_queue.h"

#include "protocol/fabrics.h"

namespace rdmablk::transport {

// Which way the command's data flows (NVMe Base 2.0 Figure 89: opcode bits 1:0), fabrics commands by FCTYPE.
DataDirection command_direction(const protocol::Sqe& sqe, bool& bidirectional) noexcept {
  bidirectional = false;
  const uint8_t opc = sqe.hdr.opcode;
  if (opc == protocol::kFabricsOpcode) {
    switch (static_cast<protocol::FabricsType>(sqe.hdr.nsid.get() & 0xFF)) {
      case protocol::FabricsType::connect:
      case protocol::FabricsType::authentication_send:
        return DataDirection::host_to_controller;
      case protocol::FabricsType::authentication_receive:
        return DataDirection::controller_to_host;
      default:
        return DataDirection::none;
    }
  }
  switch (protocol::data_transfer(opc)) {
    case protocol::DataTransfer::host_to_controller: return DataDirection::host_to_controller;
    case protocol::DataTransfer::controller_to_host: return DataDirection::controller_to_host;
    case protocol::DataTransfer::bidirectional: bidirectional = true; return DataDirection::none;
    case protocol::DataTransfer::none: break;
  }
  return DataDirection::none;
}

}  // namespace rdmablk::transport

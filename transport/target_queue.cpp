#include "transport/target_queue.h"

#include "protocol/fabrics.h"
#include "transport/target_queue_base.h"

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

namespace rdmablk::transport {

namespace {

// A descriptor whose length field is zero, whatever its type (bytes 8..11; a keyed block's is 24 bits).
bool zero_length_descriptor(const protocol::SglDescriptor& d) noexcept {
  const bool keyed = d.type() == protocol::SglType::keyed_data_block;
  for (std::size_t i = 0; i < (keyed ? 3u : 4u); ++i) {
    if (d.type_specific[i] != 0) return false;
  }
  return true;
}

}  // namespace

protocol::Status plan_data_transfer(const protocol::Sqe& sqe, uint32_t icd_len, const BindingLimits& lim,
                                    DataPlan& out) noexcept {
  namespace st = protocol::status;
  out = DataPlan{};
  bool bidir = false;
  const DataDirection dir = command_direction(sqe, bidir);
  auto sgl = protocol::decode_data_sgl(sqe.hdr.dptr, lim.accept, offsetof(protocol::SqeHeader, dptr));
  if (!sgl) {
    // Nothing to move and nothing described: the descriptor's type does not matter.
    if (dir == DataDirection::none && !bidir && icd_len == 0 && zero_length_descriptor(sqe.hdr.dptr)) {
      return st::success;
    }
    return st::sgl_descriptor_type_invalid;
  }
  const uint32_t length = sgl->length;
  const bool in_capsule = sgl->kind == protocol::SglKind::in_capsule;
  if (bidir && length != 0) return st::invalid_field;
  if (length == 0 || dir == DataDirection::none) {
    if (icd_len != 0 && (in_capsule || lim.capsule_declares_data)) return st::data_sgl_length_invalid;
    return st::success;
  }
  if (length > lim.max_transfer) return st::data_sgl_length_invalid;
  if (in_capsule) {
    if (dir != DataDirection::host_to_controller) return st::invalid_field;
    if (icd_len > lim.in_capsule) return st::data_sgl_length_invalid;
    if (sgl->addr > icd_len) return st::sgl_offset_invalid;
    if (length > lim.in_capsule || !protocol::sgl_fits_in_capsule(*sgl, icd_len)) return st::data_sgl_length_invalid;
    out.icd_offset = static_cast<uint32_t>(sgl->addr);
  } else if (icd_len != 0 && lim.capsule_declares_data) {
    return st::invalid_field;  // e.g. 0x5A with data in the capsule
  }
  out.direction = dir;
  out.length = length;
  out.kind = sgl->kind;
  if (sgl->kind == protocol::SglKind::keyed) {
    out.remote_addr = sgl->addr;
    out.rkey = sgl->key;
    out.invalidate = sgl->invalidate;
  }
  return st::success;
}

}  // namespace rdmablk::transport

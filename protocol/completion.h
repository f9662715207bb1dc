// NVMe completion queue entry (NVMe Base 2.0, 4.6 "Completion Queue Entry"). 16 bytes; on fabrics it is the
// whole response capsule (IORCSZ = 1).
#pragma once

#include "protocol/wire.h"
#include "protocol/status.h"

namespace rdmablk::protocol {

struct Cqe {
  le32 dw0;     // 0  command specific result
  le32 dw1;     // 4  command specific (Property Get of 8 bytes uses DW0-DW1)
  le16 sqhd;    // 8  SQ head pointer (fabrics: meaningless once SQ flow control is disabled)
  le16 sqid;    // 10 SQ identifier
  le16 cid;     // 12 command identifier
  le16 status;  // 14 bit 0 phase tag, bits 15:1 status field (see Status)

  constexpr Status get_status() const noexcept { return Status::from_cqe_status(status.get()); }
  constexpr bool phase() const noexcept { return (status.get() & 1u) != 0; }
  constexpr void set_status(Status s, bool phase_tag = false) noexcept { status.set(s.cqe_status(phase_tag)); }
  // 64-bit result (DW1:DW0), e.g. an 8-byte Property Get.
  constexpr uint64_t result64() const noexcept { return uint64_t{dw1.get()} << 32 | dw0.get(); }
  constexpr void set_result64(uint64_t v) noexcept {
    dw0.set(static_cast<uint32_t>(v));
    dw1.set(static_cast<uint32_t>(v >> 32));
  }
};
static_assert(sizeof(Cqe) == 16);
static_assert(offsetof(Cqe, dw0) == 0);
static_assert(offsetof(Cqe, dw1) == 4);
static_assert(offsetof(Cqe, sqhd) == 8);
static_assert(offsetof(Cqe, sqid) == 10);
static_assert(offsetof(Cqe, cid) == 12);
static_assert(offsetof(Cqe, status) == 14);
static_assert(WireLayout<Cqe>);

constexpr Cqe make_cqe(uint16_t cid, uint16_t sqid, uint16_t sqhd, Status s, uint32_t dw0 = 0,
                       bool phase = false) noexcept {
  Cqe c{};
  c.dw0.set(dw0);
  c.sqhd.set(sqhd);
  c.sqid.set(sqid);
  c.cid.set(cid);
  c.set_status(s, phase);
  return c;
}

// Asynchronous Event Request completion DW0 (Base 2.0 Figure 147): type 2:0, information 15:8, LID 23:16.
enum class AsyncEventType : uint8_t {
  error_status = 0,
  smart_health = 1,
  notice = 2,
  immediate = 3,
  one_shot = 4,
  io_command_specific = 6,
  vendor_specific = 7,
};
// Notice information (type 2).
enum class AsyncEventNotice : uint8_t {
  namespace_attribute_changed = 0x00,  // with LID 0x04 (changed namespace list)
  firmware_activation_starting = 0x01,
  telemetry_log_changed = 0x02,
  ana_change = 0x03,  // LID 0x0C
  predictable_latency_aggregate = 0x04,
  lba_status_alert = 0x05,
  endurance_group_event_aggregate = 0x06,
  discovery_log_page_change = 0xF0,  // LID 0x70
};

constexpr uint32_t async_event_result(AsyncEventType type, uint8_t info, uint8_t lid) noexcept {
  return (static_cast<uint32_t>(type) & 0x7u) | uint32_t{info} << 8 | uint32_t{lid} << 16;
}
constexpr AsyncEventType async_event_type(uint32_t dw0) noexcept { return static_cast<AsyncEventType>(dw0 & 0x7); }
constexpr uint8_t async_event_info(uint32_t dw0) noexcept { return static_cast<uint8_t>(dw0 >> 8); }
constexpr uint8_t async_event_lid(uint32_t dw0) noexcept { return static_cast<uint8_t>(dw0 >> 16); }

}  // namespace rdmablk::protocol

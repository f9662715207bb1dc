// SGL descriptors (NVMe Base 2.0, 4.1.2 "Scatter Gather List (SGL)"; NVMe over Fabrics 1.1, 2.3 / 7.3).
//
// Every descriptor is 16 bytes. Byte 15 is the SGL Identifier: Descriptor Type in bits 7:4 and
// Descriptor Sub Type in bits 3:0. On fabrics the command's DPTR (SQE bytes 39:24) holds exactly one
// descriptor (MSDBD = 1 for our controllers), one of:
//   0x01  Data Block, subtype Offset        in-capsule data: address = offset into the capsule's data
//   0x40  Keyed Data Block, subtype Address  RDMA: host virtual address, 24-bit length, 32-bit rkey
//   0x4F  Keyed Data Block, Invalidate Key   as 0x40, and the target should SEND_WITH_INV the rkey
//   0x5A  Transport Data Block, Transport    NVMe/TCP: data moves by R2T/H2CData/C2HData, address 0
#pragma once

#include "protocol/wire.h"
#include "protocol/result.h"

namespace rdmablk::protocol {

// SGL Descriptor Type, byte 15 bits 7:4 (Base 2.0 Figure 116).
enum class SglType : uint8_t {
  data_block = 0x0,
  bit_bucket = 0x1,
  segment = 0x2,
  last_segment = 0x3,
  keyed_data_block = 0x4,
  transport_data_block = 0x5,
  vendor_specific = 0xF,
};

// SGL Descriptor Sub Type, byte 15 bits 3:0 (Base 2.0 Figure 117).
enum class SglSubtype : uint8_t {
  address = 0x0,             // address field is a memory address
  offset = 0x1,              // address field is an offset (in-capsule data on fabrics)
  transport_specific = 0xA,  // meaning defined by the transport binding (NVMe/TCP)
  invalidate_key = 0xF,      // keyed data block: remote invalidate the key after the command
};

constexpr uint8_t sgl_identifier(SglType type, SglSubtype subtype) noexcept {
  return static_cast<uint8_t>(static_cast<unsigned>(type) << 4 | static_cast<unsigned>(subtype));
}
inline constexpr uint8_t kSglInCapsule = sgl_identifier(SglType::data_block, SglSubtype::offset);  // 0x01
inline constexpr uint8_t kSglKeyed = sgl_identifier(SglType::keyed_data_block, SglSubtype::address);  // 0x40
inline constexpr uint8_t kSglKeyedInvalidate =
    sgl_identifier(SglType::keyed_data_block, SglSubtype::invalidate_key);  // 0x4F
inline constexpr uint8_t kSglTransport =
    sgl_identifier(SglType::transport_data_block, SglSubtype::transport_specific);  // 0x5A

// Largest length a keyed data block can describe (24-bit field).
inline constexpr uint32_t kSglKeyedMaxLength = 0xFFFFFF;

// A descriptor of any type, as it sits in DPTR. Bytes 14:8 mean different things per type: use the typed
// layouts below (via std::bit_cast) or the decoder.
struct SglDescriptor {
  le64 address;                         // 0  address or offset (type dependent)
  std::array<uint8_t, 7> type_specific;  // 8  length (+ key for keyed data blocks)
  uint8_t identifier;                   // 15 type (7:4) and subtype (3:0)

  constexpr SglType type() const noexcept { return static_cast<SglType>(identifier >> 4); }
  constexpr uint8_t subtype() const noexcept { return identifier & 0x0F; }
};
static_assert(sizeof(SglDescriptor) == 16);
static_assert(offsetof(SglDescriptor, address) == 0);
static_assert(offsetof(SglDescriptor, type_specific) == 8);
static_assert(offsetof(SglDescriptor, identifier) == 15);

// Data Block (type 0x0), Transport Data Block (type 0x5) and Bit Bucket share this layout.
struct SglDataBlock {
  le64 address;                 // 0  address / offset into in-capsule data / reserved (0x5A)
  le32 length;                  // 8  length in bytes
  std::array<uint8_t, 3> rsvd;  // 12
  uint8_t identifier;           // 15
};
static_assert(sizeof(SglDataBlock) == 16);
static_assert(offsetof(SglDataBlock, address) == 0);
static_assert(offsetof(SglDataBlock, length) == 8);
static_assert(offsetof(SglDataBlock, rsvd) == 12);
static_assert(offsetof(SglDataBlock, identifier) == 15);

// Keyed SGL Data Block (type 0x4): the length is 24 bits at byte 8, the key 32 bits at byte 11 (unaligned).
struct SglKeyedDataBlock {
  le64 address;        // 0  remote (host) virtual address
  le24 length;         // 8  length in bytes; 0 = no data
  le32u key;           // 11 RDMA remote key (rkey)
  uint8_t identifier;  // 15 0x40, or 0x4F to ask for remote invalidation
};
static_assert(sizeof(SglKeyedDataBlock) == 16);
static_assert(offsetof(SglKeyedDataBlock, address) == 0);
static_assert(offsetof(SglKeyedDataBlock, length) == 8);
static_assert(offsetof(SglKeyedDataBlock, key) == 11);
static_assert(offsetof(SglKeyedDataBlock, identifier) == 15);

static_assert(WireLayout<SglDescriptor>);
static_assert(WireLayout<SglDataBlock>);
static_assert(WireLayout<SglKeyedDataBlock>);

// Builders (host side, and tests).
SglDescriptor make_in_capsule_sgl(uint32_t offset, uint32_t length) noexcept;  // 0x01
// 0x40, or 0x4F when `invalidate`. `length` is truncated to 24 bits: callers keep it <= kSglKeyedMaxLength.
SglDescriptor make_keyed_sgl(uint64_t address, uint32_t length, uint32_t key, bool invalidate = false) noexcept;
SglDescriptor make_transport_sgl(uint32_t length) noexcept;  // 0x5A, address 0

// What a decoded data SGL asks the transport to do.
enum class SglKind : uint8_t {
  in_capsule,  // 0x01: data follows the SQE in the capsule, at `addr` bytes from its start
  keyed,       // 0x40 / 0x4F: RDMA READ/WRITE to the host's (addr, key)
  transport,   // 0x5A: the transport moves the data (NVMe/TCP R2T / C2HData)
};

// Which kinds a transport accepts (bitmask of 1 << SglKind).
enum class SglAccept : uint8_t {
  in_capsule = 1u << 0,
  keyed = 1u << 1,
  transport = 1u << 2,
  rdma = in_capsule | keyed,
  tcp = in_capsule | transport,
  any = in_capsule | keyed | transport,
};

// A decoded data SGL: plain values, nothing points into the command.
struct SglDescriptorView {
  SglKind kind;
  uint64_t addr;    // in_capsule: offset into the in-capsule data; keyed: remote address; transport: 0
  uint32_t length;  // bytes; keyed: 24-bit value, 0 is legal (no data: the caller decides)
  uint32_t key;     // keyed only (0 otherwise)
  bool invalidate;  // keyed 0x4F only
};

// Decode the single data descriptor of a fabrics command. Pure: validates the SGL identifier only.
// Rejections carry `base_offset` + the offset of the bad field (byte 15 for type/subtype), so a caller
// decoding a whole SQE passes 24 (offsetof DPTR) to report offsets within the SQE. Not rejected here,
// left to the command layer because they complete with an NVMe status instead of killing the
// connection: in-capsule offset/length beyond the capsule (SGL Offset Invalid / Data SGL Length
// Invalid), a length that does not match the command's transfer size, non-zero reserved bytes.
Decoded<SglDescriptorView> decode_data_sgl(const SglDescriptor& desc, SglAccept accept = SglAccept::any,
                                          uint32_t base_offset = 0) noexcept;
// The same from raw bytes (at least 16; a shorter span is rejected at offset base_offset + size).
Decoded<SglDescriptorView> decode_data_sgl(std::span<const uint8_t> bytes, SglAccept accept = SglAccept::any,
                                          uint32_t base_offset = 0) noexcept;

// True when an in-capsule descriptor lies inside `in_capsule_bytes` of data (overflow safe).
constexpr bool sgl_fits_in_capsule(const SglDescriptorView& v, uint64_t in_capsule_bytes) noexcept {
  return v.kind == SglKind::in_capsule && v.addr <= in_capsule_bytes && v.length <= in_capsule_bytes - v.addr;
}

}  // namespace rdmablk::protocol

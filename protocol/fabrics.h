// NVMe over Fabrics commands (NVMe over Fabrics 1.1, 3 "Fabrics Command Set"; NVMe Base 2.0, 6) and NVMe
// Qualified Names (Base 2.0, 4.5).
//
// A fabrics command has opcode 0x7F and its command type in FCTYPE (byte 4, where other commands keep
// NSID). Connect carries a 1024-byte data block (ConnectData) through its SGL.
#pragma once

#include <string_view>

#include "protocol/wire.h"
#include "protocol/result.h"
#include "protocol/sgl.h"

namespace rdmablk::protocol {

// Fabrics command types (NVMe-oF 1.1 Figure 18 / Base 2.0 Figure 542).
enum class FabricsType : uint8_t {
  property_set = 0x00,
  connect = 0x01,
  property_get = 0x04,
  authentication_send = 0x05,
  authentication_receive = 0x06,
  disconnect = 0x08,
};

// Any fabrics command, to read FCTYPE before picking a typed layout.
struct FabricsCommand {
  uint8_t opcode;                    // 0  0x7F
  uint8_t flags;                     // 1  reserved except PSDT 7:6 (hosts set SGL)
  le16 cid;                          // 2  command identifier
  uint8_t fctype;                    // 4  fabrics command type
  std::array<uint8_t, 19> rsvd5;     // 5
  SglDescriptor dptr;                // 24 SGL1 (Connect, Authentication); reserved otherwise
  std::array<uint8_t, 24> specific;  // 40 fabrics command type specific
  constexpr FabricsType type() const noexcept { return static_cast<FabricsType>(fctype); }
};
static_assert(sizeof(FabricsCommand) == 64);
static_assert(offsetof(FabricsCommand, opcode) == 0);
static_assert(offsetof(FabricsCommand, flags) == 1);
static_assert(offsetof(FabricsCommand, cid) == 2);
static_assert(offsetof(FabricsCommand, fctype) == 4);
static_assert(offsetof(FabricsCommand, rsvd5) == 5);
static_assert(offsetof(FabricsCommand, dptr) == 24);
static_assert(offsetof(FabricsCommand, specific) == 40);

// Connect CATTR bits (NVMe-oF 1.1 Figure 20).
inline constexpr uint8_t kConnectPriorityMask = 0x03;      // 1:0 priority class (I/O queues, WRR)
inline constexpr uint8_t kConnectDisableSqFlow = 1u << 2;  // SQ flow control disabled (SQHD not maintained)

// Connect (FCTYPE 0x01) (NVMe-oF 1.1, 3.3).
struct ConnectCommand {
  uint8_t opcode;                  // 0  0x7F
  uint8_t flags;                   // 1
  le16 cid;                        // 2
  uint8_t fctype;                  // 4  0x01
  std::array<uint8_t, 19> rsvd5;   // 5
  SglDescriptor dptr;              // 24 SGL1 describing the 1024-byte Connect data
  le16 recfmt;                     // 40 record format, 0
  le16 qid;                        // 42 queue id: 0 admin, else I/O queue
  le16 sqsize;                     // 44 SQ size, 0-based (admin: at most 31 on RDMA)
  uint8_t cattr;                   // 46 connect attributes
  uint8_t rsvd47;                  // 47
  le32 kato;                       // 48 keep alive timeout in ms (admin queue), 0 = disabled
  std::array<uint8_t, 12> rsvd52;  // 52

  constexpr uint32_t queue_entries() const noexcept { return uint32_t{sqsize.get()} + 1; }
  constexpr bool sq_flow_control_disabled() const noexcept { return (cattr & kConnectDisableSqFlow) != 0; }
  constexpr uint8_t priority_class() const noexcept { return cattr & kConnectPriorityMask; }
};
static_assert(sizeof(ConnectCommand) == 64);
static_assert(offsetof(ConnectCommand, opcode) == 0);
static_assert(offsetof(ConnectCommand, flags) == 1);
static_assert(offsetof(ConnectCommand, cid) == 2);
static_assert(offsetof(ConnectCommand, fctype) == 4);
static_assert(offsetof(ConnectCommand, rsvd5) == 5);
static_assert(offsetof(ConnectCommand, dptr) == 24);
static_assert(offsetof(ConnectCommand, recfmt) == 40);
static_assert(offsetof(ConnectCommand, qid) == 42);
static_assert(offsetof(ConnectCommand, sqsize) == 44);
static_assert(offsetof(ConnectCommand, cattr) == 46);
static_assert(offsetof(ConnectCommand, rsvd47) == 47);
static_assert(offsetof(ConnectCommand, kato) == 48);
static_assert(offsetof(ConnectCommand, rsvd52) == 52);

inline constexpr uint16_t kCntlidDynamic = 0xFFFF;  // Connect data CNTLID: dynamic controller model
inline constexpr uint16_t kCntlidStatic = 0xFFFE;   // any controller (static model)
inline constexpr uint32_t kConnectDataSize = 1024;
inline constexpr uint32_t kNqnFieldSize = 256;  // NQN fields in commands and log pages, NUL terminated
inline constexpr uint32_t kNqnMaxLength = 223;  // longest NQN in bytes, without the NUL

// Connect data (NVMe-oF 1.1 Figure 21).
struct ConnectData {
  std::array<uint8_t, 16> hostid;         // 0   128-bit host identifier
  le16 cntlid;                            // 16  controller id: 0xFFFF dynamic, else the one to join (I/O)
  std::array<uint8_t, 238> rsvd18;        // 18
  std::array<char, kNqnFieldSize> subnqn;   // 256 subsystem NQN, NUL terminated
  std::array<char, kNqnFieldSize> hostnqn;  // 512 host NQN, NUL terminated
  std::array<uint8_t, 256> rsvd768;       // 768
};
static_assert(sizeof(ConnectData) == kConnectDataSize);
static_assert(offsetof(ConnectData, hostid) == 0);
static_assert(offsetof(ConnectData, cntlid) == 16);
static_assert(offsetof(ConnectData, rsvd18) == 18);
static_assert(offsetof(ConnectData, subnqn) == 256);
static_assert(offsetof(ConnectData, hostnqn) == 512);
static_assert(offsetof(ConnectData, rsvd768) == 768);

// Property Set (FCTYPE 0x00) (NVMe-oF 1.1, 3.5).
struct PropertySetCommand {
  uint8_t opcode;                  // 0
  uint8_t flags;                   // 1
  le16 cid;                        // 2
  uint8_t fctype;                  // 4  0x00
  std::array<uint8_t, 35> rsvd5;   // 5
  uint8_t attrib;                  // 40 bits 2:0 size: 0 = 4 bytes, 1 = 8 bytes
  std::array<uint8_t, 3> rsvd41;   // 41
  le32 offset;                     // 44 property offset
  le64 value;                      // 48 value (low 4 bytes for a 4-byte property)
  std::array<uint8_t, 8> rsvd56;   // 56
  constexpr bool is_8byte() const noexcept { return (attrib & 0x7) == 1; }
};
static_assert(sizeof(PropertySetCommand) == 64);
static_assert(offsetof(PropertySetCommand, opcode) == 0);
static_assert(offsetof(PropertySetCommand, flags) == 1);
static_assert(offsetof(PropertySetCommand, cid) == 2);
static_assert(offsetof(PropertySetCommand, fctype) == 4);
static_assert(offsetof(PropertySetCommand, rsvd5) == 5);
static_assert(offsetof(PropertySetCommand, attrib) == 40);
static_assert(offsetof(PropertySetCommand, rsvd41) == 41);
static_assert(offsetof(PropertySetCommand, offset) == 44);
static_assert(offsetof(PropertySetCommand, value) == 48);
static_assert(offsetof(PropertySetCommand, rsvd56) == 56);

// Property Get (FCTYPE 0x04) (NVMe-oF 1.1, 3.4). The value returns in CQE DW0 (and DW1 for 8 bytes).
struct PropertyGetCommand {
  uint8_t opcode;                  // 0
  uint8_t flags;                   // 1
  le16 cid;                        // 2
  uint8_t fctype;                  // 4  0x04
  std::array<uint8_t, 35> rsvd5;   // 5
  uint8_t attrib;                  // 40 bits 2:0 size: 0 = 4 bytes, 1 = 8 bytes
  std::array<uint8_t, 3> rsvd41;   // 41
  le32 offset;                     // 44 property offset
  std::array<uint8_t, 16> rsvd48;  // 48
  constexpr bool is_8byte() const noexcept { return (attrib & 0x7) == 1; }
};
static_assert(sizeof(PropertyGetCommand) == 64);
static_assert(offsetof(PropertyGetCommand, opcode) == 0);
static_assert(offsetof(PropertyGetCommand, flags) == 1);
static_assert(offsetof(PropertyGetCommand, cid) == 2);
static_assert(offsetof(PropertyGetCommand, fctype) == 4);
static_assert(offsetof(PropertyGetCommand, rsvd5) == 5);
static_assert(offsetof(PropertyGetCommand, attrib) == 40);
static_assert(offsetof(PropertyGetCommand, rsvd41) == 41);
static_assert(offsetof(PropertyGetCommand, offset) == 44);
static_assert(offsetof(PropertyGetCommand, rsvd48) == 48);

// Disconnect (FCTYPE 0x08) (NVMe-oF 1.1, 3.x / Base 2.0 6.4): deletes the I/O queue it is sent on.
struct DisconnectCommand {
  uint8_t opcode;                  // 0
  uint8_t flags;                   // 1
  le16 cid;                        // 2
  uint8_t fctype;                  // 4  0x08
  std::array<uint8_t, 19> rsvd5;   // 5
  SglDescriptor rsvd24;            // 24 reserved
  le16 recfmt;                     // 40 record format, 0
  std::array<uint8_t, 22> rsvd42;  // 42
};
static_assert(sizeof(DisconnectCommand) == 64);
static_assert(offsetof(DisconnectCommand, opcode) == 0);
static_assert(offsetof(DisconnectCommand, flags) == 1);
static_assert(offsetof(DisconnectCommand, cid) == 2);
static_assert(offsetof(DisconnectCommand, fctype) == 4);
static_assert(offsetof(DisconnectCommand, rsvd5) == 5);
static_assert(offsetof(DisconnectCommand, rsvd24) == 24);
static_assert(offsetof(DisconnectCommand, recfmt) == 40);
static_assert(offsetof(DisconnectCommand, rsvd42) == 42);

static_assert(WireLayout<FabricsCommand>);
static_assert(WireLayout<ConnectCommand>);
static_assert(WireLayout<ConnectData>);
static_assert(WireLayout<PropertySetCommand>);
static_assert(WireLayout<PropertyGetCommand>);
static_assert(WireLayout<DisconnectCommand>);

// Builders (PSDT = SGL). `sqsize0` is 0-based as on the wire.
ConnectCommand make_connect(uint16_t cid, uint16_t qid, uint16_t sqsize0, uint32_t kato_ms, uint8_t cattr,
                            const SglDescriptor& dptr) noexcept;
ConnectData make_connect_data(const std::array<uint8_t, 16>& hostid, uint16_t cntlid, std::string_view subnqn,
                              std::string_view hostnqn) noexcept;
PropertyGetCommand make_property_get(uint16_t cid, uint32_t offset, bool eight_bytes) noexcept;
PropertySetCommand make_property_set(uint16_t cid, uint32_t offset, uint64_t value, bool eight_bytes) noexcept;
DisconnectCommand make_disconnect(uint16_t cid) noexcept;

// Connect response DW0 (NVMe-oF 1.1 Figure 22 / Base 2.0 Figure 547).
// Success: CNTLID 15:0, AUTHREQ 31:16: its bit 1 (DW0 bit 17) ATR authentication required, its bit 2 (DW0 bit 18)
// ASCR secure channel concatenation (include/linux/nvme.h NVME_CONNECT_AUTHREQ_*; bit 0 is reserved).
constexpr uint32_t connect_success_result(uint16_t cntlid, uint16_t authreq = 0) noexcept {
  return uint32_t{cntlid} | uint32_t{authreq} << 16;
}
constexpr uint16_t connect_result_cntlid(uint32_t dw0) noexcept { return static_cast<uint16_t>(dw0 & 0xFFFF); }
// Connect Invalid Parameters (SCT 1 SC 0x82): IATTR 7:0 (bit 0: 0 = in the command, 1 = in the data),
// IPO 31:16 = byte offset of the invalid parameter within the command or the data.
constexpr uint32_t connect_invalid_param_result(bool in_data, uint16_t offset) noexcept {
  return (in_data ? 1u : 0u) | uint32_t{offset} << 16;
}

// ---------------------------------------------------------------------------------------------------------
// NVMe Qualified Names (Base 2.0, 4.5)
// ---------------------------------------------------------------------------------------------------------

inline constexpr std::string_view kDiscoveryNqn = "nqn.2014-08.org.nvmexpress.discovery";
inline constexpr std::string_view kUuidNqnPrefix = "nqn.2014-08.org.nvmexpress:uuid:";

enum class NqnForm : uint8_t {
  discovery,  // the well-known discovery subsystem NQN
  uuid,       // nqn.2014-08.org.nvmexpress:uuid:xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
  domain,     // nqn.yyyy-mm.reverse.domain[:user-defined]
};

// Validates an NQN. On rejection `offset` is the index of the offending byte in `nqn` (the length for a
// truncated name, 223 for a too-long one). Checks: 1..223 bytes; "nqn." prefix; a yyyy-mm date with a
// month 01-12; a '.' then a reverse domain name of non-empty labels [A-Za-z0-9-]; optionally ':' and a
// non-empty user string without control characters (UTF-8 above 0x7F allowed). The UUID form requires
// 8-4-4-4-12 hex digits and nothing after them.
Decoded<NqnForm> decode_nqn(std::string_view nqn) noexcept;
inline bool valid_nqn(std::string_view nqn) noexcept { return decode_nqn(nqn).has_value(); }

// A NUL-terminated NQN field (256 bytes) as a string_view of the bytes before the first NUL; rejects with
// offset `base_offset` when no NUL is found within the field.
Decoded<std::string_view> nqn_field(const std::array<char, kNqnFieldSize>& field, uint32_t base_offset) noexcept;

// Connect data after validation. The string_views point into the caller's buffer: keep it alive.
struct ConnectDataView {
  std::array<uint8_t, 16> hostid;
  uint16_t cntlid;
  std::string_view subnqn;
  std::string_view hostnqn;
};

// Decodes Connect data. Rejection offsets are from the start of the data (for the Connect Invalid
// Parameters IPO): fewer than 1024 bytes -> the size; SUBNQN with no NUL in 256 bytes, empty or not a
// valid NQN -> 256 (+ index of the bad byte for a malformed NQN); HOSTNQN likewise at 512.
Decoded<ConnectDataView> decode_connect_data(std::span<const uint8_t> data) noexcept;

}  // namespace rdmablk::protocol

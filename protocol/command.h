// NVMe submission queue entries (NVMe Base 2.0, 4.2 "Submission Queue Entry"; NVM Command Set 1.0, 3).
//
// Every command is 64 bytes. Bytes 39:0 are common (SqeHeader); Command Dwords 10-15 (bytes 63:40) are
// command specific. Each typed command below is its own 64-byte layout whose first member is the common
// header, so `as<ReadWriteCommand>(sqe)` / `to_sqe(cmd)` are plain std::bit_casts. Sub-dword fields are
// reached through masks and accessors, never C bitfields.
#pragma once

#include "protocol/wire.h"
#include "protocol/sgl.h"

namespace rdmablk::protocol {

// ---------------------------------------------------------------------------------------------------------
// Opcodes
// ---------------------------------------------------------------------------------------------------------

// Admin command set (Base 2.0 Figure 138).
enum class AdminOpcode : uint8_t {
  delete_io_sq = 0x00,
  create_io_sq = 0x01,
  get_log_page = 0x02,
  delete_io_cq = 0x04,
  create_io_cq = 0x05,
  identify = 0x06,
  abort = 0x08,
  set_features = 0x09,
  get_features = 0x0A,
  async_event_request = 0x0C,
  namespace_management = 0x0D,
  firmware_commit = 0x10,
  firmware_image_download = 0x11,
  device_self_test = 0x14,
  namespace_attachment = 0x15,
  keep_alive = 0x18,
  directive_send = 0x19,
  directive_receive = 0x1A,
  virtualization_management = 0x1C,
  nvme_mi_send = 0x1D,
  nvme_mi_receive = 0x1E,
  capacity_management = 0x20,
  lockdown = 0x24,
  doorbell_buffer_config = 0x7C,
  fabrics = 0x7F,  // fabrics command: the command type is in FCTYPE (byte 4), see fabrics.h
  format_nvm = 0x80,
  security_send = 0x81,
  security_receive = 0x82,
  sanitize = 0x84,
  get_lba_status = 0x86,
};

// NVM command set I/O commands (NVM Command Set 1.0 Figure 17).
enum class IoOpcode : uint8_t {
  flush = 0x00,
  write = 0x01,
  read = 0x02,
  write_uncorrectable = 0x04,
  compare = 0x05,
  write_zeroes = 0x08,
  dataset_management = 0x09,
  verify = 0x0C,
  reservation_register = 0x0D,
  reservation_report = 0x0E,
  reservation_acquire = 0x11,
  reservation_release = 0x15,
  copy = 0x19,
  fabrics = 0x7F,  // Connect on an I/O queue arrives with this opcode too
};

inline constexpr uint8_t kFabricsOpcode = 0x7F;

// Opcode bits 1:0 give the data transfer direction (Base 2.0 Figure 89).
enum class DataTransfer : uint8_t { none = 0, host_to_controller = 1, controller_to_host = 2, bidirectional = 3 };
constexpr DataTransfer data_transfer(uint8_t opcode) noexcept { return static_cast<DataTransfer>(opcode & 0x3); }

// ---------------------------------------------------------------------------------------------------------
// Common layout
// ---------------------------------------------------------------------------------------------------------

// CDW0 byte 1 (FLAGS).
inline constexpr uint8_t kSqeFuseMask = 0x03;  // bits 1:0 FUSE
inline constexpr uint8_t kSqePsdtShift = 6;    // bits 7:6 PSDT
inline constexpr uint8_t kSqePsdtMask = 0xC0;

enum class FusedOperation : uint8_t { normal = 0, first = 1, second = 2 };
// PRP or SGL for Data Transfer. Fabrics commands always use SGLs (kernel hosts send 01b).
enum class Psdt : uint8_t { prp = 0, sgl_mptr_contiguous = 1, sgl_mptr_sgl = 2 };

// Bytes 39:0, common to every command (Base 2.0 Figure 88).
struct SqeHeader {
  uint8_t opcode;      // 0  CDW0 7:0 OPC
  uint8_t flags;       // 1  CDW0 15:8: FUSE 1:0, PSDT 7:6
  le16 cid;            // 2  CDW0 31:16 command identifier
  le32 nsid;           // 4  CDW1 namespace identifier (0xFFFFFFFF = all)
  le32 cdw2;           // 8  command specific
  le32 cdw3;           // 12 command specific
  le64 mptr;           // 16 CDW4-5 metadata pointer
  SglDescriptor dptr;  // 24 CDW6-9 data pointer: one SGL descriptor on fabrics (or PRP1/PRP2 on PCIe)

  constexpr FusedOperation fuse() const noexcept { return static_cast<FusedOperation>(flags & kSqeFuseMask); }
  constexpr Psdt psdt() const noexcept { return static_cast<Psdt>(flags >> kSqePsdtShift); }
  constexpr void set_fuse(FusedOperation f) noexcept {
    flags = static_cast<uint8_t>((flags & ~kSqeFuseMask) | (static_cast<unsigned>(f) & kSqeFuseMask));
  }
  constexpr void set_psdt(Psdt p) noexcept {
    flags = static_cast<uint8_t>((flags & ~kSqePsdtMask) | (static_cast<unsigned>(p) << kSqePsdtShift & kSqePsdtMask));
  }
};
static_assert(sizeof(SqeHeader) == 40);
static_assert(offsetof(SqeHeader, opcode) == 0);
static_assert(offsetof(SqeHeader, flags) == 1);
static_assert(offsetof(SqeHeader, cid) == 2);
static_assert(offsetof(SqeHeader, nsid) == 4);
static_assert(offsetof(SqeHeader, cdw2) == 8);
static_assert(offsetof(SqeHeader, cdw3) == 12);
static_assert(offsetof(SqeHeader, mptr) == 16);
static_assert(offsetof(SqeHeader, dptr) == 24);

inline constexpr uint32_t kNsidAll = 0xFFFFFFFF;

// A submission queue entry of any kind.
struct Sqe {
  SqeHeader hdr;  // 0
  le32 cdw10;     // 40
  le32 cdw11;     // 44
  le32 cdw12;     // 48
  le32 cdw13;     // 52
  le32 cdw14;     // 56
  le32 cdw15;     // 60
};
static_assert(sizeof(Sqe) == 64);
static_assert(offsetof(Sqe, hdr) == 0);
static_assert(offsetof(Sqe, cdw10) == 40);
static_assert(offsetof(Sqe, cdw11) == 44);
static_assert(offsetof(Sqe, cdw12) == 48);
static_assert(offsetof(Sqe, cdw13) == 52);
static_assert(offsetof(Sqe, cdw14) == 56);
static_assert(offsetof(Sqe, cdw15) == 60);
static_assert(WireLayout<Sqe>);

// Typed layouts convert to and from an Sqe bit for bit.
template <typename T>
constexpr T as(const Sqe& sqe) noexcept {
  static_assert(sizeof(T) == sizeof(Sqe) && std::is_trivially_copyable_v<T>);
  return std::bit_cast<T>(sqe);
}
template <typename T>
constexpr Sqe to_sqe(const T& cmd) noexcept {
  static_assert(sizeof(T) == sizeof(Sqe) && std::is_trivially_copyable_v<T>);
  return std::bit_cast<Sqe>(cmd);
}

namespace detail {
constexpr uint32_t get_bits(uint32_t v, unsigned shift, uint32_t mask) noexcept { return v >> shift & mask; }
constexpr uint32_t put_bits(uint32_t v, unsigned shift, uint32_t mask, uint32_t field) noexcept {
  return (v & ~(mask << shift)) | (field & mask) << shift;
}
inline constexpr void set_bits(le32& dw, unsigned shift, uint32_t mask, uint32_t field) noexcept {
  dw.set(put_bits(dw.get(), shift, mask, field));
}
inline constexpr void set_flag(le32& dw, unsigned bit, bool on) noexcept { set_bits(dw, bit, 1, on ? 1u : 0u); }
}  // namespace detail

// A header with opcode, cid and nsid set, PSDT = SGL (fabrics), everything else zero.
constexpr SqeHeader make_header(uint8_t opcode, uint16_t cid, uint32_t nsid = 0) noexcept {
  SqeHeader h{};
  h.opcode = opcode;
  h.cid.set(cid);
  h.nsid.set(nsid);
  h.set_psdt(Psdt::sgl_mptr_contiguous);
  return h;
}

// ---------------------------------------------------------------------------------------------------------
// NVM I/O commands
// ---------------------------------------------------------------------------------------------------------

// Read (0x02), Write (0x01), Compare (0x05) (NVM Command Set 1.0, 3.2.4 / 3.3.6 / 3.2.1).
struct ReadWriteCommand {
  SqeHeader hdr;  // 0
  le64 slba;      // 40 CDW10-11 starting LBA
  le32 cdw12;     // 48 NLB 15:0 (0-based), DTYPE 23:20 (write), STC 24, PRINFO 29:26, FUA 30, LR 31
  le32 cdw13;     // 52 DSM 7:0 (read/write hints), DSPEC 31:16 (write, directive specific)
  le32 cdw14;     // 56 EILBRT / ILBRT: expected initial logical block reference tag
  le32 cdw15;     // 60 LBAT 15:0 application tag, LBATM 31:16 application tag mask

  static constexpr uint32_t kNlbMask = 0xFFFF;
  static constexpr unsigned kDtypeShift = 20;
  static constexpr unsigned kStcBit = 24;
  static constexpr unsigned kPrinfoShift = 26;
  static constexpr unsigned kFuaBit = 30;
  static constexpr unsigned kLrBit = 31;

  constexpr uint64_t start_lba() const noexcept { return slba.get(); }
  constexpr uint16_t nlb() const noexcept { return static_cast<uint16_t>(cdw12.get() & kNlbMask); }  // 0-based
  constexpr uint32_t block_count() const noexcept { return uint32_t{nlb()} + 1; }
  constexpr bool fua() const noexcept { return detail::get_bits(cdw12.get(), kFuaBit, 1) != 0; }
  constexpr bool limited_retry() const noexcept { return detail::get_bits(cdw12.get(), kLrBit, 1) != 0; }
  constexpr uint8_t prinfo() const noexcept { return static_cast<uint8_t>(detail::get_bits(cdw12.get(), kPrinfoShift, 0xF)); }
  constexpr uint8_t dtype() const noexcept { return static_cast<uint8_t>(detail::get_bits(cdw12.get(), kDtypeShift, 0xF)); }
  constexpr bool storage_tag_check() const noexcept { return detail::get_bits(cdw12.get(), kStcBit, 1) != 0; }
  constexpr uint8_t dsm() const noexcept { return static_cast<uint8_t>(cdw13.get() & 0xFF); }
  constexpr uint16_t dspec() const noexcept { return static_cast<uint16_t>(cdw13.get() >> 16); }
  constexpr uint32_t ref_tag() const noexcept { return cdw14.get(); }
  constexpr uint16_t app_tag() const noexcept { return static_cast<uint16_t>(cdw15.get() & 0xFFFF); }
  constexpr uint16_t app_tag_mask() const noexcept { return static_cast<uint16_t>(cdw15.get() >> 16); }

  constexpr void set_start_lba(uint64_t lba) noexcept { slba.set(lba); }
  // `blocks` is 1..65536; stored 0-based.
  constexpr void set_block_count(uint32_t blocks) noexcept { detail::set_bits(cdw12, 0, kNlbMask, blocks - 1); }
  constexpr void set_fua(bool on) noexcept { detail::set_flag(cdw12, kFuaBit, on); }
  constexpr void set_limited_retry(bool on) noexcept { detail::set_flag(cdw12, kLrBit, on); }
  constexpr void set_prinfo(uint8_t v) noexcept { detail::set_bits(cdw12, kPrinfoShift, 0xF, v); }
  constexpr void set_dsm(uint8_t v) noexcept { detail::set_bits(cdw13, 0, 0xFF, v); }
};
static_assert(sizeof(ReadWriteCommand) == 64);
static_assert(offsetof(ReadWriteCommand, hdr) == 0);
static_assert(offsetof(ReadWriteCommand, slba) == 40);
static_assert(offsetof(ReadWriteCommand, cdw12) == 48);
static_assert(offsetof(ReadWriteCommand, cdw13) == 52);
static_assert(offsetof(ReadWriteCommand, cdw14) == 56);
static_assert(offsetof(ReadWriteCommand, cdw15) == 60);

// Write Zeroes (0x08) (NVM Command Set 1.0, 3.2.8).
struct WriteZeroesCommand {
  SqeHeader hdr;  // 0
  le64 slba;      // 40 CDW10-11 starting LBA
  le32 cdw12;     // 48 NLB 15:0 (0-based), STC 24, DEAC 25, PRINFO 29:26, FUA 30, LR 31
  le32 cdw13;     // 52 reserved
  le32 cdw14;     // 56 ILBRT
  le32 cdw15;     // 60 LBAT 15:0, LBATM 31:16

  static constexpr unsigned kDeacBit = 25;  // deallocate: the range may read back as deallocated

  constexpr uint64_t start_lba() const noexcept { return slba.get(); }
  constexpr uint16_t nlb() const noexcept { return static_cast<uint16_t>(cdw12.get() & 0xFFFF); }
  constexpr uint32_t block_count() const noexcept { return uint32_t{nlb()} + 1; }
  constexpr bool deallocate() const noexcept { return detail::get_bits(cdw12.get(), kDeacBit, 1) != 0; }
  constexpr bool fua() const noexcept { return detail::get_bits(cdw12.get(), ReadWriteCommand::kFuaBit, 1) != 0; }
  constexpr bool limited_retry() const noexcept { return detail::get_bits(cdw12.get(), ReadWriteCommand::kLrBit, 1) != 0; }

  constexpr void set_start_lba(uint64_t lba) noexcept { slba.set(lba); }
  constexpr void set_block_count(uint32_t blocks) noexcept { detail::set_bits(cdw12, 0, 0xFFFF, blocks - 1); }
  constexpr void set_deallocate(bool on) noexcept { detail::set_flag(cdw12, kDeacBit, on); }
  constexpr void set_fua(bool on) noexcept { detail::set_flag(cdw12, ReadWriteCommand::kFuaBit, on); }
};
static_assert(sizeof(WriteZeroesCommand) == 64);
static_assert(offsetof(WriteZeroesCommand, hdr) == 0);
static_assert(offsetof(WriteZeroesCommand, slba) == 40);
static_assert(offsetof(WriteZeroesCommand, cdw12) == 48);
static_assert(offsetof(WriteZeroesCommand, cdw13) == 52);
static_assert(offsetof(WriteZeroesCommand, cdw14) == 56);
static_assert(offsetof(WriteZeroesCommand, cdw15) == 60);

// Dataset Management (0x09) (NVM Command Set 1.0, 3.2.3). The data is NR+1 DsmRange entries.
struct DsmCommand {
  SqeHeader hdr;                  // 0
  le32 cdw10;                     // 40 NR 7:0: number of ranges, 0-based
  le32 cdw11;                     // 44 attributes: IDR 0, IDW 1, AD 2 (deallocate)
  std::array<le32, 4> rsvd12;     // 48 CDW12-15 reserved

  static constexpr uint32_t kIntegralRead = 1u << 0;
  static constexpr uint32_t kIntegralWrite = 1u << 1;
  static constexpr uint32_t kDeallocate = 1u << 2;

  constexpr uint8_t nr() const noexcept { return static_cast<uint8_t>(cdw10.get() & 0xFF); }  // 0-based
  constexpr uint32_t range_count() const noexcept { return uint32_t{nr()} + 1; }                // 1..256
  constexpr uint32_t data_length() const noexcept { return range_count() * 16; }
  constexpr bool deallocate() const noexcept { return (cdw11.get() & kDeallocate) != 0; }
  constexpr bool integral_read() const noexcept { return (cdw11.get() & kIntegralRead) != 0; }
  constexpr bool integral_write() const noexcept { return (cdw11.get() & kIntegralWrite) != 0; }
  constexpr void set_range_count(uint32_t n) noexcept { detail::set_bits(cdw10, 0, 0xFF, n - 1); }
  constexpr void set_attributes(uint32_t a) noexcept { cdw11.set(a); }
};
static_assert(sizeof(DsmCommand) == 64);
static_assert(offsetof(DsmCommand, hdr) == 0);
static_assert(offsetof(DsmCommand, cdw10) == 40);
static_assert(offsetof(DsmCommand, cdw11) == 44);
static_assert(offsetof(DsmCommand, rsvd12) == 48);

// One Dataset Management range (NVM Command Set 1.0 Figure 39). NLB here is a count, not 0-based.
struct DsmRange {
  le32 cattr;  // 0  context attributes
  le32 nlb;    // 4  length in logical blocks
  le64 slba;   // 8  starting LBA
};
static_assert(sizeof(DsmRange) == 16);
static_assert(offsetof(DsmRange, cattr) == 0);
static_assert(offsetof(DsmRange, nlb) == 4);
static_assert(offsetof(DsmRange, slba) == 8);
inline constexpr uint32_t kDsmMaxRanges = 256;

// ---------------------------------------------------------------------------------------------------------
// Admin commands
// ---------------------------------------------------------------------------------------------------------

// Identify CNS values (Base 2.0 Figure 273).
enum class Cns : uint8_t {
  namespace_ = 0x00,                    // Identify Namespace (NVM), NSID
  controller = 0x01,                    // Identify Controller
  active_namespace_list = 0x02,         // active NSIDs greater than NSID
  ns_id_descriptor_list = 0x03,         // Namespace Identification Descriptor list for NSID
  nvm_set_list = 0x04,
  io_namespace = 0x05,                  // I/O command set specific namespace (CSI)
  io_controller = 0x06,                 // I/O command set specific controller (CSI)
  io_active_namespace_list = 0x07,      // active NSIDs for CSI
  io_independent_namespace = 0x08,      // I/O command set independent namespace
  allocated_namespace_list = 0x10,
  allocated_namespace = 0x11,
  namespace_controller_list = 0x12,
  controller_list = 0x13,
  primary_controller_capabilities = 0x14,
  secondary_controller_list = 0x15,
  namespace_granularity_list = 0x16,
  uuid_list = 0x17,
  domain_list = 0x18,
  endurance_group_list = 0x19,
  io_allocated_namespace_list = 0x1A,
  io_allocated_namespace = 0x1B,
  io_command_set = 0x1C,
};

// Command Set Identifier (Base 2.0 Figure 286).
enum class Csi : uint8_t { nvm = 0x00, key_value = 0x01, zoned = 0x02 };

// Identify (0x06) (Base 2.0, 5.17). Data is always 4096 bytes.
struct IdentifyCommand {
  SqeHeader hdr;               // 0
  le32 cdw10;                  // 40 CNS 7:0, CNTID 31:16
  le32 cdw11;                  // 44 CNS specific identifier 15:0 (NVMSETID/ENDGID/DOMID), CSI 31:24
  std::array<le32, 2> rsvd12;  // 48 CDW12-13
  le32 cdw14;                  // 56 UUID index 6:0
  le32 cdw15;                  // 60 reserved

  constexpr Cns cns() const noexcept { return static_cast<Cns>(cdw10.get() & 0xFF); }
  constexpr uint8_t cns_raw() const noexcept { return static_cast<uint8_t>(cdw10.get() & 0xFF); }
  constexpr uint16_t cntid() const noexcept { return static_cast<uint16_t>(cdw10.get() >> 16); }
  constexpr uint16_t cns_specific_id() const noexcept { return static_cast<uint16_t>(cdw11.get() & 0xFFFF); }
  constexpr Csi csi() const noexcept { return static_cast<Csi>(cdw11.get() >> 24); }
  constexpr uint8_t uuid_index() const noexcept { return static_cast<uint8_t>(cdw14.get() & 0x7F); }
  constexpr void set_cns(Cns c) noexcept { detail::set_bits(cdw10, 0, 0xFF, static_cast<uint32_t>(c)); }
  constexpr void set_cntid(uint16_t id) noexcept { detail::set_bits(cdw10, 16, 0xFFFF, id); }
  constexpr void set_csi(Csi c) noexcept { detail::set_bits(cdw11, 24, 0xFF, static_cast<uint32_t>(c)); }
};
static_assert(sizeof(IdentifyCommand) == 64);
static_assert(offsetof(IdentifyCommand, hdr) == 0);
static_assert(offsetof(IdentifyCommand, cdw10) == 40);
static_assert(offsetof(IdentifyCommand, cdw11) == 44);
static_assert(offsetof(IdentifyCommand, rsvd12) == 48);
static_assert(offsetof(IdentifyCommand, cdw14) == 56);
static_assert(offsetof(IdentifyCommand, cdw15) == 60);
inline constexpr uint32_t kIdentifyDataSize = 4096;

// Log page identifiers (Base 2.0 Figure 202; discovery in NVMe-oF).
enum class LogPageId : uint8_t {
  supported_log_pages = 0x00,
  error_information = 0x01,
  smart_health = 0x02,
  firmware_slot = 0x03,
  changed_namespace_list = 0x04,
  commands_supported_effects = 0x05,
  device_self_test = 0x06,
  telemetry_host = 0x07,
  telemetry_controller = 0x08,
  endurance_group_information = 0x09,
  predictable_latency_per_nvm_set = 0x0A,
  predictable_latency_event_aggregate = 0x0B,
  ana = 0x0C,  // asymmetric namespace access
  persistent_event = 0x0D,
  lba_status_information = 0x0E,
  endurance_group_event_aggregate = 0x0F,
  media_unit_status = 0x10,
  supported_capacity_configuration = 0x11,
  feature_identifiers_supported_effects = 0x12,
  nvme_mi_commands_supported_effects = 0x13,
  command_feature_lockdown = 0x14,
  boot_partition = 0x15,
  rotational_media_information = 0x16,
  discovery = 0x70,
  reservation_notification = 0x80,
  sanitize_status = 0x81,
};

// Get Log Page (0x02) (Base 2.0, 5.16). NUMD = NUMDU:NUMDL is a 0-based dword count; LPO = LPOU:LPOL a
// byte offset (dword aligned unless the log page says otherwise).
struct GetLogPageCommand {
  SqeHeader hdr;  // 0
  le32 cdw10;     // 40 LID 7:0, LSP 14:8, RAE 15, NUMDL 31:16
  le32 cdw11;     // 44 NUMDU 15:0, LSI (log specific identifier) 31:16
  le32 lpol;      // 48 CDW12 log page offset lower
  le32 lpou;      // 52 CDW13 log page offset upper
  le32 cdw14;     // 56 UUID index 6:0, OT 23 (offset type), CSI 31:24
  le32 cdw15;     // 60 reserved

  static constexpr unsigned kLspShift = 8;
  static constexpr uint32_t kLspMask = 0x7F;
  static constexpr unsigned kRaeBit = 15;
  static constexpr unsigned kOtBit = 23;

  constexpr uint8_t lid() const noexcept { return static_cast<uint8_t>(cdw10.get() & 0xFF); }
  constexpr uint8_t lsp() const noexcept { return static_cast<uint8_t>(detail::get_bits(cdw10.get(), kLspShift, kLspMask)); }
  constexpr bool rae() const noexcept { return detail::get_bits(cdw10.get(), kRaeBit, 1) != 0; }
  constexpr uint16_t numdl() const noexcept { return static_cast<uint16_t>(cdw10.get() >> 16); }
  constexpr uint16_t numdu() const noexcept { return static_cast<uint16_t>(cdw11.get() & 0xFFFF); }
  constexpr uint16_t lsi() const noexcept { return static_cast<uint16_t>(cdw11.get() >> 16); }
  constexpr uint32_t numd() const noexcept { return uint32_t{numdu()} << 16 | numdl(); }  // 0-based dwords
  constexpr uint64_t dword_count() const noexcept { return uint64_t{numd()} + 1; }
  constexpr uint64_t length_bytes() const noexcept { return dword_count() * 4; }  // up to 16 GiB, no overflow
  constexpr uint64_t offset() const noexcept { return uint64_t{lpou.get()} << 32 | lpol.get(); }
  constexpr bool offset_is_index() const noexcept { return detail::get_bits(cdw14.get(), kOtBit, 1) != 0; }
  constexpr uint8_t uuid_index() const noexcept { return static_cast<uint8_t>(cdw14.get() & 0x7F); }
  constexpr Csi csi() const noexcept { return static_cast<Csi>(cdw14.get() >> 24); }

  constexpr void set_lid(LogPageId id) noexcept { detail::set_bits(cdw10, 0, 0xFF, static_cast<uint32_t>(id)); }
  constexpr void set_lsp(uint8_t v) noexcept { detail::set_bits(cdw10, kLspShift, kLspMask, v); }
  constexpr void set_rae(bool on) noexcept { detail::set_flag(cdw10, kRaeBit, on); }
  // Sets NUMDL/NUMDU for `bytes` (a non-zero multiple of 4, at most 16 GiB).
  constexpr void set_length_bytes(uint64_t bytes) noexcept {
    const auto numd0 = static_cast<uint32_t>(bytes / 4 - 1);
    detail::set_bits(cdw10, 16, 0xFFFF, numd0 & 0xFFFF);
    detail::set_bits(cdw11, 0, 0xFFFF, numd0 >> 16);
  }
  constexpr void set_offset(uint64_t off) noexcept {
    lpol.set(static_cast<uint32_t>(off));
    lpou.set(static_cast<uint32_t>(off >> 32));
  }
};
static_assert(sizeof(GetLogPageCommand) == 64);
static_assert(offsetof(GetLogPageCommand, hdr) == 0);
static_assert(offsetof(GetLogPageCommand, cdw10) == 40);
static_assert(offsetof(GetLogPageCommand, cdw11) == 44);
static_assert(offsetof(GetLogPageCommand, lpol) == 48);
static_assert(offsetof(GetLogPageCommand, lpou) == 52);
static_assert(offsetof(GetLogPageCommand, cdw14) == 56);
static_assert(offsetof(GetLogPageCommand, cdw15) == 60);

// Feature identifiers (Base 2.0 Figure 317).
enum class FeatureId : uint8_t {
  arbitration = 0x01,
  power_management = 0x02,
  lba_range_type = 0x03,
  temperature_threshold = 0x04,
  error_recovery = 0x05,
  volatile_write_cache = 0x06,
  number_of_queues = 0x07,
  interrupt_coalescing = 0x08,
  interrupt_vector_configuration = 0x09,
  write_atomicity_normal = 0x0A,
  async_event_configuration = 0x0B,
  autonomous_power_state_transition = 0x0C,
  host_memory_buffer = 0x0D,
  timestamp = 0x0E,
  keep_alive_timer = 0x0F,
  host_controlled_thermal_management = 0x10,
  non_operational_power_state_config = 0x11,
  read_recovery_level_config = 0x12,
  predictable_latency_mode_config = 0x13,
  predictable_latency_mode_window = 0x14,
  host_behavior_support = 0x16,
  sanitize_config = 0x17,
  endurance_group_event_configuration = 0x18,
  io_command_set_profile = 0x19,
  spinup_control = 0x1A,
  enhanced_controller_metadata = 0x7D,
  controller_metadata = 0x7E,
  namespace_metadata = 0x7F,
  software_progress_marker = 0x80,
  host_identifier = 0x81,
  reservation_notification_mask = 0x82,
  reservation_persistence = 0x83,
  namespace_write_protection_config = 0x84,
};

// Get Features SEL (CDW10 10:8).
enum class FeatureSelect : uint8_t { current = 0, default_ = 1, saved = 2, supported_capabilities = 3 };

// Set Features (0x09) and Get Features (0x0A) (Base 2.0, 5.27 / 5.15).
struct FeaturesCommand {
  SqeHeader hdr;               // 0
  le32 cdw10;                  // 40 FID 7:0; Get: SEL 10:8; Set: SV 31 (save)
  le32 cdw11;                  // 44 feature specific value
  le32 cdw12;                  // 48 feature specific
  le32 cdw13;                  // 52 feature specific
  le32 cdw14;                  // 56 UUID index 6:0
  le32 cdw15;                  // 60 feature specific

  static constexpr unsigned kSelShift = 8;
  static constexpr unsigned kSvBit = 31;

  constexpr FeatureId fid() const noexcept { return static_cast<FeatureId>(cdw10.get() & 0xFF); }
  constexpr uint8_t fid_raw() const noexcept { return static_cast<uint8_t>(cdw10.get() & 0xFF); }
  constexpr FeatureSelect sel() const noexcept { return static_cast<FeatureSelect>(detail::get_bits(cdw10.get(), kSelShift, 0x7)); }
  constexpr bool save() const noexcept { return detail::get_bits(cdw10.get(), kSvBit, 1) != 0; }
  constexpr uint32_t value() const noexcept { return cdw11.get(); }
  constexpr void set_fid(FeatureId f) noexcept { detail::set_bits(cdw10, 0, 0xFF, static_cast<uint32_t>(f)); }
  constexpr void set_sel(FeatureSelect s) noexcept { detail::set_bits(cdw10, kSelShift, 0x7, static_cast<uint32_t>(s)); }
  constexpr void set_save(bool on) noexcept { detail::set_flag(cdw10, kSvBit, on); }
  constexpr void set_value(uint32_t v) noexcept { cdw11.set(v); }

  // Number of Queues (FID 0x07) CDW11 and completion DW0: NSQR 15:0, NCQR 31:16, both 0-based.
  constexpr uint16_t nsqr() const noexcept { return static_cast<uint16_t>(cdw11.get() & 0xFFFF); }
  constexpr uint16_t ncqr() const noexcept { return static_cast<uint16_t>(cdw11.get() >> 16); }
};
static_assert(sizeof(FeaturesCommand) == 64);
static_assert(offsetof(FeaturesCommand, hdr) == 0);
static_assert(offsetof(FeaturesCommand, cdw10) == 40);
static_assert(offsetof(FeaturesCommand, cdw11) == 44);
static_assert(offsetof(FeaturesCommand, cdw12) == 48);
static_assert(offsetof(FeaturesCommand, cdw13) == 52);
static_assert(offsetof(FeaturesCommand, cdw14) == 56);
static_assert(offsetof(FeaturesCommand, cdw15) == 60);

// Number of Queues value (Set Features CDW11 / completion DW0): both counts 0-based.
constexpr uint32_t number_of_queues_value(uint16_t nsqr0, uint16_t ncqr0) noexcept {
  return uint32_t{nsqr0} | uint32_t{ncqr0} << 16;
}
// Asynchronous Event Configuration (FID 0x0B) CDW11 bits (Base 2.0 Figure 332).
inline constexpr uint32_t kAecSmartMask = 0xFF;               // 7:0 SMART/health critical warnings
inline constexpr uint32_t kAecNamespaceAttribute = 1u << 8;   // NS attribute notices
inline constexpr uint32_t kAecFirmwareActivation = 1u << 9;
inline constexpr uint32_t kAecTelemetryLog = 1u << 10;
inline constexpr uint32_t kAecAnaChange = 1u << 11;
inline constexpr uint32_t kAecDiscoveryLogChange = 1u << 31;  // discovery controllers

// Abort (0x08) (Base 2.0, 5.1).
struct AbortCommand {
  SqeHeader hdr;               // 0
  le32 cdw10;                  // 40 SQID 15:0, CID 31:16 of the command to abort
  std::array<le32, 5> rsvd11;  // 44 CDW11-15

  constexpr uint16_t sqid() const noexcept { return static_cast<uint16_t>(cdw10.get() & 0xFFFF); }
  constexpr uint16_t target_cid() const noexcept { return static_cast<uint16_t>(cdw10.get() >> 16); }
  constexpr void set_target(uint16_t sq, uint16_t cid) noexcept { cdw10.set(uint32_t{sq} | uint32_t{cid} << 16); }
};
static_assert(sizeof(AbortCommand) == 64);
static_assert(offsetof(AbortCommand, hdr) == 0);
static_assert(offsetof(AbortCommand, cdw10) == 40);
static_assert(offsetof(AbortCommand, rsvd11) == 44);

static_assert(WireLayout<ReadWriteCommand>);
static_assert(WireLayout<WriteZeroesCommand>);
static_assert(WireLayout<DsmCommand>);
static_assert(WireLayout<DsmRange>);
static_assert(WireLayout<IdentifyCommand>);
static_assert(WireLayout<GetLogPageCommand>);
static_assert(WireLayout<FeaturesCommand>);
static_assert(WireLayout<AbortCommand>);

// ---------------------------------------------------------------------------------------------------------
// Builders (host side and tests). All set PSDT = 01b (SGL) and leave DPTR for the caller unless given.
// ---------------------------------------------------------------------------------------------------------

ReadWriteCommand make_read(uint16_t cid, uint32_t nsid, uint64_t slba, uint32_t blocks, const SglDescriptor& dptr,
                           bool fua = false) noexcept;
ReadWriteCommand make_write(uint16_t cid, uint32_t nsid, uint64_t slba, uint32_t blocks, const SglDescriptor& dptr,
                            bool fua = false) noexcept;
// Compare (05h): the Write layout (the host sends the data), no FUA.
ReadWriteCommand make_compare(uint16_t cid, uint32_t nsid, uint64_t slba, uint32_t blocks,
                              const SglDescriptor& dptr) noexcept;
Sqe make_flush(uint16_t cid, uint32_t nsid) noexcept;
WriteZeroesCommand make_write_zeroes(uint16_t cid, uint32_t nsid, uint64_t slba, uint32_t blocks,
                                     bool deallocate = false, bool fua = false) noexcept;
DsmCommand make_dsm(uint16_t cid, uint32_t nsid, uint32_t ranges, uint32_t attributes,
                    const SglDescriptor& dptr) noexcept;
IdentifyCommand make_identify(uint16_t cid, Cns cns, uint32_t nsid, const SglDescriptor& dptr, uint16_t cntid = 0,
                              Csi csi = Csi::nvm) noexcept;
GetLogPageCommand make_get_log_page(uint16_t cid, LogPageId lid, uint32_t nsid, uint64_t offset, uint64_t bytes,
                                    const SglDescriptor& dptr, bool rae = false) noexcept;
FeaturesCommand make_set_features(uint16_t cid, FeatureId fid, uint32_t value, bool save = false) noexcept;
FeaturesCommand make_get_features(uint16_t cid, FeatureId fid, FeatureSelect sel = FeatureSelect::current) noexcept;
Sqe make_keep_alive(uint16_t cid) noexcept;
Sqe make_async_event_request(uint16_t cid) noexcept;
AbortCommand make_abort(uint16_t cid, uint16_t sqid, uint16_t target_cid) noexcept;

}  // namespace rdmablk::protocol

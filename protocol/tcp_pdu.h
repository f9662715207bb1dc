// NVMe/TCP PDUs (NVM Express TCP Transport Specification 1.0, section 3.6 "PDU formats"): wire structs,
// builders that fill the common header, a validating decoder, and the header/data digest helpers.
//
// A PDU on the wire:
//   CH (8 B) | PSH (hlen - 8 B) | HDGST (4 B, if HDGSTF) | PAD (pdo - hlen - HDGST) | DATA | DDGST (4 B, if DDGSTF)
//   hlen = CH + PSH;  pdo = offset of DATA from the start of the PDU (0 when there is no DATA);
//   plen = every byte of the PDU, digests and padding included.
//
// Receiving is two-stage, like the kernel's nvmet-tcp and SPDK: read the 8-byte CH and call
// validate_common_header() to learn how many header bytes follow (PduHeaderInfo::header_len); read them and
// call validate_pdu_header(), which repeats the CH checks, verifies the header digest and checks the PSH.
// Every rejection carries the byte offset of the offending field and the Fatal Error Status to put in the
// C2HTermReq/H2CTermReq (write_term_req() builds it).
//
// The SQE/CQE inside capsules are opaque 64-/16-byte arrays here; protocol/command.h and completion.h parse
// them. Checks that need per-command state (ttag/cccid lookup, in-order data offsets, R2T windows) are left
// to the transport, with check_data_range() as the shared arithmetic.
#pragma once

#include <sys/uio.h>

#include "protocol/wire.h"
#include "protocol/result.h"

namespace rdmablk::protocol::tcp {

// ---- constants --------------------------------------------------------------------------------------

inline constexpr uint16_t kDiscoveryPort = 8009;
inline constexpr uint16_t kDefaultPort = 4420;
inline constexpr uint32_t kDigestLen = 4;             // HDGST and DDGST are one CRC32C each
inline constexpr uint8_t kCommonHeaderLen = 8;
inline constexpr uint8_t kIcPduLen = 128;             // ICReq/ICResp: hlen == plen == 128
inline constexpr uint8_t kCapsuleCmdHlen = 72;        // CH + 64-byte SQE
inline constexpr uint8_t kCapsuleRespHlen = 24;       // CH + 16-byte CQE
inline constexpr uint8_t kDataHlen = 24;              // H2CData / C2HData
inline constexpr uint8_t kR2tHlen = 24;
inline constexpr uint8_t kTermReqHlen = 24;
inline constexpr uint32_t kTermReqMaxData = 128;      // a TermReq carries at most 128 bytes of the bad header
inline constexpr uint32_t kTermReqMaxPlen = kTermReqHlen + kTermReqMaxData;  // 152, as the Linux host checks
inline constexpr uint32_t kMinMaxH2CData = 4096;      // ICResp MAXH2CDATA must be >= 4096 and dword-sized
inline constexpr uint8_t kMaxPda = 31;                // HPDA/CPDA: 0's based dwords, 0..31 (4..128 bytes)
inline constexpr uint16_t kPfv10 = 0;                 // PDU format version 1.0, the only one defined

// CH pdu_type.
enum class PduType : uint8_t {
  ic_req = 0x00,        // host -> controller, first PDU on the connection
  ic_resp = 0x01,       // controller -> host, answer to ICReq
  h2c_term_req = 0x02,  // host -> controller, fatal error: the connection ends
  c2h_term_req = 0x03,  // controller -> host, fatal error: the connection ends
  capsule_cmd = 0x04,   // host -> controller, SQE (+ in-capsule data)
  capsule_resp = 0x05,  // controller -> host, CQE
  h2c_data = 0x06,      // host -> controller, write data solicited by an R2T
  c2h_data = 0x07,      // controller -> host, read data
  r2t = 0x09,           // controller -> host, ready to transfer (solicits H2CData)
};
const char* pdu_type_name(uint8_t type) noexcept;  // "CapsuleCmd", ... or "unknown"

// CH flags (bits 7:4 reserved).
inline constexpr uint8_t kFlagHdgst = 0x01;    // HDGSTF: a header digest follows the header
inline constexpr uint8_t kFlagDdgst = 0x02;    // DDGSTF: a data digest follows the data
inline constexpr uint8_t kFlagLastPdu = 0x04;  // LAST_PDU: last data PDU of the transfer (H2CData: of the R2T)
inline constexpr uint8_t kFlagSuccess = 0x08;  // SUCCESS: C2HData only, with LAST_PDU; no CapsuleResp follows

// ICReq/ICResp DGST field.
inline constexpr uint8_t kDigestHeader = 0x01;  // HDGST_ENABLE
inline constexpr uint8_t kDigestData = 0x02;    // DDGST_ENABLE

// TermReq Fatal Error Status.
enum class Fes : uint16_t {
  invalid_header_field = 0x01,   // FEI = byte offset of the field
  pdu_sequence_error = 0x02,     // PDU not valid in the current connection state
  header_digest_error = 0x03,
  data_out_of_range = 0x04,      // H2CData/C2HData outside the command's (or R2T's) range
  data_limit_exceeded = 0x05,    // H2CData longer than MAXH2CDATA (the 1.0 draft called it R2T limit exceeded)
  unsupported_parameter = 0x06,  // FEI = byte offset of the parameter (ICReq PFV, ...)
};
const char* fes_name(Fes fes) noexcept;

// Which side of the connection receives (and so validates) a PDU.
enum class Receiver : uint8_t { controller, host };

// ---- wire structs -----------------------------------------------------------------------------------

// Common header, every PDU.
struct CommonHeader {
  uint8_t pdu_type;  // PduType
  uint8_t flags;     // kFlag*
  uint8_t hlen;      // header length: CH + PSH, without HDGST; fixed per PDU type
  uint8_t pdo;       // PDU data offset from the start of the PDU; 0 when the PDU has no data
  le32 plen;         // PDU length: header, digests, padding and data
};
static_assert(sizeof(CommonHeader) == 8);
static_assert(offsetof(CommonHeader, pdu_type) == 0);
static_assert(offsetof(CommonHeader, flags) == 1);
static_assert(offsetof(CommonHeader, hlen) == 2);
static_assert(offsetof(CommonHeader, pdo) == 3);
static_assert(offsetof(CommonHeader, plen) == 4);

// ICReq: host -> controller connection initialization.
struct IcReqPdu {
  CommonHeader ch;                  // type 0x00, flags 0, hlen 128, pdo 0, plen 128
  le16 pfv;                         // PDU format version, 0 = 1.0
  uint8_t hpda;                     // host PDU data alignment (0's based dwords): pdo alignment of C2H data PDUs
  uint8_t dgst;                     // digests the host asks for: kDigestHeader | kDigestData
  le32 maxr2t;                      // max outstanding R2Ts per command, 0's based (0 = one)
  std::array<uint8_t, 112> rsvd16;  // reserved
};
static_assert(sizeof(IcReqPdu) == 128);
static_assert(offsetof(IcReqPdu, ch) == 0);
static_assert(offsetof(IcReqPdu, pfv) == 8);
static_assert(offsetof(IcReqPdu, hpda) == 10);
static_assert(offsetof(IcReqPdu, dgst) == 11);
static_assert(offsetof(IcReqPdu, maxr2t) == 12);
static_assert(offsetof(IcReqPdu, rsvd16) == 16);

// ICResp: controller -> host.
struct IcRespPdu {
  CommonHeader ch;                  // type 0x01, flags 0, hlen 128, pdo 0, plen 128
  le16 pfv;                         // PDU format version, 0 = 1.0
  uint8_t cpda;                     // controller PDU data alignment (0's based dwords): pdo alignment of H2C data
  uint8_t dgst;                     // digests enabled on the connection: kDigestHeader | kDigestData
  le32 maxh2cdata;                  // max data bytes in one H2CData PDU; 1's based, >= 4096, multiple of 4
  std::array<uint8_t, 112> rsvd16;  // reserved
};
static_assert(sizeof(IcRespPdu) == 128);
static_assert(offsetof(IcRespPdu, ch) == 0);
static_assert(offsetof(IcRespPdu, pfv) == 8);
static_assert(offsetof(IcRespPdu, cpda) == 10);
static_assert(offsetof(IcRespPdu, dgst) == 11);
static_assert(offsetof(IcRespPdu, maxh2cdata) == 12);
static_assert(offsetof(IcRespPdu, rsvd16) == 16);

// H2CTermReq / C2HTermReq header; followed by up to 128 bytes of the PDU header that caused the error.
// FEI sits at byte 10, not dword aligned (the Linux nvme_tcp_term_pdu struct pads it to 12; SPDK and the
// spec put it at 10), hence the unaligned le32u.
struct TermReqHdr {
  CommonHeader ch;                 // type 0x02/0x03, flags 0, hlen 24, pdo 0, plen 24 + copied header bytes
  le16 fes;                        // Fes
  le32u fei;                       // fatal error information: byte offset of the field for FES 1 and 6, else 0
  std::array<uint8_t, 10> rsvd14;  // reserved
};
static_assert(sizeof(TermReqHdr) == 24);
static_assert(offsetof(TermReqHdr, ch) == 0);
static_assert(offsetof(TermReqHdr, fes) == 8);
static_assert(offsetof(TermReqHdr, fei) == 10);
static_assert(offsetof(TermReqHdr, rsvd14) == 14);

using SqeBytes = std::array<uint8_t, 64>;  // opaque NVMe submission queue entry
using CqeBytes = std::array<uint8_t, 16>;  // opaque NVMe completion queue entry

// CapsuleCmd: a command capsule; in-capsule data (if any) starts at pdo.
struct CapsuleCmdPdu {
  CommonHeader ch;  // type 0x04, flags HDGSTF/DDGSTF, hlen 72
  SqeBytes sqe;     // the 64-byte SQE
};
static_assert(sizeof(CapsuleCmdPdu) == 72);
static_assert(offsetof(CapsuleCmdPdu, ch) == 0);
static_assert(offsetof(CapsuleCmdPdu, sqe) == 8);

// CapsuleResp: a response capsule, never carries data.
struct CapsuleRespPdu {
  CommonHeader ch;  // type 0x05, flags HDGSTF, hlen 24, pdo 0
  CqeBytes cqe;     // the 16-byte CQE
};
static_assert(sizeof(CapsuleRespPdu) == 24);
static_assert(offsetof(CapsuleRespPdu, ch) == 0);
static_assert(offsetof(CapsuleRespPdu, cqe) == 8);

// H2CData: write data the controller asked for with an R2T.
struct H2CDataHdr {
  CommonHeader ch;                // type 0x06, flags HDGSTF/DDGSTF/LAST_PDU, hlen 24
  le16 cccid;                     // command capsule CID the data belongs to
  le16 ttag;                      // transfer tag, copied from the R2T
  le32 datao;                     // offset of this data within the command's data
  le32 datal;                     // data bytes in this PDU (== plen - pdo - DDGST), <= MAXH2CDATA
  std::array<uint8_t, 4> rsvd20;  // reserved
};
static_assert(sizeof(H2CDataHdr) == 24);
static_assert(offsetof(H2CDataHdr, ch) == 0);
static_assert(offsetof(H2CDataHdr, cccid) == 8);
static_assert(offsetof(H2CDataHdr, ttag) == 10);
static_assert(offsetof(H2CDataHdr, datao) == 12);
static_assert(offsetof(H2CDataHdr, datal) == 16);
static_assert(offsetof(H2CDataHdr, rsvd20) == 20);

// C2HData: read data.
struct C2HDataHdr {
  CommonHeader ch;                // type 0x07, flags HDGSTF/DDGSTF/LAST_PDU/SUCCESS, hlen 24
  le16 cccid;                     // command capsule CID the data belongs to
  le16 rsvd10;                    // reserved (the TTAG position in H2CData)
  le32 datao;                     // offset of this data within the command's data
  le32 datal;                     // data bytes in this PDU (== plen - pdo - DDGST)
  std::array<uint8_t, 4> rsvd20;  // reserved
};
static_assert(sizeof(C2HDataHdr) == 24);
static_assert(offsetof(C2HDataHdr, ch) == 0);
static_assert(offsetof(C2HDataHdr, cccid) == 8);
static_assert(offsetof(C2HDataHdr, rsvd10) == 10);
static_assert(offsetof(C2HDataHdr, datao) == 12);
static_assert(offsetof(C2HDataHdr, datal) == 16);
static_assert(offsetof(C2HDataHdr, rsvd20) == 20);

// R2T: the controller solicits r2tl bytes of write data starting at r2to.
struct R2tPdu {
  CommonHeader ch;                // type 0x09, flags HDGSTF, hlen 24, pdo 0
  le16 cccid;                     // command capsule CID
  le16 ttag;                      // transfer tag chosen by the controller, echoed in H2CData
  le32 r2to;                      // R2T offset within the command's data
  le32 r2tl;                      // R2T length in bytes, non-zero
  std::array<uint8_t, 4> rsvd20;  // reserved
};
static_assert(sizeof(R2tPdu) == 24);
static_assert(offsetof(R2tPdu, ch) == 0);
static_assert(offsetof(R2tPdu, cccid) == 8);
static_assert(offsetof(R2tPdu, ttag) == 10);
static_assert(offsetof(R2tPdu, r2to) == 12);
static_assert(offsetof(R2tPdu, r2tl) == 16);
static_assert(offsetof(R2tPdu, rsvd20) == 20);

static_assert(std::is_trivially_copyable_v<CommonHeader> && std::is_trivially_copyable_v<IcReqPdu> &&
              std::is_trivially_copyable_v<IcRespPdu> && std::is_trivially_copyable_v<TermReqHdr> &&
              std::is_trivially_copyable_v<CapsuleCmdPdu> && std::is_trivially_copyable_v<CapsuleRespPdu> &&
              std::is_trivially_copyable_v<H2CDataHdr> && std::is_trivially_copyable_v<C2HDataHdr> &&
              std::is_trivially_copyable_v<R2tPdu>);

// ---- connection parameters --------------------------------------------------------------------------

// What ICReq/ICResp settled for one connection. Until `established`, only ICReq/ICResp and TermReqs are
// valid and no digests apply.
struct TcpSession {
  bool established = false;  // ICReq/ICResp exchanged
  bool hdgst = false;        // header digests on every PDU but IC and TermReq
  bool ddgst = false;        // data digests on every PDU that carries data
  uint8_t hpda = 0;          // from ICReq: data alignment in PDUs the host receives (C2HData)
  uint8_t cpda = 0;          // from ICResp: data alignment in PDUs the controller receives (CapsuleCmd, H2CData)
  uint32_t maxh2cdata = 0;   // from ICResp: max H2CData data bytes (0 = not enforced)
  uint32_t maxr2t = 0;       // from ICReq: outstanding R2Ts per command, 0's based

  constexpr uint32_t hdgst_len() const noexcept { return hdgst ? kDigestLen : 0; }
  constexpr uint32_t ddgst_len() const noexcept { return ddgst ? kDigestLen : 0; }
  // Required pdo alignment, in bytes, of data PDUs that `receiver` receives: (PDA + 1) dwords.
  constexpr uint32_t data_alignment(Receiver receiver) const noexcept {
    return (uint32_t{receiver == Receiver::controller ? cpda : hpda} + 1) * 4;
  }
};

// The pdo a data-carrying PDU with header length `hlen` must have when sent to `receiver`: the header and
// its digest, rounded up to the receiver's PDA. (The Linux host and nvmet use exactly hlen + HDGST: they
// only support PDA 0.)
constexpr uint32_t data_pdo(uint8_t hlen, const TcpSession& s, Receiver receiver) noexcept {
  uint32_t align = s.data_alignment(receiver);
  uint32_t end = uint32_t{hlen} + s.hdgst_len();
  return (end + align - 1) / align * align;
}

// ---- errors -----------------------------------------------------------------------------------------

// A PDU the receiver must not accept: the connection ends with a TermReq carrying `fes` and fei().
struct PduError {
  uint32_t offset;   // byte offset of the offending field from the start of the PDU
  const char* what;  // string literal, for the log line
  Fes fes;

  // The TermReq FEI: the field offset for "invalid header field" and "unsupported parameter", 0 otherwise
  // (the FEI is reserved for the other FES values; SPDK does the same).
  constexpr uint32_t fei() const noexcept {
    return fes == Fes::invalid_header_field || fes == Fes::unsupported_parameter ? offset : 0;
  }
  constexpr DecodeError decode_error() const noexcept { return DecodeError{offset, what}; }
};

template <typename T>
using PduDecoded = tl::expected<T, PduError>;

inline tl::unexpected<PduError> pdu_reject(uint32_t offset, Fes fes, const char* what) noexcept {
  return tl::unexpected<PduError>(PduError{offset, what, fes});
}

// ---- validating decoder -----------------------------------------------------------------------------

// What a valid common header says about the rest of the PDU.
struct PduHeaderInfo {
  PduType type;
  uint8_t flags;
  uint8_t hlen;
  uint8_t pdo;
  uint32_t plen;
  uint8_t hdgst_len;     // 0 or 4: header digest right after the hlen header bytes
  uint8_t ddgst_len;     // 0 or 4: data digest after the data
  uint32_t header_len;   // hlen + hdgst_len: bytes to read before validate_pdu_header()
  uint32_t data_offset;  // where the data starts (pdo; hlen for a TermReq's copied header), 0 if no data
  uint32_t data_len;     // data bytes (no padding, no digest), 0 if none

  constexpr bool has_data() const noexcept { return data_len != 0; }
  constexpr uint32_t pad_len() const noexcept { return has_data() ? data_offset - header_len : 0; }
};

// Stage 1: validate the 8-byte common header of a PDU received by `receiver`, in this order:
//   connection state (only IC and TermReq before IC, no IC after: FES 2, offset 0)
//   -> PDU type known and sent in this direction (FES 1, offset 0)
//   -> hlen exact for the type (offset 2)
//   -> flags valid for the type and matching the negotiated digests (offset 1; checked before pdo/plen
//      because a digest-flag mismatch is what makes pdo/plen look wrong)
//   -> pdo: 0 without data; with data exactly hlen + HDGST rounded up to the receiver's PDA (offset 3)
//   -> plen: IC 128, CapsuleResp/R2T hlen + HDGST, data PDUs > pdo + DDGST, TermReq 24..152 (offset 4).
// All arithmetic is done in 64 bits: no plen can wrap. `len` must be >= 8.
PduDecoded<PduHeaderInfo> validate_common_header(const uint8_t* buf, std::size_t len, const TcpSession& session,
                                                 Receiver receiver) noexcept;

// Stage 2: `buf` holds at least header_len bytes (hlen + header digest). Repeats stage 1, verifies the
// header digest (FES 3, offset hlen), then checks the PSH:
//   ICReq: PFV 0 (offset 8), HPDA <= 31 (offset 10). ICResp: PFV 0 (8), CPDA <= 31 (10),
//   MAXH2CDATA >= 4096 and a multiple of 4 (12). H2CData/C2HData: DATAL == plen - pdo - DDGST (16), and
//   H2CData DATAL <= session.maxh2cdata (FES 5, offset 16). R2T: R2TL != 0 (16).
// Reserved fields are not checked: the Linux host and nvmet ignore them, and so does the spec's receiver.
PduDecoded<PduHeaderInfo> validate_pdu_header(const uint8_t* buf, std::size_t len, const TcpSession& session,
                                              Receiver receiver) noexcept;

// Data placement checks that need per-command state, shared by the three data-moving PDUs (their offset
// field is at byte 12 and their length at byte 16): the data must start at `expected_offset` (in-order
// transfer) and end at or before `limit` (the command's transfer length, or the end of the R2T window).
// Fails with FES 4 "data transfer out of range". A zero `length` is rejected at offset 16 with FES 1.
PduDecoded<void> check_data_range(uint32_t offset, uint32_t length, uint32_t expected_offset,
                                  uint32_t limit) noexcept;

// ---- connection initialization ----------------------------------------------------------------------

struct IcReqParams {
  uint8_t hpda = 0;  // 0's based dwords
  bool hdgst = false;
  bool ddgst = false;
  uint32_t maxr2t = 0;  // 0's based
};
IcReqPdu build_icreq(const IcReqParams& params) noexcept;

// Controller side: the session an accepted ICReq (already through validate_pdu_header) gives. The controller
// enables exactly the digests the host asked for (as nvmet does; the Linux host fails on any other answer).
TcpSession controller_session(const IcReqPdu& icreq, uint8_t cpda, uint32_t maxh2cdata) noexcept;
IcRespPdu build_icresp(const TcpSession& session) noexcept;

// Host side: check an ICResp (already through validate_pdu_header) against the ICReq we sent and produce
// the session. The DGST field must echo what we asked for (offset 11, FES 1), as the Linux host requires.
PduDecoded<TcpSession> host_session(const IcReqPdu& sent, const IcRespPdu& received) noexcept;

// ---- builders (fill hlen / pdo / plen / flags from the session) --------------------------------------

// Capsule command with `icd_len` bytes of in-capsule data following at pdo (0: no data, pdo 0).
CapsuleCmdPdu build_capsule_cmd(const SqeBytes& sqe, uint32_t icd_len, const TcpSession& session) noexcept;
CapsuleRespPdu build_capsule_resp(const CqeBytes& cqe, const TcpSession& session) noexcept;
// `datal` > 0 and <= MAXH2CDATA is the caller's job (the transport splits an R2T into PDUs).
H2CDataHdr build_h2c_data(uint16_t cccid, uint16_t ttag, uint32_t datao, uint32_t datal, bool last,
                          const TcpSession& session) noexcept;
// `success` (no CapsuleResp follows) is only set together with `last`; only when the host disabled SQ flow
// control, which is the caller's business.
C2HDataHdr build_c2h_data(uint16_t cccid, uint32_t datao, uint32_t datal, bool last, bool success,
                          const TcpSession& session) noexcept;
R2tPdu build_r2t(uint16_t cccid, uint16_t ttag, uint32_t r2to, uint32_t r2tl, const TcpSession& session) noexcept;
// A TermReq header (type c2h_term_req from a controller, h2c_term_req from a host) announcing
// `offending_len` bytes (clamped to 128) of the bad PDU's header after it.
TermReqHdr build_term_req(PduType type, Fes fes, uint32_t fei, uint32_t offending_len) noexcept;

// Write a complete TermReq for `error`: header + the first <= 128 bytes of `offending_header`.
// Returns the PDU length, or 0 if `out` is too small (it needs 24 + min(128, offending_header.size())).
std::size_t write_term_req(std::span<uint8_t> out, PduType type, const PduError& error,
                           std::span<const uint8_t> offending_header) noexcept;

// Serialize a built PDU header for sending: the hlen header bytes, the header digest when HDGSTF is set,
// and zero padding up to pdo when the PDU has data. Returns the bytes written (the offset at which the
// data goes), or 0 if `out` is too small. `pdu` points at any of the structs above.
std::size_t write_pdu_header(const void* pdu, std::span<uint8_t> out) noexcept;
template <typename Pdu>
  requires std::is_class_v<Pdu>
std::size_t write_pdu_header(const Pdu& pdu, std::span<uint8_t> out) noexcept {
  static_assert(std::is_trivially_copyable_v<Pdu> && offsetof(Pdu, ch) == 0);
  return write_pdu_header(static_cast<const void*>(&pdu), out);
}

// ---- digests ----------------------------------------------------------------------------------------

// Digests travel as little-endian 32-bit words.
inline void store_digest(uint8_t* out, uint32_t digest) noexcept {
  le32u w;
  w.set(digest);
  store(out, w);
}
inline uint32_t load_digest(const uint8_t* in) noexcept { return static_cast<uint32_t>(load<le32u>(in).get()); }

// Header digest: CRC32C over the hlen header bytes (CH + PSH); it sits at byte hlen.
uint32_t header_digest(const uint8_t* header, std::size_t hlen) noexcept;
bool header_digest_ok(const uint8_t* pdu, std::size_t hlen) noexcept;

// Data digest: CRC32C over the PDU data only (not the padding), however it is scattered.
uint32_t data_digest(std::span<const std::span<const uint8_t>> parts) noexcept;
uint32_t data_digest(std::span<const iovec> iov) noexcept;
inline bool data_digest_ok(std::span<const std::span<const uint8_t>> parts, const uint8_t* received) noexcept {
  return data_digest(parts) == load_digest(received);
}
inline bool data_digest_ok(std::span<const iovec> iov, const uint8_t* received) noexcept {
  return data_digest(iov) == load_digest(received);
}

}  // namespace rdmablk::protocol::tcp

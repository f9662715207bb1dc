#include "protocol/tcp_pdu.h"

#include <algorithm>
#include <cstring>

#include "protocol/crc32c.h"

namespace rdmablk::protocol::tcp {

namespace {

// Byte offsets of the fields rejections point at.
constexpr uint32_t kOffType = offsetof(CommonHeader, pdu_type);
constexpr uint32_t kOffFlags = offsetof(CommonHeader, flags);
constexpr uint32_t kOffHlen = offsetof(CommonHeader, hlen);
constexpr uint32_t kOffPdo = offsetof(CommonHeader, pdo);
constexpr uint32_t kOffPlen = offsetof(CommonHeader, plen);
constexpr uint32_t kOffDataLength = offsetof(H2CDataHdr, datal);  // == C2HDataHdr::datal == R2tPdu::r2tl
constexpr uint32_t kOffDataOffset = offsetof(H2CDataHdr, datao);  // == C2HDataHdr::datao == R2tPdu::r2to
static_assert(offsetof(C2HDataHdr, datal) == kOffDataLength && offsetof(R2tPdu, r2tl) == kOffDataLength);
static_assert(offsetof(C2HDataHdr, datao) == kOffDataOffset && offsetof(R2tPdu, r2to) == kOffDataOffset);

enum class DataRule : uint8_t {
  none,      // never carries data: pdo 0, plen == hlen + HDGST
  optional,  // CapsuleCmd: in-capsule data when pdo != 0
  required,  // H2CData / C2HData
  term,      // TermReq: the offending header follows hlen directly, no digests
};

struct TypeRule {
  bool known;
  Receiver receiver;  // the only side that may receive this type
  uint8_t hlen;
  uint8_t allowed_flags;
  DataRule data;
  bool digests;  // HDGST/DDGST apply (everything but IC and TermReq)
  bool ic;       // ICReq / ICResp
};

constexpr uint8_t kHD = kFlagHdgst | kFlagDdgst;

constexpr std::array<TypeRule, 10> kRules = {{
    /* 0 ICReq     */ {true, Receiver::controller, kIcPduLen, 0, DataRule::none, false, true},
    /* 1 ICResp    */ {true, Receiver::host, kIcPduLen, 0, DataRule::none, false, true},
    /* 2 H2CTerm   */ {true, Receiver::controller, kTermReqHlen, 0, DataRule::term, false, false},
    /* 3 C2HTerm   */ {true, Receiver::host, kTermReqHlen, 0, DataRule::term, false, false},
    /* 4 CapsCmd   */ {true, Receiver::controller, kCapsuleCmdHlen, kHD, DataRule::optional, true, false},
    /* 5 CapsResp  */ {true, Receiver::host, kCapsuleRespHlen, kFlagHdgst, DataRule::none, true, false},
    /* 6 H2CData   */ {true, Receiver::controller, kDataHlen, kHD | kFlagLastPdu, DataRule::required, true, false},
    /* 7 C2HData   */
    {true, Receiver::host, kDataHlen, kHD | kFlagLastPdu | kFlagSuccess, DataRule::required, true, false},
    /* 8 (none)    */ {false, Receiver::host, 0, 0, DataRule::none, false, false},
    /* 9 R2T       */ {true, Receiver::host, kR2tHlen, kFlagHdgst, DataRule::none, true, false},
}};

const TypeRule* rule_for(uint8_t type) noexcept {
  if (type >= kRules.size() || !kRules[type].known) return nullptr;
  return &kRules[type];
}

CommonHeader make_ch(PduType type, uint8_t flags, uint8_t hlen, uint8_t pdo, uint32_t plen) noexcept {
  CommonHeader ch{};
  ch.pdu_type = static_cast<uint8_t>(type);
  ch.flags = flags;
  ch.hlen = hlen;
  ch.pdo = pdo;
  ch.plen.set(plen);
  return ch;
}

// CH for a PDU that may carry `data_len` bytes of data, sent to `receiver`.
CommonHeader data_ch(PduType type, uint8_t hlen, uint8_t extra_flags, uint32_t data_len, const TcpSession& s,
                     Receiver receiver) noexcept {
  uint8_t flags = extra_flags;
  if (s.hdgst) flags |= kFlagHdgst;
  if (data_len == 0) return make_ch(type, flags, hlen, 0, hlen + s.hdgst_len());
  if (s.ddgst) flags |= kFlagDdgst;
  uint32_t pdo = data_pdo(hlen, s, receiver);
  return make_ch(type, flags, hlen, static_cast<uint8_t>(pdo), pdo + data_len + s.ddgst_len());
}

}  // namespace

const char* pdu_type_name(uint8_t type) noexcept {
  switch (type) {
    case 0x00: return "ICReq";
    case 0x01: return "ICResp";
    case 0x02: return "H2CTermReq";
    case 0x03: return "C2HTermReq";
    case 0x04: return "CapsuleCmd";
    case 0x05: return "CapsuleResp";
    case 0x06: return "H2CData";
    case 0x07: return "C2HData";
    case 0x09: return "R2T";
    default: return "unknown";
  }
}

const char* fes_name(Fes fes) noexcept {
  switch (fes) {
    case Fes::invalid_header_field: return "Invalid PDU Header Field";
    case Fes::pdu_sequence_error: return "PDU Sequence Error";
    case Fes::header_digest_error: return "Header Digest Error";
    case Fes::data_out_of_range: return "Data Transfer Out of Range";
    case Fes::data_limit_exceeded: return "Data Transfer Limit Exceeded";
    case Fes::unsupported_parameter: return "Unsupported Parameter";
  }
  return "unknown FES";
}

// ---- validation -------------------------------------------------------------------------------------

namespace {

// Type, direction, connection state.
PduDecoded<const TypeRule*> check_type(const CommonHeader& ch, const TcpSession& s, Receiver receiver) noexcept {
  const TypeRule* rule = rule_for(ch.pdu_type);
  if (rule == nullptr) return pdu_reject(kOffType, Fes::invalid_header_field, "unknown PDU type");
  if (rule->receiver != receiver) {
    return pdu_reject(kOffType, Fes::invalid_header_field, "PDU type not valid in this direction");
  }
  if (!s.established && !rule->ic && rule->data != DataRule::term) {
    return pdu_reject(kOffType, Fes::pdu_sequence_error, "PDU before connection initialization");
  }
  if (s.established && rule->ic) {
    return pdu_reject(kOffType, Fes::pdu_sequence_error, "ICReq/ICResp after connection initialization");
  }
  return rule;
}

// Flags: those the type allows, the digest flags as negotiated. Sets the digest lengths in `info`.
PduDecoded<void> check_flags(const CommonHeader& ch, const TypeRule& rule, const TcpSession& s,
                             PduHeaderInfo& info) noexcept {
  const uint8_t flags = ch.flags;
  if ((flags & ~rule.allowed_flags) != 0) {
    return pdu_reject(kOffFlags, Fes::invalid_header_field, "flag not valid for this PDU type");
  }
  if (rule.digests) {
    const bool h = (flags & kFlagHdgst) != 0;
    if (h != s.hdgst) {
      return pdu_reject(kOffFlags, Fes::invalid_header_field,
                        h ? "HDGSTF set but header digest not negotiated" : "HDGSTF clear but header digest negotiated");
    }
    const bool d = (flags & kFlagDdgst) != 0;
    const bool data_present =
        rule.data == DataRule::required || (rule.data == DataRule::optional && ch.pdo != 0);
    if (d && !s.ddgst) return pdu_reject(kOffFlags, Fes::invalid_header_field, "DDGSTF set but data digest not negotiated");
    if (d && !data_present) return pdu_reject(kOffFlags, Fes::invalid_header_field, "DDGSTF set on a PDU without data");
    if (!d && s.ddgst && data_present) {
      return pdu_reject(kOffFlags, Fes::invalid_header_field, "DDGSTF clear but data digest negotiated");
    }
    info.hdgst_len = static_cast<uint8_t>(s.hdgst_len());
    info.ddgst_len = static_cast<uint8_t>(d ? kDigestLen : 0);
  }
  if ((flags & kFlagSuccess) != 0 && (flags & kFlagLastPdu) == 0) {
    return pdu_reject(kOffFlags, Fes::invalid_header_field, "SUCCESS without LAST_PDU");
  }
  return {};
}

// PDU data offset and length (64-bit: pdo + digest + data can never wrap). Sets data_offset / data_len.
PduDecoded<void> check_layout(const CommonHeader& ch, DataRule data, const TcpSession& s, Receiver receiver,
                              PduHeaderInfo& info) noexcept {
  const uint64_t plen = ch.plen.get();
  switch (data) {
    case DataRule::none:
      if (ch.pdo != 0) return pdu_reject(kOffPdo, Fes::invalid_header_field, "pdo not 0 on a PDU without data");
      if (plen != info.header_len) return pdu_reject(kOffPlen, Fes::invalid_header_field, "plen not hlen + header digest");
      return {};
    case DataRule::term:
      if (ch.pdo != 0 && ch.pdo != ch.hlen) {
        return pdu_reject(kOffPdo, Fes::invalid_header_field, "TermReq pdo neither 0 nor hlen");
      }
      if (plen < ch.hlen || plen > kTermReqMaxPlen) {
        return pdu_reject(kOffPlen, Fes::invalid_header_field, "TermReq plen outside 24..152");
      }
      info.data_len = static_cast<uint32_t>(plen - ch.hlen);
      info.data_offset = info.data_len != 0 ? ch.hlen : 0;
      return {};
    case DataRule::optional:
      if (ch.pdo == 0) {
        if (plen == info.header_len) return {};
        return pdu_reject(kOffPlen, Fes::invalid_header_field, "plen not hlen + header digest with pdo 0");
      }
      [[fallthrough]];
    case DataRule::required:
      if (ch.pdo != data_pdo(ch.hlen, s, receiver)) {
        return pdu_reject(kOffPdo, Fes::invalid_header_field, "pdo not hlen + header digest aligned to the PDA");
      }
      if (plen <= uint64_t{ch.pdo} + info.ddgst_len) {
        return pdu_reject(kOffPlen, Fes::invalid_header_field, "plen leaves no room for data");
      }
      info.data_offset = ch.pdo;
      info.data_len = static_cast<uint32_t>(plen - ch.pdo - info.ddgst_len);
      return {};
  }
  return {};
}

}  // namespace

PduDecoded<PduHeaderInfo> validate_common_header(const uint8_t* buf, std::size_t len, const TcpSession& s,
                                                 Receiver receiver) noexcept {
  if (buf == nullptr || len < kCommonHeaderLen) {
    return pdu_reject(static_cast<uint32_t>(len), Fes::invalid_header_field, "PDU shorter than its common header");
  }
  const auto ch = load<CommonHeader>(buf);
  const auto rule = check_type(ch, s, receiver);
  if (!rule) return tl::unexpected(rule.error());
  if (ch.hlen != (*rule)->hlen) return pdu_reject(kOffHlen, Fes::invalid_header_field, "hlen wrong for PDU type");

  PduHeaderInfo info{};
  info.type = static_cast<PduType>(ch.pdu_type);
  info.flags = ch.flags;
  info.hlen = ch.hlen;
  info.pdo = ch.pdo;
  info.plen = static_cast<uint32_t>(ch.plen.get());
  if (auto ok = check_flags(ch, **rule, s, info); !ok) return tl::unexpected(ok.error());
  info.header_len = uint32_t{ch.hlen} + info.hdgst_len;
  if (auto ok = check_layout(ch, (*rule)->data, s, receiver, info); !ok) return tl::unexpected(ok.error());
  return info;
}

PduDecoded<PduHeaderInfo> validate_pdu_header(const uint8_t* buf, std::size_t len, const TcpSession& s,
                                              Receiver receiver) noexcept {
  auto info = validate_common_header(buf, len, s, receiver);
  if (!info) return info;
  if (len < info->header_len) {
    return pdu_reject(static_cast<uint32_t>(len), Fes::invalid_header_field, "PDU header truncated");
  }
  if (info->hdgst_len != 0 && !header_digest_ok(buf, info->hlen)) {
    return pdu_reject(info->hlen, Fes::header_digest_error, "header digest mismatch");
  }

  switch (info->type) {
    case PduType::ic_req: {
      const auto p = load<IcReqPdu>(buf);
      if (p.pfv.get() != kPfv10) {
        return pdu_reject(offsetof(IcReqPdu, pfv), Fes::unsupported_parameter, "ICReq PFV not 1.0");
      }
      if (p.hpda > kMaxPda) return pdu_reject(offsetof(IcReqPdu, hpda), Fes::invalid_header_field, "ICReq HPDA > 31");
      break;
    }
    case PduType::ic_resp: {
      const auto p = load<IcRespPdu>(buf);
      if (p.pfv.get() != kPfv10) {
        return pdu_reject(offsetof(IcRespPdu, pfv), Fes::unsupported_parameter, "ICResp PFV not 1.0");
      }
      if (p.cpda > kMaxPda) return pdu_reject(offsetof(IcRespPdu, cpda), Fes::invalid_header_field, "ICResp CPDA > 31");
      const uint32_t maxh2c = p.maxh2cdata.get();
      if (maxh2c < kMinMaxH2CData || maxh2c % 4 != 0) {
        return pdu_reject(offsetof(IcRespPdu, maxh2cdata), Fes::invalid_header_field,
                          "ICResp MAXH2CDATA below 4096 or not a multiple of 4");
      }
      break;
    }
    case PduType::h2c_data: {
      const auto p = load<H2CDataHdr>(buf);
      if (p.datal.get() != info->data_len) {
        return pdu_reject(kOffDataLength, Fes::invalid_header_field, "H2CData DATAL disagrees with plen");
      }
      if (s.maxh2cdata != 0 && p.datal.get() > s.maxh2cdata) {
        return pdu_reject(kOffDataLength, Fes::data_limit_exceeded, "H2CData DATAL above MAXH2CDATA");
      }
      break;
    }
    case PduType::c2h_data: {
      const auto p = load<C2HDataHdr>(buf);
      if (p.datal.get() != info->data_len) {
        return pdu_reject(kOffDataLength, Fes::invalid_header_field, "C2HData DATAL disagrees with plen");
      }
      break;
    }
    case PduType::r2t: {
      const auto p = load<R2tPdu>(buf);
      if (p.r2tl.get() == 0) return pdu_reject(kOffDataLength, Fes::invalid_header_field, "R2T R2TL is 0");
      break;
    }
    case PduType::h2c_term_req:
    case PduType::c2h_term_req:
    case PduType::capsule_cmd:
    case PduType::capsule_resp:
      break;  // TermReq FES is only logged; SQE/CQE belong to the NVMe layer
  }
  return info;
}

PduDecoded<void> check_data_range(uint32_t offset, uint32_t length, uint32_t expected_offset,
                                  uint32_t limit) noexcept {
  if (length == 0) return pdu_reject(kOffDataLength, Fes::invalid_header_field, "data length 0");
  if (offset != expected_offset) {
    return pdu_reject(kOffDataOffset, Fes::data_out_of_range, "data offset not where the transfer stands");
  }
  if (uint64_t{offset} + length > limit) {
    return pdu_reject(kOffDataLength, Fes::data_out_of_range, "data runs past the end of the transfer");
  }
  return {};
}

// ---- connection initialization ----------------------------------------------------------------------

namespace {

// ICReq and ICResp both start with a fixed-size common header and PFV 0, and carry DGST.
template <typename Pdu>
Pdu ic_pdu(PduType type, bool hdgst, bool ddgst) noexcept {
  Pdu p{};
  p.ch = make_ch(type, 0, kIcPduLen, 0, kIcPduLen);
  p.pfv.set(kPfv10);
  p.dgst = static_cast<uint8_t>((hdgst ? kDigestHeader : 0) | (ddgst ? kDigestData : 0));
  return p;
}

}  // namespace

IcReqPdu build_icreq(const IcReqParams& params) noexcept {
  auto p = ic_pdu<IcReqPdu>(PduType::ic_req, params.hdgst, params.ddgst);
  p.hpda = params.hpda;
  p.maxr2t.set(params.maxr2t);
  return p;
}

TcpSession controller_session(const IcReqPdu& icreq, uint8_t cpda, uint32_t maxh2cdata) noexcept {
  TcpSession s;
  s.established = true;
  s.hdgst = (icreq.dgst & kDigestHeader) != 0;
  s.ddgst = (icreq.dgst & kDigestData) != 0;
  s.hpda = icreq.hpda;
  s.cpda = cpda;
  s.maxh2cdata = maxh2cdata;
  s.maxr2t = icreq.maxr2t.get();
  return s;
}

IcRespPdu build_icresp(const TcpSession& s) noexcept {
  auto p = ic_pdu<IcRespPdu>(PduType::ic_resp, s.hdgst, s.ddgst);
  p.cpda = s.cpda;
  p.maxh2cdata.set(s.maxh2cdata);
  return p;
}

PduDecoded<TcpSession> host_session(const IcReqPdu& sent, const IcRespPdu& received) noexcept {
  constexpr uint8_t kKnown = kDigestHeader | kDigestData;
  if ((received.dgst & kKnown) != (sent.dgst & kKnown)) {
    return pdu_reject(offsetof(IcRespPdu, dgst), Fes::invalid_header_field, "ICResp digests differ from ICReq");
  }
  TcpSession s;
  s.established = true;
  s.hdgst = (received.dgst & kDigestHeader) != 0;
  s.ddgst = (received.dgst & kDigestData) != 0;
  s.hpda = sent.hpda;
  s.cpda = received.cpda;
  s.maxh2cdata = received.maxh2cdata.get();
  s.maxr2t = sent.maxr2t.get();
  return s;
}

// ---- builders ---------------------------------------------------------------------------------------

CapsuleCmdPdu build_capsule_cmd(const SqeBytes& sqe, uint32_t icd_len, const TcpSession& s) noexcept {
  CapsuleCmdPdu p{};
  p.ch = data_ch(PduType::capsule_cmd, kCapsuleCmdHlen, 0, icd_len, s, Receiver::controller);
  p.sqe = sqe;
  return p;
}

CapsuleRespPdu build_capsule_resp(const CqeBytes& cqe, const TcpSession& s) noexcept {
  CapsuleRespPdu p{};
  p.ch = data_ch(PduType::capsule_resp, kCapsuleRespHlen, 0, 0, s, Receiver::host);
  p.cqe = cqe;
  return p;
}

H2CDataHdr build_h2c_data(uint16_t cccid, uint16_t ttag, uint32_t datao, uint32_t datal, bool last,
                          const TcpSession& s) noexcept {
  H2CDataHdr p{};
  p.ch = data_ch(PduType::h2c_data, kDataHlen, last ? kFlagLastPdu : 0, datal, s, Receiver::controller);
  p.cccid.set(cccid);
  p.ttag.set(ttag);
  p.datao.set(datao);
  p.datal.set(datal);
  return p;
}

C2HDataHdr build_c2h_data(uint16_t cccid, uint32_t datao, uint32_t datal, bool last, bool success,
                          const TcpSession& s) noexcept {
  uint8_t flags = 0;
  if (last) flags |= kFlagLastPdu;
  if (last && success) flags |= kFlagSuccess;
  C2HDataHdr p{};
  p.ch = data_ch(PduType::c2h_data, kDataHlen, flags, datal, s, Receiver::host);
  p.cccid.set(cccid);
  p.datao.set(datao);
  p.datal.set(datal);
  return p;
}

R2tPdu build_r2t(uint16_t cccid, uint16_t ttag, uint32_t r2to, uint32_t r2tl, const TcpSession& s) noexcept {
  R2tPdu p{};
  p.ch = data_ch(PduType::r2t, kR2tHlen, 0, 0, s, Receiver::host);
  p.cccid.set(cccid);
  p.ttag.set(ttag);
  p.r2to.set(r2to);
  p.r2tl.set(r2tl);
  return p;
}

TermReqHdr build_term_req(PduType type, Fes fes, uint32_t fei, uint32_t offending_len) noexcept {
  const uint32_t copied = std::min(offending_len, kTermReqMaxData);
  TermReqHdr p{};
  p.ch = make_ch(type, 0, kTermReqHlen, 0, kTermReqHlen + copied);
  p.fes.set(static_cast<uint16_t>(fes));
  p.fei.set(fei);
  return p;
}

std::size_t write_term_req(std::span<uint8_t> out, PduType type, const PduError& error,
                           std::span<const uint8_t> offending_header) noexcept {
  const std::size_t copied = std::min<std::size_t>(offending_header.size(), kTermReqMaxData);
  const std::size_t total = kTermReqHlen + copied;
  if (out.size() < total) return 0;
  const TermReqHdr hdr = build_term_req(type, error.fes, error.fei(), static_cast<uint32_t>(copied));
  store(out.data(), hdr);
  if (copied != 0) std::memcpy(out.data() + kTermReqHlen, offending_header.data(), copied);
  return total;
}

std::size_t write_pdu_header(const void* pdu, std::span<uint8_t> out) noexcept {
  const auto ch = load<CommonHeader>(pdu);
  const std::size_t hd = (ch.flags & kFlagHdgst) != 0 ? kDigestLen : 0;
  const std::size_t header_end = std::size_t{ch.hlen} + hd;
  const std::size_t total = std::max<std::size_t>(header_end, ch.pdo);
  if (out.size() < total || ch.hlen < kCommonHeaderLen) return 0;
  std::memcpy(out.data(), pdu, ch.hlen);
  if (hd != 0) store_digest(out.data() + ch.hlen, header_digest(out.data(), ch.hlen));
  if (total > header_end) std::memset(out.data() + header_end, 0, total - header_end);
  return total;
}

// ---- digests ----------------------------------------------------------------------------------------

uint32_t header_digest(const uint8_t* header, std::size_t hlen) noexcept { return crc32c(header, hlen); }

bool header_digest_ok(const uint8_t* pdu, std::size_t hlen) noexcept {
  return header_digest(pdu, hlen) == load_digest(pdu + hlen);
}

uint32_t data_digest(std::span<const std::span<const uint8_t>> parts) noexcept {
  Crc32c crc;
  for (auto part : parts) crc.update(part);
  return crc.value();
}

uint32_t data_digest(std::span<const iovec> iov) noexcept {
  Crc32c crc;
  for (const iovec& v : iov) crc.update(v.iov_base, v.iov_len);
  return crc.value();
}

}  // namespace rdmablk::protocol::tcp

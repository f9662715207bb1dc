// The NVMe/TCP validating decoder: one table row per malformed PDU, each asserting the exact byte offset
// (the TermReq FEI) and the Fatal Error Status.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "protocol/crc32c.h"
#include "protocol/tcp_pdu.h"

namespace rdmablk::protocol::tcp {
namespace {

using Bytes = std::vector<uint8_t>;

TcpSession session(bool hdgst, bool ddgst, uint8_t hpda = 0, uint8_t cpda = 0, uint32_t maxh2cdata = 0x400000) {
  TcpSession s;
  s.established = true;
  s.hdgst = hdgst;
  s.ddgst = ddgst;
  s.hpda = hpda;
  s.cpda = cpda;
  s.maxh2cdata = maxh2cdata;
  return s;
}

const TcpSession kPre{};  // before ICReq/ICResp
const TcpSession kNone = session(false, false);
const TcpSession kHd = session(true, false);
const TcpSession kDd = session(false, true);
const TcpSession kBoth = session(true, true);
const TcpSession kHpda1 = session(false, false, 1, 0);
const TcpSession kMax4k = session(false, false, 0, 0, 4096);

// The header bytes a sender puts on the wire (header, digest, padding); data is not needed to validate.
template <typename Pdu>
Bytes ser(const Pdu& pdu) {
  Bytes out(256);
  out.resize(write_pdu_header(pdu, out));
  return out;
}

Bytes cmd(const TcpSession& s, uint32_t icd) { return ser(build_capsule_cmd(SqeBytes{}, icd, s)); }
Bytes resp(const TcpSession& s) { return ser(build_capsule_resp(CqeBytes{}, s)); }
Bytes r2t(const TcpSession& s) { return ser(build_r2t(1, 2, 0, 4096, s)); }
Bytes h2c(const TcpSession& s, uint32_t len = 4096) { return ser(build_h2c_data(1, 2, 0, len, true, s)); }
Bytes c2h(const TcpSession& s, bool last = true, bool success = false) {
  return ser(build_c2h_data(1, 0, 4096, last, success, s));
}
Bytes icreq() { return ser(build_icreq({})); }
Bytes icresp() {
  TcpSession s = kNone;
  return ser(build_icresp(s));
}
Bytes term(PduType type) { return ser(build_term_req(type, Fes::invalid_header_field, 2, 0)); }

Bytes set8(Bytes b, std::size_t off, uint8_t v) {
  b.at(off) = v;
  return b;
}
Bytes or8(Bytes b, std::size_t off, uint8_t v) {
  b.at(off) |= v;
  return b;
}
Bytes xor8(Bytes b, std::size_t off, uint8_t v) {
  b.at(off) ^= v;
  return b;
}
Bytes set16(Bytes b, std::size_t off, uint16_t v) {
  b.at(off) = static_cast<uint8_t>(v);
  b.at(off + 1) = static_cast<uint8_t>(v >> 8);
  return b;
}
Bytes set32(Bytes b, std::size_t off, uint32_t v) {
  for (std::size_t i = 0; i < 4; ++i) b.at(off + i) = static_cast<uint8_t>(v >> (8 * i));
  return b;
}
// Recompute the header digest after editing the PSH, so the edit (not the digest) is what fails.
Bytes rehash(Bytes b) {
  const std::size_t hlen = b.at(2);
  if (b.size() >= hlen + 4) store_digest(b.data() + hlen, crc32c(b.data(), hlen));
  return b;
}

struct RejectCase {
  std::string name;
  Receiver receiver;
  TcpSession session;
  Bytes pdu;
  uint32_t offset;
  Fes fes;
  std::size_t len = 0;  // bytes handed to the decoder; 0 = all of pdu
};

// gtest prints the case name, not 96 raw bytes, when a row fails.
void PrintTo(const RejectCase& c, std::ostream* os) { *os << c.name; }

constexpr auto C = Receiver::controller;
constexpr auto H = Receiver::host;
constexpr auto F1 = Fes::invalid_header_field;

std::vector<RejectCase> reject_cases() {
  return {
      // ---- PDU type and direction: offset 0 ----
      {"UnknownType08", C, kNone, set8(cmd(kNone, 0), 0, 0x08), 0, F1},
      {"UnknownType0A", H, kNone, set8(resp(kNone), 0, 0x0A), 0, F1},
      {"UnknownTypeFF", C, kNone, set8(cmd(kNone, 0), 0, 0xFF), 0, F1},
      {"R2tToController", C, kNone, r2t(kNone), 0, F1},
      {"CapsuleCmdToHost", H, kNone, cmd(kNone, 0), 0, F1},
      {"H2CDataToHost", H, kNone, h2c(kNone), 0, F1},
      {"C2HDataToController", C, kNone, c2h(kNone), 0, F1},
      {"CapsuleRespToController", C, kNone, resp(kNone), 0, F1},
      {"IcReqToHost", H, kPre, icreq(), 0, F1},
      {"IcRespToController", C, kPre, icresp(), 0, F1},
      {"H2CTermReqToHost", H, kNone, term(PduType::h2c_term_req), 0, F1},
      {"C2HTermReqToController", C, kNone, term(PduType::c2h_term_req), 0, F1},
      // ---- connection state: FES 2, offset 0 ----
      {"CapsuleCmdBeforeIc", C, kPre, cmd(kNone, 0), 0, Fes::pdu_sequence_error},
      {"C2HDataBeforeIc", H, kPre, c2h(kNone), 0, Fes::pdu_sequence_error},
      {"IcReqAfterIc", C, kNone, icreq(), 0, Fes::pdu_sequence_error},
      {"IcRespAfterIc", H, kNone, icresp(), 0, Fes::pdu_sequence_error},
      // ---- hlen: offset 2 ----
      {"IcReqHlen127", C, kPre, set8(icreq(), 2, 127), 2, F1},
      {"IcRespHlen0", H, kPre, set8(icresp(), 2, 0), 2, F1},
      {"CapsuleCmdHlen24", C, kNone, set8(cmd(kNone, 0), 2, 24), 2, F1},
      {"CapsuleRespHlen72", H, kNone, set8(resp(kNone), 2, 72), 2, F1},
      {"H2CDataHlen28", C, kNone, set8(h2c(kNone), 2, 28), 2, F1},
      {"C2HDataHlen20", H, kNone, set8(c2h(kNone), 2, 20), 2, F1},
      {"R2tHlen23", H, kNone, set8(r2t(kNone), 2, 23), 2, F1},
      {"TermReqHlen8", C, kNone, set8(term(PduType::h2c_term_req), 2, 8), 2, F1},
      // ---- flags: offset 1 ----
      {"CapsuleCmdHdgstfNotNegotiated", C, kNone, or8(cmd(kNone, 0), 1, kFlagHdgst), 1, F1},
      {"CapsuleRespHdgstfMissing", H, kHd, resp(kNone), 1, F1},
      {"H2CDataDdgstfNotNegotiated", C, kNone, h2c(kDd), 1, F1},
      {"C2HDataDdgstfMissing", H, kDd, c2h(kNone), 1, F1},
      {"CapsuleCmdDdgstfMissingWithData", C, kDd, cmd(kNone, 512), 1, F1},
      {"CapsuleCmdDdgstfWithoutData", C, kBoth, or8(cmd(kBoth, 0), 1, kFlagDdgst), 1, F1},
      {"CapsuleRespDdgstf", H, kBoth, or8(resp(kBoth), 1, kFlagDdgst), 1, F1},
      {"R2tDdgstf", H, kDd, or8(r2t(kDd), 1, kFlagDdgst), 1, F1},
      {"CapsuleCmdLastPdu", C, kNone, or8(cmd(kNone, 0), 1, kFlagLastPdu), 1, F1},
      {"C2HDataSuccessWithoutLast", H, kNone, or8(c2h(kNone, false), 1, kFlagSuccess), 1, F1},
      {"H2CDataSuccess", C, kNone, or8(h2c(kNone), 1, kFlagSuccess), 1, F1},
      {"C2HDataReservedFlag", H, kNone, or8(c2h(kNone), 1, 0x10), 1, F1},
      {"IcReqAnyFlag", C, kPre, or8(icreq(), 1, kFlagHdgst), 1, F1},
      {"TermReqHdgstfEvenWhenNegotiated", H, kHd, or8(term(PduType::c2h_term_req), 1, kFlagHdgst), 1, F1},
      // ---- pdo: offset 3 ----
      {"IcReqPdo4", C, kPre, set8(icreq(), 3, 4), 3, F1},
      {"CapsuleRespPdo24", H, kNone, set8(resp(kNone), 3, 24), 3, F1},
      {"R2tPdo1", H, kNone, set8(r2t(kNone), 3, 1), 3, F1},
      {"CapsuleCmdPdo71", C, kNone, set8(cmd(kNone, 16), 3, 71), 3, F1},
      {"CapsuleCmdPdoIgnoresHeaderDigest", C, kHd, or8(cmd(kNone, 16), 1, kFlagHdgst), 3, F1},  // 72, not 76
      {"H2CDataPdo0", C, kNone, set8(h2c(kNone), 3, 0), 3, F1},
      {"C2HDataPdoMisalignedForHpda", H, kHpda1, set8(c2h(kHpda1), 3, 28), 3, F1},  // 8-byte PDA: 24 ok, 28 not
      {"C2HDataPdoOverPadded", H, kNone, set8(c2h(kNone), 3, 128), 3, F1},
      {"TermReqPdo5", C, kNone, set8(term(PduType::h2c_term_req), 3, 5), 3, F1},
      // ---- plen: offset 4 ----
      {"IcReqPlen129", C, kPre, set32(icreq(), 4, 129), 4, F1},
      {"IcRespPlen0", H, kPre, set32(icresp(), 4, 0), 4, F1},
      {"CapsuleRespPlenMissesDigest", H, kHd, set32(resp(kHd), 4, 24), 4, F1},
      {"R2tPlen25", H, kNone, set32(r2t(kNone), 4, 25), 4, F1},
      {"CapsuleCmdDataWithoutPdo", C, kNone, set32(cmd(kNone, 0), 4, 100), 4, F1},
      {"CapsuleCmdPdoWithoutData", C, kNone, set32(cmd(kNone, 16), 4, 72), 4, F1},
      {"CapsuleCmdPlenBelowHeader", C, kNone, set32(cmd(kNone, 0), 4, 8), 4, F1},
      {"H2CDataPlenEqualsPdo", C, kNone, set32(h2c(kNone), 4, 24), 4, F1},
      {"C2HDataOnlyDigestNoData", H, kDd, set32(c2h(kDd), 4, 28), 4, F1},
      {"C2HDataPlen2", H, kNone, set32(c2h(kNone), 4, 2), 4, F1},
      {"TermReqPlen153", C, kNone, set32(term(PduType::h2c_term_req), 4, 153), 4, F1},
      {"TermReqPlen23", H, kNone, set32(term(PduType::c2h_term_req), 4, 23), 4, F1},
      // ---- header digest: FES 3 at the digest's offset ----
      {"CapsuleCmdBadHeaderDigest", C, kHd, xor8(cmd(kHd, 0), 72, 0x5A), 72, Fes::header_digest_error},
      {"R2tHeaderEditedAfterDigest", H, kBoth, xor8(r2t(kBoth), 8, 0x77), 24, Fes::header_digest_error},
      // ---- PDU specific header ----
      {"IcReqPfv1", C, kPre, set16(icreq(), 8, 1), 8, Fes::unsupported_parameter},
      {"IcReqHpda32", C, kPre, set8(icreq(), 10, 32), 10, F1},
      {"IcRespPfv1", H, kPre, set16(icresp(), 8, 1), 8, Fes::unsupported_parameter},
      {"IcRespCpda32", H, kPre, set8(icresp(), 10, 32), 10, F1},
      {"IcRespMaxH2CData4092", H, kPre, set32(icresp(), 12, 4092), 12, F1},
      {"IcRespMaxH2CDataNotDwords", H, kPre, set32(icresp(), 12, 4098), 12, F1},
      {"IcRespMaxH2CData0", H, kPre, set32(icresp(), 12, 0), 12, F1},
      {"H2CDataDatalDisagreesWithPlen", C, kNone, set32(h2c(kNone), 16, 4095), 16, F1},
      {"H2CDataDatalDisagreesUnderHeaderDigest", C, kHd, rehash(set32(h2c(kHd), 16, 4100)), 16, F1},
      {"H2CDataAboveMaxH2CData", C, kMax4k, h2c(kMax4k, 8192), 16, Fes::data_limit_exceeded},
      {"H2CDataPlenNearFourGiB", C, kNone, set32(h2c(kNone), 4, 0xFFFFFFFFu), 16, F1},
      {"H2CDataFourGiBAboveMax", C, kNone, set32(set32(h2c(kNone), 4, 0xFFFFFFFFu), 16, 0xFFFFFFFFu - 24), 16,
       Fes::data_limit_exceeded},
      {"C2HDataDatalDisagreesWithPlen", H, kNone, set32(c2h(kNone), 16, 1), 16, F1},
      {"R2tLengthZero", H, kNone, set32(r2t(kNone), 16, 0), 16, F1},
      // ---- truncated input (caller error, still no out-of-bounds read) ----
      {"ShorterThanCommonHeader", C, kNone, cmd(kNone, 0), 7, F1, 7},
      {"HeaderDigestNotYetRead", C, kHd, cmd(kHd, 0), 72, F1, 72},
  };
}

class TcpValidateReject : public ::testing::TestWithParam<RejectCase> {};

TEST_P(TcpValidateReject, ReportsOffsetAndFes) {
  const RejectCase& c = GetParam();
  const std::size_t len = c.len != 0 ? c.len : c.pdu.size();
  auto r = validate_pdu_header(c.pdu.data(), len, c.session, c.receiver);
  ASSERT_FALSE(r) << "accepted a malformed " << pdu_type_name(c.pdu.at(0));
  EXPECT_EQ(r.error().offset, c.offset) << r.error().what;
  EXPECT_EQ(r.error().fes, c.fes) << r.error().what;
  EXPECT_NE(r.error().what, nullptr);
  // Every rejection is reachable from the CH alone when it concerns the CH (the 8-byte first stage).
  if (c.offset < kCommonHeaderLen && c.len == 0) {
    auto first = validate_common_header(c.pdu.data(), kCommonHeaderLen, c.session, c.receiver);
    ASSERT_FALSE(first);
    EXPECT_EQ(first.error().offset, c.offset);
    EXPECT_EQ(first.error().fes, c.fes);
  }
}

INSTANTIATE_TEST_SUITE_P(Malformed, TcpValidateReject, ::testing::ValuesIn(reject_cases()),
                         [](const auto& p) { return p.param.name; });

// Every unmodified base PDU in the table above is accepted: the rejections come from the edits alone.
TEST(TcpValidate, UneditedBasePdusAreAccepted) {
  struct Ok {
    const char* name;
    Receiver receiver;
    TcpSession session;
    Bytes pdu;
  };
  const Ok oks[] = {
      {"cmd", C, kNone, cmd(kNone, 0)},        {"cmd icd", C, kNone, cmd(kNone, 16)},
      {"cmd hd", C, kHd, cmd(kHd, 0)},         {"cmd both icd", C, kBoth, cmd(kBoth, 512)},
      {"resp", H, kNone, resp(kNone)},         {"resp hd", H, kHd, resp(kHd)},
      {"r2t", H, kNone, r2t(kNone)},           {"r2t both", H, kBoth, r2t(kBoth)},
      {"h2c", C, kNone, h2c(kNone)},           {"h2c dd", C, kDd, h2c(kDd)},
      {"h2c max", C, kMax4k, h2c(kMax4k)},     {"c2h", H, kNone, c2h(kNone)},
      {"c2h hpda1", H, kHpda1, c2h(kHpda1)},   {"c2h success", H, kNone, c2h(kNone, true, true)},
      {"icreq", C, kPre, icreq()},             {"icresp", H, kPre, icresp()},
      {"c2hterm pre-IC", H, kPre, term(PduType::c2h_term_req)},
      {"h2cterm", C, kBoth, term(PduType::h2c_term_req)},
  };
  for (const auto& ok : oks) {
    auto r = validate_pdu_header(ok.pdu.data(), ok.pdu.size(), ok.session, ok.receiver);
    EXPECT_TRUE(r) << ok.name << ": " << (r ? "" : r.error().what) << " at " << (r ? 0 : r.error().offset);
  }
}

TEST(TcpValidate, TermReqPdoMayBeHlen) {
  Bytes t = set8(set32(term(PduType::c2h_term_req), 4, 32), 3, 24);
  t.resize(32, 0);
  auto r = validate_pdu_header(t.data(), t.size(), kNone, H);
  ASSERT_TRUE(r) << r.error().what;
  EXPECT_EQ(r->data_offset, 24u);
  EXPECT_EQ(r->data_len, 8u);
}

TEST(TcpValidate, FirstStageTellsHowMuchHeaderToRead) {
  const Bytes w = cmd(kBoth, 4096);
  auto ch = validate_common_header(w.data(), kCommonHeaderLen, kBoth, C);
  ASSERT_TRUE(ch) << ch.error().what;
  EXPECT_EQ(ch->header_len, 76u);  // 72 + HDGST
  EXPECT_EQ(ch->data_offset, 76u);
  EXPECT_EQ(ch->pad_len(), 0u);
  EXPECT_EQ(ch->data_len, 4096u);
  EXPECT_EQ(ch->ddgst_len, 4u);
  EXPECT_EQ(ch->plen, 76u + 4096u + 4u);
}

TEST(TcpValidate, HeaderDigestCheckedBeforePduSpecificFields) {
  // Both the digest and DATAL are wrong: the digest error wins (the PSH is not trusted before its digest).
  Bytes w = set32(h2c(kHd), 16, 1);
  auto r = validate_pdu_header(w.data(), w.size(), kHd, C);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().fes, Fes::header_digest_error);
  EXPECT_EQ(r.error().offset, 24u);
  EXPECT_EQ(r.error().fei(), 0u);
}

}  // namespace
}  // namespace rdmablk::protocol::tcp

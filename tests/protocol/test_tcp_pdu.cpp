// NVMe/TCP PDU layouts and builders: golden bytes written by hand from the TCP transport spec's PDU figures,
// builder -> serializer -> decoder round trips, digest placement, IC negotiation.
#include "protocol/tcp_pdu.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "protocol/crc32c.h"

namespace rdmablk::protocol::tcp {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename T>
Bytes bytes_of(const T& v) {
  Bytes out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

Bytes zeros(std::size_t n) { return Bytes(n, 0); }

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes le32_bytes(uint32_t v) {
  return {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16),
          static_cast<uint8_t>(v >> 24)};
}

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

SqeBytes sample_sqe() {
  SqeBytes sqe{};
  std::iota(sqe.begin(), sqe.end(), uint8_t{0x80});
  return sqe;
}

CqeBytes sample_cqe() {
  CqeBytes cqe{};
  std::iota(cqe.begin(), cqe.end(), uint8_t{0xA0});
  return cqe;
}

// ---- golden layouts ---------------------------------------------------------------------------------

TEST(TcpPduGolden, IcReqWithBothDigests) {
  const IcReqPdu p = build_icreq({.hpda = 2, .hdgst = true, .ddgst = true, .maxr2t = 3});
  const Bytes expected = cat({
      {0x00, 0x00, 0x80, 0x00, 0x80, 0x00, 0x00, 0x00},  // ICReq, no flags, hlen 128, pdo 0, plen 128
      {0x00, 0x00},                                      // PFV 1.0
      {0x02},                                            // HPDA 2 (12-byte alignment)
      {0x03},                                            // DGST: HDGST_ENABLE | DDGST_ENABLE
      {0x03, 0x00, 0x00, 0x00},                          // MAXR2T 3 (4 R2Ts, 0's based)
      zeros(112),
  });
  EXPECT_EQ(bytes_of(p), expected);
}

TEST(TcpPduGolden, IcResp) {
  TcpSession s = session(true, false, 0, 1, 0x400000);
  const IcRespPdu p = build_icresp(s);
  const Bytes expected = cat({
      {0x01, 0x00, 0x80, 0x00, 0x80, 0x00, 0x00, 0x00},  // ICResp, hlen 128, pdo 0, plen 128
      {0x00, 0x00},                                      // PFV
      {0x01},                                            // CPDA 1
      {0x01},                                            // DGST: header only
      {0x00, 0x00, 0x40, 0x00},                          // MAXH2CDATA 4 MiB
      zeros(112),
  });
  EXPECT_EQ(bytes_of(p), expected);
}

TEST(TcpPduGolden, CapsuleCmdWithInCapsuleDataAndBothDigests) {
  const TcpSession s = session(true, true);
  const CapsuleCmdPdu p = build_capsule_cmd(sample_sqe(), 4096, s);
  Bytes sqe(64);
  std::iota(sqe.begin(), sqe.end(), uint8_t{0x80});
  // hlen 72, HDGST at 72..75, data at pdo 76, DDGST after it: plen 76 + 4096 + 4 = 4176 = 0x1050.
  const Bytes header = cat({{0x04, 0x03, 0x48, 0x4C, 0x50, 0x10, 0x00, 0x00}, sqe});
  EXPECT_EQ(bytes_of(p), header);

  Bytes wire(128, 0xEE);
  ASSERT_EQ(write_pdu_header(p, wire), 76u);  // data goes at 76
  EXPECT_EQ(Bytes(wire.begin(), wire.begin() + 72), header);
  EXPECT_EQ(Bytes(wire.begin() + 72, wire.begin() + 76), le32_bytes(crc32c(header.data(), header.size())));
  EXPECT_EQ(wire[76], 0xEE);  // nothing written past the header
}

TEST(TcpPduGolden, CapsuleCmdInCapsuleDataNoDigests) {
  const CapsuleCmdPdu p = build_capsule_cmd(sample_sqe(), 512, session(false, false));
  // pdo 72 (no header digest), plen 72 + 512 = 584 = 0x248.
  EXPECT_EQ(bytes_of(p.ch), (Bytes{0x04, 0x00, 0x48, 0x48, 0x48, 0x02, 0x00, 0x00}));
}

TEST(TcpPduGolden, CapsuleCmdWithoutDataHasPdoZeroAndNoDdgstf) {
  const CapsuleCmdPdu p = build_capsule_cmd(sample_sqe(), 0, session(true, true));
  // HDGSTF only (no data, no data digest), pdo 0, plen 72 + 4 = 76.
  EXPECT_EQ(bytes_of(p.ch), (Bytes{0x04, 0x01, 0x48, 0x00, 0x4C, 0x00, 0x00, 0x00}));
}

TEST(TcpPduGolden, CapsuleRespWithHeaderDigest) {
  const CapsuleRespPdu p = build_capsule_resp(sample_cqe(), session(true, true));
  Bytes cqe(16);
  std::iota(cqe.begin(), cqe.end(), uint8_t{0xA0});
  EXPECT_EQ(bytes_of(p), cat({{0x05, 0x01, 0x18, 0x00, 0x1C, 0x00, 0x00, 0x00}, cqe}));  // plen 24 + 4
}

TEST(TcpPduGolden, R2t) {
  const R2tPdu p = build_r2t(0x1234, 0x0007, 0x1000, 0x2000, session(false, true));
  const Bytes expected = {
      0x09, 0x00, 0x18, 0x00, 0x18, 0x00, 0x00, 0x00,  // R2T, no DDGSTF even with data digests: no data
      0x34, 0x12,                                      // CCCID
      0x07, 0x00,                                      // TTAG
      0x00, 0x10, 0x00, 0x00,                          // R2TO 4096
      0x00, 0x20, 0x00, 0x00,                          // R2TL 8192
      0x00, 0x00, 0x00, 0x00,                          // reserved
  };
  EXPECT_EQ(bytes_of(p), expected);
}

TEST(TcpPduGolden, H2CDataLastWithDataDigest) {
  const H2CDataHdr p = build_h2c_data(0x0042, 0x0005, 0x2000, 0x1000, true, session(false, true));
  const Bytes expected = {
      0x06, 0x06, 0x18, 0x18, 0x1C, 0x10, 0x00, 0x00,  // DDGSTF|LAST_PDU, pdo 24, plen 24 + 4096 + 4
      0x42, 0x00,                                      // CCCID
      0x05, 0x00,                                      // TTAG
      0x00, 0x20, 0x00, 0x00,                          // DATAO 8192
      0x00, 0x10, 0x00, 0x00,                          // DATAL 4096
      0x00, 0x00, 0x00, 0x00,
  };
  EXPECT_EQ(bytes_of(p), expected);
}

TEST(TcpPduGolden, C2HDataLastAndSuccess) {
  const C2HDataHdr p = build_c2h_data(0xBEEF, 0, 512, true, true, session(false, false));
  const Bytes expected = {
      0x07, 0x0C, 0x18, 0x18, 0x18, 0x02, 0x00, 0x00,  // LAST_PDU|SUCCESS, pdo 24, plen 536
      0xEF, 0xBE,                                      // CCCID
      0x00, 0x00,                                      // reserved
      0x00, 0x00, 0x00, 0x00,                          // DATAO 0
      0x00, 0x02, 0x00, 0x00,                          // DATAL 512
      0x00, 0x00, 0x00, 0x00,
  };
  EXPECT_EQ(bytes_of(p), expected);
}

TEST(TcpPduGolden, C2HDataSuccessNeverWithoutLast) {
  const C2HDataHdr p = build_c2h_data(1, 0, 512, false, true, session(false, false));
  EXPECT_EQ(p.ch.flags, 0);  // SUCCESS dropped: it is only legal with LAST_PDU
}

TEST(TcpPduGolden, C2HDataPaddedToHostPda) {
  // HPDA 7 = 32-byte alignment; hlen 24 + HDGST 4 = 28 -> pdo 32, 4 bytes of zero padding.
  const TcpSession s = session(true, false, 7, 0);
  const C2HDataHdr p = build_c2h_data(0x0001, 0x100, 100, true, false, s);
  EXPECT_EQ(bytes_of(p.ch), (Bytes{0x07, 0x05, 0x18, 0x20, 0x84, 0x00, 0x00, 0x00}));  // plen 32 + 100
  Bytes wire(64, 0xEE);
  ASSERT_EQ(write_pdu_header(p, wire), 32u);
  const Bytes hdr = bytes_of(p);
  EXPECT_EQ(Bytes(wire.begin(), wire.begin() + 24), hdr);
  EXPECT_EQ(Bytes(wire.begin() + 24, wire.begin() + 28), le32_bytes(crc32c(hdr.data(), hdr.size())));
  EXPECT_EQ(Bytes(wire.begin() + 28, wire.begin() + 32), zeros(4));  // PAD
}

TEST(TcpPduGolden, TermReqFeiAtByte10) {
  const Bytes offending = {0x04, 0x00, 0x47, 0x00, 0x48, 0x00, 0x00, 0x00};  // CapsuleCmd with hlen 71
  const PduError err{2, "hlen wrong", Fes::invalid_header_field};
  Bytes wire(200, 0xEE);
  ASSERT_EQ(write_term_req(wire, PduType::c2h_term_req, err, offending), 32u);
  const Bytes expected = cat({
      {0x03, 0x00, 0x18, 0x00, 0x20, 0x00, 0x00, 0x00},  // C2HTermReq, hlen 24, pdo 0, plen 24 + 8
      {0x01, 0x00},                                      // FES 1 invalid header field
      {0x02, 0x00, 0x00, 0x00},                          // FEI: byte 2 (hlen), at offset 10, unaligned
      zeros(10),
      offending,
  });
  EXPECT_EQ(Bytes(wire.begin(), wire.begin() + 32), expected);
  EXPECT_EQ(wire[32], 0xEE);
}

TEST(TcpPduGolden, TermReqCopiesAtMost128HeaderBytes) {
  Bytes offending(200);
  std::iota(offending.begin(), offending.end(), uint8_t{0});
  const PduError err{72, "header digest", Fes::header_digest_error};
  Bytes wire(kTermReqMaxPlen);
  ASSERT_EQ(write_term_req(wire, PduType::h2c_term_req, err, offending), 152u);
  const auto hdr = load<TermReqHdr>(wire.data());
  EXPECT_EQ(hdr.ch.pdu_type, 0x02);
  EXPECT_EQ(hdr.ch.plen.get(), 152u);
  EXPECT_EQ(hdr.fes.get(), 3u);
  EXPECT_EQ(hdr.fei.get(), 0u);  // FEI reserved for a digest error
  EXPECT_EQ(Bytes(wire.begin() + 24, wire.end()), Bytes(offending.begin(), offending.begin() + 128));
  Bytes small(151);
  EXPECT_EQ(write_term_req(small, PduType::h2c_term_req, err, offending), 0u);  // does not fit: nothing
}

TEST(TcpPduGolden, FeiCarriesOffsetOnlyForHeaderFieldAndUnsupportedParameter) {
  EXPECT_EQ((PduError{16, "", Fes::invalid_header_field}.fei()), 16u);
  EXPECT_EQ((PduError{8, "", Fes::unsupported_parameter}.fei()), 8u);
  EXPECT_EQ((PduError{0, "", Fes::pdu_sequence_error}.fei()), 0u);
  EXPECT_EQ((PduError{72, "", Fes::header_digest_error}.fei()), 0u);
  EXPECT_EQ((PduError{12, "", Fes::data_out_of_range}.fei()), 0u);
  EXPECT_EQ((PduError{16, "", Fes::data_limit_exceeded}.fei()), 0u);
  const DecodeError de = PduError{16, "x", Fes::data_limit_exceeded}.decode_error();
  EXPECT_EQ(de.offset, 16u);
  EXPECT_STREQ(de.what, "x");
}

// ---- round trips --------------------------------------------------------------------------------------

struct DigestCase {
  bool hdgst;
  bool ddgst;
  uint8_t pda;
};

class TcpPduRoundTrip : public ::testing::TestWithParam<DigestCase> {
 protected:
  TcpSession s() const {
    const auto& c = GetParam();
    return session(c.hdgst, c.ddgst, c.pda, c.pda, 65536);
  }
  // Serialize header + data + data digest as a sender would.
  template <typename Pdu>
  Bytes wire(const Pdu& pdu, const Bytes& data) const {
    Bytes out(512 + data.size());
    const std::size_t n = write_pdu_header(pdu, out);
    EXPECT_NE(n, 0u);
    out.resize(n);
    out.insert(out.end(), data.begin(), data.end());
    if (!data.empty() && (pdu.ch.flags & kFlagDdgst) != 0) {
      const std::span<const uint8_t> parts[] = {data};
      const Bytes d = le32_bytes(data_digest(parts));
      out.insert(out.end(), d.begin(), d.end());
    }
    EXPECT_EQ(out.size(), pdu.ch.plen.get());
    return out;
  }
};

TEST_P(TcpPduRoundTrip, EveryBuilderPassesTheDecoder) {
  const TcpSession sess = s();
  Bytes data(300);
  std::iota(data.begin(), data.end(), uint8_t{1});

  {  // CapsuleCmd with in-capsule data, to the controller
    const Bytes w = wire(build_capsule_cmd(sample_sqe(), 300, sess), data);
    auto info = validate_pdu_header(w.data(), w.size(), sess, Receiver::controller);
    ASSERT_TRUE(info) << info.error().what;
    EXPECT_EQ(info->type, PduType::capsule_cmd);
    EXPECT_EQ(info->data_len, 300u);
    EXPECT_EQ(info->data_offset, data_pdo(72, sess, Receiver::controller));
    EXPECT_EQ(Bytes(w.begin() + info->data_offset, w.begin() + info->data_offset + 300), data);
    EXPECT_EQ(load<CapsuleCmdPdu>(w.data()).sqe, sample_sqe());
    if (sess.ddgst) {
      const std::span<const uint8_t> parts[] = {data};
      EXPECT_TRUE(data_digest_ok(parts, w.data() + w.size() - 4));
    }
  }
  {  // CapsuleCmd without data
    const Bytes w = wire(build_capsule_cmd(sample_sqe(), 0, sess), {});
    auto info = validate_pdu_header(w.data(), w.size(), sess, Receiver::controller);
    ASSERT_TRUE(info) << info.error().what;
    EXPECT_FALSE(info->has_data());
    EXPECT_EQ(info->plen, info->header_len);
  }
  {  // CapsuleResp
    const Bytes w = wire(build_capsule_resp(sample_cqe(), sess), {});
    auto info = validate_pdu_header(w.data(), w.size(), sess, Receiver::host);
    ASSERT_TRUE(info) << info.error().what;
    EXPECT_EQ(load<CapsuleRespPdu>(w.data()).cqe, sample_cqe());
  }
  {  // R2T
    const Bytes w = wire(build_r2t(7, 9, 4096, 300, sess), {});
    auto info = validate_pdu_header(w.data(), w.size(), sess, Receiver::host);
    ASSERT_TRUE(info) << info.error().what;
    const auto r2t = load<R2tPdu>(w.data());
    EXPECT_EQ(r2t.cccid.get(), 7u);
    EXPECT_EQ(r2t.ttag.get(), 9u);
    EXPECT_EQ(r2t.r2to.get(), 4096u);
    EXPECT_EQ(r2t.r2tl.get(), 300u);
  }
  {  // H2CData
    const Bytes w = wire(build_h2c_data(7, 9, 4096, 300, true, sess), data);
    auto info = validate_pdu_header(w.data(), w.size(), sess, Receiver::controller);
    ASSERT_TRUE(info) << info.error().what;
    EXPECT_EQ(info->data_len, 300u);
    EXPECT_EQ(info->pad_len(), info->data_offset - info->header_len);
    EXPECT_EQ(info->flags & kFlagLastPdu, kFlagLastPdu);
  }
  {  // C2HData
    const Bytes w = wire(build_c2h_data(7, 0, 300, true, true, sess), data);
    auto info = validate_pdu_header(w.data(), w.size(), sess, Receiver::host);
    ASSERT_TRUE(info) << info.error().what;
    EXPECT_EQ(info->data_len, 300u);
    EXPECT_EQ(info->ddgst_len, sess.ddgst ? 4 : 0);
    EXPECT_EQ(info->hdgst_len, sess.hdgst ? 4 : 0);
    EXPECT_EQ(info->data_offset % sess.data_alignment(Receiver::host), 0u);
  }
  {  // TermReq both ways (no digests, even when negotiated)
    const Bytes bad = {0x04, 0x00, 0x47, 0x00, 0x48, 0x00, 0x00, 0x00};
    Bytes w(64);
    w.resize(write_term_req(w, PduType::c2h_term_req, PduError{2, "", Fes::invalid_header_field}, bad));
    auto info = validate_pdu_header(w.data(), w.size(), sess, Receiver::host);
    ASSERT_TRUE(info) << info.error().what;
    EXPECT_EQ(info->data_offset, 24u);
    EXPECT_EQ(info->data_len, 8u);
    w[0] = 0x02;
    EXPECT_TRUE(validate_pdu_header(w.data(), w.size(), sess, Receiver::controller));
  }
}

INSTANTIATE_TEST_SUITE_P(Digests, TcpPduRoundTrip,
                         ::testing::Values(DigestCase{false, false, 0}, DigestCase{true, false, 0},
                                           DigestCase{false, true, 0}, DigestCase{true, true, 0},
                                           DigestCase{true, true, 31}, DigestCase{false, false, 3}),
                         [](const auto& p) {
                           return std::string(p.param.hdgst ? "H" : "noH") + (p.param.ddgst ? "D" : "noD") +
                                  "pda" + std::to_string(p.param.pda);
                         });

TEST(TcpPdu, PdoFollowsReceiverPda) {
  TcpSession s = session(true, false, /*hpda*/ 31, /*cpda*/ 1);
  EXPECT_EQ(data_pdo(kDataHlen, s, Receiver::host), 128u);        // 28 -> 128-byte alignment
  EXPECT_EQ(data_pdo(kCapsuleCmdHlen, s, Receiver::controller), 80u);  // 76 -> 8-byte alignment
  s.hdgst = false;
  EXPECT_EQ(data_pdo(kCapsuleCmdHlen, s, Receiver::controller), 72u);
  EXPECT_EQ(build_h2c_data(1, 1, 0, 16, false, s).ch.pdo, 24u);  // H2C uses CPDA
  EXPECT_EQ(build_c2h_data(1, 0, 16, false, false, s).ch.pdo, 128u);  // C2H uses HPDA
}

TEST(TcpPdu, WritePduHeaderRefusesSmallBuffer) {
  const auto p = build_capsule_cmd(sample_sqe(), 16, session(true, false, 0, 31));
  ASSERT_EQ(p.ch.pdo, 128u);
  Bytes small(127);
  EXPECT_EQ(write_pdu_header(p, small), 0u);
  Bytes ok(128, 0xEE);
  EXPECT_EQ(write_pdu_header(p, ok), 128u);
  EXPECT_EQ(Bytes(ok.begin() + 76, ok.end()), zeros(52));  // padding zeroed
}

// ---- digests ------------------------------------------------------------------------------------------

TEST(TcpDigest, HeaderDigestSitsAtHlenAndCoversOnlyTheHeader) {
  const TcpSession s = session(true, false);
  const auto p = build_capsule_resp(sample_cqe(), s);
  Bytes w(28);
  ASSERT_EQ(write_pdu_header(p, w), 28u);
  EXPECT_EQ(load_digest(w.data() + 24), crc32c(w.data(), 24));
  EXPECT_TRUE(header_digest_ok(w.data(), 24));
  w[23] ^= 0x01;  // any header bit breaks it
  EXPECT_FALSE(header_digest_ok(w.data(), 24));
  w[23] ^= 0x01;
  w[26] ^= 0x80;  // and so does any digest bit
  EXPECT_FALSE(header_digest_ok(w.data(), 24));
}

TEST(TcpDigest, DigestIsLittleEndianOnTheWire) {
  uint8_t out[4];
  store_digest(out, 0xE3069283u);
  EXPECT_EQ(Bytes(out, out + 4), (Bytes{0x83, 0x92, 0x06, 0xE3}));
  EXPECT_EQ(load_digest(out), 0xE3069283u);
}

TEST(TcpDigest, ScatteredDataDigestEqualsContiguous) {
  Bytes data(10000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
  const uint32_t whole = crc32c(data.data(), data.size());
  const std::span<const uint8_t> all(data);
  const std::span<const uint8_t> parts[] = {all.subspan(0, 1), all.subspan(1, 4095), all.subspan(4096, 0),
                                            all.subspan(4096, 5000), all.subspan(9096)};
  EXPECT_EQ(data_digest(parts), whole);
  iovec iov[3] = {{data.data(), 3}, {data.data() + 3, 6000}, {data.data() + 6003, 3997}};
  EXPECT_EQ(data_digest(std::span<const iovec>(iov)), whole);

  uint8_t received[4];
  store_digest(received, whole);
  EXPECT_TRUE(data_digest_ok(parts, received));
  EXPECT_TRUE(data_digest_ok(std::span<const iovec>(iov), received));
  received[0] ^= 1;
  EXPECT_FALSE(data_digest_ok(parts, received));
}

// ---- connection initialization ------------------------------------------------------------------------

TEST(TcpIc, ControllerEchoesRequestedDigestsAndHostAcceptsIt) {
  const IcReqPdu req = build_icreq({.hpda = 0, .hdgst = true, .ddgst = false, .maxr2t = 0});
  const TcpSession ctrl = controller_session(req, 0, 0x400000);
  EXPECT_TRUE(ctrl.established);
  EXPECT_TRUE(ctrl.hdgst);
  EXPECT_FALSE(ctrl.ddgst);
  const IcRespPdu resp = build_icresp(ctrl);

  const Bytes wire = bytes_of(resp);
  ASSERT_TRUE(validate_pdu_header(wire.data(), wire.size(), TcpSession{}, Receiver::host));
  auto host = host_session(req, resp);
  ASSERT_TRUE(host) << host.error().what;
  EXPECT_TRUE(host->established);
  EXPECT_EQ(host->hdgst, ctrl.hdgst);
  EXPECT_EQ(host->ddgst, ctrl.ddgst);
  EXPECT_EQ(host->maxh2cdata, 0x400000u);
  EXPECT_EQ(host->cpda, 0);
  // Both ends now agree on every PDU: a capsule built by the host passes the controller.
  Bytes w(80);
  w.resize(write_pdu_header(build_capsule_cmd(sample_sqe(), 0, *host), w));
  EXPECT_TRUE(validate_pdu_header(w.data(), w.size(), ctrl, Receiver::controller));
}

TEST(TcpIc, HostRejectsDigestAnswerThatDiffersFromRequest) {
  const IcReqPdu req = build_icreq({.hdgst = true, .ddgst = true});
  for (uint8_t dgst : {uint8_t{0}, uint8_t{1}, uint8_t{2}}) {
    IcRespPdu resp = build_icresp(session(true, true));
    resp.dgst = dgst;
    auto r = host_session(req, resp);
    ASSERT_FALSE(r) << int{dgst};
    EXPECT_EQ(r.error().offset, 11u);
    EXPECT_EQ(r.error().fes, Fes::invalid_header_field);
  }
}

TEST(TcpIc, IcReqAcceptedBeforeEstablishmentOnly) {
  const Bytes w = bytes_of(build_icreq({.hpda = 31, .hdgst = true, .ddgst = true, .maxr2t = 0xFFFFFFFF}));
  auto info = validate_pdu_header(w.data(), w.size(), TcpSession{}, Receiver::controller);
  ASSERT_TRUE(info) << info.error().what;
  EXPECT_EQ(info->type, PduType::ic_req);
  EXPECT_EQ(info->data_len, 0u);
  auto again = validate_pdu_header(w.data(), w.size(), session(false, false), Receiver::controller);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().fes, Fes::pdu_sequence_error);
  EXPECT_EQ(again.error().offset, 0u);
}

// ---- stateful range checks ----------------------------------------------------------------------------

TEST(TcpDataRange, InOrderAndInsideTheTransfer) {
  struct Case {
    uint32_t offset, length, expected, limit;
    bool ok;
    uint32_t err_offset;
    Fes fes;
  };
  const Case cases[] = {
      {0, 4096, 0, 8192, true, 0, {}},
      {4096, 4096, 4096, 8192, true, 0, {}},                        // ends exactly at the limit
      {4096, 4097, 4096, 8192, false, 16, Fes::data_out_of_range},  // one byte past
      {0, 4096, 4096, 8192, false, 12, Fes::data_out_of_range},     // out of order
      {0xFFFFF000, 0x2000, 0xFFFFF000, 0xFFFFFFFF, false, 16, Fes::data_out_of_range},  // would wrap in 32 bits
      {0, 0, 0, 8192, false, 16, Fes::invalid_header_field},        // empty
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.offset << "+" << c.length << " expect " << c.expected << " limit " << c.limit);
    auto r = check_data_range(c.offset, c.length, c.expected, c.limit);
    ASSERT_EQ(r.has_value(), c.ok);
    if (!c.ok) {
      EXPECT_EQ(r.error().offset, c.err_offset);
      EXPECT_EQ(r.error().fes, c.fes);
    }
  }
}

TEST(TcpPdu, NamesForLogs) {
  EXPECT_STREQ(pdu_type_name(0x04), "CapsuleCmd");
  EXPECT_STREQ(pdu_type_name(0x09), "R2T");
  EXPECT_STREQ(pdu_type_name(0x08), "unknown");
  EXPECT_STREQ(fes_name(Fes::data_limit_exceeded), "Data Transfer Limit Exceeded");
}

}  // namespace
}  // namespace rdmablk::protocol::tcp

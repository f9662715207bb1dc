// NVMe/TCP PDU header validation (protocol/tcp_pdu.*): validate_common_header / validate_pdu_header on
// any bytes, for either receiver and any negotiated session.
//
// Input: 5 bytes of session, then the PDU bytes.
//   [0] bit 0 receiver is the host (else the controller), bit 1 session established, bit 2 header digests,
//       bit 3 data digests; [1] CPDA, [2] HPDA (low 5 bits); [3..4] MAXH2CDATA in 4 KiB units (0: none).
// Invariants:
//   - an accepted header describes a PDU that adds up: header_len = hlen + HDGST, data after the header
//     and inside plen, plen = data end + DDGST (TermReq: no digests, data right after hlen);
//   - stage 2 accepts only what stage 1 accepted, with the same description, and only with a good digest;
//   - decode -> encode: the builder fed the decoded fields produces the same common header (reserved
//     bytes aside), and write_pdu_header reproduces the header (and its digest) byte for byte;
//   - encode -> decode: PDUs built from field values taken from the input are accepted by the receiver
//     they are meant for, with the lengths they were built with; a TermReq for any rejection is valid.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "protocol/endian.h"
#include "protocol/tcp_pdu.h"

namespace {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

bool same_ch(const pt::CommonHeader& a, const pt::CommonHeader& b) {
  return a.pdu_type == b.pdu_type && a.flags == b.flags && a.hlen == b.hlen && a.pdo == b.pdo &&
         a.plen.get() == b.plen.get();
}

// The receiver's view of a PDU built by us: serialized header (+ zero data) accepted as built.
template <typename Pdu>
void check_built(const Pdu& pdu, const pt::TcpSession& s, pt::Receiver r, uint32_t data_len) {
  std::array<uint8_t, 512> out{};
  const std::size_t n = pt::write_pdu_header(pdu, out);
  FUZZ_CHECK(n != 0);
  auto info = pt::validate_pdu_header(out.data(), n, s, r);
  FUZZ_CHECK(info.has_value());
  FUZZ_CHECK(info->data_len == data_len);
  FUZZ_CHECK(info->plen == (data_len == 0 ? n : info->data_offset + data_len + info->ddgst_len));
  if (data_len != 0) FUZZ_CHECK(info->data_offset == n);
}

void check_accepted(const uint8_t* buf, std::size_t len, const pt::TcpSession& s, const pt::PduHeaderInfo& info) {
  const auto ch = p::load<pt::CommonHeader>(buf);
  const bool term = info.type == pt::PduType::h2c_term_req || info.type == pt::PduType::c2h_term_req;
  FUZZ_CHECK(info.hlen == ch.hlen && info.pdo == ch.pdo && info.plen == ch.plen.get());
  FUZZ_CHECK(info.hlen >= pt::kCommonHeaderLen);
  FUZZ_CHECK(info.header_len == uint32_t{info.hlen} + info.hdgst_len);
  const bool ic = info.type == pt::PduType::ic_req || info.type == pt::PduType::ic_resp;
  FUZZ_CHECK(info.hdgst_len == (term || ic ? 0 : s.hdgst_len()));
  FUZZ_CHECK(info.plen >= info.header_len);
  if (info.has_data()) {
    FUZZ_CHECK(info.data_offset >= info.header_len);
    FUZZ_CHECK(uint64_t{info.data_offset} + info.data_len + info.ddgst_len == info.plen);
    FUZZ_CHECK(info.pad_len() == info.data_offset - info.header_len);
  } else {
    FUZZ_CHECK(info.ddgst_len == 0);
    FUZZ_CHECK(info.plen == info.header_len);
  }
  if (term) FUZZ_CHECK(info.plen <= pt::kTermReqMaxPlen && info.hdgst_len == 0 && info.ddgst_len == 0);

  if (len < info.header_len) return;
  // write_pdu_header() copies hlen bytes and appends the digest: the same bytes the peer sent.
  std::array<uint8_t, 512> out{};
  const std::size_t n = pt::write_pdu_header(buf, out);
  FUZZ_CHECK(n >= info.header_len);
  FUZZ_CHECK(std::memcmp(out.data(), buf, info.header_len) == 0);

  // The builders, fed the decoded fields, give the same common header.
  const bool last = (info.flags & pt::kFlagLastPdu) != 0;
  switch (info.type) {
    case pt::PduType::ic_req: {
      const auto pdu = p::load<pt::IcReqPdu>(buf);
      const auto built = pt::build_icreq(pt::IcReqParams{pdu.hpda, (pdu.dgst & pt::kDigestHeader) != 0,
                                                         (pdu.dgst & pt::kDigestData) != 0, pdu.maxr2t.get()});
      FUZZ_CHECK(same_ch(built.ch, pdu.ch));
      break;
    }
    case pt::PduType::ic_resp: {
      const auto pdu = p::load<pt::IcRespPdu>(buf);
      pt::TcpSession from{};
      from.hdgst = (pdu.dgst & pt::kDigestHeader) != 0;
      from.ddgst = (pdu.dgst & pt::kDigestData) != 0;
      from.cpda = pdu.cpda;
      from.maxh2cdata = pdu.maxh2cdata.get();
      FUZZ_CHECK(same_ch(pt::build_icresp(from).ch, pdu.ch));
      break;
    }
    case pt::PduType::capsule_cmd: {
      const auto pdu = p::load<pt::CapsuleCmdPdu>(buf);
      FUZZ_CHECK(same_ch(pt::build_capsule_cmd(pdu.sqe, info.data_len, s).ch, pdu.ch));
      break;
    }
    case pt::PduType::capsule_resp: {
      const auto pdu = p::load<pt::CapsuleRespPdu>(buf);
      FUZZ_CHECK(same_ch(pt::build_capsule_resp(pdu.cqe, s).ch, pdu.ch));
      break;
    }
    case pt::PduType::h2c_data: {
      const auto pdu = p::load<pt::H2CDataHdr>(buf);
      const auto built =
          pt::build_h2c_data(pdu.cccid.get(), pdu.ttag.get(), pdu.datao.get(), pdu.datal.get(), last, s);
      FUZZ_CHECK(same_ch(built.ch, pdu.ch));
      FUZZ_CHECK(pdu.datal.get() == info.data_len);
      break;
    }
    case pt::PduType::c2h_data: {
      const auto pdu = p::load<pt::C2HDataHdr>(buf);
      const bool success = (info.flags & pt::kFlagSuccess) != 0;
      const auto built = pt::build_c2h_data(pdu.cccid.get(), pdu.datao.get(), pdu.datal.get(), last, success, s);
      FUZZ_CHECK(same_ch(built.ch, pdu.ch));
      break;
    }
    case pt::PduType::r2t: {
      const auto pdu = p::load<pt::R2tPdu>(buf);
      FUZZ_CHECK(pdu.r2tl.get() != 0);
      FUZZ_CHECK(same_ch(pt::build_r2t(pdu.cccid.get(), pdu.ttag.get(), pdu.r2to.get(), pdu.r2tl.get(), s).ch, pdu.ch));
      break;
    }
    case pt::PduType::h2c_term_req:
    case pt::PduType::c2h_term_req: {
      const auto pdu = p::load<pt::TermReqHdr>(buf);
      auto built = pt::build_term_req(info.type, static_cast<pt::Fes>(pdu.fes.get()),
                                      static_cast<uint32_t>(pdu.fei.get()), info.data_len);
      built.ch.pdo = pdu.ch.pdo;  // a receiver also takes pdo = hlen when data follows; we send 0
      FUZZ_CHECK(same_ch(built.ch, pdu.ch));
      break;
    }
  }
}

// Builds every PDU type from field values in `f` and checks that its receiver takes it.
void check_builders(const uint8_t* f, std::size_t n, const pt::TcpSession& established) {
  std::array<uint8_t, 24> v{};
  if (n != 0) std::memcpy(v.data(), f, std::min(n, v.size()));
  auto u16 = [&](std::size_t i) { return static_cast<uint16_t>(v[i] | v[i + 1] << 8); };
  auto u32 = [&](std::size_t i) { return static_cast<uint32_t>(u16(i) | uint32_t{u16(i + 2)} << 16); };
  const auto& s = established;
  const uint32_t max_data = s.maxh2cdata != 0 ? s.maxh2cdata : 1u << 20;
  const uint32_t datal = 1 + u32(0) % std::min<uint32_t>(max_data, 1u << 20);
  const bool last = (v[4] & 1) != 0;

  pt::SqeBytes sqe{};
  std::copy_n(v.begin(), v.size(), sqe.begin());
  const uint32_t icd = v[5] % 2 == 0 ? 0 : datal;
  check_built(pt::build_capsule_cmd(sqe, icd, s), s, pt::Receiver::controller, icd);
  check_built(pt::build_capsule_resp(pt::CqeBytes{}, s), s, pt::Receiver::host, 0);
  check_built(pt::build_h2c_data(u16(6), u16(8), u32(10), datal, last, s), s, pt::Receiver::controller, datal);
  check_built(pt::build_c2h_data(u16(6), u32(10), datal, last, (v[4] & 2) != 0, s), s, pt::Receiver::host, datal);
  check_built(pt::build_r2t(u16(6), u16(8), u32(10), datal, s), s, pt::Receiver::host, 0);

  // The connection setup: ICReq with the input's parameters, the controller's session and its ICResp.
  pt::IcReqParams params{static_cast<uint8_t>(v[14] % (pt::kMaxPda + 1)), (v[15] & 1) != 0, (v[15] & 2) != 0, u32(16)};
  const auto icreq = pt::build_icreq(params);
  check_built(icreq, pt::TcpSession{}, pt::Receiver::controller, 0);
  const uint32_t maxh2c = (1 + u16(20) % 256) * 4096;
  const auto ctrl = pt::controller_session(icreq, static_cast<uint8_t>(v[22] % (pt::kMaxPda + 1)), maxh2c);
  const auto icresp = pt::build_icresp(ctrl);
  check_built(icresp, pt::TcpSession{}, pt::Receiver::host, 0);
  auto host = pt::host_session(icreq, icresp);
  FUZZ_CHECK(host.has_value());
  FUZZ_CHECK(host->hdgst == ctrl.hdgst && host->ddgst == ctrl.ddgst && host->cpda == ctrl.cpda &&
             host->hpda == ctrl.hpda && host->maxh2cdata == ctrl.maxh2cdata);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 5) return 0;
  pt::TcpSession s{};
  const pt::Receiver r = (data[0] & 1) != 0 ? pt::Receiver::host : pt::Receiver::controller;
  s.established = (data[0] & 2) != 0;
  s.hdgst = (data[0] & 4) != 0;
  s.ddgst = (data[0] & 8) != 0;
  s.cpda = data[1] & 31;
  s.hpda = data[2] & 31;
  s.maxh2cdata = uint32_t{static_cast<uint16_t>(data[3] | data[4] << 8)} * 4096;
  data += 5;
  size -= 5;
  // The validators read exactly `size` bytes: a heap copy of that size lets ASan catch any over-read.
  std::vector<uint8_t> buf(data, data + size);

  auto stage1 = pt::validate_common_header(buf.data(), buf.size(), s, r);
  auto stage2 = pt::validate_pdu_header(buf.data(), buf.size(), s, r);
  if (stage2) {
    FUZZ_CHECK(stage1.has_value());
    FUZZ_CHECK(buf.size() >= stage2->header_len);
    FUZZ_CHECK(stage2->header_len == stage1->header_len && stage2->data_len == stage1->data_len &&
               stage2->data_offset == stage1->data_offset && stage2->type == stage1->type);
    if (stage2->hdgst_len != 0) FUZZ_CHECK(pt::header_digest_ok(buf.data(), stage2->hlen));
    check_accepted(buf.data(), buf.size(), s, *stage2);
  }
  if (stage1) {
    // Every PDU that passes stage 1 and is complete gets a verdict from stage 2 (with the header alone).
    if (buf.size() >= stage1->header_len) {
      auto again = pt::validate_pdu_header(buf.data(), stage1->header_len, s, r);
      FUZZ_CHECK(again.has_value() == stage2.has_value());
    }
  }
  // A rejection becomes a TermReq the peer accepts, in either connection state.
  const pt::PduError* err = !stage1 ? &stage1.error() : !stage2 ? &stage2.error() : nullptr;
  if (err != nullptr) {
    std::array<uint8_t, pt::kTermReqMaxPlen> term{};
    const auto type = r == pt::Receiver::controller ? pt::PduType::c2h_term_req : pt::PduType::h2c_term_req;
    const std::size_t n = pt::write_term_req(term, type, *err, {buf.data(), std::min<std::size_t>(buf.size(), 200)});
    FUZZ_CHECK(n >= pt::kTermReqHlen && n <= pt::kTermReqMaxPlen);
    const auto peer = r == pt::Receiver::controller ? pt::Receiver::host : pt::Receiver::controller;
    for (bool established : {false, true}) {
      pt::TcpSession ps = s;
      ps.established = established;
      auto info = pt::validate_pdu_header(term.data(), n, ps, peer);
      FUZZ_CHECK(info.has_value());
      FUZZ_CHECK(info->plen == n);
    }
  }

  pt::TcpSession est = s;
  est.established = true;
  check_builders(buf.data(), buf.size(), est);
  return 0;
}

// The NVMe/TCP receive engine shared by target and host (transport/tcp/pdu_receiver.h), fed byte streams
// through prepare()/commit() as a socket would deliver them: where data lands, how many recvs a stream of
// small PDUs needs, direct receive of long payloads, pause/resume, digests and malformed headers.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "protocol/completion.h"
#include "protocol/crc32c.h"
#include "protocol/tcp_pdu.h"
#include "transport/tcp/pdu_receiver.h"

namespace rdmablk::transport::tcp {
namespace {

namespace p = rdmablk::protocol;
namespace pt = rdmablk::protocol::tcp;

// The host's view: C2HData lands in per-CID buffers, CapsuleResps are counted.
struct HostSide final : PduReceiver::Handler {
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<uint16_t> data_done;  // CIDs whose C2HData completed, in order
  std::vector<bool> digest_ok;
  unsigned responses = 0;
  unsigned errors = 0;
  bool pause_next_data = false;

  void on_pdu(PduReceiver& rx) noexcept override {
    if (rx.pdu().type == pt::PduType::capsule_resp) {
      ++responses;
      return;
    }
    if (rx.pdu().type != pt::PduType::c2h_data) return;
    const auto h = p::load<pt::C2HDataHdr>(rx.header().data());
    if (pause_next_data) {
      rx.pause();
      return;
    }
    rx.data_to(buffers.at(h.cccid.get()).data() + h.datao.get());
  }
  void on_pdu_data(PduReceiver& rx, bool ok) noexcept override {
    data_done.push_back(p::load<pt::C2HDataHdr>(rx.header().data()).cccid.get());
    digest_ok.push_back(ok);
  }
  void on_pdu_error(const pt::PduError&, std::span<const uint8_t>) noexcept override { ++errors; }
};

pt::TcpSession session(bool ddgst = false) {
  pt::TcpSession s;
  s.established = true;
  s.ddgst = ddgst;
  s.maxh2cdata = 128 * 1024;
  return s;
}

std::vector<uint8_t> pattern(std::size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

void append_c2h(std::vector<uint8_t>& stream, const pt::TcpSession& s, uint16_t cid, const std::vector<uint8_t>& data,
                bool corrupt_digest = false) {
  std::array<uint8_t, 256> hdr{};
  const auto pdu = pt::build_c2h_data(cid, 0, static_cast<uint32_t>(data.size()), true, false, s);
  const std::size_t n = pt::write_pdu_header(pdu, hdr);
  ASSERT_NE(n, 0u);
  stream.insert(stream.end(), hdr.begin(), hdr.begin() + static_cast<long>(n));
  stream.insert(stream.end(), data.begin(), data.end());
  if (s.ddgst) {
    uint8_t dg[4];
    pt::store_digest(dg, p::crc32c(data.data(), data.size()) ^ (corrupt_digest ? 1u : 0u));
    stream.insert(stream.end(), dg, dg + 4);
  }
}

void append_resp(std::vector<uint8_t>& stream, const pt::TcpSession& s, uint16_t cid) {
  std::array<uint8_t, 64> hdr{};
  p::Cqe cqe = p::make_cqe(cid, 1, 0, p::status::success);
  const std::size_t n = pt::write_pdu_header(pt::build_capsule_resp(p::load<pt::CqeBytes>(&cqe), s), hdr);
  stream.insert(stream.end(), hdr.begin(), hdr.begin() + static_cast<long>(n));
}

struct FeedStats {
  unsigned recvs = 0;
  unsigned direct_recvs = 0;  // recvs whose first iovec was not the staging buffer
};

// Deliver `stream` as a socket would, at most `chunk` bytes per recv, processing after each.
FeedStats feed(PduReceiver& rx, PduReceiver::Handler& h, const std::vector<uint8_t>& stream, std::size_t chunk,
               std::size_t from = 0, std::size_t to = SIZE_MAX) {
  FeedStats st;
  std::size_t pos = from;
  to = std::min(to, stream.size());
  while (pos < to) {
    iovec iov[2];
    const unsigned n = rx.prepare(iov);
    if (n == 0) break;
    ++st.recvs;
    if (n == 2) ++st.direct_recvs;
    std::size_t budget = std::min(chunk, to - pos), got = 0;
    for (unsigned i = 0; i < n && budget != 0; ++i) {
      const std::size_t take = std::min(budget, iov[i].iov_len);
      std::memcpy(iov[i].iov_base, stream.data() + pos + got, take);
      got += take;
      budget -= take;
    }
    rx.commit(got);
    pos += got;
    rx.process(h);
  }
  return st;
}

TEST(PduReceiver, ManySmallDataPdusShareOneRecvAndLandInTheirBuffers) {
  const auto s = session();
  HostSide h;
  PduReceiver rx(64 * 1024, pt::Receiver::host, s);
  std::vector<uint8_t> stream;
  std::vector<std::vector<uint8_t>> want;
  for (uint16_t cid = 0; cid < 12; ++cid) {
    want.push_back(pattern(4096, static_cast<uint8_t>(cid)));
    h.buffers.emplace_back(4096, 0);
    append_c2h(stream, s, cid, want.back());
    append_resp(stream, s, cid);
  }
  ASSERT_LT(stream.size(), 64u * 1024);
  const FeedStats st = feed(rx, h, stream, SIZE_MAX);
  EXPECT_EQ(st.recvs, 1u) << "12 PDUs of 4 KiB fit one recv: a small destination must not cut it short";
  EXPECT_EQ(st.direct_recvs, 0u);
  EXPECT_EQ(h.responses, 12u);
  ASSERT_EQ(h.data_done.size(), 12u);
  for (uint16_t cid = 0; cid < 12; ++cid) EXPECT_EQ(h.buffers[cid], want[cid]) << "cid " << cid;
  EXPECT_TRUE(rx.at_pdu_boundary());
  EXPECT_EQ(h.errors, 0u);
}

TEST(PduReceiver, LongPayloadIsReceivedStraightIntoItsDestination) {
  const auto s = session(true);
  HostSide h;
  PduReceiver rx(64 * 1024, pt::Receiver::host, s);
  const auto data = pattern(128 * 1024, 3);
  h.buffers.emplace_back(data.size(), 0);
  std::vector<uint8_t> stream;
  append_c2h(stream, s, 0, data);
  append_resp(stream, s, 0);
  // The socket hands over 8 KiB at a time: the header and the first bytes go through staging, the rest of
  // the payload straight into the buffer.
  const FeedStats st = feed(rx, h, stream, 8192);
  EXPECT_GT(st.direct_recvs, 10u);
  EXPECT_EQ(h.buffers[0], data);
  ASSERT_EQ(h.digest_ok.size(), 1u);
  EXPECT_TRUE(h.digest_ok[0]);
  EXPECT_EQ(h.responses, 1u);
}

TEST(PduReceiver, ByteAtATimeGivesTheSameResult) {
  const auto s = session(true);
  HostSide h;
  PduReceiver rx(4096, pt::Receiver::host, s);
  std::vector<uint8_t> stream;
  std::vector<std::vector<uint8_t>> want;
  for (uint16_t cid = 0; cid < 3; ++cid) {
    want.push_back(pattern(cid == 1 ? 20000 : 512, static_cast<uint8_t>(9 * cid)));
    h.buffers.emplace_back(want.back().size(), 0);
    append_c2h(stream, s, cid, want.back());
    append_resp(stream, s, cid);
  }
  feed(rx, h, stream, 1);
  for (uint16_t cid = 0; cid < 3; ++cid) EXPECT_EQ(h.buffers[cid], want[cid]);
  EXPECT_EQ(h.responses, 3u);
  EXPECT_EQ(h.digest_ok, (std::vector<bool>{true, true, true}));
}

TEST(PduReceiver, PauseHoldsTheDataUntilResume) {
  const auto s = session();
  HostSide h;
  PduReceiver rx(64 * 1024, pt::Receiver::host, s);
  const auto data = pattern(4096, 5);
  h.buffers.emplace_back(data.size(), 0);
  std::vector<uint8_t> stream;
  append_c2h(stream, s, 0, data);
  append_resp(stream, s, 0);
  h.pause_next_data = true;
  feed(rx, h, stream, SIZE_MAX);
  EXPECT_TRUE(rx.paused());
  iovec iov[2];
  EXPECT_EQ(rx.prepare(iov), 0u) << "nothing may be received while paused";
  EXPECT_TRUE(h.data_done.empty());
  EXPECT_EQ(h.responses, 0u);
  rx.resume(h.buffers[0].data());
  rx.process(h);
  EXPECT_EQ(h.buffers[0], data);
  EXPECT_EQ(h.data_done.size(), 1u);
  EXPECT_EQ(h.responses, 1u);
}

TEST(PduReceiver, DataDigestMismatchIsReportedNotApplied) {
  const auto s = session(true);
  HostSide h;
  PduReceiver rx(64 * 1024, pt::Receiver::host, s);
  h.buffers.emplace_back(4096, 0);
  h.buffers.emplace_back(4096, 0);
  std::vector<uint8_t> stream;
  append_c2h(stream, s, 0, pattern(4096, 1), true);
  append_c2h(stream, s, 1, pattern(4096, 2));
  feed(rx, h, stream, SIZE_MAX);
  EXPECT_EQ(h.digest_ok, (std::vector<bool>{false, true}));
}

TEST(PduReceiver, MalformedHeaderStopsTheEngine) {
  const auto s = session();
  HostSide h;
  PduReceiver rx(64 * 1024, pt::Receiver::host, s);
  std::vector<uint8_t> stream;
  append_resp(stream, s, 0);
  std::vector<uint8_t> bad(stream);
  bad[0] = 0x7F;  // unknown PDU type
  stream.insert(stream.end(), bad.begin(), bad.end());
  append_resp(stream, s, 1);
  feed(rx, h, stream, SIZE_MAX);
  EXPECT_EQ(h.responses, 1u);
  EXPECT_EQ(h.errors, 1u);
  EXPECT_TRUE(rx.stopped());
  iovec iov[2];
  EXPECT_EQ(rx.prepare(iov), 0u);
}

}  // namespace
}  // namespace rdmablk::transport::tcp

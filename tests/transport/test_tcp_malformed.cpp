// Malformed NVMe/TCP traffic from a raw socket at a live listener: the connection gets a C2HTermReq with
// the exact FES/FEI (where one is due) and is closed; the listener keeps serving a well-behaved host.
// And the host side against a fake controller that misbehaves.
#include "tcp_test_util.h"

using namespace tcptest;

namespace {

void expect_healthy(TargetFixture& f) {
  auto q = connect_host_queue(f.host_options());
  ASSERT_TRUE(q) << q.error().message;
  auto data = pattern(8192, 77);
  Io io;
  prep_rw(io, true, 500, data);
  ASSERT_EQ(run_one(**q, io), p::status::success);
  std::vector<uint8_t> back(8192);
  prep_rw(io, false, 500, back);
  ASSERT_EQ(run_one(**q, io), p::status::success);
  EXPECT_EQ(back, data);
}

// Send `bytes`, expect a C2HTermReq with fes/fei and a close; then check the listener still works.
void expect_term(TargetFixture& f, int fd, const std::vector<uint8_t>& bytes, pt::Fes fes, uint32_t fei) {
  send_all(fd, bytes.data(), bytes.size());
  TermReq t = read_term_req(fd);
  EXPECT_TRUE(t.got) << "no C2HTermReq";
  EXPECT_EQ(t.type, static_cast<uint8_t>(pt::PduType::c2h_term_req));
  EXPECT_EQ(t.fes, static_cast<uint16_t>(fes));
  EXPECT_EQ(t.fei, fei);
  EXPECT_GE(t.plen, pt::kTermReqHlen);
  EXPECT_LE(t.plen, pt::kTermReqMaxPlen);
  EXPECT_TRUE(peer_closed(fd));
  ::close(fd);
  EXPECT_TRUE(wait_until([&] { return f.handler.closed == f.handler.created; }));
  expect_healthy(f);
}

std::vector<uint8_t> capsule(const p::Sqe& sqe, const pt::TcpSession& s, std::span<const uint8_t> icd = {},
                             bool bad_ddgst = false) {
  auto pdu = pt::build_capsule_cmd(p::load<pt::SqeBytes>(&sqe), static_cast<uint32_t>(icd.size()), s);
  auto out = pdu_bytes(&pdu);
  out.insert(out.end(), icd.begin(), icd.end());
  if (s.ddgst && !icd.empty()) {
    uint8_t d[4];
    pt::store_digest(d, p::crc32c(icd.data(), icd.size()) ^ (bad_ddgst ? 1u : 0u));
    out.insert(out.end(), d, d + 4);
  }
  return out;
}

std::vector<uint8_t> read_pdu(int fd) {
  auto ch = recv_n(fd, 8);
  if (ch.size() < 8) return {};
  auto rest = recv_n(fd, p::load<pt::CommonHeader>(ch.data()).plen.get() - 8);
  ch.insert(ch.end(), rest.begin(), rest.end());
  return ch;
}

p::Sqe no_data_write(uint16_t cid, uint32_t bytes) {
  return write_sqe(cid, 0, bytes, p::make_transport_sgl(bytes));
}

}  // namespace

TEST(TcpMalformed, GarbageFirstBytes) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  expect_term(f, fd, std::vector<uint8_t>(16, 0xFF), pt::Fes::invalid_header_field, 0);
}

TEST(TcpMalformed, IcReqWithBadHlen) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  auto req = pt::build_icreq({});
  req.ch.hlen = 100;
  std::vector<uint8_t> b(sizeof(req));
  p::store(b.data(), req);
  expect_term(f, fd, b, pt::Fes::invalid_header_field, 2);
}

TEST(TcpMalformed, IcReqWithUnsupportedPfv) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  auto req = pt::build_icreq({});
  req.pfv.set(1);
  std::vector<uint8_t> b(sizeof(req));
  p::store(b.data(), req);
  expect_term(f, fd, b, pt::Fes::unsupported_parameter, 8);
}

TEST(TcpMalformed, CapsuleCmdBeforeIcReq) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  pt::TcpSession s{};
  s.established = true;
  expect_term(f, fd, capsule(no_data_write(1, 0), s), pt::Fes::pdu_sequence_error, 0);
}

TEST(TcpMalformed, CapsuleCmdWithWrongPdo) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  auto s = raw_handshake(fd);
  std::vector<uint8_t> icd(512, 1);
  auto b = capsule(write_sqe(1, 0, 512, p::make_in_capsule_sgl(0, 512)), s, icd);
  b[3] = 76;  // pdo must be 72
  expect_term(f, fd, b, pt::Fes::invalid_header_field, 3);
}

TEST(TcpMalformed, PlenInconsistentWithHeader) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  auto s = raw_handshake(fd);
  auto b = capsule(no_data_write(1, 0), s);
  b[4] = 100;  // plen 100 with pdo 0: must be 72
  b.resize(100, 0);
  expect_term(f, fd, b, pt::Fes::invalid_header_field, 4);
}

TEST(TcpMalformed, UnknownPduType) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  raw_handshake(fd);
  std::vector<uint8_t> b = {0x08, 0, 24, 0, 24, 0, 0, 0};
  b.resize(24, 0);
  expect_term(f, fd, b, pt::Fes::invalid_header_field, 0);
}

TEST(TcpMalformed, ControllerBoundTypeFromHost) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  auto s = raw_handshake(fd);
  auto r2t = pt::build_r2t(1, 0, 0, 4096, s);  // R2T goes controller -> host only
  expect_term(f, fd, pdu_bytes(&r2t), pt::Fes::invalid_header_field, 0);
}

// A fresh connection with a write of `len` bytes (no in-capsule data) sent, and the target's R2T for it.
struct WriteAwaitingData {
  int fd;
  pt::TcpSession s;
  std::vector<uint8_t> r2t_bytes;
  pt::R2tPdu r2t() const { return p::load<pt::R2tPdu>(r2t_bytes.data()); }
};
WriteAwaitingData write_until_r2t(const TargetFixture& f, uint16_t cid, uint32_t len) {
  WriteAwaitingData w{raw_connect(f.port()), {}, {}};
  w.s = raw_handshake(w.fd);
  auto c = capsule(no_data_write(cid, len), w.s);
  send_all(w.fd, c.data(), c.size());
  w.r2t_bytes = read_pdu(w.fd);
  return w;
}

// An H2CData header followed by `payload` bytes of zeroes.
std::vector<uint8_t> h2c_with_payload(uint16_t cccid, uint16_t ttag, uint32_t offset, uint32_t len, bool last,
                                      const pt::TcpSession& s, std::size_t payload) {
  auto h = pt::build_h2c_data(cccid, ttag, offset, len, last, s);
  auto b = pdu_bytes(&h);
  b.resize(b.size() + payload, 0);
  return b;
}

TEST(TcpMalformed, H2CDataWithUnknownTtag) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  auto s = raw_handshake(fd);
  expect_term(f, fd, h2c_with_payload(1, 999, 0, 512, true, s, 512), pt::Fes::invalid_header_field, 10);
}

TEST(TcpMalformed, H2CDataBeyondTheR2TWindow) {
  TargetFixture f;
  auto w = write_until_r2t(f, 7, 4096);
  ASSERT_EQ(w.r2t_bytes.size(), 24u);
  auto r2t = w.r2t();
  ASSERT_EQ(r2t.ch.pdu_type, static_cast<uint8_t>(pt::PduType::r2t));
  EXPECT_EQ(r2t.cccid.get(), 7);
  EXPECT_EQ(r2t.r2to.get(), 0u);
  EXPECT_EQ(r2t.r2tl.get(), 4096u);
  expect_term(f, w.fd, h2c_with_payload(7, r2t.ttag.get(), 0, 8192, true, w.s, 8192), pt::Fes::data_out_of_range, 0);
}

TEST(TcpMalformed, H2CDataAtTheWrongOffset) {
  TargetFixture f;
  auto w = write_until_r2t(f, 3, 4096);
  expect_term(f, w.fd, h2c_with_payload(3, w.r2t().ttag.get(), 512, 512, false, w.s, 512), pt::Fes::data_out_of_range,
              0);
}

TEST(TcpMalformed, H2CDataWithWrongCccid) {
  TargetFixture f;
  auto w = write_until_r2t(f, 3, 4096);
  expect_term(f, w.fd, h2c_with_payload(4, w.r2t().ttag.get(), 0, 4096, true, w.s, 4096), pt::Fes::invalid_header_field,
              8);
}

TEST(TcpMalformed, DataDigestError) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  auto s = raw_handshake(fd, false, true);
  ASSERT_TRUE(s.ddgst);
  std::vector<uint8_t> icd(512, 9);
  auto b = capsule(write_sqe(1, 0, 512, p::make_in_capsule_sgl(0, 512)), s, icd, true);
  expect_term(f, fd, b, pt::Fes::header_digest_error, 0);
  EXPECT_EQ(f.handler.commands, 2);  // expect_healthy's write and read: the bad one never reached the core
}

TEST(TcpMalformed, HeaderDigestError) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  auto s = raw_handshake(fd, true, false);
  ASSERT_TRUE(s.hdgst);
  auto b = capsule(no_data_write(1, 0), s);
  b[72] ^= 0xFF;  // the digest after the 72-byte header
  expect_term(f, fd, b, pt::Fes::header_digest_error, 0);
}

TEST(TcpMalformed, TruncatedPduThenCloseNeedsNoTermReq) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  auto s = raw_handshake(fd);
  auto b = capsule(no_data_write(1, 0), s);
  send_all(fd, b.data(), 40);
  ::shutdown(fd, SHUT_WR);
  TermReq t = read_term_req(fd);
  EXPECT_FALSE(t.got);
  EXPECT_TRUE(wait_until([&] { return f.handler.closed == 1; }));
  ::close(fd);
  expect_healthy(f);
}

TEST(TcpMalformed, PeerDisconnectMidTransferReleasesRequests) {
  TargetFixture f;
  auto w = write_until_r2t(f, 5, 65536);
  auto b = h2c_with_payload(5, w.r2t().ttag.get(), 0, 65536, true, w.s, 1000);  // part of the data, then gone
  send_all(w.fd, b.data(), b.size());
  ::close(w.fd);
  EXPECT_TRUE(wait_until([&] { return f.handler.closed == 1; }));
  EXPECT_TRUE(wait_until([] { return tcp::live_tcp_target_connections() == 0; }));
  expect_healthy(f);
}

TEST(TcpMalformed, HostTermReqClosesWithoutAnswer) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  raw_handshake(fd);
  auto t = pt::build_term_req(pt::PduType::h2c_term_req, pt::Fes::pdu_sequence_error, 0, 0);
  send_all(fd, &t, sizeof(t));
  EXPECT_FALSE(read_term_req(fd).got);
  ::close(fd);
  EXPECT_TRUE(wait_until([&] { return f.handler.closed == 1; }));
  expect_healthy(f);
}

TEST(TcpMalformed, CommandIdConflictCompletesWithStatusAndKeepsTheConnection) {
  TargetFixture f;
  f.handler.hold_writes = true;
  int fd = raw_connect(f.port());
  auto s = raw_handshake(fd);
  auto c = capsule(no_data_write(42, 4096), s);
  send_all(fd, c.data(), c.size());
  send_all(fd, c.data(), c.size());  // same CID while the first is in flight
  auto resp = read_pdu(fd);
  ASSERT_EQ(resp.size(), 24u);
  ASSERT_EQ(resp[0], static_cast<uint8_t>(pt::PduType::capsule_resp));
  auto cqe = p::load<p::Cqe>(resp.data() + 8);
  EXPECT_EQ(cqe.cid.get(), 42);
  EXPECT_EQ(cqe.get_status(), p::status::command_id_conflict);
  EXPECT_EQ(f.handler.commands, 1);
  // Still alive: another command gets its answer (a flush: opcode 0, no data).
  p::Sqe flush{};
  flush.hdr = p::make_header(0x00, 43, 1);
  flush.hdr.dptr = p::make_transport_sgl(0);
  auto c2 = capsule(flush, s);
  send_all(fd, c2.data(), c2.size());
  auto resp2 = read_pdu(fd);
  ASSERT_EQ(resp2.size(), 24u);
  EXPECT_EQ(p::load<p::Cqe>(resp2.data() + 8).cid.get(), 43);
  EXPECT_EQ(f.handler.closed, 0);
  f.handler.hold_writes = false;
  ::close(fd);
  EXPECT_TRUE(wait_until([&] { return f.handler.closed == 1; }));
}

TEST(TcpMalformed, InCapsuleSglLargerThanTheDataGetsSglStatus) {
  TargetFixture f;
  int fd = raw_connect(f.port());
  auto s = raw_handshake(fd);
  std::vector<uint8_t> icd(512, 3);
  auto b = capsule(write_sqe(9, 0, 1024, p::make_in_capsule_sgl(0, 1024)), s, icd);
  send_all(fd, b.data(), b.size());
  auto resp = read_pdu(fd);
  ASSERT_EQ(resp.size(), 24u);
  auto cqe = p::load<p::Cqe>(resp.data() + 8);
  EXPECT_EQ(cqe.cid.get(), 9);
  EXPECT_EQ(cqe.get_status(), p::status::data_sgl_length_invalid);
  // Offset beyond the data, and a keyed (RDMA) SGL.
  b = capsule(write_sqe(10, 0, 512, p::make_in_capsule_sgl(1024, 512)), s, icd);
  send_all(fd, b.data(), b.size());
  EXPECT_EQ(p::load<p::Cqe>(read_pdu(fd).data() + 8).get_status(), p::status::sgl_offset_invalid);
  b = capsule(write_sqe(11, 0, 512, p::make_keyed_sgl(0x1000, 512, 7)), s);
  send_all(fd, b.data(), b.size());
  EXPECT_EQ(p::load<p::Cqe>(read_pdu(fd).data() + 8).get_status(), p::status::sgl_descriptor_type_invalid);
  EXPECT_EQ(f.handler.commands, 0);
  ::close(fd);
  EXPECT_TRUE(wait_until([&] { return f.handler.closed == 1; }));
}

TEST(TcpMalformed, MoreCommandsThanSlotsTerminates) {
  tcp::TcpTargetOptions o;
  o.max_queue_depth = 2;  // 4 slots
  TargetFixture f(o);
  f.handler.hold_writes = true;
  int fd = raw_connect(f.port());
  auto s = raw_handshake(fd);
  std::vector<uint8_t> all;
  for (uint16_t cid = 0; cid < 5; ++cid) {
    auto c = capsule(no_data_write(cid, 4096), s);
    all.insert(all.end(), c.begin(), c.end());
  }
  f.handler.hold_writes = true;
  send_all(fd, all.data(), all.size());
  TermReq t = read_term_req(fd);
  EXPECT_TRUE(t.got);
  EXPECT_EQ(t.fes, static_cast<uint16_t>(pt::Fes::pdu_sequence_error));
  ::close(fd);
  EXPECT_TRUE(wait_until([&] { return f.handler.closed == 1; }));
  f.handler.hold_writes = false;
  expect_healthy(f);
}

// ---- host side against a fake controller ----------------------------------------------------------

namespace {
struct FakeController {
  int lfd = -1;
  uint16_t port = 0;
  FakeController() {
    lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(lfd, 4);
    socklen_t len = sizeof(a);
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~FakeController() { ::close(lfd); }
  // Accept and answer the ICReq; returns the connection.
  int accept_ic(uint32_t maxh2cdata = 65536) {
    int fd = ::accept(lfd, nullptr, nullptr);
    auto req = recv_n(fd, 128);
    EXPECT_EQ(req.size(), 128u);
    auto s = pt::controller_session(p::load<pt::IcReqPdu>(req.data()), 0, maxh2cdata);
    auto resp = pt::build_icresp(s);
    send_all(fd, &resp, sizeof(resp));
    return fd;
  }
};

HostQueueOptions fake_options(uint16_t port) {
  HostQueueOptions o;
  o.address.traddr = "127.0.0.1";
  o.address.trsvcid = port;
  o.in_capsule_limit = 0;
  return o;
}
}  // namespace

TEST(TcpHostMalformed, ControllerTermReqFailsOutstandingCommands) {
  FakeController fc;
  std::thread ctl([&] {
    int fd = fc.accept_ic();
    recv_n(fd, 72);  // the read command
    auto t = pt::build_term_req(pt::PduType::c2h_term_req, pt::Fes::invalid_header_field, 2, 0);
    send_all(fd, &t, sizeof(t));
    peer_closed(fd);
    ::close(fd);
  });
  auto q = connect_host_queue(fake_options(fc.port));
  ASSERT_TRUE(q) << q.error().message;
  std::vector<uint8_t> buf(4096);
  Io io;
  prep_rw(io, false, 0, buf);
  ASSERT_TRUE((*q)->submit(io.cmd).ok());
  int rc = 0;
  for (int i = 0; i < 300 && rc >= 0; ++i) rc = (*q)->poll(1, 100ms);  // up to 30 s
  EXPECT_EQ(rc, -ECONNRESET);
  EXPECT_TRUE(io.done);
  EXPECT_EQ(io.cqe.get_status(), p::status::transient_transport_error);
  EXPECT_EQ((*q)->outstanding(), 0u);
  EXPECT_EQ((*q)->poll(0, 0ms), -ECONNRESET);
  q->reset();
  ctl.join();
}

TEST(TcpHostMalformed, ResponseForUnknownCidGetsH2CTermReq) {
  FakeController fc;
  std::vector<uint8_t> got;
  std::thread ctl([&] {
    int fd = fc.accept_ic();
    recv_n(fd, 72);
    pt::TcpSession s{};
    s.established = true;
    p::Cqe cqe = p::make_cqe(77, 1, 0, p::status::success);  // nobody sent CID 77
    auto r = pt::build_capsule_resp(p::load<pt::CqeBytes>(&cqe), s);
    send_all(fd, &r, sizeof(r));
    got = recv_n(fd, 24);
    ::close(fd);
  });
  auto q = connect_host_queue(fake_options(fc.port));
  ASSERT_TRUE(q) << q.error().message;
  std::vector<uint8_t> buf(512);
  Io io;
  prep_rw(io, false, 0, buf);
  ASSERT_TRUE((*q)->submit(io.cmd).ok());
  int rc = 0;
  for (int i = 0; i < 300 && rc >= 0; ++i) rc = (*q)->poll(1, 100ms);  // up to 30 s
  EXPECT_EQ(rc, -EPROTO);
  EXPECT_EQ(io.cqe.get_status(), p::status::transient_transport_error);
  ctl.join();
  ASSERT_EQ(got.size(), 24u);
  auto t = p::load<pt::TermReqHdr>(got.data());
  EXPECT_EQ(t.ch.pdu_type, static_cast<uint8_t>(pt::PduType::h2c_term_req));
  EXPECT_EQ(t.fes.get(), static_cast<uint16_t>(pt::Fes::invalid_header_field));
  EXPECT_EQ(t.fei.get(), 20u);  // CapsuleResp CQE CID
}

TEST(TcpHostMalformed, R2TBeyondTheCommandIsRejected) {
  FakeController fc;
  std::thread ctl([&] {
    int fd = fc.accept_ic();
    auto cmd = recv_n(fd, 72);
    pt::TcpSession s{};
    s.established = true;
    uint16_t cid = p::load<p::Sqe>(cmd.data() + 8).hdr.cid.get();
    auto r = pt::build_r2t(cid, 0, 0, 8192, s);  // the write is 4096 bytes
    send_all(fd, &r, sizeof(r));
    peer_closed(fd);
    ::close(fd);
  });
  auto q = connect_host_queue(fake_options(fc.port));
  ASSERT_TRUE(q) << q.error().message;
  auto data = pattern(4096, 1);
  Io io;
  prep_rw(io, true, 0, data);
  ASSERT_TRUE((*q)->submit(io.cmd).ok());
  int rc = 0;
  for (int i = 0; i < 300 && rc >= 0; ++i) rc = (*q)->poll(1, 100ms);  // up to 30 s
  EXPECT_EQ(rc, -EPROTO);
  EXPECT_TRUE(io.done);
  q->reset();
  ctl.join();
}

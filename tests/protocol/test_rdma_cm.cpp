// NVMe-oF RDMA-CM private data: golden layouts, the controller-side request decoder, host-side helpers.
#include "protocol/rdma_cm.h"

#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <string>
#include <vector>

namespace rdmablk::protocol::rdma_cm {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename T>
Bytes bytes_of(const T& v) {
  Bytes out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

Bytes request_bytes(uint16_t recfmt, uint16_t qid, uint16_t hrqsize, uint16_t hsqsize, uint16_t cntlid = 0,
                    std::size_t len = 32) {
  Bytes b(len, 0);
  auto put = [&](std::size_t off, uint16_t v) {
    if (off + 1 < b.size()) {
      b[off] = static_cast<uint8_t>(v);
      b[off + 1] = static_cast<uint8_t>(v >> 8);
    }
  };
  put(0, recfmt);
  put(2, qid);
  put(4, hrqsize);
  put(6, hsqsize);
  put(8, cntlid);
  return b;
}

TEST(RdmaCmGolden, LinuxAdminQueueRequest) {
  // nvme_rdma_route_resolved() for qid 0: HRQSIZE = NVME_AQ_DEPTH (32), HSQSIZE = 31, the rest zero.
  const Bytes expected = {0x00, 0x00,  // RECFMT 0
                          0x00, 0x00,  // QID 0
                          0x20, 0x00,  // HRQSIZE 32 (1's based)
                          0x1F, 0x00,  // HSQSIZE 31 (0's based)
                          0x00, 0x00,  // CNTLID
                          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(bytes_of(make_request(0, 32)), expected);
}

TEST(RdmaCmGolden, IoQueueRequestWithCntlid) {
  Bytes expected(32, 0);
  const uint8_t head[] = {0x00, 0x00, 0x03, 0x00, 0x80, 0x00, 0x7F, 0x00, 0x01, 0x00};  // qid 3, 128 entries
  std::memcpy(expected.data(), head, sizeof(head));
  EXPECT_EQ(bytes_of(make_request(3, 128, 1)), expected);
}

TEST(RdmaCmGolden, Accept) {
  Bytes expected(32, 0);
  expected[2] = 0x80;  // CRQSIZE 128
  EXPECT_EQ(bytes_of(make_accept(128)), expected);
}

TEST(RdmaCmGolden, RejectIsFourBytes) {
  EXPECT_EQ(bytes_of(make_reject(RejectStatus::invalid_hsqsize)), (Bytes{0x00, 0x00, 0x04, 0x00}));
  EXPECT_EQ(bytes_of(make_reject(RejectStatus::invalid_cntlid)), (Bytes{0x00, 0x00, 0x09, 0x00}));
}

TEST(RdmaCm, DecodesWhatTheLinuxHostSends) {
  const ConnectLimits limits{};
  const CmRequest admin = make_request(0, 32);
  auto a = decode_request(&admin, sizeof(admin), limits);
  ASSERT_TRUE(a) << a.error().what;
  EXPECT_EQ(a->qid, 0);
  EXPECT_EQ(a->hsqsize, 31);
  EXPECT_EQ(a->hrqsize, 32);
  EXPECT_EQ(a->sq_entries(), 32u);  // what the controller answers as CRQSIZE (nvmet: hsqsize + 1)

  const CmRequest io = make_request(4, 1024, 7);
  auto i = decode_request(&io, sizeof(io), limits);
  ASSERT_TRUE(i) << i.error().what;
  EXPECT_EQ(i->qid, 4);
  EXPECT_EQ(i->sq_entries(), 1024u);
  EXPECT_EQ(i->hrqsize, 1024);
  EXPECT_EQ(i->cntlid, 7);
}

TEST(RdmaCm, ExtraPrivateDataBytesAreIgnored) {
  // InfiniBand CM REQ private data is padded with zeros up to 92 bytes (56 after the rdma_cm header).
  const Bytes b = request_bytes(0, 1, 128, 127, 0, 56);
  auto r = decode_request(b.data(), b.size(), ConnectLimits{});
  ASSERT_TRUE(r) << r.error().what;
  EXPECT_EQ(r->sq_entries(), 128u);
}

struct CmRejectCase {
  std::string name;
  Bytes data;
  ConnectLimits limits;
  RejectStatus status;
  uint32_t offset;
};

void PrintTo(const CmRejectCase& c, std::ostream* os) { *os << c.name; }

class RdmaCmRejectRequest : public ::testing::TestWithParam<CmRejectCase> {};

TEST_P(RdmaCmRejectRequest, StatusAndOffset) {
  const auto& c = GetParam();
  auto r = decode_request(c.data.empty() ? nullptr : c.data.data(), c.data.size(), c.limits);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, c.status) << r.error().what;
  EXPECT_EQ(r.error().offset, c.offset) << r.error().what;
  EXPECT_EQ(r.error().decode_error().offset, c.offset);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, RdmaCmRejectRequest,
    ::testing::Values(
        CmRejectCase{"Empty", {}, {}, RejectStatus::invalid_length, 0},
        CmRejectCase{"ShortBy1", request_bytes(0, 0, 32, 31, 0, 31), {}, RejectStatus::invalid_length, 31},
        CmRejectCase{"OnlyTheKernelStructBeforeCntlid", request_bytes(0, 0, 32, 31, 0, 8), {},
                     RejectStatus::invalid_length, 8},
        CmRejectCase{"Recfmt1", request_bytes(1, 0, 32, 31), {}, RejectStatus::invalid_recfmt, 0},
        CmRejectCase{"RecfmtFFFF", request_bytes(0xFFFF, 0, 32, 31), {}, RejectStatus::invalid_recfmt, 0},
        CmRejectCase{"QidAboveLimit", request_bytes(0, 9, 32, 31), {.max_qid = 8}, RejectStatus::invalid_qid, 2},
        CmRejectCase{"HrqsizeZero", request_bytes(0, 1, 0, 31), {}, RejectStatus::invalid_hrqsize, 4},
        CmRejectCase{"HsqsizeZero", request_bytes(0, 1, 1, 0), {}, RejectStatus::invalid_hsqsize, 6},
        CmRejectCase{"Admin33Entries", request_bytes(0, 0, 33, 32), {}, RejectStatus::invalid_hsqsize, 6},
        CmRejectCase{"IoAboveMqes", request_bytes(0, 1, 129, 128), {.max_io_queue_entries = 128},
                     RejectStatus::invalid_hsqsize, 6},
        CmRejectCase{"IoMaxHsqsize", request_bytes(0, 1, 0xFFFF, 0xFFFF), {}, RejectStatus::invalid_hsqsize, 6}),
    [](const auto& p) { return p.param.name; });

TEST(RdmaCm, LimitsAreInclusive) {
  const Bytes b = request_bytes(0, 8, 128, 127);
  EXPECT_TRUE(decode_request(b.data(), b.size(), ConnectLimits{.max_qid = 8, .max_io_queue_entries = 128}));
  const Bytes admin = request_bytes(0, 0, 32, 31);
  EXPECT_TRUE(decode_request(admin.data(), admin.size(), ConnectLimits{.max_qid = 0, .max_io_queue_entries = 2}));
}

TEST(RdmaCm, HostDecodesAcceptAndReject) {
  const CmAccept acc = make_accept(64);
  auto a = decode_accept(&acc, sizeof(acc));
  ASSERT_TRUE(a) << a.error().what;
  EXPECT_EQ(*a, 64);

  const Bytes bad_fmt = {0x01, 0x00, 0x40, 0x00};
  auto f = decode_accept(bad_fmt.data(), bad_fmt.size());
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().offset, 0u);
  const Bytes zero_q = {0x00, 0x00, 0x00, 0x00};
  auto z = decode_accept(zero_q.data(), zero_q.size());
  ASSERT_FALSE(z);
  EXPECT_EQ(z.error().offset, 2u);
  auto s = decode_accept(zero_q.data(), 3);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().offset, 3u);

  const CmReject rej = make_reject(RejectStatus::no_resources);
  auto r = decode_reject(&rej, sizeof(rej));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, RejectStatus::no_resources);
  EXPECT_FALSE(decode_reject(&rej, 3));
  EXPECT_FALSE(decode_reject(nullptr, 0));
}

TEST(RdmaCm, StatusNamesMatchTheKernel) {
  EXPECT_STREQ(reject_status_name(RejectStatus::invalid_length), "invalid length");
  EXPECT_STREQ(reject_status_name(RejectStatus::invalid_hsqsize), "invalid host SQ size");
  EXPECT_STREQ(reject_status_name(RejectStatus::no_resources), "resource not found");
  EXPECT_STREQ(reject_status_name(RejectStatus::invalid_cntlid), "invalid controller ID");
  EXPECT_STREQ(reject_status_name(static_cast<RejectStatus>(0x42)), "unrecognized reason");
  EXPECT_EQ(static_cast<uint16_t>(RejectStatus::invalid_ord), 8);
  EXPECT_EQ(static_cast<uint16_t>(RejectStatus::invalid_cntlid), 9);
}

}  // namespace
}  // namespace rdmablk::protocol::rdma_cm

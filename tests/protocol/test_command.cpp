// SQE layouts and typed command views: golden bytes from NVMe Base 2.0 / NVM Command Set 1.0 tables.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "protocol/command.h"
#include "protocol/completion.h"

namespace rdmablk::protocol {
namespace {

template <typename T>
std::vector<uint8_t> bytes_of(const T& v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

std::vector<uint8_t> zeros(std::size_t n) { return std::vector<uint8_t>(n, 0); }

TEST(Command, ReadWithFuaGoldenBytes) {
  const auto dptr = make_keyed_sgl(0x1122334455667788ull, 0x1000, 0xAABBCCDD);
  const auto cmd = make_read(0x1234, 1, 0x0102030405060708ull, 8, dptr, /*fua=*/true);
  auto want = zeros(64);
  want[0] = 0x02;                                                  // OPC read
  want[1] = 0x40;                                                  // PSDT 01b
  want[2] = 0x34, want[3] = 0x12;                                  // CID
  want[4] = 0x01;                                                  // NSID 1
  const uint8_t sgl[16] = {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // address
                           0x00, 0x10, 0x00,                                // length 24 bits
                           0xDD, 0xCC, 0xBB, 0xAA,                          // key
                           0x40};                                           // keyed, address
  std::memcpy(&want[24], sgl, 16);
  const uint8_t slba[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
  std::memcpy(&want[40], slba, 8);
  want[48] = 0x07;  // NLB 0-based
  want[51] = 0x40;  // FUA = CDW12 bit 30
  EXPECT_EQ(bytes_of(cmd), want);
}

TEST(Command, ReadWriteAccessorsRoundTripThroughSqe) {
  auto w = make_write(7, 3, 1000, 65536, make_in_capsule_sgl(0, 4096));
  w.set_limited_retry(true);
  w.set_prinfo(0x9);
  w.set_dsm(0x23);
  const Sqe sqe = to_sqe(w);
  EXPECT_EQ(sqe.hdr.opcode, static_cast<uint8_t>(IoOpcode::write));
  const auto back = as<ReadWriteCommand>(sqe);
  EXPECT_EQ(back.start_lba(), 1000u);
  EXPECT_EQ(back.nlb(), 0xFFFF);
  EXPECT_EQ(back.block_count(), 65536u);
  EXPECT_FALSE(back.fua());
  EXPECT_TRUE(back.limited_retry());
  EXPECT_EQ(back.prinfo(), 0x9);
  EXPECT_EQ(back.dsm(), 0x23);
  EXPECT_EQ(sqe.cdw12.get(), 0xFFFFu | 1u << 31 | 0x9u << 26);
  EXPECT_EQ(back.hdr.cid.get(), 7);
  EXPECT_EQ(back.hdr.nsid.get(), 3u);
}

TEST(Command, HeaderFlagsFuseAndPsdt) {
  SqeHeader h{};
  h.set_fuse(FusedOperation::second);
  h.set_psdt(Psdt::sgl_mptr_sgl);
  EXPECT_EQ(h.flags, 0x82);
  EXPECT_EQ(h.fuse(), FusedOperation::second);
  EXPECT_EQ(h.psdt(), Psdt::sgl_mptr_sgl);
  h.set_fuse(FusedOperation::normal);
  EXPECT_EQ(h.flags, 0x80);
  h.flags = 0x41;
  EXPECT_EQ(h.fuse(), FusedOperation::first);
  EXPECT_EQ(h.psdt(), Psdt::sgl_mptr_contiguous);
}

TEST(Command, DataTransferDirectionFromOpcode) {
  EXPECT_EQ(data_transfer(static_cast<uint8_t>(IoOpcode::write)), DataTransfer::host_to_controller);
  EXPECT_EQ(data_transfer(static_cast<uint8_t>(IoOpcode::read)), DataTransfer::controller_to_host);
  EXPECT_EQ(data_transfer(static_cast<uint8_t>(IoOpcode::flush)), DataTransfer::none);
  EXPECT_EQ(data_transfer(static_cast<uint8_t>(AdminOpcode::get_log_page)), DataTransfer::controller_to_host);
  EXPECT_EQ(data_transfer(static_cast<uint8_t>(AdminOpcode::identify)), DataTransfer::controller_to_host);
  EXPECT_EQ(data_transfer(kFabricsOpcode), DataTransfer::bidirectional);
}

TEST(Command, FlushAndWriteZeroesGoldenBytes) {
  const Sqe flush = make_flush(0x0102, 0xFFFFFFFF);
  auto want = zeros(64);
  want[1] = 0x40;
  want[2] = 0x02, want[3] = 0x01;
  want[4] = want[5] = want[6] = want[7] = 0xFF;
  EXPECT_EQ(bytes_of(flush), want);

  const auto wz = make_write_zeroes(5, 2, 0x10, 256, /*deallocate=*/true, /*fua=*/true);
  want = zeros(64);
  want[0] = 0x08;
  want[1] = 0x40;
  want[2] = 0x05;
  want[4] = 0x02;
  want[40] = 0x10;
  want[48] = 0xFF;         // NLB 255
  want[51] = 0x40 | 0x02;  // FUA bit 30, DEAC bit 25
  EXPECT_EQ(bytes_of(wz), want);
  EXPECT_TRUE(wz.deallocate());
  EXPECT_TRUE(wz.fua());
  EXPECT_EQ(wz.block_count(), 256u);
}

TEST(Command, DatasetManagementAndRanges) {
  const auto dsm = make_dsm(9, 1, 3, DsmCommand::kDeallocate, make_in_capsule_sgl(0, 48));
  auto bytes = bytes_of(dsm);
  EXPECT_EQ(bytes[0], 0x09);
  EXPECT_EQ(bytes[40], 0x02);  // NR 0-based
  EXPECT_EQ(bytes[44], 0x04);  // AD
  EXPECT_EQ(dsm.range_count(), 3u);
  EXPECT_EQ(dsm.data_length(), 48u);
  EXPECT_TRUE(dsm.deallocate());
  EXPECT_FALSE(dsm.integral_read());

  // Range entry: cattr, nlb (a count, not 0-based), slba.
  const uint8_t raw[16] = {0x01, 0, 0, 0, 0x00, 0x01, 0, 0, 0x00, 0x20, 0, 0, 0, 0, 0, 0};
  const auto r = load<DsmRange>(raw);
  EXPECT_EQ(r.cattr.get(), 1u);
  EXPECT_EQ(r.nlb.get(), 256u);
  EXPECT_EQ(r.slba.get(), 0x2000u);
}

TEST(Command, IdentifyFields) {
  auto id = make_identify(1, Cns::ns_id_descriptor_list, 5, make_keyed_sgl(0x1000, 4096, 1), 0xBEEF, Csi::zoned);
  const auto b = bytes_of(id);
  EXPECT_EQ(b[0], 0x06);
  EXPECT_EQ(b[40], 0x03);                   // CNS
  EXPECT_EQ(b[42], 0xEF);                   // CNTID 31:16
  EXPECT_EQ(b[43], 0xBE);
  EXPECT_EQ(b[47], 0x02);                   // CSI 31:24 of CDW11
  EXPECT_EQ(id.cns(), Cns::ns_id_descriptor_list);
  EXPECT_EQ(id.cntid(), 0xBEEF);
  EXPECT_EQ(id.csi(), Csi::zoned);
  id.cdw11.set(0x00000042);
  EXPECT_EQ(id.cns_specific_id(), 0x42);
}

TEST(Command, GetLogPageNumdSplitAndOffsetGolden) {
  // 0x10003 dwords -> NUMD (0-based) = 0x10002: NUMDL 0x0002, NUMDU 0x0001.
  const auto glp = make_get_log_page(0x55, LogPageId::discovery, 0, 0x0000000500000010ull, 0x10003ull * 4,
                                     make_keyed_sgl(0, 0, 0), /*rae=*/true);
  const auto b = bytes_of(glp);
  EXPECT_EQ(b[0], 0x02);
  EXPECT_EQ(b[40], 0x70);  // LID
  EXPECT_EQ(b[41], 0x80);  // RAE bit 15, LSP 0
  EXPECT_EQ(b[42], 0x02);  // NUMDL
  EXPECT_EQ(b[43], 0x00);
  EXPECT_EQ(b[44], 0x01);  // NUMDU
  EXPECT_EQ(b[45], 0x00);
  const uint8_t lpo[8] = {0x10, 0, 0, 0, 0x05, 0, 0, 0};
  EXPECT_EQ(0, std::memcmp(&b[48], lpo, 8));
  EXPECT_EQ(glp.numd(), 0x10002u);
  EXPECT_EQ(glp.dword_count(), 0x10003u);
  EXPECT_EQ(glp.length_bytes(), 0x4000Cu);
  EXPECT_EQ(glp.offset(), 0x0000000500000010ull);
  EXPECT_TRUE(glp.rae());
  EXPECT_EQ(glp.lid(), 0x70);
}

TEST(Command, GetLogPageDecodesHostFieldsAndMaximumLength) {
  Sqe s{};
  s.hdr.opcode = 0x02;
  s.cdw10.set(0xFFFF0000u | 0x7Fu << 8 | 0x02);  // LID 2, LSP 0x7F, RAE 0, NUMDL FFFF
  s.cdw11.set(0xABCDFFFFu);                     // NUMDU FFFF, LSI ABCD
  s.cdw14.set(0x02800005u);                     // CSI 2, OT, UUID index 5
  const auto g = as<GetLogPageCommand>(s);
  EXPECT_EQ(g.lid(), 0x02);
  EXPECT_EQ(g.lsp(), 0x7F);
  EXPECT_FALSE(g.rae());
  EXPECT_EQ(g.lsi(), 0xABCD);
  EXPECT_EQ(g.numd(), 0xFFFFFFFFu);
  EXPECT_EQ(g.length_bytes(), 0x400000000ull);  // 2^32 dwords, no 32-bit overflow
  EXPECT_TRUE(g.offset_is_index());
  EXPECT_EQ(g.uuid_index(), 5);
  EXPECT_EQ(g.csi(), Csi::zoned);
}

TEST(Command, SetAndGetFeatures) {
  const auto nq = make_set_features(3, FeatureId::number_of_queues, number_of_queues_value(7, 3), /*save=*/true);
  const auto b = bytes_of(nq);
  EXPECT_EQ(b[0], 0x09);
  EXPECT_EQ(b[40], 0x07);
  EXPECT_EQ(b[43], 0x80);  // SV
  EXPECT_EQ(b[44], 0x07);  // NSQR
  EXPECT_EQ(b[46], 0x03);  // NCQR
  EXPECT_EQ(nq.nsqr(), 7);
  EXPECT_EQ(nq.ncqr(), 3);
  EXPECT_TRUE(nq.save());

  const auto gf = make_get_features(4, FeatureId::keep_alive_timer, FeatureSelect::supported_capabilities);
  EXPECT_EQ(bytes_of(gf)[0], 0x0A);
  EXPECT_EQ(bytes_of(gf)[40], 0x0F);
  EXPECT_EQ(bytes_of(gf)[41], 0x03);  // SEL 10:8
  EXPECT_EQ(gf.sel(), FeatureSelect::supported_capabilities);
  EXPECT_EQ(gf.fid(), FeatureId::keep_alive_timer);
  EXPECT_FALSE(gf.save());
}

TEST(Command, FeatureAndLogIdValuesMatchSpec) {
  EXPECT_EQ(static_cast<int>(FeatureId::arbitration), 0x01);
  EXPECT_EQ(static_cast<int>(FeatureId::volatile_write_cache), 0x06);
  EXPECT_EQ(static_cast<int>(FeatureId::number_of_queues), 0x07);
  EXPECT_EQ(static_cast<int>(FeatureId::async_event_configuration), 0x0B);
  EXPECT_EQ(static_cast<int>(FeatureId::keep_alive_timer), 0x0F);
  EXPECT_EQ(static_cast<int>(FeatureId::host_identifier), 0x81);
  EXPECT_EQ(static_cast<int>(LogPageId::changed_namespace_list), 0x04);
  EXPECT_EQ(static_cast<int>(LogPageId::ana), 0x0C);
  EXPECT_EQ(static_cast<int>(LogPageId::feature_identifiers_supported_effects), 0x12);
  EXPECT_EQ(static_cast<int>(AdminOpcode::keep_alive), 0x18);
  EXPECT_EQ(static_cast<int>(AdminOpcode::async_event_request), 0x0C);
  EXPECT_EQ(static_cast<int>(IoOpcode::dataset_management), 0x09);
}

TEST(Command, KeepAliveAerAndAbort) {
  EXPECT_EQ(make_keep_alive(1).hdr.opcode, 0x18);
  EXPECT_EQ(make_async_event_request(2).hdr.opcode, 0x0C);
  const auto ab = make_abort(9, 3, 0x1234);
  const auto b = bytes_of(ab);
  EXPECT_EQ(b[0], 0x08);
  EXPECT_EQ(b[40], 0x03);  // SQID
  EXPECT_EQ(b[42], 0x34);  // CID 31:16
  EXPECT_EQ(b[43], 0x12);
  EXPECT_EQ(ab.sqid(), 3);
  EXPECT_EQ(ab.target_cid(), 0x1234);
}

TEST(Completion, GoldenBytesWithPhaseAndStatus) {
  const Cqe c = make_cqe(0xBEEF, 2, 17, status::lba_out_of_range, 0x11223344, /*phase=*/true);
  const std::vector<uint8_t> want = {0x44, 0x33, 0x22, 0x11, 0, 0, 0, 0, 17, 0, 2, 0, 0xEF, 0xBE,
                                     // status field 0x4080 (DNR, SC 0x80) << 1 | phase = 0x8101
                                     0x01, 0x81};
  EXPECT_EQ(bytes_of(c), want);
  EXPECT_TRUE(c.phase());
  EXPECT_EQ(c.get_status(), status::lba_out_of_range);
  EXPECT_TRUE(c.get_status().dnr());
}

TEST(Completion, Result64AndAsyncEventDw0) {
  Cqe c{};
  c.set_result64(0x0123456789ABCDEFull);
  EXPECT_EQ(c.dw0.get(), 0x89ABCDEFu);
  EXPECT_EQ(c.dw1.get(), 0x01234567u);
  EXPECT_EQ(c.result64(), 0x0123456789ABCDEFull);

  const uint32_t aen = async_event_result(AsyncEventType::notice,
                                          static_cast<uint8_t>(AsyncEventNotice::discovery_log_page_change), 0x70);
  EXPECT_EQ(aen, 0x0070F002u);
  EXPECT_EQ(async_event_type(aen), AsyncEventType::notice);
  EXPECT_EQ(async_event_info(aen), 0xF0);
  EXPECT_EQ(async_event_lid(aen), 0x70);
  EXPECT_EQ(async_event_result(AsyncEventType::notice, 0x00, 0x04), 0x00040002u);
}

}  // namespace
}  // namespace rdmablk::protocol

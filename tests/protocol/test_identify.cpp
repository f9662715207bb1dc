// Identify data structures (NVMe Base 2.0 Figures 275-281; NVM Command Set 1.0 Figure 97).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "protocol/identify.h"
#include "protocol/properties.h"

namespace rdmablk::protocol {
namespace {

template <typename T>
std::vector<uint8_t> bytes_of(const T& v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

uint16_t u16_at(const std::vector<uint8_t>& b, std::size_t off) { return static_cast<uint16_t>(b[off] | b[off + 1] << 8); }
uint32_t u32_at(const std::vector<uint8_t>& b, std::size_t off) {
  return uint32_t{b[off]} | uint32_t{b[off + 1]} << 8 | uint32_t{b[off + 2]} << 16 | uint32_t{b[off + 3]} << 24;
}

TEST(Identify, ControllerFieldsLandAtSpecOffsets) {
  auto ctrl = std::make_unique<IdentifyController>();
  *ctrl = {};
  ctrl->vid.set(0x1B36);
  set_padded(ctrl->sn, "SN123", 5, ' ');
  set_padded(ctrl->mn, "rdmablk", 7, ' ');
  set_padded(ctrl->fr, "0.1", 3, ' ');
  ctrl->ieee = {0x11, 0x22, 0x33};
  ctrl->cmic = idctl::kCmicMultiController | idctl::kCmicAna;
  ctrl->mdts = 8;
  ctrl->cntlid.set(0x0042);
  ctrl->ver.set(kNvme2_0.value);
  ctrl->oaes.set(idctl::kOaesNamespaceAttribute | idctl::kOaesAnaChange);
  ctrl->ctratt.set(idctl::kCtrattHostId128 | idctl::kCtrattTbkas);
  ctrl->cntrltype = idctl::kCntrltypeIo;
  ctrl->fguid[0] = 0xFE;
  ctrl->crdt1.set(5);
  ctrl->oacs.set(idctl::kOacsDoorbellBufferConfig);
  ctrl->acl = 3;
  ctrl->aerl = 3;
  ctrl->lpa = idctl::kLpaSmartPerNamespace | idctl::kLpaCommandEffects | idctl::kLpaExtendedData;
  ctrl->elpe = 127;
  ctrl->wctemp.set(0x0157);
  ctrl->kas.set(10);
  ctrl->sqes = idctl::kSqes64;
  ctrl->cqes = idctl::kCqes16;
  ctrl->maxcmd.set(128);
  ctrl->nn.set(1024);
  ctrl->oncs.set(idctl::kOncsDsm | idctl::kOncsWriteZeroes);
  ctrl->vwc = idctl::kVwcPresent;
  ctrl->sgls.set(idctl::kSglsSupported | idctl::kSglsKeyed | idctl::kSglsOffset);
  ctrl->mnan.set(1024);
  set_padded(ctrl->subnqn, "nqn.2014-08.io.rdmablk:vol1", 27, '\0');
  ctrl->ioccsz.set((64 + 4096) / 16);
  ctrl->iorcsz.set(1);
  ctrl->icdoff.set(0);
  ctrl->msdbd = 1;
  ctrl->ofcs.set(1);
  ctrl->psd[0].mp.set(0x09C4);
  ctrl->psd[1].enlat.set(0xAABBCCDD);
  ctrl->vs[0] = 0x5A;

  const auto b = bytes_of(*ctrl);
  EXPECT_EQ(u16_at(b, 0), 0x1B36);
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(&b[4]), 20), "SN123               ");
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(&b[24]), 7), "rdmablk");
  EXPECT_EQ(b[31], ' ');  // space padded after "rdmablk"
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(&b[64]), 8), "0.1     ");
  EXPECT_EQ(b[73], 0x11);
  EXPECT_EQ(b[75], 0x33);
  EXPECT_EQ(b[76], 0x0A);
  EXPECT_EQ(b[77], 8);
  EXPECT_EQ(u16_at(b, 78), 0x0042);
  EXPECT_EQ(u32_at(b, 80), 0x00020000u);
  EXPECT_EQ(u32_at(b, 92), 0x00000900u);
  EXPECT_EQ(u32_at(b, 96), 0x41u);
  EXPECT_EQ(b[111], 1);
  EXPECT_EQ(b[112], 0xFE);
  EXPECT_EQ(u16_at(b, 128), 5);
  EXPECT_EQ(u16_at(b, 256), 0x100);
  EXPECT_EQ(b[258], 3);
  EXPECT_EQ(b[259], 3);
  EXPECT_EQ(b[261], 0x07);
  EXPECT_EQ(b[262], 127);
  EXPECT_EQ(u16_at(b, 266), 0x0157);
  EXPECT_EQ(u16_at(b, 320), 10);
  EXPECT_EQ(b[512], 0x66);
  EXPECT_EQ(b[513], 0x44);
  EXPECT_EQ(u16_at(b, 514), 128);
  EXPECT_EQ(u32_at(b, 516), 1024u);
  EXPECT_EQ(u16_at(b, 520), 0x0C);
  EXPECT_EQ(b[525], 1);
  EXPECT_EQ(u32_at(b, 536), 0x00100005u);
  EXPECT_EQ(u32_at(b, 540), 1024u);
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(&b[768])), "nqn.2014-08.io.rdmablk:vol1");
  EXPECT_EQ(u32_at(b, 1792), 260u);
  EXPECT_EQ(u32_at(b, 1796), 1u);
  EXPECT_EQ(u16_at(b, 1800), 0);
  EXPECT_EQ(b[1803], 1);
  EXPECT_EQ(u16_at(b, 1804), 1);
  EXPECT_EQ(u16_at(b, 2048), 0x09C4);
  EXPECT_EQ(u32_at(b, 2048 + 32 + 4), 0xAABBCCDDu);
  EXPECT_EQ(b[3072], 0x5A);
}

TEST(Identify, ControllerCapacityIs128Bit) {
  auto ctrl = std::make_unique<IdentifyController>();
  *ctrl = {};
  ctrl->tnvmcap.set(0x1122334455667788ull, 0x01);
  const auto b = bytes_of(*ctrl);
  EXPECT_EQ(b[280], 0x88);
  EXPECT_EQ(b[287], 0x11);
  EXPECT_EQ(b[288], 0x01);
  EXPECT_EQ(ctrl->tnvmcap.high(), 1u);
}

TEST(Identify, NamespaceFieldsLandAtSpecOffsets) {
  auto ns = std::make_unique<IdentifyNamespace>();
  *ns = {};
  ns->nsze.set(0x0000000100000000ull);
  ns->ncap.set(2);
  ns->nuse.set(3);
  ns->nsfeat = idns::kNsfeatThinProvisioning | idns::kNsfeatOptPerf;
  ns->nlbaf = 1;
  ns->flbas = 1;
  ns->nmic = idns::kNmicShared;
  ns->dlfeat = idns::kDlfeatReadZeroes | idns::kDlfeatWriteZeroesDeallocate;
  ns->noiob.set(0x80);
  ns->nvmcap.set(0x2000);
  ns->npwg.set(7);
  ns->nows.set(31);
  ns->anagrpid.set(1);
  ns->nsattr = idns::kNsattrWriteProtected;
  ns->nguid[0] = 0xA0;
  ns->nguid[15] = 0xAF;
  ns->eui64[0] = 0xE0;
  ns->eui64[7] = 0xE7;
  ns->lbaf[0].lbads = 9;
  ns->lbaf[1].lbads = 12;
  ns->lbaf[1].ms.set(8);
  ns->lbaf[1].rp = 2;
  ns->lbaf[63].lbads = 13;

  const auto b = bytes_of(*ns);
  EXPECT_EQ(b[4], 0x01);  // nsze bit 32
  EXPECT_EQ(b[8], 2);
  EXPECT_EQ(b[16], 3);
  EXPECT_EQ(b[24], 0x11);
  EXPECT_EQ(b[25], 1);
  EXPECT_EQ(b[26], 1);
  EXPECT_EQ(b[30], 1);
  EXPECT_EQ(b[33], 0x09);
  EXPECT_EQ(u16_at(b, 46), 0x80);
  EXPECT_EQ(u16_at(b, 48), 0x2000);
  EXPECT_EQ(u16_at(b, 64), 7);
  EXPECT_EQ(u16_at(b, 72), 31);
  EXPECT_EQ(u32_at(b, 92), 1u);
  EXPECT_EQ(b[99], 1);
  EXPECT_EQ(b[104], 0xA0);
  EXPECT_EQ(b[119], 0xAF);
  EXPECT_EQ(b[120], 0xE0);
  EXPECT_EQ(b[127], 0xE7);
  EXPECT_EQ(b[130], 9);                 // lbaf[0].lbads
  EXPECT_EQ(u16_at(b, 132), 8);         // lbaf[1].ms
  EXPECT_EQ(b[134], 12);                // lbaf[1].lbads
  EXPECT_EQ(b[135], 2);                 // lbaf[1].rp
  EXPECT_EQ(b[128 + 63 * 4 + 2], 13);   // lbaf[63] ends at 383
  EXPECT_EQ(ns->format_index(), 1);
}

TEST(Identify, FormatIndexUsesHighFlbasBits) {
  IdentifyNamespace ns{};
  ns.flbas = 0x20 | idns::kFlbasExtendedMetadata | 0x3;  // bits 6:5 = 01 -> index bit 4
  EXPECT_EQ(ns.format_index(), 0x13);
}

TEST(Identify, ActiveNamespaceListStartsAfterNsid) {
  const std::vector<uint32_t> active = {1, 2, 5, 9, 100};
  auto list = make_active_namespace_list(active, 2);
  EXPECT_EQ(list.nsid[0].get(), 5u);
  EXPECT_EQ(list.nsid[1].get(), 9u);
  EXPECT_EQ(list.nsid[2].get(), 100u);
  EXPECT_EQ(list.nsid[3].get(), 0u);
  list = make_active_namespace_list(active, 0);
  EXPECT_EQ(list.nsid[0].get(), 1u);
  EXPECT_EQ(list.nsid[4].get(), 100u);
  list = make_active_namespace_list(active, 100);
  EXPECT_EQ(list.nsid[0].get(), 0u);
}

TEST(Identify, ActiveNamespaceListCapsAt1024) {
  std::vector<uint32_t> active(2000);
  for (uint32_t i = 0; i < active.size(); ++i) active[i] = i + 1;
  const auto list = make_active_namespace_list(active, 0);
  EXPECT_EQ(list.nsid[0].get(), 1u);
  EXPECT_EQ(list.nsid[1023].get(), 1024u);
}

TEST(Identify, NsIdDescriptorListGoldenBytes) {
  NamespaceIds ids;
  ids.eui64 = std::array<uint8_t, 8>{1, 2, 3, 4, 5, 6, 7, 8};
  ids.nguid = std::array<uint8_t, 16>{};
  ids.nguid->fill(0xAB);
  ids.csi = 0x00;
  const auto list = make_ns_id_descriptor_list(ids);
  const std::vector<uint8_t> head(list.begin(), list.begin() + 12);
  EXPECT_EQ(head, (std::vector<uint8_t>{0x01, 0x08, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(list[12], 0x02);  // NGUID header
  EXPECT_EQ(list[13], 16);
  EXPECT_EQ(list[16], 0xAB);
  EXPECT_EQ(list[31], 0xAB);
  EXPECT_EQ(list[32], 0x04);  // CSI header
  EXPECT_EQ(list[33], 1);
  EXPECT_EQ(list[36], 0x00);
  EXPECT_EQ(list[37], 0x00);  // terminator
}

TEST(Identify, NsIdDescriptorListRoundTrip) {
  NamespaceIds ids;
  ids.uuid = std::array<uint8_t, 16>{0xDE, 0xAD, 0xBE, 0xEF};
  ids.nguid = std::array<uint8_t, 16>{9, 8, 7};
  ids.csi = 0x02;
  const auto list = make_ns_id_descriptor_list(ids);
  const auto parsed = parse_ns_id_descriptor_list(list);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().what;
  EXPECT_FALSE(parsed->eui64.has_value());
  EXPECT_EQ(parsed->nguid, ids.nguid);
  EXPECT_EQ(parsed->uuid, ids.uuid);
  EXPECT_EQ(parsed->csi, std::optional<uint8_t>(0x02));
}

TEST(Identify, NsIdDescriptorParserSkipsUnknownTypes) {
  const std::vector<uint8_t> list = {0x7E, 2, 0, 0, 0xAA, 0xBB, 0x04, 1, 0, 0, 0x02, 0};
  const auto parsed = parse_ns_id_descriptor_list(list);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->csi, std::optional<uint8_t>(0x02));
}

TEST(Identify, NsIdDescriptorParserRejectsWithOffsets) {
  // Wrong NIDL for EUI64 at the second descriptor (starts at 5): offset of its NIDL = 6.
  std::vector<uint8_t> list = {0x04, 1, 0, 0, 0x00, 0x01, 16, 0, 0};
  list.resize(64, 0);
  auto v = parse_ns_id_descriptor_list(list);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 6u);

  // Identifier runs past the end of the buffer: offset of NIDL.
  list = {0x02, 16, 0, 0, 1, 2, 3};
  v = parse_ns_id_descriptor_list(list);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 1u);

  // Header truncated: offset of the header.
  list = {0x04, 1, 0, 0, 0x00, 0x03, 16};
  v = parse_ns_id_descriptor_list(list);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 5u);

  // Duplicate CSI: offset of the second NIDT.
  list = {0x04, 1, 0, 0, 0x00, 0x04, 1, 0, 0, 0x02, 0};
  v = parse_ns_id_descriptor_list(list);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 5u);
}

}  // namespace
}  // namespace rdmablk::protocol

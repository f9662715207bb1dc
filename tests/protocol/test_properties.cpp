// Controller properties (NVMe Base 2.0, 3.1.3).
#include <gtest/gtest.h>

#include "protocol/properties.h"

namespace rdmablk::protocol {
namespace {

TEST(Properties, OffsetsAndSizes) {
  EXPECT_EQ(property::cap, 0x00u);
  EXPECT_EQ(property::vs, 0x08u);
  EXPECT_EQ(property::intms, 0x0Cu);
  EXPECT_EQ(property::intmc, 0x10u);
  EXPECT_EQ(property::cc, 0x14u);
  EXPECT_EQ(property::csts, 0x1Cu);
  EXPECT_EQ(property::nssr, 0x20u);
  EXPECT_EQ(property_size(property::cap), 8u);
  EXPECT_EQ(property_size(property::vs), 4u);
  EXPECT_EQ(property_size(property::cc), 4u);
  EXPECT_EQ(property_size(property::csts), 4u);
  EXPECT_EQ(property_size(property::nssr), 4u);
  EXPECT_FALSE(property_size(0x18).has_value());  // reserved
  EXPECT_FALSE(property_size(0x1000).has_value());
}

TEST(Properties, CapGoldenValueLikeNvmet) {
  // MQES 127, CQR, TO 15 (7.5 s), CSS NVM (bit 37) + I/O command sets (bit 43), MPSMIN 0, MPSMAX 0.
  Cap cap;
  cap.set_mqes(127).set_cqr(true).set_to(15).set_css(Cap::kCssNvm | Cap::kCssIoCommandSets);
  EXPECT_EQ(cap.value, 0x0000'0820'0F01'007Full);
  EXPECT_EQ(cap.mqes(), 127);
  EXPECT_TRUE(cap.cqr());
  EXPECT_EQ(cap.to(), 15);
  EXPECT_EQ(cap.css(), 0x41);
  EXPECT_EQ(cap.mpsmin(), 0);
}

TEST(Properties, CapEveryFieldAtItsBits) {
  Cap cap;
  cap.set_ams(0x3).set_dstrd(0xA).set_nssrs(true).set_bps(true).set_mpsmin(0x3).set_mpsmax(0x5).set_cmbs(true).set_nsss(
      true);
  EXPECT_EQ(cap.value, (0x3ull << 17) | (0xAull << 32) | (1ull << 36) | (1ull << 45) | (0x3ull << 48) |
                           (0x5ull << 52) | (1ull << 57) | (1ull << 58));
  EXPECT_EQ(cap.ams(), 3);
  EXPECT_EQ(cap.dstrd(), 0xA);
  EXPECT_TRUE(cap.nssrs());
  EXPECT_TRUE(cap.bps());
  EXPECT_EQ(cap.mpsmin(), 3);
  EXPECT_EQ(cap.mpsmax(), 5);
  EXPECT_TRUE(cap.cmbs());
  EXPECT_TRUE(cap.nsss());
  EXPECT_FALSE(cap.pmrs());
  const Cap raw{1ull << 56 | 0x3ull << 59 | 0x2ull << 46};
  EXPECT_TRUE(raw.pmrs());
  EXPECT_EQ(raw.crms(), 3);
  EXPECT_EQ(raw.cps(), 2);
}

TEST(Properties, VersionEncoding) {
  EXPECT_EQ(kNvme1_3.value, 0x00010300u);
  EXPECT_EQ(kNvme2_0.value, 0x00020000u);
  const Vs v = Vs::make(1, 4, 2);
  EXPECT_EQ(v.value, 0x00010402u);
  EXPECT_EQ(v.major(), 1);
  EXPECT_EQ(v.minor(), 4);
  EXPECT_EQ(v.tertiary(), 2);
}

TEST(Properties, CcAsTheLinuxHostWritesIt) {
  // EN | IOSQES 6 | IOCQES 4, CSS NVM, MPS 0 (4 KiB), AMS round robin.
  const Cc cc{0x00460001};
  EXPECT_TRUE(cc.en());
  EXPECT_EQ(cc.iosqes(), 6);
  EXPECT_EQ(cc.iocqes(), 4);
  EXPECT_EQ(cc.css(), 0);
  EXPECT_EQ(cc.mps(), 0);
  EXPECT_EQ(cc.ams(), 0);
  EXPECT_EQ(cc.shn(), 0);
  Cc shut = cc;
  shut.set_shn(Cc::Shn::normal);
  EXPECT_EQ(shut.value, 0x00464001u);
  shut.set_en(false).set_css(7).set_mps(2).set_ams(1);
  EXPECT_EQ(shut.value, 0x00464000u | 7u << 4 | 2u << 7 | 1u << 11);
  EXPECT_EQ(shut.css(), 7);
  EXPECT_EQ(shut.mps(), 2);
  EXPECT_EQ(shut.ams(), 1);
  EXPECT_FALSE(Cc{0x00460001}.crime());
}

TEST(Properties, CstsFields) {
  Csts csts;
  csts.set_rdy(true).set_shst(Csts::Shst::complete);
  EXPECT_EQ(csts.value, 0x9u);
  EXPECT_TRUE(csts.rdy());
  EXPECT_EQ(csts.shst(), 2);
  csts.set_cfs(true).set_nssro(true).set_pp(true);
  EXPECT_EQ(csts.value, 0x9u | 0x2u | 0x10u | 0x20u);
  EXPECT_TRUE(csts.cfs());
  EXPECT_TRUE(csts.nssro());
  EXPECT_TRUE(csts.pp());
  csts.set_rdy(false);
  EXPECT_FALSE(csts.rdy());
  EXPECT_EQ(kNssrResetValue, 0x4E564D65u);  // "NVMe"
}

}  // namespace
}  // namespace rdmablk::protocol

// SGL descriptors: golden layouts (NVMe Base 2.0 Figures 114-121) and the fabrics data SGL decoder.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "protocol/command.h"
#include "protocol/sgl.h"

namespace rdmablk::protocol {
namespace {

std::vector<uint8_t> bytes_of(const SglDescriptor& d) {
  std::vector<uint8_t> out(16);
  std::memcpy(out.data(), &d, 16);
  return out;
}

SglDescriptor from_bytes(const std::array<uint8_t, 16>& b) { return load<SglDescriptor>(b.data()); }

TEST(Sgl, KeyedWithInvalidateGoldenBytes) {
  const auto d = make_keyed_sgl(0x00007F0012345000ull, 0x123456, 0xCAFEF00D, /*invalidate=*/true);
  const std::vector<uint8_t> want = {0x00, 0x50, 0x34, 0x12, 0x00, 0x7F, 0x00, 0x00,  // address
                                     0x56, 0x34, 0x12,                                // 24-bit length
                                     0x0D, 0xF0, 0xFE, 0xCA,                          // key at byte 11
                                     0x4F};                                           // keyed, invalidate
  EXPECT_EQ(bytes_of(d), want);
  EXPECT_EQ(d.type(), SglType::keyed_data_block);
  EXPECT_EQ(d.subtype(), 0xF);
}

TEST(Sgl, InCapsuleAndTransportGoldenBytes) {
  const std::vector<uint8_t> in_capsule = {0x00, 0x00, 0, 0, 0, 0, 0, 0, 0x00, 0x10, 0x00, 0x00, 0, 0, 0, 0x01};
  EXPECT_EQ(bytes_of(make_in_capsule_sgl(0, 4096)), in_capsule);
  const std::vector<uint8_t> transport = {0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x02, 0x00, 0, 0, 0, 0x5A};
  EXPECT_EQ(bytes_of(make_transport_sgl(0x20000)), transport);
  EXPECT_EQ(kSglInCapsule, 0x01);
  EXPECT_EQ(kSglKeyed, 0x40);
  EXPECT_EQ(kSglKeyedInvalidate, 0x4F);
  EXPECT_EQ(kSglTransport, 0x5A);
}

TEST(Sgl, DecodeKeyed) {
  const auto v = decode_data_sgl(make_keyed_sgl(0xDEADBEEF000ull, 8192, 0x77, false));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, SglKind::keyed);
  EXPECT_EQ(v->addr, 0xDEADBEEF000ull);
  EXPECT_EQ(v->length, 8192u);
  EXPECT_EQ(v->key, 0x77u);
  EXPECT_FALSE(v->invalidate);

  const auto inv = decode_data_sgl(make_keyed_sgl(1, 2, 3, true), SglAccept::rdma);
  ASSERT_TRUE(inv.has_value());
  EXPECT_TRUE(inv->invalidate);
}

TEST(Sgl, DecodeKeyedFromRawBytesWithMaximumLengthAndKey) {
  const std::array<uint8_t, 16> raw = {1, 2, 3, 4, 5, 6, 7, 8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x40};
  const auto v = decode_data_sgl(std::span<const uint8_t>(raw));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->addr, 0x0807060504030201ull);
  EXPECT_EQ(v->length, kSglKeyedMaxLength);
  EXPECT_EQ(v->key, 0xFFFFFFFFu);
}

TEST(Sgl, KeyedLengthZeroIsLegal) {
  const auto v = decode_data_sgl(make_keyed_sgl(0, 0, 0));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, SglKind::keyed);
  EXPECT_EQ(v->length, 0u);
}

TEST(Sgl, KeyedLengthIsTruncatedTo24Bits) {
  const auto d = make_keyed_sgl(0, 0x01000010, 0xAB);
  const auto v = decode_data_sgl(d);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->length, 0x10u);
  EXPECT_EQ(v->key, 0xABu);  // the length did not spill into the key
}

TEST(Sgl, DecodeInCapsuleAndTransport) {
  const auto ic = decode_data_sgl(make_in_capsule_sgl(16, 512), SglAccept::tcp);
  ASSERT_TRUE(ic.has_value());
  EXPECT_EQ(ic->kind, SglKind::in_capsule);
  EXPECT_EQ(ic->addr, 16u);
  EXPECT_EQ(ic->length, 512u);
  EXPECT_TRUE(sgl_fits_in_capsule(*ic, 528));
  EXPECT_FALSE(sgl_fits_in_capsule(*ic, 527));

  const auto tr = decode_data_sgl(make_transport_sgl(1u << 20), SglAccept::tcp);
  ASSERT_TRUE(tr.has_value());
  EXPECT_EQ(tr->kind, SglKind::transport);
  EXPECT_EQ(tr->length, 1u << 20);
  EXPECT_EQ(tr->addr, 0u);
}

TEST(Sgl, FitsInCapsuleIsOverflowSafe) {
  const SglDescriptorView huge{SglKind::in_capsule, ~0ull - 4, 16, 0, false};
  EXPECT_FALSE(sgl_fits_in_capsule(huge, 8192));
  const SglDescriptorView keyed{SglKind::keyed, 0, 16, 0, false};
  EXPECT_FALSE(sgl_fits_in_capsule(keyed, 8192));
}

struct BadSgl {
  uint8_t identifier;
};
class SglRejects : public ::testing::TestWithParam<BadSgl> {};

TEST_P(SglRejects, UnknownTypeOrSubtypeAtByte15) {
  std::array<uint8_t, 16> raw{};
  raw[15] = GetParam().identifier;
  const auto v = decode_data_sgl(from_bytes(raw));
  ASSERT_FALSE(v.has_value()) << std::hex << int{GetParam().identifier};
  EXPECT_EQ(v.error().offset, 15u);
  EXPECT_NE(v.error().what, nullptr);
}
INSTANTIATE_TEST_SUITE_P(Identifiers, SglRejects,
                         ::testing::Values(BadSgl{0x00},    // data block, address subtype (PCIe only)
                                           BadSgl{0x0A},    // data block, transport subtype
                                           BadSgl{0x10},    // bit bucket
                                           BadSgl{0x20},    // segment
                                           BadSgl{0x30},    // last segment
                                           BadSgl{0x41},    // keyed, offset subtype
                                           BadSgl{0x4A},    // keyed, transport subtype
                                           BadSgl{0x50},    // transport data block, address subtype
                                           BadSgl{0x60},    // reserved type
                                           BadSgl{0xF0}));  // vendor specific

TEST(Sgl, RejectsKindNotAcceptedByTransport) {
  auto on_rdma = decode_data_sgl(make_transport_sgl(4096), SglAccept::rdma);
  ASSERT_FALSE(on_rdma.has_value());
  EXPECT_EQ(on_rdma.error().offset, 15u);
  auto on_tcp = decode_data_sgl(make_keyed_sgl(0, 4096, 1), SglAccept::tcp);
  ASSERT_FALSE(on_tcp.has_value());
  EXPECT_EQ(on_tcp.error().offset, 15u);
}

TEST(Sgl, RejectOffsetsRelativeToTheSqe) {
  Sqe sqe{};
  sqe.hdr.dptr.identifier = 0x20;  // segment descriptor
  const auto v = decode_data_sgl(sqe.hdr.dptr, SglAccept::any, offsetof(Sqe, hdr) + offsetof(SqeHeader, dptr));
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 39u);
}

TEST(Sgl, RejectsTruncatedBytes) {
  const std::array<uint8_t, 10> raw{};
  const auto v = decode_data_sgl(std::span<const uint8_t>(raw), SglAccept::any, 24);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().offset, 34u);
}

}  // namespace
}  // namespace rdmablk::protocol

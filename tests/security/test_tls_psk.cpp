// NVMe/TCP TLS PSKs: interchange format, retained PSK, identities, TLS PSK.
//
// Known answers come from two independent sources:
//  - libnvme's test/psk.c (test_data_psk, test_data_identity, test_data_identity_compat): the configured
//    key 5512DBB6..., the interchange strings and the version 1 identities for nqn.psk-test-host /
//    nqn.psk-test-subsys, both for the fixed derivation and for the old (compat) one;
//  - python3 hashlib + hmac: HKDF-Extract/Expand (RFC 5869) written out by hand with the RFC 8446 HkdfLabel
//    (or libnvme's old info layout for compat) for the retained PSKs and TLS PSKs, and zlib.crc32 for the CRC.
//    The script reproduces libnvme's identities above before its other outputs were pasted here.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "security/tls_psk.h"

namespace rdmablk::security {
namespace {

std::vector<uint8_t> from_hex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

std::string to_hex(std::span<const uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

// libnvme test/psk.c configured keys.
const std::vector<uint8_t> kKey32 = from_hex("5512DBB6737D0106F65975B773DFB011FFC344BCF442E2DD6D8BC4870B5D5B03");
const std::vector<uint8_t> kKey48 = from_hex(
    "5512DBB6737D0106F65975B773DFB011FFC344BCF442E2DD6D8BC4870B5D5B03FFC344BCF442E2DD6D8BC4870B5D5B03");
constexpr std::string_view kHost = "nqn.psk-test-host";
constexpr std::string_view kSubsys = "nqn.psk-test-subsys";

ConfiguredPsk configured(const std::vector<uint8_t>& key, PskHash hash) {
  ConfiguredPsk psk;
  psk.key = Secret(key);
  psk.hash = hash;
  return psk;
}

TEST(TlsPskInterchange, ParsesLibnvmeExamples) {
  struct Case {
    const char* text;
    PskHash hash;
    const std::vector<uint8_t>* key;
  } cases[] = {
      {"NVMeTLSkey-1:00:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", PskHash::none, &kKey32},
      {"NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", PskHash::sha256, &kKey32},
      {"NVMeTLSkey-1:02:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwP/w0S89ELi3W2LxIcLXVsDn8kXZQ==:",
       PskHash::sha384, &kKey48},
  };
  for (const auto& c : cases) {
    auto psk = parse_psk_interchange(c.text);
    ASSERT_TRUE(psk) << c.text << ": " << psk.error().message;
    EXPECT_EQ(psk->hash, c.hash);
    EXPECT_TRUE(psk->key.equals(*c.key));
    auto text = format_psk_interchange(*psk);
    ASSERT_TRUE(text);
    EXPECT_EQ(*text, c.text);
  }
  // A key file's trailing newline is fine.
  EXPECT_TRUE(parse_psk_interchange("NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:\n"));
}

TEST(TlsPskInterchange, Crc32IsZlibs) {
  // python3: hex(zlib.crc32(bytes.fromhex('5512DBB6...5B03'))) == 0xd9baf45f
  EXPECT_EQ(psk_crc32(kKey32), 0xd9baf45fu);
}

TEST(TlsPskInterchange, RejectsBadInputWithoutQuotingTheKey) {
  const std::string good = "NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:";
  std::vector<std::string> bad = {
      "",
      "NVMeTLSkey-2:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:",     // version
      "NVMeTLSkey-1:03:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:",     // hash
      "NVMeTLSkey-1:02:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:",     // 32 bytes with 02
      "NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ",      // no final colon
      "NVMeTLSkey-1:01:WRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:",     // CRC mismatch
      "NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9Lr:",      // length
      "NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWw Nf9LrZ:",    // not Base64
      "NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9L==:",     // padding inside
      "NVMeTLSkey-1:00:VRLbtnN9AQb2WXW3:",                                      // too short
      "NVMeTLSkey-1:01::",
  };
  for (const auto& text : bad) {
    auto psk = parse_psk_interchange(text);
    ASSERT_FALSE(psk) << text;
    EXPECT_EQ(psk.error().message.find("VRLbtn"), std::string::npos) << psk.error().message;
    EXPECT_EQ(psk.error().message.find("WRLbtn"), std::string::npos) << psk.error().message;
  }
  EXPECT_TRUE(parse_psk_interchange(good));
}

TEST(TlsPskInterchange, GeneratesKeysThatRoundTrip) {
  for (auto [hash, len] : {std::pair{PskHash::sha256, 32u}, std::pair{PskHash::sha384, 48u},
                          std::pair{PskHash::none, 48u}}) {
    auto a = generate_configured_psk(hash, len);
    auto b = generate_configured_psk(hash, len);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->key.size(), len);
    EXPECT_FALSE(a->key.equals(b->key.bytes()));  // 2^-256 chance of a false failure
    auto text = format_psk_interchange(*a);
    ASSERT_TRUE(text);
    auto back = parse_psk_interchange(*text);
    ASSERT_TRUE(back);
    EXPECT_TRUE(back->key.equals(a->key.bytes()));
    EXPECT_EQ(back->hash, hash);
  }
  EXPECT_FALSE(generate_configured_psk(PskHash::none, 40));
}

TEST(TlsPskDerivation, Version1IdentitiesMatchLibnvme) {
  auto p256 = derive_tls_psk_for(configured(kKey32, PskHash::sha256), kHost, kSubsys, 1);
  ASSERT_TRUE(p256) << p256.error().message;
  EXPECT_EQ(p256->identity,
            "NVMe1R01 nqn.psk-test-host nqn.psk-test-subsys iSbjiStwJ/1TrTvDlt2fjFmzvsytOJelidNnA+X5lEU=");
  auto p384 = derive_tls_psk_for(configured(kKey48, PskHash::sha384), kHost, kSubsys, 1);
  ASSERT_TRUE(p384);
  EXPECT_EQ(p384->identity,
            "NVMe1R02 nqn.psk-test-host nqn.psk-test-subsys "
            "QhW2+Rp6RzHlNtCslyRxMnwJ11tKKhz8JCAQpQ+XUD8f9td1VeH5h53yz2wKJG1a");
  auto c256 = derive_tls_psk_for(configured(kKey32, PskHash::sha256), kHost, kSubsys, 1, PskDerivation::libnvme_compat);
  ASSERT_TRUE(c256);
  EXPECT_EQ(c256->identity,
            "NVMe1R01 nqn.psk-test-host nqn.psk-test-subsys 66GuqV08TsAGII39teWUfwQwizjv06Jy8jOcX3NAAzM=");
  auto c384 = derive_tls_psk_for(configured(kKey48, PskHash::sha384), kHost, kSubsys, 1, PskDerivation::libnvme_compat);
  ASSERT_TRUE(c384);
  EXPECT_EQ(c384->identity,
            "NVMe1R02 nqn.psk-test-host nqn.psk-test-subsys "
            "RsKmYJ3nAn1ApjjMloJFbAkLPivONDAX/xW327YBUsn2eGShXSjCZvBaOxscLqmz");
}

TEST(TlsPskDerivation, RetainedAndTlsPsksMatchPython) {
  // python3 hashlib+hmac (see the file comment).
  auto r256 = derive_retained_psk(configured(kKey32, PskHash::sha256), kHost);
  ASSERT_TRUE(r256);
  EXPECT_EQ(to_hex(r256->bytes()), "073311dec37e219ff3acd43f130130c5bdd443c066e1cc3424e49030234ff7d5");
  auto r384c = derive_retained_psk(configured(kKey48, PskHash::sha384), kHost, PskDerivation::libnvme_compat);
  ASSERT_TRUE(r384c);
  EXPECT_EQ(to_hex(r384c->bytes()),
            "12d2452bc4783f50286bf940ad1caa05a304065e379024d9278ca7c9d8a42400c47029f198bfcdf5f14c07cb04eb7306");
  // Hash 00: the configured key is the retained key.
  auto r_none = derive_retained_psk(configured(kKey32, PskHash::none), kHost);
  ASSERT_TRUE(r_none);
  EXPECT_TRUE(r_none->equals(kKey32));

  struct Case {
    const std::vector<uint8_t>* key;
    PskHash hash;
    int version;
    PskDerivation derivation;
    const char* identity;
    const char* tls_psk;
  } cases[] = {
      {&kKey32, PskHash::sha256, 0, PskDerivation::standard, "NVMe0R01 nqn.psk-test-host nqn.psk-test-subsys",
       "05c6503551ad136e6ee32e6eeb3f6d500b69701d84ec71e328f65c7f51566f68"},
      {&kKey32, PskHash::sha256, 0, PskDerivation::libnvme_compat, "NVMe0R01 nqn.psk-test-host nqn.psk-test-subsys",
       "09fb1983ac6d6d0353e7cae4f23daddd651c367fa347c59d9cf6936f5a83eafb"},
      {&kKey32, PskHash::sha256, 1, PskDerivation::standard, nullptr,
       "8fc3c0badfd4c0c66fa3ca33aadd0314f85536cc9bc47338b60f3e6e563786ca"},
      {&kKey32, PskHash::sha256, 1, PskDerivation::libnvme_compat, nullptr,
       "b9f5ab2a41ba6e72a23a12066302a2f775fa6c0942c8e0b18ca8ac07edf305e2"},
      {&kKey48, PskHash::sha384, 0, PskDerivation::standard, "NVMe0R02 nqn.psk-test-host nqn.psk-test-subsys",
       "f42ba63824cdfe421914c582921f85b5b5b7e2d4df084caeedc9be20b212e8bb0fe8a23e9d59a1c8fc6449da4970a78d"},
      {&kKey48, PskHash::sha384, 1, PskDerivation::standard, nullptr,
       "a2b2f943f479fc682555cec89857c80ed004ce92f32a973d5764155bb7e36b17a85368a0666d250afac9282dda2e62ca"},
      {&kKey48, PskHash::sha384, 1, PskDerivation::libnvme_compat, nullptr,
       "fcefe2e2a2e682b1447dcabf1ec268f78f08c63cd075753abcc8bda2c5c34d48d3014aa8d76ad80107e4f5c9f27e2149"},
      // Interchange hash 00: no transform, the cipher suite follows the key length.
      {&kKey32, PskHash::none, 1, PskDerivation::standard,
       "NVMe1R01 nqn.psk-test-host nqn.psk-test-subsys quJVUJjp/BImWR0UQay/MjSfEgyAr6TyBOWybS/B404=",
       "a45d08ee4639c7570729bb3e57e905e466a49a15ece5401af906830c4d3bdb0b"},
      {&kKey32, PskHash::none, 0, PskDerivation::standard, "NVMe0R01 nqn.psk-test-host nqn.psk-test-subsys",
       "ec85300ba827726bd3bc4fc07f3a34aec5fe7c8ccac05fefc2f021c74e0df9ef"},
  };
  for (const auto& c : cases) {
    auto psk = derive_tls_psk_for(configured(*c.key, c.hash), kHost, kSubsys, c.version, c.derivation);
    ASSERT_TRUE(psk) << psk.error().message;
    if (c.identity != nullptr) {
      EXPECT_EQ(psk->identity, c.identity);
    }
    EXPECT_EQ(to_hex(psk->key.bytes()), c.tls_psk) << psk->identity;
    EXPECT_EQ(psk->hash, c.key->size() == 32 ? PskHash::sha256 : PskHash::sha384);
  }
}

TEST(TlsPskDerivation, ExpandLabelMatchesPythonForTrafficKeys) {
  // RFC 8446 7.3 key/iv from traffic secrets 00 01 02 .. (python3 hashlib+hmac, HkdfLabel by hand).
  std::vector<uint8_t> s32(32), s48(48);
  for (std::size_t i = 0; i < s48.size(); ++i) s48[i] = static_cast<uint8_t>(i);
  for (std::size_t i = 0; i < s32.size(); ++i) s32[i] = static_cast<uint8_t>(i);
  auto k128 = hkdf_expand_label(PskHash::sha256, s32, "key", {}, 16);
  auto iv128 = hkdf_expand_label(PskHash::sha256, s32, "iv", {}, 12);
  auto k256 = hkdf_expand_label(PskHash::sha384, s48, "key", {}, 32);
  auto iv256 = hkdf_expand_label(PskHash::sha384, s48, "iv", {}, 12);
  ASSERT_TRUE(k128 && iv128 && k256 && iv256);
  EXPECT_EQ(to_hex(k128->bytes()), "9c9783cf77ea32d44f369da41f19f3cc");
  EXPECT_EQ(to_hex(iv128->bytes()), "2f41c846a431a163814bcd71");
  EXPECT_EQ(to_hex(k256->bytes()), "6877d022f1c61d24ebb7487c16752d9a4798e40431c75b39320e537c90e23225");
  EXPECT_EQ(to_hex(iv256->bytes()), "42822531a0fe88648fc09e9f");
}

TEST(TlsPskDerivation, RejectsNqnsThatBreakTheIdentity) {
  auto key = configured(kKey32, PskHash::sha256);
  EXPECT_FALSE(derive_tls_psk_for(key, "nqn.with space", kSubsys, 1));
  EXPECT_FALSE(derive_tls_psk_for(key, "", kSubsys, 1));
  EXPECT_FALSE(derive_tls_psk_for(key, kHost, std::string(224, 'a'), 1));
  EXPECT_FALSE(derive_tls_psk_for(key, kHost, kSubsys, 2));
  // Version 0's context is the identity itself: HkdfLabel's context is at most 255 bytes.
  EXPECT_FALSE(derive_tls_psk_for(key, std::string(200, 'h'), std::string(200, 's'), 0));
  EXPECT_TRUE(derive_tls_psk_for(key, std::string(200, 'h'), std::string(200, 's'), 1));
}

TEST(TlsPskIdentity, ParsesAndFormats) {
  const std::string v1 =
      "NVMe1R01 nqn.psk-test-host nqn.psk-test-subsys iSbjiStwJ/1TrTvDlt2fjFmzvsytOJelidNnA+X5lEU=";
  auto id = parse_psk_identity(v1);
  ASSERT_TRUE(id) << id.error().message;
  EXPECT_EQ(id->version, 1);
  EXPECT_EQ(id->type, 'R');
  EXPECT_EQ(id->hash, PskHash::sha256);
  EXPECT_EQ(id->hostnqn, kHost);
  EXPECT_EQ(id->subnqn, kSubsys);
  EXPECT_EQ(id->digest, "iSbjiStwJ/1TrTvDlt2fjFmzvsytOJelidNnA+X5lEU=");
  EXPECT_EQ(id->to_string(), v1);

  auto v0 = parse_psk_identity("NVMe0R02 nqn.h nqn.s");
  ASSERT_TRUE(v0);
  EXPECT_EQ(v0->version, 0);
  EXPECT_EQ(v0->hash, PskHash::sha384);
  EXPECT_EQ(v0->to_string(), "NVMe0R02 nqn.h nqn.s");

  for (const char* bad : {"", "NVMe", "NVMe0R01", "NVMe0R01 ", "NVMe0R01 nqn.h", "NVMe0R01 nqn.h nqn.s extra",
                          "NVMe1R01 nqn.h nqn.s", "NVMe2R01 nqn.h nqn.s", "NVMe0X01 nqn.h nqn.s",
                          "NVMe0R03 nqn.h nqn.s", "NVMe0R01  nqn.h nqn.s", "NVMe0R01 nqn.h nqn.s ",
                          "NVMe1R01 nqn.h nqn.s iSbjiStwJ/1TrTvDlt2fjFmzvsytOJelidNnA+X5lEU",
                          "NVMe1R02 nqn.h nqn.s iSbjiStwJ/1TrTvDlt2fjFmzvsytOJelidNnA+X5lEU=",
                          "nvme0R01 nqn.h nqn.s"}) {
    EXPECT_FALSE(parse_psk_identity(bad)) << bad;
  }
}

TEST(TlsPskIdentity, SurvivesArbitraryBytes) {
  // Every prefix of a valid identity and of a mangled one: no crash, no out-of-bounds read (ASan build).
  std::string v1 = "NVMe1R01 nqn.psk-test-host nqn.psk-test-subsys iSbjiStwJ/1TrTvDlt2fjFmzvsytOJelidNnA+X5lEU=";
  int accepted = 0;
  for (std::size_t n = 0; n <= v1.size(); ++n) accepted += parse_psk_identity(std::string_view(v1).substr(0, n)) ? 1 : 0;
  EXPECT_EQ(accepted, 1);
  std::string junk = v1;
  for (std::size_t i = 0; i < junk.size(); ++i) {
    std::string m = junk;
    m[i] = static_cast<char>(0xFF);
    EXPECT_FALSE(parse_psk_identity(m)) << i;
  }
}

}  // namespace
}  // namespace rdmablk::security

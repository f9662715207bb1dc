// DH-HMAC-CHAP secret representation and key transform (security/dhchap_key.h).
//
// Known answers come from outside this code:
//  - the spec's / nvme-cli's example secret "DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:"
//    (nvme-cli Documentation/nvme-gen-dhchap-key.txt, also quoted in the kernel's commit allowing any
//    transform hash with any key size);
//  - representations printed by nvme-cli 2.3 gen-dhchap-key (see AgreesWithNvmeCli);
//  - the other representations and every expected HMAC were computed with python3 (base64, zlib.crc32,
//    struct.pack('<I'), hmac.new(key, msg, hashlib.sha256/384/512)); the exact expressions are in the
//    comments next to the values.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "security/dhchap_key.h"

namespace rdmablk::security::dhchap {
namespace {

std::vector<uint8_t> from_hex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

std::vector<uint8_t> to_vector(std::span<const uint8_t> s) { return {s.begin(), s.end()}; }

std::vector<uint8_t> counting(std::size_t n) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i);
  return v;
}

constexpr std::string_view kSpecKey = "DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:";
// python3: base64.b64decode("ia6z...aQ2n")[:32].hex()
constexpr std::string_view kSpecKeyHex = "89aeb31a874eaf84841b46736b0dfdf2ba58d30aa2a545a3e235a3521e07594c";
constexpr std::string_view kHostNqn = "nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100";

TEST(DhchapCrc, StandardCheckValue) {
  // The CRC-32 (IEEE, reflected) check value of "123456789" is CBF43926 (python3: zlib.crc32(b'123456789')).
  const std::string s = "123456789";
  EXPECT_EQ(dhchap_crc32({reinterpret_cast<const uint8_t*>(s.data()), s.size()}), 0xCBF43926u);
}

TEST(DhchapKey, ParsesTheSpecExample) {
  auto key = DhchapKey::parse(kSpecKey);
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(key->transform(), KeyTransform::none);
  EXPECT_EQ(to_vector(key->secret()), from_hex(kSpecKeyHex));
  // Round trip: the same text comes back.
  EXPECT_EQ(key->format(), kSpecKey);
}

TEST(DhchapKey, SpecExampleWithEveryTransform) {
  // The kernel accepts any transform hash with any key size (the commit quotes these four).
  for (char xx : {'0', '1', '2', '3'}) {
    std::string text(kSpecKey);
    text[8] = xx;
    auto key = DhchapKey::parse(text);
    ASSERT_TRUE(key) << xx << ": " << key.error().message;
    EXPECT_EQ(static_cast<int>(key->transform()), xx - '0');
    EXPECT_EQ(key->format(), text);
  }
}

TEST(DhchapKey, Parses48And64ByteKeys) {
  // python3: k=bytes(range(48)); "DHHC-1:02:%s:" % base64.b64encode(k+struct.pack('<I',zlib.crc32(k))).decode()
  const std::string k48 = "DHHC-1:02:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vcSEgBQ==:";
  // python3: the same with bytes(range(64)) and XX 03
  const std::string k64 =
      "DHHC-1:03:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P4zODhA=:";
  auto a = DhchapKey::parse(k48);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->transform(), KeyTransform::sha384);
  EXPECT_EQ(to_vector(a->secret()), counting(48));
  EXPECT_EQ(a->format(), k48);
  auto b = DhchapKey::parse(k64);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->transform(), KeyTransform::sha512);
  EXPECT_EQ(to_vector(b->secret()), counting(64));
  EXPECT_EQ(b->format(), k64);
}

TEST(DhchapKey, AcceptsWhatTheKernelAccepts) {
  // No trailing ':' (the kernel's nvme_auth_extract_key takes the secret "might be affixed with a ':'"),
  // and the newline of a key file.
  auto a = DhchapKey::parse("DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(to_vector(a->secret()), from_hex(kSpecKeyHex));
  auto b = DhchapKey::parse(std::string(kSpecKey) + "\n");
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(to_vector(b->secret()), from_hex(kSpecKeyHex));
}

// Every refusal names the problem and never quotes the secret (nor a piece of it).
void expect_refused(std::string_view text, std::string_view reason_part) {
  auto key = DhchapKey::parse(text);
  ASSERT_FALSE(key) << "accepted: " << text;
  EXPECT_NE(key.error().message.find(reason_part), std::string::npos) << key.error().message;
  // No 6-character run of the input's base64 part appears in the message.
  const std::size_t start = text.size() > 10 ? 10 : text.size();
  for (std::size_t i = start; i + 6 <= text.size(); ++i) {
    EXPECT_EQ(key.error().message.find(text.substr(i, 6)), std::string::npos)
        << "message quotes the secret: " << key.error().message;
  }
}

TEST(DhchapKey, RefusesBadPrefix) {
  expect_refused("DHHC-2:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:", "DHHC-1:");
  expect_refused("dhhc-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:", "DHHC-1:");
  expect_refused("NVMeTLSkey-1:01:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:", "DHHC-1:");
  expect_refused("", "DHHC-1:");
  expect_refused(" DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:", "DHHC-1:");
}

TEST(DhchapKey, RefusesBadTransformField) {
  expect_refused("DHHC-1:04:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:", "transform");
  expect_refused("DHHC-1:0:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:", "transform");
  expect_refused("DHHC-1:10:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:", "transform");
  expect_refused("DHHC-1:000ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:", "transform");
  expect_refused("DHHC-1:", "transform");
}

TEST(DhchapKey, RefusesBadCrc) {
  // python3: k=bytes(range(32)); raw=k+struct.pack('<I', zlib.crc32(k)^1) - the CRC off by one bit.
  expect_refused("DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+LfiaR:", "CRC");
  // The same key with the right CRC parses (so the refusal above is the CRC's doing).
  auto good = DhchapKey::parse("DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:");
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_EQ(to_vector(good->secret()), counting(32));
  // One character of the spec key changed: the CRC no longer matches.
  expect_refused("DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ3n:", "CRC");
}

TEST(DhchapKey, RefusesBadLength) {
  // python3: the representation of bytes(range(31)) and of bytes(range(33)), each with its right CRC.
  expect_refused("DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHndteE0=:", "31 bytes");
  expect_refused("DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gBYOQ5A==:", "33 bytes");
  expect_refused("DHHC-1:00:AAAA:", "want 32, 48 or 64");
  expect_refused("DHHC-1:00::", "base64");
}

TEST(DhchapKey, RefusesBadBase64) {
  expect_refused("DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2:", "base64");    // 47 chars
  expect_refused("DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2*:", "base64");   // bad char
  expect_refused("DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6a=2n:", "base64");   // '=' inside
  expect_refused("DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqi UWj4jWjUh4HWUz6aQ2n:", "base64");   // space inside
  expect_refused("DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:x", "after");   // trailing junk
  expect_refused("DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n::", "after");
}

TEST(DhchapKey, GenerateMakesDistinctParseableKeys) {
  std::set<std::vector<uint8_t>> seen;
  for (std::size_t len : {32u, 48u, 64u}) {
    for (auto t : {KeyTransform::none, KeyTransform::sha256, KeyTransform::sha384, KeyTransform::sha512}) {
      auto key = DhchapKey::generate(len, t);
      ASSERT_TRUE(key) << key.error().message;
      EXPECT_EQ(key->secret().size(), len);
      EXPECT_EQ(key->transform(), t);
      EXPECT_TRUE(seen.insert(to_vector(key->secret())).second) << "two generated keys are equal";
      const std::string text = key->format();
      auto back = DhchapKey::parse(text);
      ASSERT_TRUE(back) << back.error().message;
      EXPECT_EQ(to_vector(back->secret()), to_vector(key->secret()));
      EXPECT_EQ(back->transform(), t);
    }
  }
  EXPECT_FALSE(DhchapKey::generate(16));
  EXPECT_FALSE(DhchapKey::generate(33));
  EXPECT_FALSE(DhchapKey::generate(32, static_cast<KeyTransform>(4)));
}

TEST(DhchapKey, FromSecretFormatsLikeNvmeCli) {
  // python3: k = bytes(range(32))
  //          "DHHC-1:01:%s:" % base64.b64encode(k + struct.pack('<I', zlib.crc32(k))).decode()
  const auto secret = counting(32);
  auto key = DhchapKey::from_secret(secret, KeyTransform::sha256);
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(key->format(), "DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:");
  EXPECT_FALSE(DhchapKey::from_secret(counting(20), KeyTransform::none));
}

TEST(DhchapKeyTransform, KnownAnswers) {
  auto key = DhchapKey::parse(kSpecKey);
  ASSERT_TRUE(key);
  // XX 00: the secret itself.
  auto none = key->transformed(kHostNqn);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(to_vector(none->view()), from_hex(kSpecKeyHex));

  // python3: hmac.new(key, hostnqn + b"NVMe-over-Fabrics", hashlib.sha256 / sha384 / sha512).hexdigest()
  const std::pair<char, std::string_view> cases[] = {
      {'1', "bc105402882c8dda20d4fdafcbe1176965b975e7c5024a8477f9d0a6584c680c"},
      {'2', "cff133cbbf2e896ac3d862fad85003b190aae37af1620623ae8514e355b77b6c4a39bee879f81942670f4c8f7496dec9"},
      {'3', "90c294c902ff89fa16e3b01a9297c3c9fa1aef6cabadbc21099dc5c5debb2709070a44a6c212d931fabfb0b019ef305e"
            "fce620eb030a7941b9861cff9096baff"},
  };
  for (const auto& [xx, want] : cases) {
    std::string text(kSpecKey);
    text[8] = xx;
    auto k = DhchapKey::parse(text);
    ASSERT_TRUE(k);
    auto t = k->transformed(kHostNqn);
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(to_vector(t->view()), from_hex(want)) << "XX 0" << xx;
  }
}

// Printed by nvme-cli 2.3 (Debian 12's nvme-cli 2.4+really2.3-3), `nvme gen-dhchap-key`:
//   --secret=000102...1f --hmac=0 --key-length=32                   -> kNvmeCliCounting
//   --secret=<the spec key's hex> --hmac=1 --key-length=32 --nqn=<kHostNqn>
//                                         -> kNvmeCliTransformed (nvme-cli 2.x stores the transformed key)
//   --hmac=2 --key-length=48 --nqn=nqn.test:x, and --key-length=64: random keys, parsed and re-formatted.
constexpr std::string_view kNvmeCliCounting = "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:";
constexpr std::string_view kNvmeCliTransformed = "DHHC-1:01:vBBUAogsjdog1P2vy+EXaWW5defFAkqEd/nQplhMaAwgubyf:";
constexpr std::string_view kNvmeCli48 =
    "DHHC-1:02:Z+MN+sic5XWOtgJPe95urUOHZxC2aXGFltj9jcgOILM3sPJZBIBDgcjTNgdtShQgSK2UUQ==:";
constexpr std::string_view kNvmeCli64 =
    "DHHC-1:00:iGVJVNG+u/App0+yioN/FjXYMjbd6dmqLzaghuo5bpBaRAnKHfoxbMYEuE4/zL+EdAUcHY8aMk8vLYBt9KuArMEXLis=:";

TEST(DhchapKey, AgreesWithNvmeCli) {
  auto counting_key = DhchapKey::from_secret(counting(32), KeyTransform::none);
  ASSERT_TRUE(counting_key);
  EXPECT_EQ(counting_key->format(), kNvmeCliCounting);

  // nvme-cli's transformed key is our SHA-256 transform of the spec key with the same NQN.
  std::string spec(kSpecKey);
  spec[8] = '1';
  auto key = DhchapKey::parse(spec);
  ASSERT_TRUE(key);
  auto ours = key->transformed(kHostNqn);
  ASSERT_TRUE(ours);
  auto theirs = DhchapKey::parse(kNvmeCliTransformed);
  ASSERT_TRUE(theirs) << theirs.error().message;
  EXPECT_EQ(to_vector(theirs->secret()), to_vector(ours->view()));

  for (auto text : {kNvmeCli48, kNvmeCli64}) {
    auto k = DhchapKey::parse(text);
    ASSERT_TRUE(k) << k.error().message;
    EXPECT_EQ(k->format(), text);
  }
}

TEST(DhchapKeyTransform, RefusesAnEmptyOrNulNqn) {
  auto key = DhchapKey::parse("DHHC-1:01:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:");
  ASSERT_TRUE(key);
  EXPECT_FALSE(key->transformed(""));
  EXPECT_FALSE(key->transformed(std::string_view("nqn.a\0b", 7)));
}

TEST(SecretBytes, MoveCloneTruncate) {
  SecretBytes a(std::span<const uint8_t>(counting(8)));
  SecretBytes b = a.clone();
  EXPECT_EQ(to_vector(a.view()), to_vector(b.view()));
  SecretBytes c = std::move(a);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(c.size(), 8u);
  c.truncate(3);
  EXPECT_EQ(to_vector(c.view()), (std::vector<uint8_t>{0, 1, 2}));
  c.truncate(10);  // growing is not truncating: no change
  EXPECT_EQ(c.size(), 3u);
}

TEST(ConstantTimeEqual, ComparesContentAndLength) {
  const auto a = counting(32);
  auto b = counting(32);
  EXPECT_TRUE(constant_time_equal(a, b));
  b[31] ^= 1;
  EXPECT_FALSE(constant_time_equal(a, b));
  EXPECT_FALSE(constant_time_equal(a, std::span<const uint8_t>(a).first(31)));
  EXPECT_TRUE(constant_time_equal({}, {}));
}

}  // namespace
}  // namespace rdmablk::security::dhchap

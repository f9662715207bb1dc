// DH-HMAC-CHAP computations (security/dhchap.h): responses, augmented challenge, DH exchange, and a whole
// exchange over the wire formats of protocol/auth.h.
//
// Expected values were computed independently with python3 (hashlib / hmac / struct), with inputs:
//   hostnqn = b"nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100"
//   subnqn  = b"nqn.2014-08.io.rdmablk:vol1"
//   hl      = 32 / 48 / 64 for SHA-256 / SHA-384 / SHA-512 (H below)
//   kh = bytes(range(0x10, 0x10 + hl))             transformed host key
//   kc = bytes(range(0x80, 0x80 + hl))             transformed controller key
//   c1 = bytes((i*7+1) & 0xff for i in range(hl))  C1;  c2 = bytes((i*13+5) & 0xff for i in range(hl))  C2
//   ss = bytes((i*3+0x42) & 0xff for i in range(256))   a stand-in for g^xy mod p
//   aug(c) = hmac.new(H(ss).digest(), c, H).digest()    (nvme_auth_augmented_challenge)
//   R1 = hmac.new(kh, C + struct.pack('<I', 0x01020304) + struct.pack('<H', 0x0506) + bytes([sc_c])
//                 + b"HostHost" + hostnqn + b"\0" + subnqn, H)        C = c1, or aug(c1) with DH
//   R2 = hmac.new(kc, C + struct.pack('<I', 0x0a0b0c0d) + struct.pack('<H', 0x0506) + b"\0"
//                 + b"Controller" + subnqn + b"\0" + hostnqn, H)      C = c2, or aug(c2) with DH
//   psk = hmac.new(ss, c1 + c2, H)                                    (nvme_auth_generate_psk)
#include <gtest/gtest.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "protocol/auth.h"
#include "security/dhchap.h"

namespace rdmablk::security::dhchap {
namespace {

namespace auth = protocol::auth;

constexpr std::string_view kHostNqn = "nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100";
constexpr std::string_view kSubNqn = "nqn.2014-08.io.rdmablk:vol1";

std::vector<uint8_t> from_hex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}
std::vector<uint8_t> to_vector(std::span<const uint8_t> s) { return {s.begin(), s.end()}; }

std::vector<uint8_t> pattern(std::size_t n, unsigned mul, unsigned add) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * mul + add) & 0xFF);
  return v;
}

struct Vectors {
  HashId hash;
  std::string_view r1_null, r2_null, r1_dh, r2_dh, augmented_c1, psk;
};

// python3, as in the file comment.
const Vectors kVectors[] = {
    {HashId::sha256,
     "c64ff18ca789802003a0cd9785d8af284e438337892a4f21729f75bb3ad75b05",
     "028719da6c839bf44314d0092a5e021e16ee2177a82aa67ca5e514bcae1bc6a7",
     "b84a25a1e20c81a53f0a3307ea7048755a0ca22ff42fab2370fdd8a36a842a7b",
     "607cb925bc337501cd074cec9cd19b93ffc4372c51ed71a745b9f09dffa0d91c",
     "e70d88920b3ea1a72fabd2fca1fcde0e30c095b140f9daf630b8915f44c44692",
     "c280f92f888df14a37b9b168e75bc37e18e9fdff244d17a6bd4e28804406caa5"},
    {HashId::sha384,
     "c600e4b9a68bdc7a7735c87733a1e20b01ba0fa38dd43f24bdea9cf7cb61ca77d2a3397edcb32d3fe1b34abc8a88dea1",
     "bd390a81ab0a877f0bd521918fbfba5ca14971d153367e6e06c935da08a05e2691b6f214b16dd406a13870233717acdf",
     "f04c1d701ac266746f7c3ec49afb676742134f3a4a8892e315f8d3c8b919d838a9698932b943786613e43973bf631e67",
     "116b25cad8c742bd522e418435504ffce1d6b11af4f6741cf805c0fdfaad81fd7f3fee569858b8be2218674fb722e5bd",
     "1f06f13de5b211bebb2e7c3afa53cf51e6e2cafa9d8a97b5597e49d79bf9391e865de9cc40288813444f144f9ca17ccc",
     "bdfd4373be6022fa1fbc83f4214e4a64af5553ead4547d6265fc9e8ee3465096d806dcfb869e204f3f68d1f7b2396848"},
    {HashId::sha512,
     "4bfcf320f21f5db936d5b8324a94c8e42ee5daa41412f36ecedc45b6390fe470"
     "5bd42790895e2d57107eae0148dccb9999f4c2c17b3e0134297c4187e5c2091b",
     "6c445722536e1e2fab30b14a5c24baa2f8b50dea0b3afc5e4f96349b1b86cd3a"
     "7003ecca0543f47ccf51d4de527c68a7588574f49d4ae2d62e442eebd513c0bf",
     "c7bc58ada46a6d670f8d1d66daa677ff4f2baca86da1fc35a56fdc7e288ecf05"
     "3b77dc1f6bc1a006af53600cfc7385821f3f67d21c9ec07f96acf833c79fa065",
     "d87adc5edfb5c55504985e1f242d40bb41f0dea1c74ce90816c864d6a4ede0a7"
     "060deb5b54c60702d3961f09ee1e5a7f76f7f74c5b8d9151379e7a09bae8caa9",
     "74bb9994a46bb068dfae848ecfdf4d8636d8298e7949a601c30d5b8da2626109"
     "ced3e6149803ce2aea1fc4711f7563c160846efb499cb5000cbd290374b28722",
     "39dfe6151da0326680919e09f761c3e3e44cba58278b5679471ff8108f5579ee"
     "7b594d92c1c0556e872d0b76aed803b47594acd2fe1fcd336e6f4aeed1ca2a5b"},
};

struct Inputs {
  explicit Inputs(HashId h) : hl(auth::hash_length(h)) {
    kh = pattern(hl, 1, 0x10);
    kc = pattern(hl, 1, 0x80);
    c1 = pattern(hl, 7, 1);
    c2 = pattern(hl, 13, 5);
    ss = pattern(256, 3, 0x42);
  }
  std::size_t hl;
  std::vector<uint8_t> kh, kc, c1, c2, ss;
};

ResponseInput host_input(HashId h, const Inputs& in, bool dh) {
  ResponseInput r;
  r.hash = h;
  r.key = in.kh;
  r.challenge = in.c1;
  if (dh) r.shared_secret = in.ss;
  r.seqnum = 0x01020304;
  r.t_id = 0x0506;
  r.sc_c = 0;
  r.host_nqn = kHostNqn;
  r.subsys_nqn = kSubNqn;
  return r;
}

ResponseInput controller_input(HashId h, const Inputs& in, bool dh) {
  ResponseInput r = host_input(h, in, dh);
  r.key = in.kc;
  r.challenge = in.c2;
  r.seqnum = 0x0a0b0c0d;
  return r;
}

TEST(DhchapResponse, HostResponseKnownAnswers) {
  for (const auto& v : kVectors) {
    const Inputs in(v.hash);
    auto null_group = host_response(host_input(v.hash, in, false));
    ASSERT_TRUE(null_group) << null_group.error().what;
    EXPECT_EQ(to_vector(null_group->view()), from_hex(v.r1_null)) << "hash " << int(v.hash);
    auto with_dh = host_response(host_input(v.hash, in, true));
    ASSERT_TRUE(with_dh) << with_dh.error().what;
    EXPECT_EQ(to_vector(with_dh->view()), from_hex(v.r1_dh)) << "hash " << int(v.hash);
  }
}

TEST(DhchapResponse, ControllerResponseKnownAnswers) {
  for (const auto& v : kVectors) {
    const Inputs in(v.hash);
    auto null_group = controller_response(controller_input(v.hash, in, false));
    ASSERT_TRUE(null_group) << null_group.error().what;
    EXPECT_EQ(to_vector(null_group->view()), from_hex(v.r2_null)) << "hash " << int(v.hash);
    auto with_dh = controller_response(controller_input(v.hash, in, true));
    ASSERT_TRUE(with_dh) << with_dh.error().what;
    EXPECT_EQ(to_vector(with_dh->view()), from_hex(v.r2_dh)) << "hash " << int(v.hash);
  }
}

TEST(DhchapResponse, ScCByteIsHashed) {
  // python3: R1 as above (SHA-256, null group) with bytes([2]) as the SC_C byte.
  const Inputs in(HashId::sha256);
  auto r = host_input(HashId::sha256, in, false);
  r.sc_c = 2;
  auto got = host_response(r);
  ASSERT_TRUE(got);
  EXPECT_EQ(to_vector(got->view()), from_hex("0536b8064d14f16295d11c70b43dcd836bfcc2ce7e5d8e8377d65d68f2eb6c27"));
}

TEST(DhchapResponse, EveryInputChangesTheResponse) {
  const Inputs in(HashId::sha256);
  const auto base = host_response(host_input(HashId::sha256, in, true));
  ASSERT_TRUE(base);
  auto differs = [&](ResponseInput r) {
    auto got = host_response(r);
    return got && !constant_time_equal(got->view(), base->view());
  };
  auto r = host_input(HashId::sha256, in, true);
  r.seqnum ^= 1;
  EXPECT_TRUE(differs(r));
  r = host_input(HashId::sha256, in, true);
  r.t_id ^= 1;
  EXPECT_TRUE(differs(r));
  r = host_input(HashId::sha256, in, true);
  r.host_nqn = kSubNqn;
  r.subsys_nqn = kHostNqn;
  EXPECT_TRUE(differs(r));
  auto other_ss = in.ss;
  other_ss[255] ^= 1;
  r = host_input(HashId::sha256, in, true);
  r.shared_secret = other_ss;
  EXPECT_TRUE(differs(r));
  // The host and controller roles differ even with the same key, challenge and numbers.
  auto as_ctrl = controller_response(host_input(HashId::sha256, in, true));
  ASSERT_TRUE(as_ctrl);
  EXPECT_FALSE(constant_time_equal(as_ctrl->view(), base->view()));
}

TEST(DhchapResponse, RefusesBadInputs) {
  const Inputs in(HashId::sha256);
  auto r = host_input(HashId::sha256, in, false);
  r.challenge = std::span<const uint8_t>(in.c1).first(31);
  EXPECT_FALSE(host_response(r));
  r = host_input(HashId::sha256, in, false);
  r.key = {};
  EXPECT_FALSE(host_response(r));
  r = host_input(HashId::sha256, in, false);
  r.host_nqn = "";
  EXPECT_FALSE(host_response(r));
  r = host_input(HashId::sha256, in, false);
  r.hash = static_cast<HashId>(4);
  auto bad_hash = host_response(r);
  ASSERT_FALSE(bad_hash);
  EXPECT_EQ(bad_hash.error().explanation, FailureExplanation::hash_unusable);
}

TEST(DhchapAugmentedChallenge, KnownAnswers) {
  for (const auto& v : kVectors) {
    const Inputs in(v.hash);
    auto ca = augmented_challenge(v.hash, in.ss, in.c1);
    ASSERT_TRUE(ca) << ca.error().what;
    EXPECT_EQ(to_vector(ca->view()), from_hex(v.augmented_c1)) << "hash " << int(v.hash);
  }
  const Inputs in(HashId::sha256);
  EXPECT_FALSE(augmented_challenge(HashId::sha256, {}, in.c1));
  EXPECT_FALSE(augmented_challenge(HashId::sha384, in.ss, in.c1));  // C1 is 32 bytes, SHA-384 wants 48
}

TEST(DhchapGeneratedPsk, KnownAnswers) {
  for (const auto& v : kVectors) {
    const Inputs in(v.hash);
    auto psk = generated_psk(v.hash, in.ss, in.c1, in.c2);
    ASSERT_TRUE(psk) << psk.error().what;
    EXPECT_EQ(to_vector(psk->view()), from_hex(v.psk)) << "hash " << int(v.hash);
  }
}

TEST(DhchapHash, Sha256OfAbc) {
  // FIPS 180-2 example: SHA-256("abc").
  const std::array<uint8_t, 3> abc = {'a', 'b', 'c'};
  auto d = hash(HashId::sha256, abc);
  ASSERT_TRUE(d);
  EXPECT_EQ(to_vector(d->view()), from_hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
}

TEST(DhchapRandom, ChallengesAndSequenceNumbers) {
  auto a = random_challenge(HashId::sha512);
  auto b = random_challenge(HashId::sha512);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->size(), 64u);
  EXPECT_FALSE(constant_time_equal(a->view(), b->view()));
  const uint32_t s1 = next_sequence_number();
  const uint32_t s2 = next_sequence_number();
  EXPECT_NE(s1, 0u);
  EXPECT_NE(s2, 0u);
  EXPECT_EQ(s2, s1 + 1 == 0 ? 1 : s1 + 1);
}

// ---------------------------------------------------------------------------------------------------------
// Diffie-Hellman
// ---------------------------------------------------------------------------------------------------------

constexpr DhGroupId kGroups[] = {DhGroupId::ffdhe2048, DhGroupId::ffdhe3072, DhGroupId::ffdhe4096,
                                 DhGroupId::ffdhe6144, DhGroupId::ffdhe8192};

// The group's prime p, big-endian, padded to the group size (from OpenSSL's named group).
std::vector<uint8_t> prime_of(DhGroupId group) {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, "DH", nullptr);
  EXPECT_NE(ctx, nullptr);
  EXPECT_EQ(EVP_PKEY_paramgen_init(ctx), 1);
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, const_cast<char*>(dh_group_name(group)), 0),
      OSSL_PARAM_construct_end()};
  EXPECT_EQ(EVP_PKEY_CTX_set_params(ctx, params), 1);
  EVP_PKEY* pkey = nullptr;
  EXPECT_EQ(EVP_PKEY_generate(ctx, &pkey), 1);
  BIGNUM* p = nullptr;
  EXPECT_EQ(EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_FFC_P, &p), 1);
  std::vector<uint8_t> out(auth::dh_value_length(group));
  EXPECT_EQ(BN_bn2binpad(p, out.data(), static_cast<int>(out.size())), static_cast<int>(out.size()));
  BN_free(p);
  EVP_PKEY_free(pkey);
  EVP_PKEY_CTX_free(ctx);
  return out;
}

// value - k, big-endian, same size (value > k).
std::vector<uint8_t> minus(std::vector<uint8_t> v, unsigned k) {
  for (std::size_t i = v.size(); i-- > 0 && k != 0;) {
    const unsigned cur = v[i];
    v[i] = static_cast<uint8_t>(cur - (k & 0xFF));
    k = (k >> 8) + (cur < (k & 0xFF) ? 1 : 0);
  }
  return v;
}

// The value `v` (< 256) big-endian in `len` bytes.
std::vector<uint8_t> small_value(std::size_t len, uint8_t v) {
  std::vector<uint8_t> out(len, 0);
  if (!out.empty()) out[out.size() - 1] = v;
  return out;
}

TEST(DhchapDh, GroupsAreTheRfc7919Primes) {
  // RFC 7919 Appendix A: every ffdhe prime is 2^b - 2^(b-64) + {[2^(b-130) e] + X} * 2^64 - 1, so it
  // starts with 64 one bits followed by the digits of e (ADF85458 A2BB4A9A...) and ends with 64 one bits.
  const std::vector<uint8_t> head = from_hex("FFFFFFFFFFFFFFFFADF85458A2BB4A9A");
  for (auto group : kGroups) {
    const auto p = prime_of(group);
    ASSERT_EQ(p.size(), auth::dh_value_length(group));
    EXPECT_TRUE(std::equal(head.begin(), head.end(), p.begin())) << dh_group_name(group);
    for (std::size_t i = p.size() - 8; i < p.size(); ++i) EXPECT_EQ(p[i], 0xFF) << dh_group_name(group);
  }
}

TEST(DhchapDh, BothSidesDeriveTheSameSecretInEveryGroup) {
  for (auto group : kGroups) {
    auto host = DhKeyPair::generate(group);
    auto ctrl = DhKeyPair::generate(group);
    ASSERT_TRUE(host) << host.error().what;
    ASSERT_TRUE(ctrl) << ctrl.error().what;
    const std::size_t len = auth::dh_value_length(group);
    EXPECT_EQ(host->group(), group);
    EXPECT_EQ(host->public_value().size(), len);
    EXPECT_EQ(ctrl->public_value().size(), len);
    EXPECT_FALSE(constant_time_equal(host->public_value(), ctrl->public_value()));
    // The public value is below p.
    const auto p = prime_of(group);
    EXPECT_TRUE(std::lexicographical_compare(host->public_value().begin(), host->public_value().end(), p.begin(),
                                             p.end()));
    auto k_host = host->shared_secret(ctrl->public_value());
    auto k_ctrl = ctrl->shared_secret(host->public_value());
    ASSERT_TRUE(k_host) << k_host.error().what;
    ASSERT_TRUE(k_ctrl) << k_ctrl.error().what;
    EXPECT_EQ(k_host->size(), len) << "shared secret padded to the group size";
    EXPECT_TRUE(constant_time_equal(k_host->view(), k_ctrl->view())) << dh_group_name(group);
    // A third party's key pair does not get the same secret.
    auto other = DhKeyPair::generate(group);
    ASSERT_TRUE(other);
    auto k_other = other->shared_secret(ctrl->public_value());
    ASSERT_TRUE(k_other);
    EXPECT_FALSE(constant_time_equal(k_other->view(), k_ctrl->view()));
  }
}

TEST(DhchapDh, RefusesOutOfRangePeerValues) {
  for (auto group : {DhGroupId::ffdhe2048, DhGroupId::ffdhe8192}) {
    auto pair = DhKeyPair::generate(group);
    ASSERT_TRUE(pair) << pair.error().what;
    const std::size_t len = auth::dh_value_length(group);
    const auto p = prime_of(group);
    const auto zero = small_value(len, 0);
    const auto one = small_value(len, 1);
    const std::vector<uint8_t> all_ones(len, 0xFF);  // > p
    const auto longer = small_value(len + 1, 2);      // the value 2, one byte too long
    const auto shorter = small_value(len - 1, 2);
    const std::pair<const char*, std::vector<uint8_t>> bad[] = {
        {"0", zero},         {"1", one},          {"p-1", minus(p, 1)}, {"p", p},
        {"2^bits-1", all_ones}, {"longer than p", longer}, {"shorter than p", shorter}, {"empty", {}},
    };
    for (const auto& [name, value] : bad) {
      auto k = pair->shared_secret(value);
      ASSERT_FALSE(k) << name << " accepted in " << dh_group_name(group);
      EXPECT_EQ(k.error().explanation, FailureExplanation::incorrect_payload) << name;
    }
    // p-2 passes the range check, but -2 is a quadratic non-residue (p = 7 mod 8, so 2 is a residue and -1
    // is not): outside the order-q subgroup, and OpenSSL's full public key check (y^q = 1) refuses it.
    auto p_minus_2 = pair->shared_secret(minus(p, 2));
    EXPECT_FALSE(p_minus_2) << "p-2 (not in the subgroup) accepted";
    // 2 = g is a valid group element: accepted.
    EXPECT_TRUE(pair->shared_secret(small_value(len, 2)));
  }
}

TEST(DhchapDh, NullGroupHasNoKeyPair) {
  auto pair = DhKeyPair::generate(DhGroupId::null);
  ASSERT_FALSE(pair);
  EXPECT_EQ(pair.error().explanation, FailureExplanation::dhgroup_unusable);
  EXPECT_FALSE(DhKeyPair::generate(static_cast<DhGroupId>(6)));
}

// ---------------------------------------------------------------------------------------------------------
// A whole exchange over the wire formats: what the target core and the initiator will do.
// ---------------------------------------------------------------------------------------------------------

TEST(DhchapExchange, BidirectionalWithDhOverTheWire) {
  auto host_key = DhchapKey::generate(32, KeyTransform::sha256);
  auto ctrl_key = DhchapKey::generate(48, KeyTransform::none);
  ASSERT_TRUE(host_key && ctrl_key);
  std::array<uint8_t, auth::kMaxTransferLength> wire{};
  const uint16_t t_id = 7;

  // Host: AUTH_Negotiate.
  const HashId hashes[] = {HashId::sha256, HashId::sha384, HashId::sha512};
  const DhGroupId groups[] = {DhGroupId::null, DhGroupId::ffdhe2048, DhGroupId::ffdhe3072};
  auto n = auth::encode_negotiate(wire, t_id, auth::SecureChannel::none, hashes, groups);
  ASSERT_TRUE(n);
  // Controller: decode, pick SHA-384 + ffdhe3072, answer with a Challenge.
  auto neg = auth::decode_negotiate(std::span<const uint8_t>(wire).first(*n));
  ASSERT_TRUE(neg) << neg.error().what;
  ASSERT_TRUE(neg->offers(HashId::sha384) && neg->offers(DhGroupId::ffdhe3072));
  const HashId hash = HashId::sha384;
  auto ctrl_dh = DhKeyPair::generate(DhGroupId::ffdhe3072);
  ASSERT_TRUE(ctrl_dh);
  auto c1 = random_challenge(hash);
  ASSERT_TRUE(c1);
  const uint32_t s1 = next_sequence_number();
  n = auth::encode_challenge(wire, neg->t_id, hash, DhGroupId::ffdhe3072, s1, c1->view(), ctrl_dh->public_value());
  ASSERT_TRUE(n);

  // Host: decode the Challenge, do the DH half, compute R1, send C2 for the controller.
  std::vector<uint8_t> challenge_msg(wire.begin(), wire.begin() + static_cast<std::ptrdiff_t>(*n));
  auto ch = auth::decode_challenge(challenge_msg);
  ASSERT_TRUE(ch) << ch.error().what;
  auto host_dh = DhKeyPair::generate(ch->dh_group);
  ASSERT_TRUE(host_dh);
  auto host_ks = host_dh->shared_secret(ch->dh_value);
  ASSERT_TRUE(host_ks);
  auto kh = host_key->transformed(kHostNqn);
  ASSERT_TRUE(kh);
  ResponseInput r1_in{ch->hash, kh->view(), ch->challenge, host_ks->view(), ch->seqnum, ch->t_id, 0, kHostNqn, kSubNqn};
  auto r1 = host_response(r1_in);
  ASSERT_TRUE(r1);
  auto c2 = random_challenge(ch->hash);
  ASSERT_TRUE(c2);
  const uint32_t s2 = next_sequence_number();
  n = auth::encode_reply(wire, ch->t_id, r1->view(), true, s2, c2->view(), host_dh->public_value());
  ASSERT_TRUE(n);

  // Controller: decode the Reply, check R1 (constant time), compute R2.
  std::vector<uint8_t> reply_msg(wire.begin(), wire.begin() + static_cast<std::ptrdiff_t>(*n));
  auto rep = auth::decode_reply(reply_msg);
  ASSERT_TRUE(rep) << rep.error().what;
  ASSERT_EQ(rep->hl, auth::hash_length(hash));
  auto ctrl_ks = ctrl_dh->shared_secret(rep->dh_value);
  ASSERT_TRUE(ctrl_ks);
  auto kh_ctrl_side = host_key->transformed(kHostNqn);  // the controller holds the host's secret too
  ASSERT_TRUE(kh_ctrl_side);
  ResponseInput expect_in{hash, kh_ctrl_side->view(), c1->view(), ctrl_ks->view(), s1, t_id, 0, kHostNqn, kSubNqn};
  auto expected_r1 = host_response(expect_in);
  ASSERT_TRUE(expected_r1);
  EXPECT_TRUE(constant_time_equal(expected_r1->view(), rep->response)) << "host not authenticated";
  ASSERT_TRUE(rep->cvalid);
  auto kc = ctrl_key->transformed(kSubNqn);
  ASSERT_TRUE(kc);
  ResponseInput r2_in{hash, kc->view(), rep->challenge, ctrl_ks->view(), rep->seqnum, t_id, 0, kHostNqn, kSubNqn};
  auto r2 = controller_response(r2_in);
  ASSERT_TRUE(r2);
  n = auth::encode_success1(wire, t_id, static_cast<uint8_t>(auth::hash_length(hash)), r2->view());
  ASSERT_TRUE(n);

  // Host: decode Success1, check R2, send Success2.
  auto s1m = auth::decode_success1(std::span<const uint8_t>(wire).first(*n));
  ASSERT_TRUE(s1m) << s1m.error().what;
  ASSERT_TRUE(s1m->rvalid);
  auto kc_host_side = ctrl_key->transformed(kSubNqn);
  ASSERT_TRUE(kc_host_side);
  ResponseInput expect_r2{hash, kc_host_side->view(), c2->view(), host_ks->view(), s2, t_id, 0, kHostNqn, kSubNqn};
  auto expected_r2 = controller_response(expect_r2);
  ASSERT_TRUE(expected_r2);
  EXPECT_TRUE(constant_time_equal(expected_r2->view(), s1m->response)) << "controller not authenticated";
  n = auth::encode_success2(wire, t_id);
  ASSERT_TRUE(n);
  auto s2m = auth::decode_success2(std::span<const uint8_t>(wire).first(*n));
  ASSERT_TRUE(s2m);
  EXPECT_EQ(s2m->t_id, t_id);

  // A host with the wrong secret is refused: its R1 does not match.
  auto wrong = DhchapKey::generate(32, KeyTransform::sha256);
  ASSERT_TRUE(wrong);
  auto kw = wrong->transformed(kHostNqn);
  ASSERT_TRUE(kw);
  ResponseInput wrong_in = r1_in;
  wrong_in.key = kw->view();
  auto wrong_r1 = host_response(wrong_in);
  ASSERT_TRUE(wrong_r1);
  EXPECT_FALSE(constant_time_equal(expected_r1->view(), wrong_r1->view()));
}

}  // namespace
}  // namespace rdmablk::security::dhchap

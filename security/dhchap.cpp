#include "security/dhchap.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/dh.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>

#include <atomic>
#include <memory>

namespace rdmablk::security::dhchap {

namespace {

namespace auth = protocol::auth;

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const noexcept { Free(p); }
};
using MacPtr = std::unique_ptr<EVP_MAC, Deleter<EVP_MAC, EVP_MAC_free>>;
using MacCtxPtr = std::unique_ptr<EVP_MAC_CTX, Deleter<EVP_MAC_CTX, EVP_MAC_CTX_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, Deleter<EVP_PKEY_CTX, EVP_PKEY_CTX_free>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;
using ParamBldPtr = std::unique_ptr<OSSL_PARAM_BLD, Deleter<OSSL_PARAM_BLD, OSSL_PARAM_BLD_free>>;
using ParamPtr = std::unique_ptr<OSSL_PARAM, Deleter<OSSL_PARAM, OSSL_PARAM_free>>;

tl::unexpected<AuthError> internal(const char* what) noexcept {
  return auth::auth_reject(FailureExplanation::failed, 0, what);
}
tl::unexpected<AuthError> bad_peer(const char* what) noexcept {
  return auth::auth_reject(FailureExplanation::incorrect_payload, 0, what);
}

const EVP_MD* digest_of(HashId hash) noexcept {
  switch (hash) {
    case HashId::sha256: return EVP_sha256();
    case HashId::sha384: return EVP_sha384();
    case HashId::sha512: return EVP_sha512();
  }
  return nullptr;
}

std::span<const uint8_t> bytes_of(std::string_view s) noexcept {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

bool is_nqn(std::string_view nqn) noexcept { return !nqn.empty() && nqn.find('\0') == std::string_view::npos; }

// The response both sides compute (see host_response / controller_response).
AuthResult<Digest> response(const ResponseInput& in, std::string_view role, std::string_view first_nqn,
                            std::string_view second_nqn) {
  const std::size_t hl = auth::hash_length(in.hash);
  if (hl == 0) return auth::auth_reject(FailureExplanation::hash_unusable, 0, "unknown hash id");
  if (in.challenge.size() != hl) return internal("challenge is not the hash length");
  if (in.key.empty()) return internal("no key for the response");
  if (!is_nqn(in.host_nqn) || !is_nqn(in.subsys_nqn)) return internal("NQN is empty or has a NUL byte");
  Digest augmented;
  std::span<const uint8_t> challenge = in.challenge;
  if (!in.shared_secret.empty()) {
    auto ca = augmented_challenge(in.hash, in.shared_secret, in.challenge);
    if (!ca) return tl::unexpected(ca.error());
    augmented = *ca;
    challenge = augmented.view();
  }
  const uint8_t seq[4] = {static_cast<uint8_t>(in.seqnum), static_cast<uint8_t>(in.seqnum >> 8),
                          static_cast<uint8_t>(in.seqnum >> 16), static_cast<uint8_t>(in.seqnum >> 24)};
  const uint8_t tid[2] = {static_cast<uint8_t>(in.t_id), static_cast<uint8_t>(in.t_id >> 8)};
  const uint8_t sc_c[1] = {in.sc_c};
  const uint8_t nul[1] = {0};
  return hmac(in.hash, in.key,
              {challenge, seq, tid, sc_c, bytes_of(role), bytes_of(first_nqn), nul, bytes_of(second_nqn)});
}

}  // namespace

Digest::~Digest() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

const char* digest_name(HashId hash) noexcept {
  switch (hash) {
    case HashId::sha256: return "SHA256";
    case HashId::sha384: return "SHA384";
    case HashId::sha512: return "SHA512";
  }
  return nullptr;
}

const char* dh_group_name(DhGroupId group) noexcept {
  switch (group) {
    case DhGroupId::ffdhe2048: return "ffdhe2048";
    case DhGroupId::ffdhe3072: return "ffdhe3072";
    case DhGroupId::ffdhe4096: return "ffdhe4096";
    case DhGroupId::ffdhe6144: return "ffdhe6144";
    case DhGroupId::ffdhe8192: return "ffdhe8192";
    case DhGroupId::null: break;
  }
  return nullptr;
}

AuthResult<Digest> hash(HashId hash_id, std::span<const uint8_t> data) {
  const EVP_MD* md = digest_of(hash_id);
  if (md == nullptr) return auth::auth_reject(FailureExplanation::hash_unusable, 0, "unknown hash id");
  Digest out;
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, md, nullptr) != 1) return internal("EVP_Digest failed");
  out.set_size(len);
  return out;
}

AuthResult<Digest> hmac(HashId hash_id, std::span<const uint8_t> key,
                        std::initializer_list<std::span<const uint8_t>> parts) {
  const char* name = digest_name(hash_id);
  if (name == nullptr) return auth::auth_reject(FailureExplanation::hash_unusable, 0, "unknown hash id");
  // EVP_MAC_init with an empty key means "keep the previous key": refuse it instead.
  if (key.empty()) return internal("HMAC key is empty");
  MacPtr mac(EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr));
  if (!mac) return internal("EVP_MAC_fetch(HMAC) failed");
  MacCtxPtr ctx(EVP_MAC_CTX_new(mac.get()));
  if (!ctx) return internal("EVP_MAC_CTX_new failed");
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>(name), 0),
                         OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(ctx.get(), key.data(), key.size(), params) != 1) return internal("EVP_MAC_init failed");
  for (const auto& part : parts) {
    if (!part.empty() && EVP_MAC_update(ctx.get(), part.data(), part.size()) != 1) {
      return internal("EVP_MAC_update failed");
    }
  }
  Digest out;
  std::size_t len = 0;
  if (EVP_MAC_final(ctx.get(), out.data(), &len, protocol::auth::kMaxHashLength) != 1) {
    return internal("EVP_MAC_final failed");
  }
  out.set_size(len);
  return out;
}

AuthResult<Digest> random_challenge(HashId hash_id) {
  const std::size_t hl = auth::hash_length(hash_id);
  if (hl == 0) return auth::auth_reject(FailureExplanation::hash_unusable, 0, "unknown hash id");
  Digest out;
  if (RAND_bytes(out.data(), static_cast<int>(hl)) != 1) return internal("RAND_bytes failed");
  out.set_size(hl);
  return out;
}

uint32_t next_sequence_number() noexcept {
  static std::atomic<uint32_t> counter = [] {
    uint32_t start = 0;
    while (start == 0) {
      if (RAND_bytes(reinterpret_cast<unsigned char*>(&start), sizeof(start)) != 1) start = 1;
    }
    return start - 1;  // the first call returns `start`
  }();
  uint32_t v = counter.fetch_add(1, std::memory_order_relaxed) + 1;
  while (v == 0) v = counter.fetch_add(1, std::memory_order_relaxed) + 1;
  return v;
}

AuthResult<DhKeyPair> DhKeyPair::generate(DhGroupId group) {
  const char* name = dh_group_name(group);
  if (name == nullptr) return auth::auth_reject(FailureExplanation::dhgroup_unusable, 0, "not a DH group");
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, "DH", nullptr));
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1) return internal("DH keygen init failed");
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, const_cast<char*>(name), 0),
                         OSSL_PARAM_construct_end()};
  if (EVP_PKEY_CTX_set_params(ctx.get(), params) != 1) {
    return auth::auth_reject(FailureExplanation::dhgroup_unusable, 0, "OpenSSL does not know the DH group");
  }
  EVP_PKEY* raw = nullptr;
  if (EVP_PKEY_generate(ctx.get(), &raw) != 1) return internal("DH key generation failed");
  DhKeyPair pair(raw, group);
  BIGNUM* pub_raw = nullptr;
  if (EVP_PKEY_get_bn_param(raw, OSSL_PKEY_PARAM_PUB_KEY, &pub_raw) != 1) return internal("no DH public key");
  BnPtr pub(pub_raw);
  const std::size_t len = auth::dh_value_length(group);
  if (BN_bn2binpad(pub.get(), pair.public_.data(), static_cast<int>(len)) != static_cast<int>(len)) {
    return internal("DH public key larger than the group");
  }
  pair.public_size_ = len;
  return pair;
}

DhKeyPair::DhKeyPair(DhKeyPair&& other) noexcept
    : key_(other.key_), group_(other.group_), public_(other.public_), public_size_(other.public_size_) {
  other.key_ = nullptr;
  other.public_size_ = 0;
}

DhKeyPair& DhKeyPair::operator=(DhKeyPair&& other) noexcept {
  if (this != &other) {
    EVP_PKEY_free(key_);
    key_ = other.key_;
    group_ = other.group_;
    public_ = other.public_;
    public_size_ = other.public_size_;
    other.key_ = nullptr;
    other.public_size_ = 0;
  }
  return *this;
}

DhKeyPair::~DhKeyPair() { EVP_PKEY_free(key_); }  // frees and cleanses the private value

AuthResult<SecretBytes> DhKeyPair::shared_secret(std::span<const uint8_t> peer_value) const {
  if (key_ == nullptr) return internal("no DH key");
  const std::size_t len = auth::dh_value_length(group_);
  if (peer_value.size() != len) return bad_peer("peer DH value is not the size of the group");
  BnPtr peer(BN_bin2bn(peer_value.data(), static_cast<int>(peer_value.size()), nullptr));
  BIGNUM* p_raw = nullptr;
  if (!peer || EVP_PKEY_get_bn_param(key_, OSSL_PKEY_PARAM_FFC_P, &p_raw) != 1) return internal("DH parameters");
  BnPtr p_minus_2(p_raw);
  if (BN_sub_word(p_minus_2.get(), 2) != 1) return internal("BN_sub_word failed");
  // 2 <= y <= p - 2: 0, 1 and p - 1 would force the shared secret; y >= p is not a group element.
  if (BN_cmp(peer.get(), BN_value_one()) <= 0 || BN_cmp(peer.get(), p_minus_2.get()) > 0) {
    return bad_peer("peer DH value out of range (must be 2 .. p-2)");
  }

  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, dh_group_name(group_), 0) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, peer.get()) != 1) {
    return internal("OSSL_PARAM_BLD failed");
  }
  ParamPtr params(OSSL_PARAM_BLD_to_param(bld.get()));
  PkeyCtxPtr from_ctx(EVP_PKEY_CTX_new_from_name(nullptr, "DH", nullptr));
  if (!params || !from_ctx || EVP_PKEY_fromdata_init(from_ctx.get()) != 1) return internal("DH fromdata init failed");
  EVP_PKEY* peer_raw = nullptr;
  if (EVP_PKEY_fromdata(from_ctx.get(), &peer_raw, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    return bad_peer("peer DH value refused by OpenSSL");
  }
  PkeyPtr peer_key(peer_raw);

  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, key_, nullptr));
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1) return internal("DH derive init failed");
  // Pad g^xy to the size of p, as the kernel's kpp does (its output buffer is the group size).
  if (EVP_PKEY_CTX_set_dh_pad(ctx.get(), 1) != 1) return internal("DH pad setting failed");
  // validate_peer = 1: OpenSSL's public key check too (range, and y^q = 1 for these safe-prime groups).
  if (EVP_PKEY_derive_set_peer_ex(ctx.get(), peer_key.get(), 1) != 1) {
    return bad_peer("peer DH value failed the public key check");
  }
  SecretBytes out(len);
  std::size_t out_len = len;
  if (EVP_PKEY_derive(ctx.get(), out.data(), &out_len) != 1 || out_len != len) return internal("DH derive failed");
  return out;
}

AuthResult<Digest> augmented_challenge(HashId hash_id, std::span<const uint8_t> shared_secret,
                                       std::span<const uint8_t> challenge) {
  const std::size_t hl = auth::hash_length(hash_id);
  if (hl == 0) return auth::auth_reject(FailureExplanation::hash_unusable, 0, "unknown hash id");
  if (challenge.size() != hl) return internal("challenge is not the hash length");
  if (shared_secret.empty()) return internal("no shared secret to augment the challenge with");
  auto hashed = hash(hash_id, shared_secret);
  if (!hashed) return tl::unexpected(hashed.error());
  return hmac(hash_id, hashed->view(), {challenge});
}

AuthResult<Digest> host_response(const ResponseInput& in) {
  return response(in, "HostHost", in.host_nqn, in.subsys_nqn);
}

AuthResult<Digest> controller_response(const ResponseInput& in) {
  return response(in, "Controller", in.subsys_nqn, in.host_nqn);
}

AuthResult<SecretBytes> generated_psk(HashId hash_id, std::span<const uint8_t> shared_secret,
                                      std::span<const uint8_t> c1, std::span<const uint8_t> c2) {
  const std::size_t hl = auth::hash_length(hash_id);
  if (hl == 0) return auth::auth_reject(FailureExplanation::hash_unusable, 0, "unknown hash id");
  if (c1.size() != hl || c2.size() != hl) return internal("challenge is not the hash length");
  if (shared_secret.empty()) return internal("secure channel concatenation needs a DH shared secret");
  auto psk = hmac(hash_id, shared_secret, {c1, c2});
  if (!psk) return tl::unexpected(psk.error());
  return SecretBytes(psk->view());
}

}  // namespace rdmablk::security::dhchap

#include "security/tls_psk.h"

#include <isa-l/crc.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace rdmablk::security {

// ---- Secret ----

Secret::Secret(std::span<const uint8_t> bytes) noexcept : size_(std::min(bytes.size(), kCapacity)) {
  if (size_ != 0) std::memcpy(data_.data(), bytes.data(), size_);
}

Secret::Secret(const Secret& other) noexcept : data_(other.data_), size_(other.size_) {}

Secret& Secret::operator=(const Secret& other) noexcept {
  if (this != &other) {
    data_ = other.data_;
    size_ = other.size_;
  }
  return *this;
}

Secret::~Secret() { OPENSSL_cleanse(data_.data(), data_.size()); }

void Secret::resize(std::size_t n) noexcept {
  size_ = std::min(n, kCapacity);
  OPENSSL_cleanse(data_.data() + size_, kCapacity - size_);
}

void Secret::clear() noexcept {
  OPENSSL_cleanse(data_.data(), data_.size());
  size_ = 0;
}

bool Secret::equals(std::span<const uint8_t> other) const noexcept {
  return other.size() == size_ && CRYPTO_memcmp(data_.data(), other.data(), size_) == 0;
}

// ---- helpers ----

namespace {

const char* digest_name(PskHash hash) noexcept {
  switch (hash) {
    case PskHash::sha256: return "SHA256";
    case PskHash::sha384: return "SHA384";
    case PskHash::none: break;
  }
  return nullptr;
}

struct KdfDeleter {
  void operator()(EVP_KDF* k) const noexcept { EVP_KDF_free(k); }
  void operator()(EVP_KDF_CTX* c) const noexcept { EVP_KDF_CTX_free(c); }
};

// One HKDF operation (mode EXTRACT_ONLY or EXPAND_ONLY) through OpenSSL's provider.
Result<Secret> run_hkdf(PskHash hash, int mode, std::span<const uint8_t> key, std::span<const uint8_t> salt,
                        std::span<const uint8_t> info, std::size_t out_len) {
  const char* md = digest_name(hash);
  if (md == nullptr) return make_error("HKDF: hash must be SHA-256 or SHA-384");
  if (out_len == 0 || out_len > Secret::kCapacity) return make_error("HKDF: bad output length");
  std::unique_ptr<EVP_KDF, KdfDeleter> kdf(EVP_KDF_fetch(nullptr, OSSL_KDF_NAME_HKDF, nullptr));
  if (!kdf) return make_error("HKDF: OpenSSL has no HKDF");
  std::unique_ptr<EVP_KDF_CTX, KdfDeleter> ctx(EVP_KDF_CTX_new(kdf.get()));
  if (!ctx) return make_error("HKDF: out of memory", ENOMEM);
  OSSL_PARAM params[6];
  std::size_t n = 0;
  params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>(md), 0);
  params[n++] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode);
  params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(key.data()), key.size());
  if (!salt.empty())
    params[n++] =
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(salt.data()), salt.size());
  if (!info.empty())
    params[n++] =
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<uint8_t*>(info.data()), info.size());
  params[n] = OSSL_PARAM_construct_end();
  Secret out;
  out.resize(out_len);
  if (EVP_KDF_derive(ctx.get(), out.mutable_data(), out_len, params) != 1) return make_error("HKDF failed");
  return out;
}

Result<Secret> hmac(PskHash hash, std::span<const uint8_t> key, std::string_view data) {
  const char* md = digest_name(hash);
  if (md == nullptr) return make_error("HMAC: hash must be SHA-256 or SHA-384");
  Secret out;
  std::size_t out_len = 0;
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, md, nullptr, key.data(), key.size(),
                reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.mutable_data(),
                Secret::kCapacity, &out_len) == nullptr)
    return make_error("HMAC failed");
  out.resize(out_len);
  return out;
}

std::string base64_encode(std::span<const uint8_t> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(),
                                static_cast<int>(bytes.size()));
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

bool is_base64_char(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

// Strict standard Base64 (padded, no whitespace) into `out`, which is wiped on failure. EVP_DecodeBlock
// alone would accept whitespace and count padding as data, so the text is checked first.
bool base64_decode_strict(std::string_view text, Secret& out) noexcept {
  out.clear();
  if (text.empty() || text.size() % 4 != 0) return false;
  std::size_t pad = 0;
  if (text.back() == '=') pad = (text[text.size() - 2] == '=') ? 2 : 1;
  for (std::size_t i = 0; i < text.size() - pad; ++i)
    if (!is_base64_char(text[i])) return false;
  const std::size_t decoded = text.size() / 4 * 3;
  if (decoded > Secret::kCapacity) return false;
  const int n = EVP_DecodeBlock(out.mutable_data(), reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0 || static_cast<std::size_t>(n) != decoded) {
    out.clear();
    return false;
  }
  out.resize(decoded - pad);
  return true;
}

}  // namespace

// ---- hashes and interchange format ----

std::size_t psk_hash_length(PskHash hash) noexcept {
  switch (hash) {
    case PskHash::sha256: return 32;
    case PskHash::sha384: return 48;
    case PskHash::none: break;
  }
  return 0;
}

PskHash ConfiguredPsk::cipher_hash() const noexcept {
  if (hash != PskHash::none) return hash;
  return key.size() == 48 ? PskHash::sha384 : PskHash::sha256;
}

uint32_t psk_crc32(std::span<const uint8_t> bytes) noexcept {
  // ISA-L's crc32_gzip_refl is the reflected IEEE CRC with zlib's pre/post inversion: crc32(0, buf, len).
  return crc32_gzip_refl(0, const_cast<uint8_t*>(bytes.data()), bytes.size());
}

namespace {
constexpr std::string_view kInterchangePrefix = "NVMeTLSkey-1:";

bool key_length_fits(PskHash hash, std::size_t len) noexcept {
  switch (hash) {
    case PskHash::none: return len == 32 || len == 48;
    case PskHash::sha256: return len == 32;
    case PskHash::sha384: return len == 48;
  }
  return false;
}
}  // namespace

Result<ConfiguredPsk> parse_psk_interchange(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  if (text.substr(0, kInterchangePrefix.size()) != kInterchangePrefix)
    return make_error("TLS PSK: not in the interchange format (expected NVMeTLSkey-1:HH:...:)");
  text.remove_prefix(kInterchangePrefix.size());
  if (text.size() < 4 || text[2] != ':' || text.back() != ':')
    return make_error("TLS PSK: malformed interchange format (expected NVMeTLSkey-1:HH:<base64>:)");
  PskHash hash;
  if (text.substr(0, 2) == "00") {
    hash = PskHash::none;
  } else if (text.substr(0, 2) == "01") {
    hash = PskHash::sha256;
  } else if (text.substr(0, 2) == "02") {
    hash = PskHash::sha384;
  } else {
    return make_error("TLS PSK: unknown hash in the interchange format (00, 01 or 02 expected)");
  }
  const std::string_view b64 = text.substr(3, text.size() - 4);
  Secret raw;
  if (!base64_decode_strict(b64, raw)) return make_error("TLS PSK: the key is not valid Base64");
  if (raw.size() < 4 || !key_length_fits(hash, raw.size() - 4))
    return make_error("TLS PSK: wrong key length for the interchange hash (32 bytes for 01, 48 for 02)");
  const std::size_t key_len = raw.size() - 4;
  const uint8_t* c = raw.data() + key_len;
  const uint32_t stored = uint32_t{c[0]} | uint32_t{c[1]} << 8 | uint32_t{c[2]} << 16 | uint32_t{c[3]} << 24;
  if (stored != psk_crc32(raw.bytes().first(key_len)))
    return make_error("TLS PSK: CRC-32 mismatch (the key was mistyped or truncated)");
  ConfiguredPsk out;
  out.key = Secret(raw.bytes().first(key_len));
  out.hash = hash;
  return out;
}

Result<std::string> format_psk_interchange(const ConfiguredPsk& psk) {
  if (!key_length_fits(psk.hash, psk.key.size()))
    return make_error("TLS PSK: wrong key length for the interchange hash");
  Secret raw(psk.key.bytes());
  const uint32_t crc = psk_crc32(psk.key.bytes());
  raw.resize(psk.key.size() + 4);
  for (int i = 0; i < 4; ++i) raw.mutable_data()[psk.key.size() + i] = static_cast<uint8_t>(crc >> (8 * i));
  std::string out(kInterchangePrefix);
  out += "0";
  out += static_cast<char>('0' + static_cast<int>(psk.hash));
  out += ':';
  std::string b64 = base64_encode(raw.bytes());
  out += b64;
  OPENSSL_cleanse(b64.data(), b64.size());
  out += ':';
  return out;
}

Result<ConfiguredPsk> generate_configured_psk(PskHash hash, std::size_t key_length) {
  const std::size_t len = hash == PskHash::none ? key_length : psk_hash_length(hash);
  if (!key_length_fits(hash, len)) return make_error("TLS PSK: key length must be 32 or 48 bytes");
  ConfiguredPsk out;
  out.hash = hash;
  out.key.resize(len);
  if (RAND_priv_bytes(out.key.mutable_data(), static_cast<int>(len)) != 1)
    return make_error("TLS PSK: the random generator failed");
  return out;
}

// ---- HKDF ----

Result<Secret> hkdf_extract(PskHash hash, std::span<const uint8_t> input_key) {
  const std::array<uint8_t, 64> zeros{};
  const std::size_t n = psk_hash_length(hash);
  if (n == 0) return make_error("HKDF: hash must be SHA-256 or SHA-384");
  return run_hkdf(hash, EVP_KDF_HKDF_MODE_EXTRACT_ONLY, input_key, std::span(zeros.data(), n), {}, n);
}

Result<Secret> hkdf_expand_label(PskHash hash, std::span<const uint8_t> secret, std::string_view label,
                                 std::span<const uint8_t> context, std::size_t length,
                                 PskDerivation derivation) {
  constexpr std::string_view kPrefix = "tls13 ";
  if (label.size() > 255 - kPrefix.size() || context.size() > 255 || length > 0xFFFF)
    return make_error("HKDF-Expand-Label: label or context too long");
  std::array<uint8_t, 2 + 1 + 255 + 1 + 255> info{};
  std::size_t n = 0;
  if (derivation == PskDerivation::standard) {
    // struct HkdfLabel { uint16 length; opaque label<7..255> = "tls13 " + Label; opaque context<0..255>; }
    info[n++] = static_cast<uint8_t>(length >> 8);
    info[n++] = static_cast<uint8_t>(length);
    info[n++] = static_cast<uint8_t>(kPrefix.size() + label.size());
  } else {
    // Old libnvme: little-endian length, no length bytes before the label and the context.
    info[n++] = static_cast<uint8_t>(length);
    info[n++] = static_cast<uint8_t>(length >> 8);
  }
  std::memcpy(info.data() + n, kPrefix.data(), kPrefix.size());
  n += kPrefix.size();
  std::memcpy(info.data() + n, label.data(), label.size());
  n += label.size();
  if (derivation == PskDerivation::standard) info[n++] = static_cast<uint8_t>(context.size());
  if (!context.empty()) std::memcpy(info.data() + n, context.data(), context.size());
  n += context.size();
  return run_hkdf(hash, EVP_KDF_HKDF_MODE_EXPAND_ONLY, secret, {}, std::span(info.data(), n), length);
}

// ---- NVMe derivations ----

namespace {
std::span<const uint8_t> as_bytes(std::string_view s) noexcept {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
}  // namespace

bool valid_identity_nqn(std::string_view nqn) noexcept {
  if (nqn.empty() || nqn.size() > 223) return false;
  return std::all_of(nqn.begin(), nqn.end(), [](char c) { return c > ' ' && c < 0x7F; });
}

Result<Secret> derive_retained_psk(const ConfiguredPsk& configured, std::string_view hostnqn,
                                   PskDerivation derivation) {
  if (!key_length_fits(configured.hash, configured.key.size())) return make_error("TLS PSK: bad configured key");
  if (!valid_identity_nqn(hostnqn)) return make_error("TLS PSK: invalid host NQN");
  if (configured.hash == PskHash::none) return configured.key;
  auto prk = hkdf_extract(configured.hash, configured.key.bytes());
  if (!prk) return tl::unexpected(prk.error());
  return hkdf_expand_label(configured.hash, prk->bytes(), "HostNQN", as_bytes(hostnqn), configured.key.size(),
                           derivation);
}

Result<std::string> derive_psk_digest(PskHash hash, std::span<const uint8_t> retained, std::string_view hostnqn,
                                      std::string_view subnqn) {
  if (!valid_identity_nqn(hostnqn) || !valid_identity_nqn(subnqn))
    return make_error("TLS PSK: invalid host or subsystem NQN");
  std::string msg;
  msg.reserve(hostnqn.size() + subnqn.size() + 19);
  msg.append(hostnqn).append(" ").append(subnqn).append(" NVMe-over-Fabrics");
  auto mac = hmac(hash, retained, msg);
  if (!mac) return tl::unexpected(mac.error());
  return base64_encode(mac->bytes());
}

std::string PskIdentity::to_string() const {
  std::string out = "NVMe";
  out += static_cast<char>('0' + version);
  out += type;
  out += '0';
  out += static_cast<char>('0' + static_cast<int>(hash));
  out.append(" ").append(hostnqn).append(" ").append(subnqn);
  if (version == 1) out.append(" ").append(digest);
  return out;
}

Result<PskIdentity> parse_psk_identity(std::string_view text) {
  // "NVMe" v type "0" h " " ...
  if (text.size() < 9 || text.substr(0, 4) != "NVMe" || text[8] != ' ')
    return make_error("PSK identity: not an NVMe PSK identity");
  PskIdentity id;
  if (text[4] != '0' && text[4] != '1') return make_error("PSK identity: unknown version");
  id.version = text[4] - '0';
  if (text[5] != 'R' && text[5] != 'G') return make_error("PSK identity: unknown PSK type");
  id.type = text[5];
  if (text.substr(6, 2) == "01") {
    id.hash = PskHash::sha256;
  } else if (text.substr(6, 2) == "02") {
    id.hash = PskHash::sha384;
  } else {
    return make_error("PSK identity: unknown hash");
  }
  std::string_view rest = text.substr(9);
  std::string_view fields[3];
  std::size_t count = 0;
  while (!rest.empty()) {
    if (count == 3) return make_error("PSK identity: too many fields");
    const std::size_t sp = rest.find(' ');
    fields[count++] = rest.substr(0, sp);
    if (sp == std::string_view::npos) break;
    rest.remove_prefix(sp + 1);
    if (rest.empty()) return make_error("PSK identity: trailing space");
  }
  const std::size_t want = id.version == 1 ? 3 : 2;
  if (count != want) return make_error("PSK identity: wrong number of fields for its version");
  if (!valid_identity_nqn(fields[0]) || !valid_identity_nqn(fields[1]))
    return make_error("PSK identity: invalid NQN");
  id.hostnqn = std::string(fields[0]);
  id.subnqn = std::string(fields[1]);
  if (id.version == 1) {
    const std::size_t b64_len = 4 * ((psk_hash_length(id.hash) + 2) / 3);
    Secret decoded;
    if (fields[2].size() != b64_len || !base64_decode_strict(fields[2], decoded) ||
        decoded.size() != psk_hash_length(id.hash))
      return make_error("PSK identity: malformed PSK digest");
    id.digest = std::string(fields[2]);
  }
  return id;
}

Result<Secret> derive_tls_psk(PskHash hash, std::span<const uint8_t> retained, std::string_view context,
                              PskDerivation derivation) {
  if (retained.empty() || retained.size() > Secret::kCapacity) return make_error("TLS PSK: bad retained key");
  auto prk = hkdf_extract(hash, retained);
  if (!prk) return tl::unexpected(prk.error());
  return hkdf_expand_label(hash, prk->bytes(), "nvme-tls-psk", as_bytes(context), retained.size(), derivation);
}

Result<TlsPsk> derive_tls_psk_for(const ConfiguredPsk& configured, std::string_view hostnqn,
                                  std::string_view subnqn, int identity_version, PskDerivation derivation) {
  if (identity_version != 0 && identity_version != 1) return make_error("PSK identity: version must be 0 or 1");
  if (!valid_identity_nqn(subnqn)) return make_error("TLS PSK: invalid subsystem NQN");
  auto retained = derive_retained_psk(configured, hostnqn, derivation);
  if (!retained) return tl::unexpected(retained.error());
  PskIdentity id;
  id.version = identity_version;
  id.hash = configured.cipher_hash();
  id.hostnqn = std::string(hostnqn);
  id.subnqn = std::string(subnqn);
  std::string context;
  if (identity_version == 1) {
    auto digest = derive_psk_digest(id.hash, retained->bytes(), hostnqn, subnqn);
    if (!digest) return tl::unexpected(digest.error());
    id.digest = *digest;
    context.push_back('0');
    context.push_back(static_cast<char>('0' + static_cast<int>(id.hash)));
    context.push_back(' ');
    context.append(id.digest);
  }
  TlsPsk out;
  out.identity = id.to_string();
  out.hash = id.hash;
  if (identity_version == 0) context = out.identity;
  auto key = derive_tls_psk(id.hash, retained->bytes(), context, derivation);
  if (!key) return tl::unexpected(key.error());
  out.key = *key;
  return out;
}

}  // namespace rdmablk::security

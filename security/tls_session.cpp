#include "security/tls_session.h"

#include <arpa/inet.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/tls1.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#ifndef SOL_TLS
#define SOL_TLS 282
#endif

namespace rdmablk::security {

const char* to_string(TlsFailure failure) noexcept {
  switch (failure) {
    case TlsFailure::none: return "none";
    case TlsFailure::unknown_identity: return "unknown PSK identity";
    case TlsFailure::wrong_psk: return "wrong PSK";
    case TlsFailure::peer_alert: return "peer alert";
    case TlsFailure::protocol: return "TLS protocol error";
    case TlsFailure::closed: return "closed";
    case TlsFailure::internal: return "internal error";
  }
  return "?";
}

namespace {

constexpr const char* kSuite128 = "TLS_AES_128_GCM_SHA256";
constexpr const char* kSuite256 = "TLS_AES_256_GCM_SHA384";
constexpr uint8_t kRecordApplicationData = 23;
constexpr uint8_t kRecordAlert = 21;
constexpr uint8_t kRecordHandshake = 22;
constexpr uint8_t kAlertDecryptError = 51;
constexpr uint8_t kAlertIllegalParameter = 47;

const char* suite_for(PskHash hash) noexcept { return hash == PskHash::sha384 ? kSuite256 : kSuite128; }

// Identities come from the peer: keep only printable ASCII, bounded, for log lines.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 512)) out += (c >= 0x20 && c < 0x7F) ? c : '?';
  if (s.size() > 512) out += "...";
  return out;
}

std::string alert_name(int alert) {
  // SSL_alert_desc_string_long takes the (level << 8 | description) value of the info callback.
  return std::string(SSL_alert_desc_string_long(alert)) + " (" + std::to_string(alert & 0xFF) + ")";
}

// A TLS 1.3 external PSK as an SSL_SESSION (what both PSK callbacks hand OpenSSL).
SSL_SESSION* make_psk_session(SSL* ssl, PskHash hash, const Secret& key) {
  const unsigned char id[2] = {0x13, static_cast<unsigned char>(hash == PskHash::sha384 ? 0x02 : 0x01)};
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, id);
  if (cipher == nullptr) return nullptr;
  SSL_SESSION* session = SSL_SESSION_new();
  if (session == nullptr) return nullptr;
  if (SSL_SESSION_set1_master_key(session, key.data(), key.size()) != 1 ||
      SSL_SESSION_set_cipher(session, cipher) != 1 ||
      SSL_SESSION_set_protocol_version(session, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(session);
    return nullptr;
  }
  return session;
}

bool hex_to_secret(std::string_view hex, Secret& out) noexcept {
  out.clear();
  if (hex.size() % 2 != 0 || hex.size() / 2 > Secret::kCapacity) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out.resize(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(hex[2 * i]);
    const int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      out.clear();
      return false;
    }
    out.mutable_data()[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace

// ---- OpenSSL callbacks: C trampolines to the session (SSL app data) ----

struct TlsCallbacks {
  static TlsSession* of(const SSL* ssl) noexcept { return static_cast<TlsSession*>(SSL_get_app_data(ssl)); }

  static int find_session(SSL* ssl, const unsigned char* identity, size_t len, SSL_SESSION** sess) {
    *sess = nullptr;
    TlsSession* s = of(ssl);
    if (s == nullptr) return 0;
    void* out = nullptr;
    const int rc = s->on_find_session(identity, len, &out);
    *sess = static_cast<SSL_SESSION*>(out);
    return rc;
  }
  static int use_session(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* idlen, SSL_SESSION** sess) {
    *sess = nullptr;
    TlsSession* s = of(ssl);
    if (s == nullptr) return 0;
    void* out = nullptr;
    const int rc = s->on_use_session(md, id, idlen, &out);
    *sess = static_cast<SSL_SESSION*>(out);
    return rc;
  }
  static int client_hello(SSL* ssl, int* alert, void*) {
    TlsSession* s = of(ssl);
    if (s == nullptr) {
      *alert = SSL_AD_INTERNAL_ERROR;
      return SSL_CLIENT_HELLO_ERROR;
    }
    return s->on_client_hello();
  }
  static void keylog(const SSL* ssl, const char* line) {
    if (TlsSession* s = of(ssl)) s->on_keylog(line);
  }
  static void message(int write_p, int, int content_type, const void* buf, size_t len, SSL* ssl, void*) {
    if (TlsSession* s = of(ssl)) s->on_message(write_p, content_type, buf, len);
  }
  static void info(const SSL* ssl, int where, int ret) {
    if (TlsSession* s = of(ssl)) s->on_info(where, ret);
  }
};

// ---- TlsContext ----

TlsContext::TlsContext(ssl_ctx_st* ctx, bool server, TlsServerConfig config) noexcept
    : ctx_(ctx), server_(server), server_config_(std::move(config)) {}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

namespace {
Result<SSL_CTX*> make_ctx(bool server) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) return make_error("TLS: SSL_CTX_new failed");
  bool ok = SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) == 1 &&
            SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1 &&
            SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384") == 1;
  // No tickets (the PSK is external; a ticket would also be a post-handshake record the kernel must not
  // see), no session cache, no renegotiation-era options, no early data.
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION);
  ok = ok && SSL_CTX_set_num_tickets(ctx, 0) == 1;
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_max_early_data(ctx, 0);
  SSL_CTX_set_keylog_callback(ctx, &TlsCallbacks::keylog);
  SSL_CTX_set_msg_callback(ctx, &TlsCallbacks::message);
  SSL_CTX_set_info_callback(ctx, &TlsCallbacks::info);
  if (server) {
    SSL_CTX_set_psk_find_session_callback(ctx, &TlsCallbacks::find_session);
    SSL_CTX_set_client_hello_cb(ctx, &TlsCallbacks::client_hello, nullptr);
  } else {
    // Without a trust store, a server that answers with a certificate instead of taking our PSK fails
    // verification: a PSK-only client must never end up unauthenticated.
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
  if (!ok) {
    SSL_CTX_free(ctx);
    return make_error("TLS: cannot restrict the context to TLS 1.3 with the NVMe cipher suites");
  }
  return ctx;
}
}  // namespace

Result<std::shared_ptr<TlsContext>> TlsContext::server(TlsServerConfig config) {
  if (!config.lookup) return make_error("TLS: the server needs a PSK lookup");
  auto ctx = make_ctx(true);
  if (!ctx) return tl::unexpected(ctx.error());
  return std::shared_ptr<TlsContext>(new TlsContext(*ctx, true, std::move(config)));
}

Result<std::shared_ptr<TlsContext>> TlsContext::client() {
  auto ctx = make_ctx(false);
  if (!ctx) return tl::unexpected(ctx.error());
  return std::shared_ptr<TlsContext>(new TlsContext(*ctx, false, {}));
}

// ---- TlsSession: construction ----

TlsSession::TlsSession(std::shared_ptr<const TlsContext> context, bool server) noexcept
    : context_(std::move(context)), server_(server) {}

TlsSession::~TlsSession() {
  if (ssl_ != nullptr) {
    SSL_set_app_data(ssl_, nullptr);
    SSL_free(ssl_);
  }
}

Result<void> TlsSession::init(SSL* ssl) {
  ssl_ = ssl;
  SSL_set_app_data(ssl_, this);
  rbio_ = BIO_new(BIO_s_mem());
  wbio_ = BIO_new(BIO_s_mem());
  if (rbio_ == nullptr || wbio_ == nullptr) {
    BIO_free(rbio_);
    BIO_free(wbio_);
    rbio_ = wbio_ = nullptr;
    return make_error("TLS: out of memory", ENOMEM);
  }
  // An empty read BIO means "more input needed", not end of stream.
  BIO_set_mem_eof_return(rbio_, -1);
  BIO_set_mem_eof_return(wbio_, -1);
  SSL_set_bio(ssl_, rbio_, wbio_);
  return {};
}

Result<std::unique_ptr<TlsSession>> TlsSession::server(std::shared_ptr<const TlsContext> context) {
  if (!context || !context->is_server()) return make_error("TLS: server session needs a server context");
  SSL* ssl = SSL_new(context->native());
  if (ssl == nullptr) return make_error("TLS: SSL_new failed");
  std::unique_ptr<TlsSession> s(new TlsSession(std::move(context), true));
  if (auto r = s->init(ssl); !r) return tl::unexpected(r.error());
  SSL_set_accept_state(ssl);
  return s;
}

Result<std::unique_ptr<TlsSession>> TlsSession::client(std::shared_ptr<const TlsContext> context,
                                                       TlsClientConfig config) {
  if (!context || context->is_server()) return make_error("TLS: client session needs a client context");
  auto psk = derive_tls_psk_for(config.psk, config.hostnqn, config.subnqn, config.identity_version,
                                config.derivation);
  if (!psk) return tl::unexpected(psk.error());
  SSL* ssl = SSL_new(context->native());
  if (ssl == nullptr) return make_error("TLS: SSL_new failed");
  std::unique_ptr<TlsSession> s(new TlsSession(std::move(context), false));
  if (auto r = s->init(ssl); !r) return tl::unexpected(r.error());
  s->client_psk_ = std::move(*psk);
  s->client_config_ = std::move(config);
  // Offer only the suite that goes with the PSK's hash: the server cannot use the PSK with the other.
  if (SSL_set_ciphersuites(ssl, suite_for(s->client_psk_.hash)) != 1)
    return make_error("TLS: cannot set the cipher suite");
  SSL_set_psk_use_session_callback(ssl, &TlsCallbacks::use_session);
  SSL_set_connect_state(ssl);
  return s;
}

// ---- errors ----

std::string TlsSession::take_openssl_errors() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

void TlsSession::fail(TlsFailure kind, std::string message) noexcept {
  if (state_ == State::failed) return;
  state_ = State::failed;
  error_.kind = kind;
  try {
    error_.message = std::move(message);
  } catch (...) {
  }
}

void TlsSession::fail_from_openssl(const char* what) noexcept {
  try {
    const unsigned long first = ERR_peek_error();
    const int reason = ERR_GET_REASON(first);
    const std::string detail = take_openssl_errors();
    std::string where = std::string(what) + (server_ ? " (server)" : " (client)");
    if (server_ && lookup_ == Lookup::unknown) {
      fail(TlsFailure::unknown_identity,
           where + ": no PSK for the offered identity '" + offered_identity_ + "'");
    } else if (server_ && lookup_ == Lookup::digest_mismatch) {
      fail(TlsFailure::wrong_psk, where + ": the PSK digest in identity '" + offered_identity_ +
                                      "' does not match our key for that host and subsystem");
    } else if (reason == SSL_R_BINDER_DOES_NOT_VERIFY) {
      fail(TlsFailure::wrong_psk, where + ": the peer's PSK binder does not verify: it has a different key for '" +
                                      offered_identity_ + "'");
    } else if (alert_received_ >= 0 && (alert_received_ & 0xFF) == kAlertDecryptError) {
      fail(TlsFailure::wrong_psk,
           where + ": the peer rejected our PSK binder (alert " + alert_name(alert_received_) + "): wrong key");
    } else if (!server_ && state_ == State::handshaking && alert_received_ >= 0 &&
               (alert_received_ & 0xFF) == kAlertIllegalParameter) {
      // OpenSSL 3 servers answer a binder that does not verify with illegal_parameter, not decrypt_error;
      // our ClientHello is well formed, so that is what it means here.
      fail(TlsFailure::wrong_psk, where + ": the peer refused our PSK (alert " + alert_name(alert_received_) +
                                      "): most likely it has a different key for our identity (wrong key)");
    } else if (alert_received_ >= 0) {
      fail(TlsFailure::peer_alert,
           where + ": the peer sent alert " + alert_name(alert_received_) +
               (!server_ && state_ == State::handshaking ? " (does it know our PSK identity?)" : ""));
    } else if (!server_ && reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
      fail(TlsFailure::unknown_identity,
           where + ": the server did not take our PSK and sent a certificate instead");
    } else {
      fail(TlsFailure::protocol, where + ": " + (detail.empty() ? "failed" : detail));
    }
    if (alert_received_ >= 0) {
      error_.alert = alert_received_ & 0xFF;
    } else if (alert_sent_ >= 0) {
      error_.alert = alert_sent_ & 0xFF;
    }
  } catch (...) {
    fail(TlsFailure::internal, {});
  }
  ERR_clear_error();
}

// ---- callbacks ----

int TlsSession::on_find_session(const unsigned char* identity, std::size_t len, void** session) noexcept {
  try {
    const std::string_view text(reinterpret_cast<const char*>(identity), len);
    offered_identity_ = printable(text);
    lookup_ = Lookup::unknown;
    auto id = parse_psk_identity(text);
    if (!id || id->type != 'R') return 1;  // not ours: no session, the handshake fails without a PSK
    auto key = context_->server_config().lookup(*id);
    if (!key) return 1;
    if (key->cipher_hash() != id->hash) return 1;  // the host offers this identity for another suite
    const PskDerivation derivation = context_->server_config().derivation;
    auto expected = derive_tls_psk_for(*key, id->hostnqn, id->subnqn, id->version, derivation);
    if (!expected) return 1;
    // The identity only says who; the binder proves the key. A version 1 digest that differs already
    // tells that the host's key is another one: use our key anyway so that the binder fails and the host
    // gets decrypt_error, the alert for a wrong PSK.
    const bool same = expected->identity.size() == len &&
                      CRYPTO_memcmp(expected->identity.data(), identity, len) == 0;
    lookup_ = same ? Lookup::found : Lookup::digest_mismatch;
    SSL_SESSION* s = make_psk_session(ssl_, expected->hash, expected->key);
    if (s == nullptr) return 0;
    identity_ = std::string(text);
    hostnqn_ = id->hostnqn;
    subnqn_ = id->subnqn;
    hash_ = expected->hash;
    *session = s;
    return 1;
  } catch (...) {
    return 0;
  }
}

int TlsSession::on_use_session(const void* md, const unsigned char** id, std::size_t* idlen,
                               void** session) noexcept {
  // md is set on the second ClientHello (after HelloRetryRequest): the PSK must use that hash.
  if (md != nullptr) {
    const EVP_MD* want = EVP_get_digestbyname(client_psk_.hash == PskHash::sha384 ? "SHA384" : "SHA256");
    if (want == nullptr || EVP_MD_get_type(static_cast<const EVP_MD*>(md)) != EVP_MD_get_type(want)) return 1;
  }
  SSL_SESSION* s = make_psk_session(ssl_, client_psk_.hash, client_psk_.key);
  if (s == nullptr) return 0;
  *id = reinterpret_cast<const unsigned char*>(client_psk_.identity.data());
  *idlen = client_psk_.identity.size();
  *session = s;
  return 1;
}

int TlsSession::on_client_hello() noexcept {
  // The suite is chosen before the PSK is looked up, and a PSK only works with its own hash. Pin the
  // suite to the hash of the NVMe identities offered (when they agree), so that a host offering both
  // suites in any order gets the one its PSK needs. pre_shared_key (41): identities<7..2^16-1>, each
  // opaque identity<1..2^16-1> + uint32 obfuscated_ticket_age; then the binders.
  const unsigned char* ext = nullptr;
  size_t len = 0;
  if (SSL_client_hello_get0_ext(ssl_, TLSEXT_TYPE_psk, &ext, &len) != 1 || len < 2) return SSL_CLIENT_HELLO_SUCCESS;
  const std::size_t list_len = std::size_t{ext[0]} << 8 | ext[1];
  if (list_len + 2 > len) return SSL_CLIENT_HELLO_SUCCESS;
  bool want128 = false;
  bool want256 = false;
  std::size_t off = 2;
  while (off + 2 <= 2 + list_len) {
    const std::size_t id_len = std::size_t{ext[off]} << 8 | ext[off + 1];
    if (off + 2 + id_len + 4 > 2 + list_len) break;
    const std::string_view id(reinterpret_cast<const char*>(ext + off + 2), id_len);
    if (id.size() >= 9 && id.substr(0, 4) == "NVMe") {
      want128 = want128 || id.substr(6, 2) == "01";
      want256 = want256 || id.substr(6, 2) == "02";
    }
    off += 2 + id_len + 4;
  }
  if (want128 != want256) SSL_set_ciphersuites(ssl_, want256 ? kSuite256 : kSuite128);
  return SSL_CLIENT_HELLO_SUCCESS;
}

void TlsSession::on_keylog(const char* line) noexcept {
  // "<LABEL> <client random hex> <secret hex>"
  const std::string_view text(line);
  const std::size_t sp1 = text.find(' ');
  if (sp1 == std::string_view::npos) return;
  const std::size_t sp2 = text.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return;
  const std::string_view label = text.substr(0, sp1);
  const std::string_view secret = text.substr(sp2 + 1);
  if (label == "CLIENT_TRAFFIC_SECRET_0") {
    hex_to_secret(secret, client_secret_);
  } else if (label == "SERVER_TRAFFIC_SECRET_0") {
    hex_to_secret(secret, server_secret_);
  }
}

void TlsSession::on_message(int write_p, int content_type, const void* buf, std::size_t len) noexcept {
  if (state_ != State::established) return;
  // Record headers after the handshake give the application traffic sequence numbers kTLS starts from.
  if (content_type == SSL3_RT_HEADER) {
    (write_p != 0 ? tx_records_ : rx_records_) += 1;
  } else if (content_type == SSL3_RT_HANDSHAKE && len >= 1 &&
             static_cast<const uint8_t*>(buf)[0] == SSL3_MT_KEY_UPDATE) {
    key_update_seen_ = true;
  }
}

void TlsSession::on_info(int where, int ret) noexcept {
  if ((where & SSL_CB_ALERT) == 0) return;
  if ((where & SSL_CB_READ) != 0) {
    alert_received_ = ret;
  } else {
    alert_sent_ = ret;
  }
}

// ---- input / output ----

void TlsSession::track_input(std::span<const uint8_t> bytes) noexcept {
  std::size_t i = 0;
  while (i < bytes.size()) {
    if (body_left_ > 0) {
      const std::size_t n = std::min(body_left_, bytes.size() - i);
      body_left_ -= n;
      i += n;
      continue;
    }
    header_[header_have_++] = bytes[i++];
    if (header_have_ == header_.size()) {
      body_left_ = std::size_t{header_[3]} << 8 | header_[4];
      header_have_ = 0;
    }
  }
}

bool TlsSession::feed(std::span<const uint8_t> bytes) noexcept {
  if (bytes.empty()) return true;
  if (bytes.size() > static_cast<std::size_t>(INT32_MAX)) return false;
  if (BIO_write(rbio_, bytes.data(), static_cast<int>(bytes.size())) != static_cast<int>(bytes.size())) return false;
  track_input(bytes);
  return true;
}

std::size_t TlsSession::next_read_size() const noexcept {
  return body_left_ > 0 ? body_left_ : header_.size() - header_have_;
}

std::size_t TlsSession::pending_output() const noexcept { return BIO_ctrl_pending(wbio_); }

std::size_t TlsSession::read_output(std::span<uint8_t> out) noexcept {
  if (out.empty()) return 0;
  const int n = BIO_read(wbio_, out.data(), static_cast<int>(std::min<std::size_t>(out.size(), INT32_MAX)));
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

const char* TlsSession::cipher_name() const noexcept {
  const SSL_CIPHER* c = SSL_get_current_cipher(ssl_);
  return c != nullptr ? SSL_CIPHER_get_name(c) : "";
}

// ---- handshake ----

TlsStep TlsSession::handshake() noexcept {
  switch (state_) {
    case State::established:
    case State::ktls: return TlsStep::done;
    case State::failed:
    case State::closed: return TlsStep::failed;
    case State::handshaking: break;
  }
  ERR_clear_error();
  const int rc = SSL_do_handshake(ssl_);
  if (rc == 1) {
    if (!server_ && SSL_session_reused(ssl_) != 1) {
      fail(TlsFailure::unknown_identity, "TLS handshake (client): the server did not accept our PSK");
      return TlsStep::failed;
    }
    if (server_ && lookup_ != Lookup::found) {
      fail(TlsFailure::internal, "TLS handshake (server): completed without an accepted PSK");
      return TlsStep::failed;
    }
    if (!server_) {
      identity_ = client_psk_.identity;
      hostnqn_ = client_config_->hostnqn;
      subnqn_ = client_config_->subnqn;
      hash_ = client_psk_.hash;
    }
    // Sequence numbers of the application traffic keys start here.
    tx_records_ = 0;
    rx_records_ = 0;
    state_ = State::established;
    return TlsStep::done;
  }
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    ERR_clear_error();
    return TlsStep::need_input;
  }
  fail_from_openssl("TLS handshake");
  return TlsStep::failed;
}

// ---- userspace records ----

TlsIo TlsSession::encrypt(std::span<const uint8_t> plain) noexcept {
  if (state_ != State::established) {
    if (state_ != State::failed) fail(TlsFailure::internal, "TLS: encrypt before the handshake or after close/kTLS");
    return TlsIo::failed;
  }
  std::size_t done = 0;
  while (done < plain.size()) {
    ERR_clear_error();
    std::size_t written = 0;
    if (SSL_write_ex(ssl_, plain.data() + done, plain.size() - done, &written) != 1) {
      fail_from_openssl("TLS encrypt");
      return TlsIo::failed;
    }
    done += written;
  }
  return TlsIo::ok;
}

TlsRead TlsSession::decrypt(std::span<uint8_t> out) noexcept {
  if (state_ == State::closed) return {TlsIo::closed, 0};
  if (state_ != State::established) {
    if (state_ != State::failed) fail(TlsFailure::internal, "TLS: decrypt before the handshake or after kTLS");
    return {TlsIo::failed, 0};
  }
  if (out.empty()) return {TlsIo::ok, 0};
  ERR_clear_error();
  std::size_t n = 0;
  const int rc = SSL_read_ex(ssl_, out.data(), out.size(), &n);
  if (rc == 1) return {TlsIo::ok, n};
  switch (SSL_get_error(ssl_, rc)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      ERR_clear_error();
      // The peer asked us to update our keys too: OpenSSL would answer with the next write; answer now.
      if (SSL_get_key_update_type(ssl_) != SSL_KEY_UPDATE_NONE &&
          (SSL_key_update(ssl_, SSL_KEY_UPDATE_NOT_REQUESTED) != 1 || SSL_do_handshake(ssl_) != 1)) {
        fail_from_openssl("TLS KeyUpdate answer");
        return {TlsIo::failed, 0};
      }
      return {TlsIo::need_input, 0};
    case SSL_ERROR_ZERO_RETURN:
      ERR_clear_error();
      state_ = State::closed;
      error_ = {TlsFailure::closed, "TLS: the peer sent close_notify", 0};
      return {TlsIo::closed, 0};
    default:
      fail_from_openssl("TLS decrypt");
      return {TlsIo::failed, 0};
  }
}

void TlsSession::close() noexcept {
  if (state_ == State::established || state_ == State::closed) {
    ERR_clear_error();
    SSL_shutdown(ssl_);  // queues close_notify in the write BIO
    ERR_clear_error();
  }
  if (state_ == State::established) {
    state_ = State::closed;
    error_ = {TlsFailure::closed, "TLS: closed", -1};
  }
}

bool TlsSession::update_keys() noexcept {
  if (state_ != State::established) return false;
  ERR_clear_error();
  // SSL_key_update only schedules the message; a handshake call writes it out now.
  if (SSL_key_update(ssl_, SSL_KEY_UPDATE_REQUESTED) != 1 || SSL_do_handshake(ssl_) != 1) {
    fail_from_openssl("TLS KeyUpdate");
    return false;
  }
  return true;
}

// ---- kTLS ----

Result<TlsTrafficKeys> TlsSession::traffic_keys(bool transmit) const {
  if (state_ != State::established) return make_error("kTLS: the handshake is not done (or the session ended)");
  if (key_update_seen_) return make_error("kTLS: a KeyUpdate happened; the first traffic keys are stale");
  if (BIO_ctrl_pending(rbio_) != 0 || SSL_has_pending(ssl_) == 1 || next_read_size() != 5)
    return make_error("kTLS: received bytes are still buffered in the session (read record by record with "
                      "next_read_size() during the handshake, or decrypt() them first)");
  const SSL_CIPHER* cipher = SSL_get_current_cipher(ssl_);
  if (cipher == nullptr) return make_error("kTLS: no cipher");
  const uint16_t suite = static_cast<uint16_t>(SSL_CIPHER_get_id(cipher) & 0xFFFF);
  if (suite != 0x1301 && suite != 0x1302) return make_error("kTLS: unexpected cipher suite");
  // This side writes with its own secret: the client's for the client.
  const bool client_secret = transmit != server_;
  const Secret& secret = client_secret ? client_secret_ : server_secret_;
  if (secret.empty()) return make_error("kTLS: traffic secret not captured");
  TlsTrafficKeys out;
  out.hash = suite == 0x1302 ? PskHash::sha384 : PskHash::sha256;
  auto key = hkdf_expand_label(out.hash, secret.bytes(), "key", {}, suite == 0x1302 ? 32 : 16);
  auto iv = hkdf_expand_label(out.hash, secret.bytes(), "iv", {}, 12);
  if (!key || !iv) return make_error("kTLS: key derivation failed");
  out.key = *key;
  std::memcpy(out.iv.data(), iv->data(), out.iv.size());
  out.sequence = transmit ? tx_records_ : rx_records_;
  return out;
}

namespace {
// Fills the kernel's crypto_info for one direction (TLS 1.3: salt = iv[0..4), iv = iv[4..12), rec_seq
// big-endian), as OpenSSL's ktls code does, and sets it. `Info` is tls12_crypto_info_aes_gcm_128 or _256,
// which differ only in their key size.
template <typename Info>
int set_ktls_crypto_info(int fd, int direction, uint16_t cipher_type, const TlsTrafficKeys& keys) {
  Info info{};
  info.info.version = TLS_1_3_VERSION;
  info.info.cipher_type = cipher_type;
  std::memcpy(info.key, keys.key.data(), sizeof info.key);
  std::memcpy(info.salt, keys.iv.data(), sizeof info.salt);
  std::memcpy(info.iv, keys.iv.data() + 4, sizeof info.iv);
  for (std::size_t i = 0; i < sizeof info.rec_seq; ++i) {
    info.rec_seq[i] = static_cast<unsigned char>(keys.sequence >> (56 - 8 * i));
  }
  const int rc = setsockopt(fd, SOL_TLS, direction, &info, sizeof info);
  const int saved = errno;
  OPENSSL_cleanse(&info, sizeof info);
  errno = saved;
  return rc;
}

int set_ktls_direction(int fd, int direction, const TlsTrafficKeys& keys) {
  if (keys.hash == PskHash::sha256) {
    return set_ktls_crypto_info<tls12_crypto_info_aes_gcm_128>(fd, direction, TLS_CIPHER_AES_GCM_128, keys);
  }
  return set_ktls_crypto_info<tls12_crypto_info_aes_gcm_256>(fd, direction, TLS_CIPHER_AES_GCM_256, keys);
}
}  // namespace

Result<void> TlsSession::enable_ktls(int fd) {
  if (pending_output() != 0) return make_error("kTLS: send the pending output first");
  auto tx = traffic_keys(true);
  if (!tx) return tl::unexpected(tx.error());
  auto rx = traffic_keys(false);
  if (!rx) return tl::unexpected(rx.error());
  if (setsockopt(fd, SOL_TCP, TCP_ULP, "tls", sizeof("tls")) != 0) {
    const int e = errno;
    return make_error(e == ENOENT ? "kTLS: this kernel has no tls ULP (TCP_ULP: ENOENT)"
                                  : std::string("kTLS: TCP_ULP tls: ") + std::strerror(e),
                      e);
  }
  if (set_ktls_direction(fd, TLS_TX, *tx) != 0) {
    const int e = errno;
    return make_error(std::string("kTLS: TLS_TX: ") + std::strerror(e), e);
  }
  if (set_ktls_direction(fd, TLS_RX, *rx) != 0) {
    // TX is in the kernel already: the connection cannot go back to userspace records.
    const int e = errno;
    fail(TlsFailure::internal, "kTLS: TLS_RX failed after TLS_TX");
    return make_error(std::string("kTLS: TLS_RX: ") + std::strerror(e) + " (TX already set: close the connection)", e);
  }
  client_secret_.clear();
  server_secret_.clear();
  state_ = State::ktls;
  return {};
}

const KtlsSupport& probe_ktls() {
  static const KtlsSupport support = [] {
    KtlsSupport s;
    {
      std::ifstream in("/proc/sys/net/ipv4/tcp_available_ulp");
      std::string word;
      while (in >> word) {
        if (word == "tls") {
          s.available = true;
          s.reason = "tcp_available_ulp lists tls";
          return s;
        }
      }
    }
    // Not loaded (yet): attaching it to a connected TCP socket loads the module if the kernel can.
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int accepted = -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    if (listener < 0 || client < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(listener, 1) != 0 || getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &alen) != 0 ||
        connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        (accepted = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)) < 0) {
      s.reason = std::string("cannot set up a loopback TCP connection to probe: ") + std::strerror(errno);
    } else if (setsockopt(client, SOL_TCP, TCP_ULP, "tls", sizeof("tls")) == 0) {
      s.available = true;
      s.reason = "TCP_ULP tls attached on a loopback connection";
    } else {
      const int e = errno;
      s.reason = e == ENOENT ? "the kernel has no tls ULP (not in tcp_available_ulp; TCP_ULP tls: ENOENT)"
                             : std::string("TCP_ULP tls: ") + std::strerror(e);
    }
    for (int fd : {listener, client, accepted})
      if (fd >= 0) ::close(fd);
    return s;
  }();
  return support;
}

uint8_t ktls_record_type(const void* msghdr_ptr) noexcept {
  const auto* msg = static_cast<const msghdr*>(msghdr_ptr);
  for (const cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(const_cast<msghdr*>(msg), const_cast<cmsghdr*>(c))) {
    if (c->cmsg_level == SOL_TLS && c->cmsg_type == TLS_GET_RECORD_TYPE && c->cmsg_len >= CMSG_LEN(1))
      return *CMSG_DATA(c);
  }
  return kRecordApplicationData;
}

KtlsRecordInfo classify_ktls_record(uint8_t record_type, std::span<const uint8_t> payload) {
  KtlsRecordInfo info;
  if (record_type == kRecordAlert) {
    if (payload.size() >= 2 && payload[1] == 0) {
      info.close_notify = true;
      info.description = "the peer sent close_notify";
    } else if (payload.size() >= 2) {
      info.description = "the peer sent alert " + alert_name(payload[0] << 8 | payload[1]);
    } else {
      info.description = "a truncated alert record";
    }
  } else if (record_type == kRecordHandshake) {
    const int type = payload.empty() ? -1 : payload[0];
    if (type == SSL3_MT_KEY_UPDATE) {
      info.description = "the peer sent a TLS KeyUpdate, which this kTLS connection does not take";
    } else if (type == SSL3_MT_NEWSESSION_TICKET) {
      info.description = "the peer sent a NewSessionTicket after the hand-off to kTLS (not used: PSK only)";
    } else {
      info.description = "the peer sent a post-handshake message (type " + std::to_string(type) + ")";
    }
  } else {
    info.description = "unexpected TLS record type " + std::to_string(record_type);
  }
  return info;
}

}  // namespace rdmablk::security

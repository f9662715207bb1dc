// NVMe/TCP TLS 1.3 with pre-shared keys (NVMe/TCP Transport 1.1 section 3.6, TP 8011) on OpenSSL 3:
// the handshake and the record layer over memory BIOs, for a reactor that owns the socket.
//
//   reactor recv() -> session.feed(bytes) -> session.handshake() / session.decrypt(plain)
//   session.encrypt(plain) / handshake() / decrypt() -> session.read_output(buf) -> reactor send()
//
// The session never does I/O. After every call the reactor sends what read_output() returns, even after a
// failure (that is the alert). TLS 1.3 only; TLS_AES_128_GCM_SHA256 for SHA-256 PSKs and
// TLS_AES_256_GCM_SHA384 for SHA-384 PSKs; PSK with (EC)DHE, no certificates, no session tickets (the
// server never sends NewSessionTicket), no early data. In NVMe/TCP the ICReq/ICResp exchange follows the
// handshake, inside TLS.
//
// After the handshake the records go one of two ways:
//  (a) kTLS (enable_ktls): the negotiated traffic keys and record sequence numbers are handed to the
//      kernel's TLS ULP and the reactor does plain send/recv on the fd. For this, the reactor must not read
//      past the handshake's last record: during the handshake it reads next_read_size() bytes at a time
//      (the rest of the current record), so nothing meant for the kernel sits in the session. The traffic
//      secrets come from OpenSSL's key log callback (CLIENT/SERVER_TRAFFIC_SECRET_0), the key and IV from
//      HKDF-Expand-Label(secret, "key"/"iv") as RFC 8446 7.3 says (what OpenSSL's own kTLS code feeds the
//      kernel). A KeyUpdate before the hand-off makes it refuse (the kernel would get stale keys); after
//      it, the kernel reports any non-data record (alert, KeyUpdate, NewSessionTicket) through recvmsg's
//      TLS_GET_RECORD_TYPE cmsg: classify_ktls_record() says what it is, and the connection ends.
//  (b) userspace records (encrypt / decrypt): OpenSSL processes post-handshake messages itself (it answers
//      a KeyUpdate: send read_output() afterwards) and close_notify ends the stream.
//
// A session belongs to one thread (the reactor's); the contexts are shared, immutable after creation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "protocol/result.h"
#include "security/tls_psk.h"

// OpenSSL types, so that users of this header do not include OpenSSL.
struct ssl_ctx_st;
struct ssl_st;
struct bio_st;

namespace rdmablk::security {

// Why a session failed.
enum class TlsFailure : uint8_t {
  none,
  unknown_identity,  // server: no key for the offered identity (or it is malformed / not NVMe)
  wrong_psk,         // the PSK binder did not verify (server), or the peer said decrypt_error (client)
  peer_alert,        // the peer sent a fatal alert (alert() says which)
  protocol,          // malformed or unexpected TLS input, bad record MAC, ...
  closed,            // used after close_notify / close()
  internal,          // OpenSSL or memory failure, misuse of the API
};
const char* to_string(TlsFailure failure) noexcept;

struct TlsError {
  TlsFailure kind = TlsFailure::none;
  std::string message;  // for the log; never contains key material
  int alert = -1;       // the TLS alert received (peer_alert, wrong_psk on the client) or sent; -1 if none
};

// Server: the key for an offered identity. Called during handshake() on the session's thread, so it must
// be quick (an in-memory lookup), and thread-safe when sessions of one context run on several reactors.
// Return nullopt to refuse the host. Only type R (retained PSK) identities reach it.
using TlsPskLookup = std::function<std::optional<ConfiguredPsk>(const PskIdentity& identity)>;

struct TlsServerConfig {
  TlsPskLookup lookup;
  PskDerivation derivation = PskDerivation::standard;
};

struct TlsClientConfig {
  std::string hostnqn;
  std::string subnqn;
  ConfiguredPsk psk;
  int identity_version = 1;  // 1: "NVMe1R0h <host> <subsys> <digest>" (TP 8011); 0: without the digest
  PskDerivation derivation = PskDerivation::standard;
};

// An SSL_CTX for one side. Shared by the sessions of a listener (server) or of an initiator (client).
class TlsContext {
 public:
  static Result<std::shared_ptr<TlsContext>> server(TlsServerConfig config);
  static Result<std::shared_ptr<TlsContext>> client();
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  bool is_server() const noexcept { return server_; }
  const TlsServerConfig& server_config() const noexcept { return server_config_; }
  ssl_ctx_st* native() const noexcept { return ctx_; }

 private:
  TlsContext(ssl_ctx_st* ctx, bool server, TlsServerConfig config) noexcept;
  ssl_ctx_st* ctx_;
  bool server_;
  TlsServerConfig server_config_;
};

// Keys of one direction as the kernel's TLS ULP takes them.
struct TlsTrafficKeys {
  PskHash hash = PskHash::sha256;  // sha256: AES-128-GCM, sha384: AES-256-GCM
  Secret key;                      // 16 or 32 bytes
  std::array<uint8_t, 12> iv{};    // salt (4) || per-connection IV (8)
  uint64_t sequence = 0;           // next record's sequence number
};

enum class TlsStep : uint8_t { done, need_input, failed };
enum class TlsIo : uint8_t { ok, need_input, closed, failed };
struct TlsRead {
  TlsIo status;
  std::size_t bytes;  // plaintext bytes written to the output span (status ok)
};

class TlsSession {
 public:
  static Result<std::unique_ptr<TlsSession>> server(std::shared_ptr<const TlsContext> context);
  static Result<std::unique_ptr<TlsSession>> client(std::shared_ptr<const TlsContext> context,
                                                     TlsClientConfig config);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // ---- bytes from and to the socket ----
  // Queues received bytes (any split). False only when out of memory.
  bool feed(std::span<const uint8_t> bytes) noexcept;
  // How many bytes complete the TLS record being received (5 at a record boundary: its header). A reactor
  // that will switch to kTLS reads at most this much per recv() during the handshake.
  std::size_t next_read_size() const noexcept;
  // Bytes waiting to be sent, and taking them (copied out, up to out.size()).
  std::size_t pending_output() const noexcept;
  std::size_t read_output(std::span<uint8_t> out) noexcept;

  // ---- handshake ----
  // Drives the handshake with what was fed. done: keys agreed (client: the target accepted our PSK).
  // need_input: send read_output(), feed more. failed: error() says why; send read_output() (the alert).
  TlsStep handshake() noexcept;
  bool handshake_done() const noexcept { return state_ == State::established; }
  const TlsError& error() const noexcept { return error_; }

  // After the handshake: the identity used (server: the one the host offered and we accepted), its parsed
  // NQNs, and the suite.
  const std::string& identity() const noexcept { return identity_; }
  const std::string& hostnqn() const noexcept { return hostnqn_; }
  const std::string& subnqn() const noexcept { return subnqn_; }
  PskHash hash() const noexcept { return hash_; }
  const char* cipher_name() const noexcept;

  // ---- userspace records ----
  // Appends the records carrying `plain` to the output. ok or failed.
  TlsIo encrypt(std::span<const uint8_t> plain) noexcept;
  // Decrypts the next application data from what was fed into `out`. need_input: feed more (and send
  // read_output(): a KeyUpdate may have been answered). closed: the peer sent close_notify.
  TlsRead decrypt(std::span<uint8_t> out) noexcept;
  // Queues close_notify (send read_output() afterwards).
  void close() noexcept;
  // Sends a KeyUpdate asking the peer to update too (long-lived userspace connections; send read_output()
  // afterwards). Afterwards traffic_keys() / enable_ktls() refuse: the kernel would need the new keys.
  bool update_keys() noexcept;

  // ---- kTLS ----
  // This side's (tx) and the peer's (rx) traffic keys with the next sequence numbers. Fails before the
  // handshake, after a KeyUpdate, or when input is buffered in the session.
  Result<TlsTrafficKeys> traffic_keys(bool transmit) const;
  // Hands the connection to the kernel: setsockopt TCP_ULP "tls", TLS_TX, TLS_RX. Requires an established
  // session, no pending output (send it first), no buffered input. On success the session is done with
  // records and the traffic secrets are wiped; the reactor uses plain send/recv. On failure before
  // TLS_TX the socket is unchanged (use the userspace path).
  Result<void> enable_ktls(int fd);
  bool ktls_enabled() const noexcept { return state_ == State::ktls; }

 private:
  enum class State : uint8_t { handshaking, established, ktls, closed, failed };
  enum class Lookup : uint8_t { none, found, unknown, digest_mismatch };

  TlsSession(std::shared_ptr<const TlsContext> context, bool server) noexcept;
  Result<void> init(ssl_st* ssl);
  void fail(TlsFailure kind, std::string message) noexcept;
  void fail_from_openssl(const char* what) noexcept;
  std::string take_openssl_errors();
  void track_input(std::span<const uint8_t> bytes) noexcept;

  // OpenSSL callbacks (static trampolines in the .cpp reach these through SSL app data).
  friend struct TlsCallbacks;
  int on_find_session(const unsigned char* identity, std::size_t len, void** session) noexcept;
  int on_use_session(const void* md, const unsigned char** id, std::size_t* idlen, void** session) noexcept;
  int on_client_hello() noexcept;
  void on_keylog(const char* line) noexcept;
  void on_message(int write_p, int content_type, const void* buf, std::size_t len) noexcept;
  void on_info(int where, int ret) noexcept;

  std::shared_ptr<const TlsContext> context_;
  bool server_;
  ssl_st* ssl_ = nullptr;
  bio_st* rbio_ = nullptr;  // owned by ssl_
  bio_st* wbio_ = nullptr;  // owned by ssl_
  State state_ = State::handshaking;
  TlsError error_;

  // Client: what we offer.
  std::optional<TlsClientConfig> client_config_;
  TlsPsk client_psk_;

  // Both: the identity in use, the server's lookup result.
  std::string identity_;
  std::string hostnqn_;
  std::string subnqn_;
  PskHash hash_ = PskHash::sha256;
  Lookup lookup_ = Lookup::none;
  std::string offered_identity_;  // server: last identity offered (for the log), printable only

  // Alerts seen (-1: none).
  int alert_received_ = -1;
  int alert_sent_ = -1;

  // kTLS bookkeeping: traffic secrets from the key log, records since the handshake, KeyUpdate seen.
  Secret client_secret_;
  Secret server_secret_;
  uint64_t tx_records_ = 0;
  uint64_t rx_records_ = 0;
  bool key_update_seen_ = false;

  // Input record boundary tracking (next_read_size).
  std::array<uint8_t, 5> header_{};
  std::size_t header_have_ = 0;
  std::size_t body_left_ = 0;
};

// Whether this kernel has the TLS ULP: /proc/sys/net/ipv4/tcp_available_ulp lists it, or attaching it to a
// loopback TCP connection works (that loads the module where modules can be loaded). Cached.
struct KtlsSupport {
  bool available = false;
  std::string reason;  // why not, or how it was found
};
const KtlsSupport& probe_ktls();

// What a non-application record reported by kTLS (recvmsg cmsg SOL_TLS / TLS_GET_RECORD_TYPE) means.
// Every case ends the connection: close_notify cleanly, the rest as a protocol error.
struct KtlsRecordInfo {
  bool close_notify = false;
  std::string description;
};
KtlsRecordInfo classify_ktls_record(uint8_t record_type, std::span<const uint8_t> payload);
// The record type of a kTLS recvmsg() (from its control messages); 23 (application data) if none.
uint8_t ktls_record_type(const void* msghdr_ptr) noexcept;

}  // namespace rdmablk::security

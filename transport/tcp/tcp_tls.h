// NVMe/TCP over TLS 1.3 (NVMe/TCP Transport 1.1 section 3.6, TP 8011): the pieces the target connection
// (tcp_target.cpp) and the host queue (tcp_host.cpp) share. The TLS session itself (handshake, records,
// kTLS hand-off) is security/tls_session.h; this file says how a connection uses it:
//
//   - The handshake comes first, before ICReq; ICReq/ICResp and every PDU after it travel inside TLS.
//   - After the handshake the records go to the kernel (kTLS: the PDU path is the plain one, on the same
//     fd) when probe_ktls() finds the tls ULP and the connection allows it, else they are built and opened
//     in userspace: encrypt_iov() gathers a send's iovecs into records, decrypt_iov() fills a recv's.
//   - A connection that may switch to kTLS reads the handshake record by record (next_read_size()), so no
//     byte meant for the kernel stays in the session.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/log_pages.h"
#include "protocol/result.h"
#include "security/tls_session.h"

namespace rdmablk::transport::tcp {

// A listener's TLS policy. required: a connection must complete a TLS 1.3 handshake before ICReq (a plain
// ICReq is refused: the socket is closed, as nvmet does when TREQ says required). optional: the first byte
// decides, 0x16 (a TLS handshake record) starts TLS, anything else stays plain NVMe/TCP.
enum class TlsPolicy : uint8_t { none, optional, required };
const char* to_string(TlsPolicy policy) noexcept;
// "none" / "optional" / "required" (config files).
Result<TlsPolicy> parse_tls_policy(std::string_view text);
// What the discovery log entry of a listener with this policy says (TREQ 1:0 and TSAS SECTYPE).
protocol::TcpSecureChannel secure_channel_of(TlsPolicy policy) noexcept;

// Target side: given to TcpListener through TcpTargetOptions.
struct TcpTlsServerOptions {
  TlsPolicy policy = TlsPolicy::none;
  // A server context (security::TlsContext::server) whose PSK lookup the caller wrote; shared by every
  // connection of the listener, looked up on their reactors (so the lookup must be thread-safe).
  std::shared_ptr<const security::TlsContext> context;
  bool allow_ktls = true;  // hand records to the kernel when it has the tls ULP
};

// Host side: set in HostQueueOptions::tls.
struct TcpTlsClientOptions {
  security::TlsClientConfig config;  // host NQN, subsystem NQN, configured PSK, identity version
  // A client context (security::TlsContext::client), shared by the queues of a controller; null: the queue
  // makes its own.
  std::shared_ptr<const security::TlsContext> context;
  bool allow_ktls = true;
};

// What a connection negotiated, for logs and for the core (the identity's host NQN is the one the PSK
// belongs to; the Connect's must match it).
struct TlsConnectionInfo {
  bool active = false;
  bool ktls = false;
  std::string identity;
  std::string hostnqn;
  std::string subnqn;
  std::string cipher;
};
TlsConnectionInfo connection_info(const security::TlsSession& session);
// "TLS 1.3 <cipher> with <identity> (kernel TLS|userspace TLS)"
std::string describe(const TlsConnectionInfo& info);

// A record's worth of plaintext: what encrypt_iov() puts in one record.
inline constexpr std::size_t kTlsRecordPlain = 16384;
// Bytes a TLS 1.3 record adds: header 5, content type 1, AEAD tag 16.
inline constexpr std::size_t kTlsRecordOverhead = 22;
// The first byte of a TLS handshake record (a ClientHello).
inline constexpr uint8_t kTlsHandshakeRecord = 0x16;

// Gathers up to `max_plain` bytes of the iovecs into records (one per kTlsRecordPlain of plaintext, so
// the small PDU headers between data do not each become a record). `stage` is the caller's scratch
// (kTlsRecordPlain bytes). Returns the plaintext bytes taken (all of them, up to max_plain), or -1 when
// the session failed (session.error()).
long encrypt_iov(security::TlsSession& session, const iovec* iov, unsigned n, std::size_t max_plain,
                 std::vector<uint8_t>& stage) noexcept;

// Decrypts what the session holds into the iovecs, filling them in order.
struct TlsFill {
  security::TlsIo status;  // ok: bytes > 0; need_input: bytes may be > 0 (all that was there); closed / failed
  std::size_t bytes;
};
TlsFill decrypt_iov(security::TlsSession& session, const iovec* iov, unsigned n) noexcept;

// What a recvmsg() on a kTLS socket brought when its record was not application data (the record type comes
// in a TLS_GET_RECORD_TYPE control message; the payload landed in the iovecs). `skip`: a NewSessionTicket
// (harmless: PSK only, never used), read on; `close_notify`: the end of the stream; else the connection
// ends with `description`.
struct KtlsControl {
  bool skip = false;
  bool close_notify = false;
  std::string description;
};
// Room for the control message a kTLS recvmsg() needs.
inline constexpr std::size_t kKtlsCmsgSpace = 64;
// nullopt for application data; else what the record means. `got`: the bytes recvmsg() returned.
std::optional<KtlsControl> ktls_control(const msghdr& msg, std::size_t got);

// recvmsg(MSG_DONTWAIT) on a kTLS socket for a host queue: application data into the iovecs, a
// NewSessionTicket skipped, 0 for close_notify or EOF, -1 with errno (EPROTO: any other record, `why`
// says which) as readv would.
ssize_t ktls_recv(int fd, const iovec* iov, unsigned n, std::string& why) noexcept;

}  // namespace rdmablk::transport::tcp

// The NVMe/TCP TLS server side as a target connection drives it (security/tls_session.*, and
// transport/tcp/tcp_tls.* encrypt_iov / decrypt_iov that move records between the session and a queue's
// iovecs): the handshake fed whatever a host sends, in recv-sized chunks, and the records after it.
//
// Input: 3 bytes of setup, then the payload.
//   [0] mode (mod 3):
//       0  the payload is the host's byte stream from the first byte: a server session is fed it in chunks,
//          handshake() after each, decrypt_iov() once it says done (a random stream never gets there; the
//          seeds hold real ClientHellos, so the mutations reach the PSK lookup and the binder check);
//       1  a real client's handshake flights, each XOR-ed with payload bytes at payload-chosen offsets
//          (pairs: offset byte, mask byte) before the server sees them;
//       2  a real handshake, then: plaintext from the payload client -> server (encrypted by the client,
//          decrypted by decrypt_iov into iovecs the seed splits), server -> client through encrypt_iov,
//          then the rest of the payload fed raw to the server as if it were records.
//   [1..2] seed for chunk sizes and iovec splits.
// Invariants:
//   - next_read_size() is 1..(5 + 65535): a reactor never asks recv for 0 bytes or more than a record;
//   - a failed session stays failed, and says why (a TlsFailure other than none);
//   - whatever a real client encrypts comes out of decrypt_iov byte for byte, whatever the iovec split,
//     and encrypt_iov's records decrypt to the iovecs' bytes in order;
//   - bytes that are not records sealed with the session's keys never come out as plaintext.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include <sys/uio.h>

#include "fuzz_util.h"
#include "security/tls_psk.h"
#include "security/tls_session.h"
#include "transport/tcp/tcp_tls.h"

namespace {

namespace sec = rdmablk::security;
namespace tt = rdmablk::transport::tcp;
using rdmablk::fuzz::Rng;
using Bytes = std::vector<uint8_t>;

constexpr const char* kHost = "nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6";
constexpr const char* kSubsys = "nqn.2024-01.io.rdmablk:fuzz";
constexpr std::size_t kMaxRecordRead = 5 + 65535;

sec::ConfiguredPsk the_key() {
  static const uint8_t bytes[32] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB,
                                    0xCC, 0xDD, 0xEE, 0xF0, 0x01, 0x12, 0x23, 0x34, 0x45, 0x56, 0x67,
                                    0x78, 0x89, 0x9A, 0xAB, 0xBC, 0xCD, 0xDE, 0xEF, 0xFE, 0xED};
  sec::ConfiguredPsk k;
  k.key = sec::Secret(std::span<const uint8_t>(bytes, sizeof bytes));
  k.hash = sec::PskHash::sha256;
  return k;
}

struct Contexts {
  std::shared_ptr<sec::TlsContext> server;
  std::shared_ptr<sec::TlsContext> client;
};

const Contexts& contexts() {
  static const Contexts c = [] {
    Contexts out;
    sec::TlsServerConfig config;
    config.lookup = [](const sec::PskIdentity& id) -> std::optional<sec::ConfiguredPsk> {
      if (id.hostnqn == kHost && id.subnqn == kSubsys) return the_key();
      return std::nullopt;
    };
    auto s = sec::TlsContext::server(std::move(config));
    auto cl = sec::TlsContext::client();
    if (!s || !cl) FUZZ_FAIL("cannot create the TLS contexts");
    out.server = *s;
    out.client = *cl;
    return out;
  }();
  return c;
}

std::unique_ptr<sec::TlsSession> new_server() {
  auto s = sec::TlsSession::server(contexts().server);
  if (!s) FUZZ_FAIL("cannot create a server session");
  return std::move(*s);
}

std::unique_ptr<sec::TlsSession> new_client() {
  sec::TlsClientConfig c{kHost, kSubsys, the_key(), 1, sec::PskDerivation::standard};
  auto s = sec::TlsSession::client(contexts().client, c);
  if (!s) FUZZ_FAIL("cannot create a client session");
  return std::move(*s);
}

Bytes drain(sec::TlsSession& s) {
  Bytes out(s.pending_output());
  out.resize(s.read_output(out));
  return out;
}

void check_read_size(const sec::TlsSession& s) {
  const std::size_t n = s.next_read_size();
  FUZZ_CHECK(n >= 1 && n <= kMaxRecordRead);
}

// Feeds `bytes` to the server in recv-sized chunks (record by record when `ktls_style`, as a reactor that
// may hand over to kTLS reads), driving the handshake after each; what the server sends is appended to
// `out`. Returns the last step.
sec::TlsStep feed_server(sec::TlsSession& server, std::span<const uint8_t> bytes, Rng& rng, bool ktls_style,
                         Bytes& out) {
  sec::TlsStep step = sec::TlsStep::need_input;
  std::size_t at = 0;
  while (at < bytes.size()) {
    check_read_size(server);
    std::size_t chunk = ktls_style ? server.next_read_size() : rng.range(1, 4096);
    chunk = std::min(chunk, bytes.size() - at);
    FUZZ_CHECK(server.feed(bytes.subspan(at, chunk)));
    at += chunk;
    step = server.handshake();
    const Bytes sent = drain(server);
    out.insert(out.end(), sent.begin(), sent.end());
    if (step == sec::TlsStep::failed) {
      FUZZ_CHECK(server.error().kind != sec::TlsFailure::none);
      FUZZ_CHECK(server.handshake() == sec::TlsStep::failed);
      return step;
    }
    if (step == sec::TlsStep::done) break;
  }
  return step;
}

// Up to 4 iovecs over `buf`, split where the seed says.
unsigned split(Bytes& buf, Rng& rng, iovec* iov) {
  unsigned n = 0;
  std::size_t at = 0;
  while (at < buf.size() && n < 3) {
    const std::size_t len = std::min<std::size_t>(rng.range(1, buf.size()), buf.size() - at);
    iov[n++] = iovec{buf.data() + at, len};
    at += len;
  }
  if (at < buf.size()) iov[n++] = iovec{buf.data() + at, buf.size() - at};
  return n;
}

// Reads `want` plaintext bytes out of `server` with decrypt_iov, feeding it `cipher` as needed.
Bytes decrypt_all(sec::TlsSession& server, const Bytes& cipher, std::size_t want, Rng& rng) {
  Bytes out(want);
  std::size_t have = 0;
  std::size_t fed = 0;
  while (have < want) {
    Bytes window(out.begin() + static_cast<long>(have), out.end());
    iovec iov[4];
    const unsigned n = split(window, rng, iov);
    const tt::TlsFill f = tt::decrypt_iov(server, iov, n);
    FUZZ_CHECK(f.bytes <= window.size());
    if (f.bytes != 0) {
      std::copy_n(window.begin(), f.bytes, out.begin() + static_cast<long>(have));
      have += f.bytes;
      continue;
    }
    if (f.status != sec::TlsIo::need_input || fed == cipher.size()) break;
    const std::size_t chunk = std::min<std::size_t>(rng.range(1, 8192), cipher.size() - fed);
    FUZZ_CHECK(server.feed(std::span<const uint8_t>(cipher.data() + fed, chunk)));
    fed += chunk;
  }
  out.resize(have);
  return out;
}

// A real handshake; the client's flights are mutated with `mutations` (offset, mask pairs) when given.
bool handshake(sec::TlsSession& client, sec::TlsSession& server, std::span<const uint8_t> mutations, Rng& rng) {
  sec::TlsStep c = sec::TlsStep::need_input;
  sec::TlsStep s = sec::TlsStep::need_input;
  std::size_t m = 0;
  for (int round = 0; round < 8; ++round) {
    if (c == sec::TlsStep::need_input) c = client.handshake();
    Bytes flight = drain(client);
    for (int k = 0; k < 4 && m + 1 < mutations.size() && !flight.empty(); ++k, m += 2) {
      flight[mutations[m] * flight.size() / 256] ^= mutations[m + 1];
    }
    Bytes back;
    if (!flight.empty() && s == sec::TlsStep::need_input) s = feed_server(server, flight, rng, rng.one_in(2), back);
    if (!back.empty() && c == sec::TlsStep::need_input) FUZZ_CHECK(client.feed(back));
    if (c == sec::TlsStep::need_input && !back.empty()) c = client.handshake();
    if (c == sec::TlsStep::failed || s == sec::TlsStep::failed) return false;
    if (c == sec::TlsStep::done && s == sec::TlsStep::done) return true;
    if (flight.empty() && back.empty()) return false;
  }
  return false;
}

void round_trips(sec::TlsSession& client, sec::TlsSession& server, std::span<const uint8_t> payload, Rng& rng) {
  // Host -> target: the client's records through decrypt_iov.
  const std::size_t n_plain = std::min<std::size_t>(payload.size(), rng.range(0, 40000));
  Bytes plain(payload.begin(), payload.begin() + static_cast<long>(n_plain));
  if (plain.empty()) plain.assign(rng.range(1, 70000), 0x5A);
  FUZZ_CHECK(client.encrypt(plain) == sec::TlsIo::ok);
  const Bytes cipher = drain(client);
  FUZZ_CHECK(decrypt_all(server, cipher, plain.size(), rng) == plain);

  // Target -> host: encrypt_iov over a split of the same bytes.
  iovec iov[4];
  const unsigned n = split(plain, rng, iov);
  std::vector<uint8_t> stage(tt::kTlsRecordPlain);
  const long taken = tt::encrypt_iov(server, iov, n, plain.size(), stage);
  FUZZ_CHECK(taken == static_cast<long>(plain.size()));
  const Bytes back = drain(server);
  FUZZ_CHECK(decrypt_all(client, back, plain.size(), rng) == plain);

  // The rest as raw "records": never plaintext.
  std::span<const uint8_t> rest = payload.subspan(n_plain);
  if (rest.empty()) return;
  FUZZ_CHECK(server.feed(rest));
  Bytes out(4096);
  iovec o{out.data(), out.size()};
  const tt::TlsFill f = tt::decrypt_iov(server, &o, 1);
  FUZZ_CHECK(f.bytes == 0);
  if (f.status == sec::TlsIo::failed) FUZZ_CHECK(server.error().kind != sec::TlsFailure::none);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  (void)contexts();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 3 || size > 200000) return 0;
  const uint8_t mode = data[0] % 3;
  Rng rng(static_cast<uint64_t>(data[1]) << 8 | data[2]);
  std::span<const uint8_t> payload(data + 3, size - 3);

  auto server = new_server();
  if (mode == 0) {
    Bytes sent;
    const sec::TlsStep step = feed_server(*server, payload, rng, rng.one_in(2), sent);
    if (step == sec::TlsStep::done) {
      Bytes out(1024);
      iovec o{out.data(), out.size()};
      (void)tt::decrypt_iov(*server, &o, 1);
    }
    return 0;
  }
  auto client = new_client();
  if (mode == 1) {
    if (handshake(*client, *server, payload, rng)) round_trips(*client, *server, {}, rng);
    return 0;
  }
  if (!handshake(*client, *server, {}, rng)) FUZZ_FAIL("an unmutated handshake failed");
  round_trips(*client, *server, payload, rng);
  return 0;
}

// Interoperability with GnuTLS, the library tlshd (ktls-utils) uses for the Linux kernel's NVMe/TCP TLS
// host and target: gnutls-cli as the host against our server, and our client against gnutls-serv, with the
// identity and TLS PSK that tls_psk derives, over TCP loopback. GnuTLS never sees the configured key: it
// gets what nvme-cli would put in the keyring (identity + TLS PSK), as tlshd does.
//
// Needs gnutls-cli / gnutls-serv (Debian package gnutls-bin); skipped with the reason when they are not
// installed. SHA-256 PSKs only: GnuTLS computed every external PSK binder with SHA-256 until its
// gnutls_psk_allocate_*_credentials2 (2025, 3.8.x); Debian 12's 3.7.9 cannot use a SHA-384 (02) PSK, so
// neither can a tlshd built on it (tried: our server says "bad extension", our client gets
// illegal_parameter). The NQNs here have no ':' because gnutls-serv's PSK password file uses ':' as its separator.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "security/tls_session.h"

extern char** environ;

namespace rdmablk::security {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr const char* kHost = "nqn.2024-01.io.rdmablk.interop-host";
constexpr const char* kSubsys = "nqn.2024-01.io.rdmablk.interop-subsys";
// TLS 1.3 with PSK and (EC)DHE, as tlshd asks for.
constexpr const char* kPriority =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-KX-ALL:+ECDHE-PSK:+DHE-PSK:+PSK:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM";

bool have(const char* program) {
  for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/bin/"})
    if (access((std::string(dir) + program).c_str(), X_OK) == 0) return true;
  return false;
}

std::string hex(std::span<const uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

// A child process with its stdin and stdout on pipes (stderr to a file for the failure message).
struct Child {
  pid_t pid = -1;
  int in = -1;   // write end: the child's stdin
  int out = -1;  // read end: the child's stdout
  std::string err_path;

  static Child spawn(const std::vector<std::string>& argv) {
    Child c;
    int in_pipe[2], out_pipe[2];
    EXPECT_EQ(pipe2(in_pipe, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(out_pipe, O_CLOEXEC), 0);
    char tmpl[] = "/tmp/tls-interop-XXXXXX";
    const int err_fd = mkstemp(tmpl);
    c.err_path = tmpl;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    EXPECT_EQ(posix_spawnp(&c.pid, args[0], &fa, nullptr, args.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in_pipe[0]);
    close(out_pipe[1]);
    close(err_fd);
    c.in = in_pipe[1];
    c.out = out_pipe[0];
    return c;
  }
  std::string stderr_text() const {
    std::ifstream f(err_path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  // Reads stdout until `want` appears or the deadline passes.
  std::string read_until(const std::string& want, int timeout_ms) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (got.find(want) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{out, POLLIN, 0};
      if (poll(&p, 1, 100) != 1) continue;
      char buf[4096];
      const ssize_t n = read(out, buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
  }
  ~Child() {
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    if (pid > 0) {
      kill(pid, SIGTERM);
      int status = 0;
      waitpid(pid, &status, 0);
    }
    if (!err_path.empty()) unlink(err_path.c_str());
  }
};

int listen_loopback(uint16_t& port) {
  const int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  EXPECT_EQ(bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(listen(l, 1), 0);
  EXPECT_EQ(getsockname(l, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  port = ntohs(addr.sin_port);
  return l;
}

bool send_all(int fd, TlsSession& s) {
  Bytes out(s.pending_output());
  out.resize(s.read_output(out));
  std::size_t off = 0;
  while (off < out.size()) {
    const ssize_t n = send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// Drives the handshake on a blocking socket; false with the session's error on failure.
bool handshake_on(int fd, TlsSession& s, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    const TlsStep step = s.handshake();
    if (!send_all(fd, s)) return false;
    if (step == TlsStep::done) return true;
    if (step == TlsStep::failed) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) != 1) continue;
    uint8_t buf[16384];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    s.feed(std::span(buf, static_cast<std::size_t>(n)));
  }
  return false;
}

// Reads until `want` bytes of plaintext arrived.
std::string read_plain(int fd, TlsSession& s, std::size_t want, int timeout_ms) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  uint8_t buf[16384];
  while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
    for (TlsRead r = s.decrypt(buf); r.status == TlsIo::ok; r = s.decrypt(buf))
      got.append(reinterpret_cast<char*>(buf), r.bytes);
    send_all(fd, s);
    if (got.size() >= want) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) != 1) continue;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    s.feed(std::span(buf, static_cast<std::size_t>(n)));
  }
  return got;
}

TEST(TlsInterop, GnutlsClientAgainstOurServer) {
  if (!have("gnutls-cli")) GTEST_SKIP() << "gnutls-cli not installed (Debian package gnutls-bin)";
  for (PskHash hash : {PskHash::sha256}) {
    SCOPED_TRACE(hash == PskHash::sha256 ? "sha256" : "sha384");
    auto key = generate_configured_psk(hash);
    ASSERT_TRUE(key);
    auto psk = derive_tls_psk_for(*key, kHost, kSubsys, 1);
    ASSERT_TRUE(psk);
    TlsServerConfig config;
    config.lookup = [&](const PskIdentity& id) -> std::optional<ConfiguredPsk> {
      if (id.hostnqn == kHost && id.subnqn == kSubsys) return *key;
      return std::nullopt;
    };
    auto ctx = TlsContext::server(std::move(config));
    ASSERT_TRUE(ctx);
    uint16_t port = 0;
    const int l = listen_loopback(port);
    Child cli = Child::spawn({"gnutls-cli", "--priority", kPriority, "--pskusername", psk->identity,
                              "--pskkey", hex(psk->key.bytes()), "-p", std::to_string(port), "127.0.0.1"});
    pollfd p{l, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1) << cli.stderr_text();
    const int fd = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    close(l);
    auto s = TlsSession::server(*ctx);
    ASSERT_TRUE(s);
    const bool ok = handshake_on(fd, **s, 10000);
    ASSERT_TRUE(ok) << (*s)->error().message << "\ngnutls-cli: " << cli.stderr_text();
    EXPECT_EQ((*s)->identity(), psk->identity);
    EXPECT_STREQ((*s)->cipher_name(), hash == PskHash::sha384 ? "TLS_AES_256_GCM_SHA384" : "TLS_AES_128_GCM_SHA256");
    // gnutls-cli sends what it reads from stdin and prints what it receives.
    ASSERT_EQ(write(cli.in, "ping from gnutls\n", 17), 17);
    EXPECT_EQ(read_plain(fd, **s, 17, 10000), "ping from gnutls\n");
    const std::string reply = "pong from rdmablk\n";
    ASSERT_EQ((*s)->encrypt(std::span(reinterpret_cast<const uint8_t*>(reply.data()), reply.size())), TlsIo::ok);
    ASSERT_TRUE(send_all(fd, **s));
    EXPECT_NE(cli.read_until("pong from rdmablk", 10000).find("pong from rdmablk"), std::string::npos)
        << cli.stderr_text();
    close(fd);
  }
}

TEST(TlsInterop, OurClientAgainstGnutlsServer) {
  if (!have("gnutls-serv")) GTEST_SKIP() << "gnutls-serv not installed (Debian package gnutls-bin)";
  for (PskHash hash : {PskHash::sha256}) {
    SCOPED_TRACE(hash == PskHash::sha256 ? "sha256" : "sha384");
    auto key = generate_configured_psk(hash);
    ASSERT_TRUE(key);
    auto psk = derive_tls_psk_for(*key, kHost, kSubsys, 1);
    ASSERT_TRUE(psk);
    char tmpl[] = "/tmp/tls-interop-psk-XXXXXX";
    const int pfd = mkstemp(tmpl);
    const std::string line = psk->identity + ":" + hex(psk->key.bytes()) + "\n";
    ASSERT_EQ(write(pfd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    close(pfd);
    uint16_t port = 0;
    const int l = listen_loopback(port);  // reserve a free port number, then let gnutls-serv take it
    close(l);
    Child serv = Child::spawn({"gnutls-serv", "--priority", kPriority, "--pskpasswd", tmpl, "--echo", "-p",
                               std::to_string(port)});
    // Wait for it to listen.
    int fd = -1;
    for (int i = 0; i < 100 && fd < 0; ++i) {
      fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(port);
      if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        close(fd);
        fd = -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    ASSERT_GE(fd, 0) << serv.stderr_text();
    auto ctx = TlsContext::client();
    ASSERT_TRUE(ctx);
    auto c = TlsSession::client(*ctx, TlsClientConfig{kHost, kSubsys, *key, 1, PskDerivation::standard});
    ASSERT_TRUE(c);
    const bool ok = handshake_on(fd, **c, 10000);
    ASSERT_TRUE(ok) << (*c)->error().message << "\ngnutls-serv: " << serv.stderr_text();
    EXPECT_STREQ((*c)->cipher_name(), hash == PskHash::sha384 ? "TLS_AES_256_GCM_SHA384" : "TLS_AES_128_GCM_SHA256");
    const std::string msg = "echo me, gnutls\n";
    ASSERT_EQ((*c)->encrypt(std::span(reinterpret_cast<const uint8_t*>(msg.data()), msg.size())), TlsIo::ok);
    ASSERT_TRUE(send_all(fd, **c));
    EXPECT_EQ(read_plain(fd, **c, msg.size(), 10000), msg) << serv.stderr_text();
    close(fd);
    unlink(tmpl);
  }
}

}  // namespace
}  // namespace rdmablk::security

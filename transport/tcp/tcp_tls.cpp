#include "transport/tcp/tcp_tls.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace rdmablk::transport::tcp {

namespace sec = rdmablk::security;

const char* to_string(TlsPolicy policy) noexcept {
  switch (policy) {
    case TlsPolicy::none: return "none";
    case TlsPolicy::optional: return "optional";
    case TlsPolicy::required: return "required";
  }
  return "?";
}

Result<TlsPolicy> parse_tls_policy(std::string_view text) {
  if (text == "none") return TlsPolicy::none;
  if (text == "optional") return TlsPolicy::optional;
  if (text == "required") return TlsPolicy::required;
  return make_error("TLS policy must be none, optional or required", EINVAL);
}

protocol::TcpSecureChannel secure_channel_of(TlsPolicy policy) noexcept {
  switch (policy) {
    case TlsPolicy::optional: return protocol::TcpSecureChannel::tls13_optional;
    case TlsPolicy::required: return protocol::TcpSecureChannel::tls13_required;
    case TlsPolicy::none: break;
  }
  return protocol::TcpSecureChannel::none;
}

TlsConnectionInfo connection_info(const sec::TlsSession& session) {
  TlsConnectionInfo info;
  info.active = true;
  info.ktls = session.ktls_enabled();
  info.identity = session.identity();
  info.hostnqn = session.hostnqn();
  info.subnqn = session.subnqn();
  info.cipher = session.cipher_name();
  return info;
}

std::string describe(const TlsConnectionInfo& info) {
  return "TLS 1.3 " + info.cipher + " with " + info.identity + (info.ktls ? " (kernel TLS)" : " (userspace TLS)");
}

long encrypt_iov(sec::TlsSession& session, const iovec* iov, unsigned n, std::size_t max_plain,
                 std::vector<uint8_t>& stage) noexcept {
  if (stage.size() < kTlsRecordPlain) return -1;
  std::size_t taken = 0;
  std::size_t staged = 0;
  auto flush = [&]() noexcept {
    if (staged == 0) return true;
    const bool ok = session.encrypt(std::span<const uint8_t>(stage.data(), staged)) == sec::TlsIo::ok;
    staged = 0;
    return ok;
  };
  for (unsigned i = 0; i < n && taken < max_plain; ++i) {
    const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
    std::size_t len = std::min(iov[i].iov_len, max_plain - taken);
    while (len != 0) {
      // A whole record's worth straight from the caller's buffer: no copy through the stage.
      if (staged == 0 && len >= kTlsRecordPlain) {
        const std::size_t whole = len - len % kTlsRecordPlain;
        if (session.encrypt(std::span<const uint8_t>(p, whole)) != sec::TlsIo::ok) return -1;
        p += whole;
        len -= whole;
        taken += whole;
        continue;
      }
      const std::size_t chunk = std::min(len, kTlsRecordPlain - staged);
      std::memcpy(stage.data() + staged, p, chunk);
      staged += chunk;
      p += chunk;
      len -= chunk;
      taken += chunk;
      if (staged == kTlsRecordPlain && !flush()) return -1;
    }
  }
  if (!flush()) return -1;
  return static_cast<long>(taken);
}

TlsFill decrypt_iov(sec::TlsSession& session, const iovec* iov, unsigned n) noexcept {
  std::size_t got = 0;
  for (unsigned i = 0; i < n; ++i) {
    auto* base = static_cast<uint8_t*>(iov[i].iov_base);
    std::size_t have = 0;
    while (have < iov[i].iov_len) {
      const sec::TlsRead r = session.decrypt(std::span<uint8_t>(base + have, iov[i].iov_len - have));
      if (r.status == sec::TlsIo::ok && r.bytes != 0) {
        have += r.bytes;
        continue;
      }
      got += have;
      if (r.status == sec::TlsIo::ok) return {sec::TlsIo::need_input, got};  // nothing decrypted
      if (got != 0 && r.status != sec::TlsIo::failed) return {sec::TlsIo::ok, got};  // deliver first, then close
      return {r.status, got};
    }
    got += have;
  }
  return {got != 0 ? sec::TlsIo::ok : sec::TlsIo::need_input, got};
}

std::optional<KtlsControl> ktls_control(const msghdr& msg, std::size_t got) {
  constexpr uint8_t kApplicationData = 23;
  constexpr uint8_t kHandshake = 22;
  constexpr uint8_t kNewSessionTicket = 4;
  const uint8_t type = sec::ktls_record_type(&msg);
  if (type == kApplicationData) return std::nullopt;
  // The payload's first bytes (alert level/description, handshake message type) from the iovecs.
  std::array<uint8_t, 8> head{};
  std::size_t have = 0;
  for (std::size_t i = 0; i < msg.msg_iovlen && have < std::min(got, head.size()); ++i) {
    const std::size_t take = std::min({msg.msg_iov[i].iov_len, got - have, head.size() - have});
    std::memcpy(head.data() + have, msg.msg_iov[i].iov_base, take);
    have += take;
  }
  KtlsControl c;
  if (type == kHandshake && have >= 1 && head[0] == kNewSessionTicket) {
    c.skip = true;
    c.description = "NewSessionTicket (ignored)";
    return c;
  }
  const sec::KtlsRecordInfo info = sec::classify_ktls_record(type, std::span<const uint8_t>(head.data(), have));
  c.close_notify = info.close_notify;
  c.description = info.description;
  return c;
}

ssize_t ktls_recv(int fd, const iovec* iov, unsigned n, std::string& why) noexcept {
  for (;;) {
    alignas(cmsghdr) std::array<uint8_t, kKtlsCmsgSpace> cbuf{};
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(iov);
    m.msg_iovlen = n;
    m.msg_control = cbuf.data();
    m.msg_controllen = cbuf.size();
    const ssize_t r = ::recvmsg(fd, &m, MSG_DONTWAIT);
    if (r <= 0) return r;
    std::optional<KtlsControl> c;
    try {
      c = ktls_control(m, static_cast<std::size_t>(r));
    } catch (...) {
      return errno = ENOMEM, -1;
    }
    if (!c) return r;
    if (c->skip) continue;
    if (c->close_notify) return 0;
    try {
      why = c->description;
    } catch (...) {
    }
    return errno = EPROTO, -1;
  }
}

}  // namespace rdmablk::transport::tcp

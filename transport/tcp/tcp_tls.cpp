#include "transport/tcp/tcp_tls.h"

#include <algorithm>
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

}  // namespace rdmablk::transport::tcp

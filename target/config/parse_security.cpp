#include "target/config/parser.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace rdmablk::target::config_impl {

// A host's tls_psk is only ever used on a listener with tls: optional or required.
void Parser::warn_unused_psks(const TargetConfig& config) {
  const bool any_tls = std::any_of(config.listeners.begin(), config.listeners.end(),
                                   [](const ListenerConfig& l) { return l.tls != transport::tcp::TlsPolicy::none; });
  for (std::size_t s = 0; s < config.subsystems.size() && !any_tls; ++s) {
    const auto& hosts = config.subsystems[s].host_configs;
    for (std::size_t h = 0; h < hosts.size(); ++h) {
      if (!hosts[h].tls_psk.configured()) continue;
      warn(hosts[h].tls_psk.at, "subsystems[" + std::to_string(s) + "].hosts[" + std::to_string(h) + "]",
           "a tls_psk, but no listener has tls: optional or required, so it is never used");
    }
  }
}

DhchapSecretConfig Parser::parse_secret(const Mapping& m, std::string_view key_name,
                                        std::string_view file_name) const {
  DhchapSecretConfig secret;
  const Field* inline_key = m.find(key_name);
  const Field* file = m.find(file_name);
  if (inline_key && file) {
    fail(file->key_at, file->path,
         "give " + std::string(key_name) + " or " + std::string(file_name) + ", not both (" + std::string(key_name) +
             " at line " + std::to_string(inline_key->key_at.line) + ")");
  }
  if (inline_key) {
    // The message never quotes the value: it is a secret.
    if (missing(inline_key->value) || !inline_key->value.IsScalar()) {
      fail(inline_key->value_at, inline_key->path, "expected a secret \"DHHC-1:XX:<base64>:\" (nvme gen-dhchap-key)");
    }
    auto key = security::dhchap::DhchapKey::parse(inline_key->value.Scalar());
    if (!key) fail(inline_key->value_at, inline_key->path, key.error().message);
    secret.key = std::make_shared<const security::dhchap::DhchapKey>(std::move(*key));
    secret.at = inline_key->value_at;
  } else if (file) {
    secret.file = string_value(*file, "the path of a file holding a DHHC-1 secret");
    secret.at = file->value_at;
  }
  return secret;
}

TlsPskConfig Parser::parse_tls_psk(const Mapping& m) const {
  TlsPskConfig psk;
  const Field* inline_key = m.find("tls_psk");
  const Field* file = m.find("tls_psk_file");
  if (inline_key && file) {
    fail(file->key_at, file->path,
         "give tls_psk or tls_psk_file, not both (tls_psk at line " + std::to_string(inline_key->key_at.line) + ")");
  }
  if (inline_key) {
    // Never quotes the value: it is a secret.
    if (missing(inline_key->value) || !inline_key->value.IsScalar()) {
      fail(inline_key->value_at, inline_key->path, "expected a PSK \"NVMeTLSkey-1:XX:<base64>:\" (nvme gen-tls-key)");
    }
    auto key = security::parse_psk_interchange(inline_key->value.Scalar());
    if (!key) fail(inline_key->value_at, inline_key->path, key.error().message);
    psk.key = std::make_shared<const security::ConfiguredPsk>(std::move(*key));
    psk.at = inline_key->value_at;
  } else if (file) {
    psk.file = string_value(*file, "the path of a file holding an NVMeTLSkey-1 PSK");
    psk.at = file->value_at;
  }
  return psk;
}

namespace {

// Reads a secret's file (see load_config()): a regular file, no symlink, not readable or writable by other
// users, short. Errors never quote the content; the caller wipes the returned text after parsing it.
Result<std::string> read_secret_file(const std::string& path, const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    if (e == ELOOP) return make_error(path + ": a symbolic link (name the key file itself)", e);
    return make_error("cannot read " + path + ": " + errno_text(e), e);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    return make_error("cannot read " + path + ": " + errno_text(e), e);
  }
  if (!S_ISREG(st.st_mode)) return make_error(path + ": not a regular file", EINVAL);
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if ((st.st_mode & (S_IRWXO | S_IWGRP)) != 0) {
    return make_error(path + ": mode " + mode +
                          " lets other users read or change the secret (chmod 600 it; a group may only read it)",
                      EPERM);
  }
  // A secret is at most "DHHC-1:03:" + base64 of 68 bytes + ":" and a newline; anything much longer is not one.
  std::string text(4096, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      return make_error("cannot read " + path + ": " + errno_text(e), e);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got == text.size()) {
    std::fill(text.begin(), text.end(), '\0');
    return make_error(path + ": too long for " + what, EINVAL);
  }
  text.resize(got);
  return text;
}

}  // namespace


// One DH-HMAC-CHAP key file.
Result<security::dhchap::DhchapKey> read_key_file(const std::string& path) {
  auto text = read_secret_file(path, "a DHHC-1 secret");
  if (!text) return tl::unexpected(text.error());
  auto key = security::dhchap::DhchapKey::parse(*text);
  std::fill(text->begin(), text->end(), '\0');
  if (!key) return make_error(path + ": " + key.error().message, EINVAL);
  return key;
}

// One TLS PSK file (NVMeTLSkey-1 interchange format, as `nvme gen-tls-key` prints it).
Result<security::ConfiguredPsk> read_psk_file(const std::string& path) {
  auto text = read_secret_file(path, "an NVMeTLSkey-1 PSK");
  if (!text) return tl::unexpected(text.error());
  auto key = security::parse_psk_interchange(*text);
  std::fill(text->begin(), text->end(), '\0');
  if (!key) return make_error(path + ": " + key.error().message, EINVAL);
  return key;
}

}  // namespace rdmablk::target::config_impl

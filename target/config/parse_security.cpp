#include "target/config/parser.h"

#include <algorithm>

#include "security/secret_file.h"

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

// One DH-HMAC-CHAP key file.
Result<security::dhchap::DhchapKey> read_key_file(const std::string& path) {
  auto text = security::read_secret_file(path, "a DHHC-1 secret");
  if (!text) return tl::unexpected(text.error());
  auto key = security::dhchap::DhchapKey::parse(*text);
  security::wipe_secret(*text);
  if (!key) return make_error(path + ": " + key.error().message, EINVAL);
  return key;
}

// One TLS PSK file (NVMeTLSkey-1 interchange format, as `nvme gen-tls-key` prints it).
Result<security::ConfiguredPsk> read_psk_file(const std::string& path) {
  auto text = security::read_secret_file(path, "an NVMeTLSkey-1 PSK");
  if (!text) return tl::unexpected(text.error());
  auto key = security::parse_psk_interchange(*text);
  security::wipe_secret(*text);
  if (!key) return make_error(path + ": " + key.error().message, EINVAL);
  return key;
}

}  // namespace rdmablk::target::config_impl

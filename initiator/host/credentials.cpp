#include "initiator/host/credentials.h"

#include <fmt/format.h>

#include <cerrno>

namespace rdmablk::initiator {

Result<std::shared_ptr<const security::dhchap::DhchapKey>> parse_dhchap_secret(std::string_view text,
                                                                                std::string_view what) {
  auto key = security::dhchap::DhchapKey::parse(text);
  if (!key) return make_error(fmt::format("invalid {}: {}", what, key.error().message), EINVAL);
  return std::make_shared<const security::dhchap::DhchapKey>(std::move(*key));
}

Result<DhchapSettings> make_dhchap_settings(std::string_view secret, std::string_view ctrl_secret,
                                            std::string_view secret_what, std::string_view ctrl_secret_what) {
  DhchapSettings s;
  if (!ctrl_secret.empty() && secret.empty()) {
    return make_error(fmt::format("{} needs {} (bidirectional authentication proves the host first)",
                                  ctrl_secret_what, secret_what),
                      EINVAL);
  }
  if (!secret.empty()) {
    auto k = parse_dhchap_secret(secret, secret_what);
    if (!k) return tl::unexpected(k.error());
    s.secret = std::move(*k);
  }
  if (!ctrl_secret.empty()) {
    auto k = parse_dhchap_secret(ctrl_secret, ctrl_secret_what);
    if (!k) return tl::unexpected(k.error());
    s.ctrl_secret = std::move(*k);
  }
  return s;
}

Result<std::shared_ptr<const security::ConfiguredPsk>> parse_tls_key(std::string_view text, std::string_view what) {
  auto key = security::parse_psk_interchange(text);
  if (!key) return make_error(fmt::format("invalid {}: {}", what, key.error().message), EINVAL);
  return std::make_shared<const security::ConfiguredPsk>(std::move(*key));
}

}  // namespace rdmablk::initiator

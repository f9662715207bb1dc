// What a host presents besides its identity: DH-HMAC-CHAP secrets (in-band authentication) and a TLS PSK
// (NVMe/TCP over TLS 1.3). Parsed once from their text forms and shared by every queue of a controller.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "protocol/auth.h"
#include "protocol/result.h"
#include "security/dhchap_key.h"
#include "security/tls_psk.h"

namespace rdmablk::initiator {

// DH-HMAC-CHAP in-band authentication (NVMe Base 2.0 8.13, TP 8006), run on a queue whose Connect response
// asks for it (AUTHREQ ATR), as the Linux host does: on the admin queue and on every I/O queue, t_id = qid.
// The keys are shared (ControllerOptions is copied; the secret is held once, cleansed when freed).
struct DhchapSettings {
  std::shared_ptr<const security::dhchap::DhchapKey> secret;       // host secret (--dhchap-secret); null: none
  std::shared_ptr<const security::dhchap::DhchapKey> ctrl_secret;  // bidirectional (--dhchap-ctrl-secret)
  std::vector<protocol::auth::HashId> hashes;       // offered, best first; empty: all, in the kernel's order
  std::vector<protocol::auth::DhGroupId> dh_groups;  // offered, best first; empty: all, in the kernel's order
};

// "DHHC-1:..." text -> a shared key; the error names `what` (the flag or key) and never quotes the text.
Result<std::shared_ptr<const security::dhchap::DhchapKey>> parse_dhchap_secret(std::string_view text,
                                                                                std::string_view what);
// Both secrets at once: a controller secret needs a host secret (bidirectional authentication proves
// the host first). Empty strings mean "not given".
Result<DhchapSettings> make_dhchap_settings(std::string_view secret, std::string_view ctrl_secret,
                                            std::string_view secret_what = "--dhchap-secret",
                                            std::string_view ctrl_secret_what = "--dhchap-ctrl-secret");

// NVMe/TCP TLS 1.3 with a configured PSK (TP 8011): every queue runs the handshake before ICReq, offering
// the identity derived from (host NQN, subsystem NQN, PSK), as the Linux host does with --tls.
struct TlsSettings {
  std::shared_ptr<const security::ConfiguredPsk> psk;  // null: plain NVMe/TCP
  int identity_version = 1;                            // 1: with the PSK digest (TP 8011); 0: without
  security::PskDerivation derivation = security::PskDerivation::standard;
  bool allow_ktls = true;  // records in the kernel when it has the tls ULP
};
// "NVMeTLSkey-1:XX:...:" text -> a shared key; the error names `what` and never quotes the text.
Result<std::shared_ptr<const security::ConfiguredPsk>> parse_tls_key(std::string_view text, std::string_view what);

}  // namespace rdmablk::initiator

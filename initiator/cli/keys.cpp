// gen-dhchap-key: a new DH-HMAC-CHAP secret in the DHHC-1 representation, as `nvme gen-dhchap-key` prints
// it (nvme-cli 2.x: -m/--hmac, -l/--key-length, -n/--nqn), for --dhchap-secret / --dhchap-ctrl-secret and
// the target's `hosts:` entries. gen-tls-key: a new NVMe/TCP TLS PSK in the interchange format, as
// `nvme gen-tls-key` prints it (-m/--hmac 1 SHA-256 with 32 bytes, 2 SHA-384 with 48), for --tls-key and the
// target's tls_psk.
#include <fmt/format.h>

#include "initiator/cli/common.h"
#include "security/dhchap_key.h"
#include "security/tls_psk.h"

namespace rdmablk::initiator::cli {

namespace {

struct GenKeyFlags {
  unsigned hmac = 0;
  std::optional<unsigned> key_length;
  std::string nqn;
};

int run_gen_dhchap_key(const GenKeyFlags& f, const CliEnv& env) {
  namespace dh = security::dhchap;
  // nvme-cli's rule: a transform hash fixes the key length (SHA-256 32, SHA-384 48, SHA-512 64 bytes).
  static constexpr unsigned kHashLength[] = {0, 32, 48, 64};
  unsigned length = f.key_length.value_or(f.hmac ? kHashLength[f.hmac] : 32);
  if (f.hmac && length != kHashLength[f.hmac]) {
    return report_error(env, fmt::format("--key-length {} does not fit --hmac {} (it needs {})", length, f.hmac,
                                         kHashLength[f.hmac]),
                        2);
  }
  const auto transform = static_cast<dh::KeyTransform>(f.hmac);
  auto key = dh::DhchapKey::generate(length, transform);
  if (!key) return report_error(env, key.error().message);
  if (f.hmac) {
    // nvme-cli 2.x prints the secret already transformed with the NQN (the host NQN by default); for a
    // random secret that is just another random secret of the same length, but the NQN must be valid.
    std::string nqn = f.nqn;
    if (nqn.empty()) {
      auto host = resolve_host_identity(std::nullopt, std::nullopt, env.host_sources);
      if (!host) return report_error(env, host.error().message, 2);
      nqn = host->hostnqn;
    } else if (auto v = protocol::decode_nqn(nqn); !v) {
      return report_error(env, fmt::format("invalid NQN '{}': {} at byte {}", nqn, v.error().what, v.error().offset), 2);
    }
    auto t = key->transformed(nqn);
    if (!t) return report_error(env, t.error().message);
    key = dh::DhchapKey::from_secret(t->view(), transform);
    if (!key) return report_error(env, key.error().message);
  }
  *env.out << key->format() << "\n";
  return 0;
}

int run_gen_tls_key(unsigned hmac, const CliEnv& env) {
  auto psk = security::generate_configured_psk(hmac == 2 ? security::PskHash::sha384 : security::PskHash::sha256);
  if (!psk) return report_error(env, psk.error().message);
  auto text = security::format_psk_interchange(*psk);
  if (!text) return report_error(env, text.error().message);
  *env.out << *text << "\n";
  return 0;
}

}  // namespace

void add_key_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out) {
  auto f = std::make_shared<GenKeyFlags>();
  auto* gen = app.add_subcommand("gen-dhchap-key", "print a new DH-HMAC-CHAP secret (DHHC-1:XX:...:)");
  gen->add_option("-m,--hmac", f->hmac, "transform hash: 0 none, 1 SHA-256, 2 SHA-384, 3 SHA-512")
      ->capture_default_str()
      ->check(CLI::Range(0u, 3u));
  gen->add_option("-l,--key-length", f->key_length, "secret length in bytes: 32, 48 or 64 (default: 32, or the hash's)")
      ->check(CLI::IsMember({32u, 48u, 64u}));
  gen->add_option("-n,--nqn", f->nqn, "NQN for the transform with --hmac 1..3 (default: this host's NQN)");
  out.push_back({gen, [f, &env] { return run_gen_dhchap_key(*f, env); }});

  auto tls_hmac = std::make_shared<unsigned>(1);
  auto* gen_tls = app.add_subcommand("gen-tls-key", "print a new NVMe/TCP TLS PSK (NVMeTLSkey-1:XX:...:)");
  gen_tls->add_option("-m,--hmac", *tls_hmac, "PSK hash: 1 SHA-256 (32-byte key), 2 SHA-384 (48-byte key)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 2u));
  out.push_back({gen_tls, [tls_hmac, &env] { return run_gen_tls_key(*tls_hmac, env); }});
}

}  // namespace rdmablk::initiator::cli

#include "initiator/cli/common.h"

#include <fmt/format.h>

#include <cerrno>

#include "security/secret_file.h"

namespace rdmablk::initiator::cli {

void add_connection_flags(CLI::App* app, ConnFlags& f, bool need_addr, bool need_nqn) {
  app->add_option("-t,--transport", f.transport, "transport type: tcp or rdma")->capture_default_str();
  auto* a = app->add_option("-a,--traddr", f.traddr, "transport address (IP)");
  if (need_addr) a->required();
  app->add_option("-s,--trsvcid", f.trsvcid, "transport service id (port)");
  auto* n = app->add_option("-n,--nqn", f.nqn, "subsystem NQN");
  if (need_nqn) n->required();
  add_host_flags(app, f, true);
}

void add_host_flags(CLI::App* app, ConnFlags& f, bool short_names) {
  auto name = [short_names](const char* letter, const char* long_name) {
    return short_names ? std::string(letter) + "," + long_name : std::string(long_name);
  };
  app->add_option(name("-q", "--hostnqn"), f.hostnqn, "host NQN (default: /etc/nvme/hostnqn, else generated)");
  app->add_option("--hostid", f.hostid, "host identifier, a UUID (default: /etc/nvme/hostid, else derived)");
  app->add_option("--kato", f.kato_s, "keep-alive timeout in seconds (0 = off)");
  app->add_option(name("-S", "--dhchap-secret"), f.dhchap_secret,
                  "DH-HMAC-CHAP host secret (DHHC-1:XX:...:, see gen-dhchap-key), used when the controller "
                  "requires authentication");
  app->add_option(name("-C", "--dhchap-ctrl-secret"), f.dhchap_ctrl_secret,
                  "DH-HMAC-CHAP controller secret: the controller must prove it knows it (bidirectional)");
  app->add_flag("--tls", f.tls,
                "NVMe/TCP over TLS 1.3 with a pre-shared key (the userspace host needs --tls-key or --tls-key-file)");
  // nvme-cli spells it --tls_key; both work.
  auto* key = app->add_option("--tls-key,--tls_key", f.tls_key,
                              "TLS PSK in the interchange format (NVMeTLSkey-1:XX:...:, see gen-tls-key); implies --tls");
  app->add_option("--tls-key-file", f.tls_key_file, "a file holding the TLS PSK (chmod 600: other users may not read it, docs/security.md)")
      ->excludes(key);
}

Result<std::string> read_tls_key_file(const std::string& path) {
  auto text = security::read_secret_file(path, "an NVMeTLSkey-1 PSK");
  if (!text) return text;
  std::string key = security::first_line(*text);
  security::wipe_secret(*text);
  return key;
}

Result<Resolved> resolve(const ConnFlags& f, uint16_t default_port, uint32_t default_kato_ms, const CliEnv& env,
                         HostPath path) {
  Resolved r;
  auto t = transport::parse_transport_type(f.transport);
  if (!t) return tl::unexpected(t.error());
  r.address.type = *t;
  r.address.traddr = f.traddr;
  r.address.trsvcid = default_port;
  if (!f.trsvcid.empty()) {
    auto p = transport::parse_port(f.trsvcid);
    if (!p) return tl::unexpected(p.error());
    r.address.trsvcid = *p;
  }
  auto host = resolve_host_identity(f.hostnqn.empty() ? std::nullopt : std::optional(f.hostnqn),
                                    f.hostid.empty() ? std::nullopt : std::optional(f.hostid), env.host_sources);
  if (!host) return tl::unexpected(host.error());
  r.host = *host;
  r.kato_ms = f.kato_s ? *f.kato_s * 1000u : default_kato_ms;
  auto dhchap = make_dhchap_settings(f.dhchap_secret, f.dhchap_ctrl_secret);
  if (!dhchap) return tl::unexpected(dhchap.error());
  r.dhchap = std::move(*dhchap);

  std::string key = f.tls_key;
  if (!f.tls_key_file.empty()) {
    auto text = read_tls_key_file(f.tls_key_file);
    if (!text) return tl::unexpected(text.error());
    key = std::move(*text);
  }
  r.tls = f.tls || !key.empty();
  if (r.tls && r.address.type != transport::TransportType::tcp) {
    return make_error("--tls is for NVMe/TCP (-t tcp) only", EINVAL);
  }
  if (path == HostPath::kernel) {
    if (!key.empty()) {
      return make_error(
          "the kernel host takes its TLS PSK from the kernel's .nvme keyring, not from the command line: insert it "
          "with `nvme tls-key --import` (or `nvme gen-tls-key --insert`) and pass --tls alone, or use "
          "`rdmablk attach --userspace --tls-key-file FILE` (userspace TLS, no keyring or tlshd needed)",
          EINVAL);
    }
  } else if (r.tls) {
    if (key.empty()) {
      return make_error("--tls needs --tls-key or --tls-key-file here: the userspace host has no kernel keyring", EINVAL);
    }
    auto psk = parse_tls_key(key, f.tls_key_file.empty() ? "--tls-key" : f.tls_key_file);
    security::wipe_secret(key);
    if (!psk) return tl::unexpected(psk.error());
    r.tls_settings.psk = std::move(*psk);
  }
  return r;
}

ControllerOptions controller_options(const Resolved& r, std::string subnqn, const CliEnv& env) {
  ControllerOptions o;
  o.address = r.address;
  o.subnqn = std::move(subnqn);
  o.host = r.host;
  o.kato_ms = r.kato_ms;
  o.dhchap = r.dhchap;
  o.tls = r.tls_settings;
  o.connector = env.connector;
  return o;
}

tl::expected<Discovered, int> read_discovery_log(const ConnFlags& f, const CliEnv& env) {
  auto r = resolve(f, f.transport == "rdma" ? transport::kDefaultIoPort : transport::kDefaultDiscoveryPort, 0, env);
  if (!r) return tl::unexpected(report_error(env, r.error().message, 2));
  auto ctrl = Controller::connect_discovery(controller_options(*r, {}, env));
  if (!ctrl) return tl::unexpected(report_error(env, ctrl.error().message));
  auto log = (*ctrl)->discovery_log();
  (void)(*ctrl)->shutdown();
  if (!log) return tl::unexpected(report_error(env, log.error().message));
  return Discovered{std::move(*r), std::move(*log)};
}

void add_tuning_flags(CLI::App* app, Tuning& t) {
  app->add_option("-i,--nr-io-queues", t.nr_io_queues, "number of I/O queues (default: one per CPU)");
  app->add_option("-Q,--queue-size", t.queue_size, "entries per I/O queue (default 128)");
  app->add_option("-l,--ctrl-loss-tmo", t.ctrl_loss_tmo,
                  "seconds to keep reconnecting after a loss before failing I/O (default 600, -1 = forever)");
  app->add_option("-c,--reconnect-delay", t.reconnect_delay, "seconds between reconnect attempts (default 10)");
  // --kato (the shared connection flag) is the same setting under its short name.
  app->add_option("-k,--keep-alive-tmo", t.keep_alive_tmo, "keep-alive timeout in seconds")
      ->excludes(app->get_option("--kato"));
}

std::string human_bytes(uint64_t b) {
  static const char* const units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1000 && u < 5) {
    v /= 1000;
    ++u;
  }
  return u ? fmt::format("{:.2f} {}", v, units[u]) : fmt::format("{} B", b);
}

void add_namespace_flags(CLI::App* app, NamespaceFlags& f) {
  app->add_option("device", f.uri, "the namespace: tcp://ADDR:PORT/NQN[/NSID] or rdma://... (NSID 1 if absent)")
      ->required();
  app->add_option("-n,--namespace-id", f.nsid, "namespace identifier (default: the one in the URI)")
      ->check(CLI::Range(1u, 0xFFFFFFFEu));
  add_host_flags(app, f.conn, false);
}

tl::expected<NamespaceSession, int> open_namespace(NamespaceFlags f, const CliEnv& env, bool need_info) {
  auto uri = parse_namespace_uri(f.uri);
  if (!uri) return tl::unexpected(report_error(env, uri.error().message, 2));
  f.conn.transport = uri->address.type == transport::TransportType::rdma ? "rdma" : "tcp";
  f.conn.traddr = uri->address.traddr;
  f.conn.trsvcid = std::to_string(uri->address.trsvcid);
  auto r = resolve(f.conn, transport::kDefaultIoPort, 5000, env);
  if (!r) return tl::unexpected(report_error(env, r.error().message, 2));
  NamespaceSession s;
  s.nsid = f.nsid.value_or(uri->nsid);
  auto ctrl = Controller::connect(controller_options(*r, uri->subnqn, env));
  if (!ctrl) return tl::unexpected(report_error(env, ctrl.error().message));
  s.ctrl = std::move(*ctrl);
  s.ns = s.ctrl->find_namespace(s.nsid);
  if (need_info && s.ns == nullptr) {
    return tl::unexpected(report_error(env, fmt::format("{}: no namespace {}", s.ctrl->where(), s.nsid)));
  }
  auto q = s.ctrl->connect_io_queue(1, 2);
  if (!q) return tl::unexpected(report_error(env, q.error().message));
  s.io = std::move(*q);
  return s;
}

NamespaceSession::~NamespaceSession() {
  if (io) io->disconnect();
  if (ctrl) (void)ctrl->shutdown();
}

int report_error(const CliEnv& env, const std::string& message, int code) {
  *env.err << "rdmablk: error: " << message << "\n";
  return code;
}

}  // namespace rdmablk::initiator::cli

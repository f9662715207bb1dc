#include "initiator/cli_common.h"

#include <fmt/format.h>

namespace rdmablk::initiator::cli {

void add_connection_flags(CLI::App* app, ConnFlags& f, bool need_addr, bool need_nqn) {
  app->add_option("-t,--transport", f.transport, "transport type: tcp or rdma")->capture_default_str();
  auto* a = app->add_option("-a,--traddr", f.traddr, "transport address (IP)");
  if (need_addr) a->required();
  app->add_option("-s,--trsvcid", f.trsvcid, "transport service id (port)");
  auto* n = app->add_option("-n,--nqn", f.nqn, "subsystem NQN");
  if (need_nqn) n->required();
  app->add_option("-q,--hostnqn", f.hostnqn, "host NQN (default: /etc/nvme/hostnqn, else generated)");
  app->add_option("--hostid", f.hostid, "host identifier, a UUID (default: /etc/nvme/hostid, else derived)");
  app->add_option("--kato", f.kato_s, "keep-alive timeout in seconds (0 = off)");
  app->add_option("-S,--dhchap-secret", f.dhchap_secret,
                  "DH-HMAC-CHAP host secret (DHHC-1:XX:...:, see gen-dhchap-key), used when the controller "
                  "requires authentication");
  app->add_option("-C,--dhchap-ctrl-secret", f.dhchap_ctrl_secret,
                  "DH-HMAC-CHAP controller secret: the controller must prove it knows it (bidirectional)");
}

Result<Resolved> resolve(const ConnFlags& f, uint16_t default_port, uint32_t default_kato_ms, const CliEnv& env) {
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
  return r;
}

ControllerOptions controller_options(const Resolved& r, std::string subnqn, const CliEnv& env) {
  ControllerOptions o;
  o.address = r.address;
  o.subnqn = std::move(subnqn);
  o.host = r.host;
  o.kato_ms = r.kato_ms;
  o.dhchap = r.dhchap;
  o.connector = env.connector;
  return o;
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

int report_error(const CliEnv& env, const std::string& message, int code) {
  *env.err << "rdmablk: error: " << message << "\n";
  return code;
}

}  // namespace rdmablk::initiator::cli

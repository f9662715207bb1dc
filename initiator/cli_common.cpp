#include "initiator/cli_common.h"

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
  return r;
}

ControllerOptions controller_options(const Resolved& r, std::string subnqn, const CliEnv& env) {
  ControllerOptions o;
  o.address = r.address;
  o.subnqn = std::move(subnqn);
  o.host = r.host;
  o.kato_ms = r.kato_ms;
  o.connector = env.connector;
  return o;
}

int report_error(const CliEnv& env, const std::string& message, int code) {
  *env.err << "rdmablk: error: " << message << "\n";
  return code;
}

}  // namespace rdmablk::initiator::cli

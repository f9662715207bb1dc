// discover (`nvme discover`: the discovery log of a discovery controller) and identify (a controller and
// its namespaces, `nvme id-ctrl` style), through our userspace host.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "initiator/cli/cli.h"
#include "initiator/cli/common.h"
#include "initiator/host/discovery_strings.h"

namespace rdmablk::initiator {

using cli::human_bytes;

namespace {

std::string hex_bytes(const uint8_t* p, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

}  // namespace

std::string format_discovery_log(const DiscoveryLog& log) {
  std::string out = fmt::format("\nDiscovery Log Number of Records {}, Generation counter {}\n", log.entries.size(),
                                log.genctr);
  for (std::size_t i = 0; i < log.entries.size(); ++i) {
    const auto& e = log.entries[i];
    std::string traddr = field_string(e.traddr.data(), e.traddr.size());
    out += fmt::format("=====Discovery Log Entry {}======\n", i);
    out += fmt::format("trtype:  {}\n", trtype_str(e.trtype));
    out += fmt::format("adrfam:  {}\n", traddr.empty() ? "" : adrfam_str(e.adrfam));
    out += fmt::format("subtype: {}\n", subtype_str(e.subtype));
    out += fmt::format("treq:    {}\n", treq_str(e.treq));
    out += fmt::format("portid:  {}\n", e.portid.get());
    out += fmt::format("trsvcid: {}\n", field_string(e.trsvcid.data(), e.trsvcid.size()));
    out += fmt::format("subnqn:  {}\n", field_string(e.subnqn.data(), e.subnqn.size()));
    out += fmt::format("traddr:  {}\n", traddr);
    out += fmt::format("eflags:  {}\n", eflags_str(e.eflags.get()));
    if (e.trtype == 1) {
      auto t = e.rdma_tsas();
      static const char* const prtypes[] = {"unrecognized", "not specified", "infiniband", "roce", "roce-v2", "iwarp"};
      out += fmt::format("rdma_prtype: {}\n", t.prtype < 6 ? prtypes[t.prtype] : "unrecognized");
      out += fmt::format("rdma_qptype: {}\n", t.qptype == 1 ? "connected" : t.qptype == 2 ? "datagram" : "unrecognized");
      out += fmt::format("rdma_cms:    {}\n", t.cms == 1 ? "rdma-cm" : "unrecognized");
      out += fmt::format("rdma_pkey: 0x{:04x}\n", t.pkey.get());
    } else if (e.trtype == 3) {
      out += fmt::format("sectype: {}\n", sectype_str(e.tcp_tsas().sectype));
    }
  }
  return out;
}

std::string format_discovery_log_json(const DiscoveryLog& log) {
  nlohmann::ordered_json root;
  root["genctr"] = log.genctr;
  root["records"] = nlohmann::ordered_json::array();
  for (const auto& e : log.entries) {
    nlohmann::ordered_json r;
    r["trtype"] = trtype_str(e.trtype);
    r["adrfam"] = adrfam_str(e.adrfam);
    r["subtype"] = subtype_str(e.subtype);
    r["treq"] = treq_str(e.treq);
    r["portid"] = e.portid.get();
    r["trsvcid"] = field_string(e.trsvcid.data(), e.trsvcid.size());
    r["subnqn"] = field_string(e.subnqn.data(), e.subnqn.size());
    r["traddr"] = field_string(e.traddr.data(), e.traddr.size());
    r["eflags"] = eflags_str(e.eflags.get());
    if (e.trtype == 3) r["sectype"] = sectype_str(e.tcp_tsas().sectype);
    root["records"].push_back(r);
  }
  // Discovery log fields are the controller's bytes: replace what is not UTF-8 instead of throwing.
  return root.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string format_identify(const Controller& ctrl) {
  const auto& id = ctrl.identity();
  std::string out = fmt::format("NVMe controller {}\n", ctrl.where());
  auto line = [&](const char* k, const std::string& v) { out += fmt::format("{:<10}: {}\n", k, v); };
  line("vid", fmt::format("{:#x}", id.vid.get()));
  line("sn", field_string(id.sn.data(), id.sn.size()));
  line("mn", field_string(id.mn.data(), id.mn.size()));
  line("fr", field_string(id.fr.data(), id.fr.size()));
  line("cntlid", fmt::format("{:#x}", id.cntlid.get()));
  line("ver", fmt::format("{:#x}", id.ver.get()));
  line("mdts", id.mdts ? fmt::format("{} ({} bytes max transfer)", id.mdts, ctrl.max_transfer_bytes())
                       : std::string("0 (no limit)"));
  line("cntrltype", fmt::format("{}", id.cntrltype));
  line("oncs", fmt::format("{:#x}", id.oncs.get()));
  line("vwc", fmt::format("{:#x}", id.vwc));
  line("kas", fmt::format("{}", id.kas.get()));
  line("maxcmd", fmt::format("{}", id.maxcmd.get()));
  line("nn", fmt::format("{}", id.nn.get()));
  line("sgls", fmt::format("{:#x}", id.sgls.get()));
  line("ioccsz", fmt::format("{}", id.ioccsz.get()));
  line("iorcsz", fmt::format("{}", id.iorcsz.get()));
  line("icdoff", fmt::format("{}", id.icdoff.get()));
  line("msdbd", fmt::format("{}", id.msdbd));
  line("subnqn", field_string(id.subnqn.data(), id.subnqn.size()));
  line("queues", fmt::format("{} I/O queues granted, queue size {} (CAP.MQES {})", ctrl.granted_io_queues(),
                            ctrl.cap().mqes() + 1u, ctrl.cap().mqes()));
  out += fmt::format("\n{} namespace(s)\n", ctrl.namespaces().size());
  for (const auto& ns : ctrl.namespaces()) {
    out += fmt::format("\nnsid      : {}\n", ns.nsid);
    out += fmt::format("size      : {} blocks ({})\n", ns.size_blocks, human_bytes(ns.size_blocks * ns.block_size));
    out += fmt::format("capacity  : {} blocks\n", ns.capacity_blocks);
    out += fmt::format("block size: {}\n", ns.block_size);
    if (ns.nguid) out += fmt::format("nguid     : {}\n", hex_bytes(ns.nguid->data(), 16));
    if (ns.eui64) out += fmt::format("eui64     : {}\n", hex_bytes(ns.eui64->data(), 8));
    if (ns.uuid) out += fmt::format("uuid      : {}\n", format_uuid(*ns.uuid));
  }
  return out;
}

namespace cli {

namespace {

struct DiscoverFlags {
  ConnFlags conn;
  std::string format = "normal";
};

int run_discover(const DiscoverFlags& f, const CliEnv& env) {
  auto d = read_discovery_log(f.conn, env);
  if (!d) return d.error();
  *env.out << (f.format == "json" ? format_discovery_log_json(d->log) : format_discovery_log(d->log));
  return 0;
}

int run_identify(const ConnFlags& f, const CliEnv& env) {
  auto r = resolve(f, transport::kDefaultIoPort, 5000, env);
  if (!r) return report_error(env, r.error().message, 2);
  auto ctrl = Controller::connect(controller_options(*r, f.nqn, env));
  if (!ctrl) return report_error(env, ctrl.error().message);
  *env.out << format_identify(**ctrl);
  (void)(*ctrl)->shutdown();
  return 0;
}

}  // namespace

void add_discovery_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out) {
  auto disc = std::make_shared<DiscoverFlags>();
  auto* discover = app.add_subcommand("discover", "print the discovery log of a discovery controller");
  add_connection_flags(discover, disc->conn, true, false);
  discover->add_option("-o,--output-format", disc->format, "normal or json")->check(CLI::IsMember({"normal", "json"}));
  out.push_back({discover, [disc, &env] { return run_discover(*disc, env); }});

  auto id = std::make_shared<ConnFlags>();
  auto* identify = app.add_subcommand("identify", "print a controller and its namespaces");
  add_connection_flags(identify, *id, true, true);
  out.push_back({identify, [id, &env] { return run_identify(*id, env); }});
}

}  // namespace cli

}  // namespace rdmablk::initiator

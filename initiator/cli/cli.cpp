#include "initiator/cli/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>

#include "initiator/bench/job_file.h"
#include "initiator/bench/plot.h"
#include "initiator/bench/report.h"
#include "initiator/bench/runner.h"
#include "initiator/cli/common.h"
#include "initiator/host/discovery_strings.h"

namespace rdmablk::initiator {

using cli::ConnFlags;
using cli::controller_options;
using cli::human_bytes;
using cli::resolve;

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

int cli_main(int argc, const char* const* argv, const CliEnv& env) {
  std::ostream& out = *env.out;
  std::ostream& err = *env.err;
  CLI::App app{"rdmablk: NVMe over Fabrics initiator (discover, identify, bench, connect, attach)", "rdmablk"};
  app.set_version_flag("--version", "rdmablk 0.1.0");
  app.require_subcommand(1, 1);

  ConnFlags disc_flags, id_flags, bench_flags;
  std::string disc_format = "normal", bench_format = "normal", jobfile, plot_dir;
  bool parse_only = false;
  auto* discover = app.add_subcommand("discover", "print the discovery log of a discovery controller");
  cli::add_connection_flags(discover, disc_flags, true, false);
  discover->add_option("-o,--output-format", disc_format, "normal or json")
      ->check(CLI::IsMember({"normal", "json"}));
  auto* identify = app.add_subcommand("identify", "print a controller and its namespaces");
  cli::add_connection_flags(identify, id_flags, true, true);
  auto* bench = app.add_subcommand("bench", "run a fio job file against NVMe-oF namespaces");
  bench->add_option("jobfile", jobfile, "fio job file")->required();
  cli::add_connection_flags(bench, bench_flags, false, false);
  bench->add_option("--output-format", bench_format, "normal or json")->check(CLI::IsMember({"normal", "json"}));
  bench->add_option("--plot", plot_dir, "write SVG charts (IOPS, bandwidth over time; latency percentiles) and an index.html into DIR");
  bench->add_flag("--parse-only", parse_only, "check the job file and print its jobs and groups; run nothing");
  std::vector<cli::Command> commands;
  cli::add_fabrics_commands(app, env, commands);
  cli::add_attach_commands(app, env, commands);
  cli::add_key_commands(app, env, commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion&) {
    out << "rdmablk 0.1.0\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    if (auto* sub = app.get_subcommands().empty() ? nullptr : app.get_subcommands().front()) {
      err << "rdmablk " << sub->get_name() << ": error: " << msg << " (see rdmablk " << sub->get_name() << " --help)\n";
    } else {
      err << "rdmablk: error: " << msg << " (see rdmablk --help)\n";
    }
    return 2;
  }

  auto fail = [&](const std::string& m, int code = 1) {
    err << "rdmablk: error: " << m << "\n";
    return code;
  };

  for (const auto& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  if (discover->parsed()) {
    auto r = resolve(disc_flags, disc_flags.transport == "rdma" ? transport::kDefaultIoPort : transport::kDefaultDiscoveryPort,
                     0, env);
    if (!r) return fail(r.error().message, 2);
    auto ctrl = Controller::connect_discovery(controller_options(*r, {}, env));
    if (!ctrl) return fail(ctrl.error().message);
    auto log = (*ctrl)->discovery_log();
    (void)(*ctrl)->shutdown();
    if (!log) return fail(log.error().message);
    out << (disc_format == "json" ? format_discovery_log_json(*log) : format_discovery_log(*log));
    return 0;
  }
  if (identify->parsed()) {
    auto r = resolve(id_flags, transport::kDefaultIoPort, 5000, env);
    if (!r) return fail(r.error().message, 2);
    auto ctrl = Controller::connect(controller_options(*r, id_flags.nqn, env));
    if (!ctrl) return fail(ctrl.error().message);
    out << format_identify(**ctrl);
    (void)(*ctrl)->shutdown();
    return 0;
  }

  // bench
  auto file = bench::parse_job_file(jobfile);
  if (!file) return fail(file.error().message, 2);
  for (const auto& note : file->notes) err << "rdmablk bench: note: " << note << "\n";
  if (parse_only) {
    out << bench::describe_jobs(*file);
    return 0;
  }
  auto r = resolve(bench_flags, transport::kDefaultIoPort, 5000, env);
  if (!r) return fail(r.error().message, 2);
  bench::RunnerOptions ro;
  if (!bench_flags.traddr.empty()) ro.connection.address = r->address;
  if (!bench_flags.nqn.empty()) ro.connection.subnqn = bench_flags.nqn;
  if (!bench_flags.traddr.empty() && bench_flags.nqn.empty()) return fail("-a/--traddr given without -n/--nqn", 2);
  ro.connection.host = r->host;
  ro.connection.kato_ms = r->kato_ms;
  ro.connection.dhchap = r->dhchap;
  ro.connection.tls = r->tls_settings;
  ro.connection.connector = env.connector;
  ro.progress = env.progress_tty;
  auto when = std::chrono::system_clock::now();
  auto results = bench::run_bench(*file, ro);
  if (!results) return fail(results.error().message, 2);
  if (bench_format == "json") {
    out << bench::json_report(file->global_options, *results, when).dump(4) << "\n";
  } else {
    out << bench::text_report(*results);
  }
  if (!plot_dir.empty()) {
    auto written = bench::write_plots(plot_dir, *results);
    if (!written) return fail(written.error().message);
    err << "rdmablk bench: charts in " << plot_dir << "/index.html\n";
  }
  int status = 0;
  for (const auto& res : *results) {
    if (res.error) {
      err << "rdmablk: error: job '" << res.spec.name << "': " << res.error_message << "\n";
      status = 1;
    }
  }
  return status;
}

}  // namespace rdmablk::initiator

// bench: runs a fio job file against NVMe-oF namespaces (initiator/bench) and prints fio's report,
// normal or JSON, with SVG charts on request.
#include <CLI/CLI.hpp>

#include <chrono>

#include "initiator/bench/job_file.h"
#include "initiator/bench/plot.h"
#include "initiator/bench/report.h"
#include "initiator/bench/runner.h"
#include "initiator/cli/common.h"

namespace rdmablk::initiator::cli {

namespace {

struct BenchFlags {
  ConnFlags conn;
  std::string jobfile;
  std::string format = "normal";
  std::string plot_dir;
  bool parse_only = false;
};

// -t/-a/-s/-n: the target of jobs whose filename= names none.
Result<bench::RunnerOptions> runner_options(const BenchFlags& f, const CliEnv& env) {
  auto r = resolve(f.conn, transport::kDefaultIoPort, 5000, env);
  if (!r) return tl::unexpected(r.error());
  bench::RunnerOptions ro;
  if (!f.conn.traddr.empty()) ro.connection.address = r->address;
  if (!f.conn.nqn.empty()) ro.connection.subnqn = f.conn.nqn;
  if (!f.conn.traddr.empty() && f.conn.nqn.empty()) return make_error("-a/--traddr given without -n/--nqn");
  ro.connection.host = r->host;
  ro.connection.kato_ms = r->kato_ms;
  ro.connection.dhchap = r->dhchap;
  ro.connection.tls = r->tls_settings;
  ro.connection.connector = env.connector;
  ro.progress = env.progress_tty;
  return ro;
}

// The report, the charts, and one error line per failed job (exit status 1).
int report(const BenchFlags& f, const bench::JobFile& file, const std::vector<bench::JobResult>& results,
           std::chrono::system_clock::time_point when, const CliEnv& env) {
  if (f.format == "json") {
    *env.out << bench::json_report(file.global_options, results, when).dump(4) << "\n";
  } else {
    *env.out << bench::text_report(results);
  }
  if (!f.plot_dir.empty()) {
    auto written = bench::write_plots(f.plot_dir, results);
    if (!written) return report_error(env, written.error().message);
    *env.err << "rdmablk bench: charts in " << f.plot_dir << "/index.html\n";
  }
  int status = 0;
  for (const auto& res : results) {
    if (res.error) {
      *env.err << "rdmablk: error: job '" << res.spec.name << "': " << res.error_message << "\n";
      status = 1;
    }
  }
  return status;
}

int run_bench(const BenchFlags& f, const CliEnv& env) {
  auto file = bench::parse_job_file(f.jobfile);
  if (!file) return report_error(env, file.error().message, 2);
  for (const auto& note : file->notes) *env.err << "rdmablk bench: note: " << note << "\n";
  if (f.parse_only) {
    *env.out << bench::describe_jobs(*file);
    return 0;
  }
  auto ro = runner_options(f, env);
  if (!ro) return report_error(env, ro.error().message, 2);
  auto when = std::chrono::system_clock::now();
  auto results = bench::run_bench(*file, *ro);
  if (!results) return report_error(env, results.error().message, 2);
  return report(f, *file, *results, when, env);
}

}  // namespace

void add_bench_command(CLI::App& app, const CliEnv& env, std::vector<Command>& out) {
  auto f = std::make_shared<BenchFlags>();
  auto* bench = app.add_subcommand("bench", "run a fio job file against NVMe-oF namespaces");
  bench->add_option("jobfile", f->jobfile, "fio job file")->required();
  add_connection_flags(bench, f->conn, false, false);
  bench->add_option("--output-format", f->format, "normal or json")->check(CLI::IsMember({"normal", "json"}));
  bench->add_option("--plot", f->plot_dir, "write SVG charts (IOPS, bandwidth over time; latency percentiles) and an index.html into DIR");
  bench->add_flag("--parse-only", f->parse_only, "check the job file and print its jobs and groups; run nothing");
  out.push_back({bench, [f, &env] { return run_bench(*f, env); }});
}

}  // namespace rdmablk::initiator::cli

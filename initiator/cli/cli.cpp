#include "initiator/cli/cli.h"

#include <CLI/CLI.hpp>

#include "initiator/cli/common.h"

namespace rdmablk::initiator {

int cli_main(int argc, const char* const* argv, const CliEnv& env) {
  std::ostream& out = *env.out;
  std::ostream& err = *env.err;
  CLI::App app{"rdmablk: NVMe over Fabrics initiator (discover, identify, bench, connect, attach)", "rdmablk"};
  app.set_version_flag("--version", "rdmablk 0.1.0");
  app.require_subcommand(1, 1);

  // In the order `rdmablk --help` lists them.
  std::vector<cli::Command> commands;
  cli::add_discovery_commands(app, env, commands);
  cli::add_bench_command(app, env, commands);
  cli::add_fabrics_commands(app, env, commands);
  cli::add_attach_commands(app, env, commands);
  cli::add_key_commands(app, env, commands);
  cli::add_nvm_io_commands(app, env, commands);
  cli::add_reservation_commands(app, env, commands);

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

  for (const auto& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return cli::report_error(env, "no subcommand (see rdmablk --help)", 2);  // require_subcommand(1, 1) rules it out
}

}  // namespace rdmablk::initiator

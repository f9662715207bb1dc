// rdmablk: the initiator tool. Subcommands (discover, identify, connect, bench, ...) arrive with the
// transport issues; the foundation provides the command line skeleton.
#include <CLI/CLI.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  CLI::App app{"rdmablk: NVMe over Fabrics initiator (discover, connect, bench)"};
  app.set_version_flag("--version", "rdmablk 0.1.0");
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  std::puts(app.help().c_str());
  return 0;
}

// Runs the `rdmablk` command line in-process (cli_main) and captures what it prints.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "initiator/cli/cli.h"

namespace rdmablk::testing {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

// `env` supplies the connector and paths; its streams are replaced by captures, and the host identity
// files point nowhere so that the machine's own /etc/nvme does not leak into the test.
inline CliRun run_cli(initiator::CliEnv env, std::vector<const char*> args) {
  std::ostringstream out, err;
  env.out = &out;
  env.err = &err;
  env.host_sources = {"/nonexistent/hostnqn", "/nonexistent/hostid", "/nonexistent/machine-id"};
  args.insert(args.begin(), "rdmablk");
  int code = initiator::cli_main(static_cast<int>(args.size()), args.data(), env);
  return {code, out.str(), err.str()};
}

}  // namespace rdmablk::testing

// Pieces shared by the `rdmablk` subcommands (cli.cpp: discover/identify/bench; cli_fabrics.cpp:
// connect/connect-all/disconnect/list through the kernel host; cli_attach.cpp: attach/detach through
// ublk). Each subcommand group registers itself on the CLI11 app and returns what runs it when parsed.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "initiator/cli.h"
#include "initiator/controller.h"

namespace rdmablk::initiator::cli {

// The nvme-cli connection flags: -t -a -s -n -q --hostid --kato.
struct ConnFlags {
  std::string transport = "tcp";
  std::string traddr;
  std::string trsvcid;
  std::string nqn;
  std::string hostnqn;
  std::string hostid;
  std::optional<unsigned> kato_s;
};

void add_connection_flags(CLI::App* app, ConnFlags& f, bool need_addr, bool need_nqn);

struct Resolved {
  transport::TransportAddress address;
  HostIdentity host;
  uint32_t kato_ms = 0;
};

// Flags -> address (default port when -s is absent), host identity, KATO.
Result<Resolved> resolve(const ConnFlags& f, uint16_t default_port, uint32_t default_kato_ms, const CliEnv& env);
ControllerOptions controller_options(const Resolved& r, std::string subnqn, const CliEnv& env);

// One registered subcommand: run() is called when `app` was the one parsed; returns the exit status.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// "rdmablk: error: MESSAGE" on env.err; returns `code`.
int report_error(const CliEnv& env, const std::string& message, int code = 1);

// Subcommand groups (flag storage lives in the closures).
void add_fabrics_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out);  // cli_fabrics.cpp
void add_attach_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out);   // cli_attach.cpp

}  // namespace rdmablk::initiator::cli

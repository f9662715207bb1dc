// `rdmablk-target ctl VERB`: the control socket's client. Sends one request, prints the reply as a table
// (nvme-cli's style) or, with -o json, as the JSON document the daemon returned.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "target/config/config.h"

namespace rdmablk::target {

// Adds the `ctl` subcommand and its verbs to `app`; returns it (parsed when `*ctl` is true afterwards).
CLI::App* add_ctl_command(CLI::App& app);
// Runs the parsed `ctl` command; returns the exit status (0 ok, 1 the daemon refused or failed, 2 cannot
// reach the socket or bad arguments).
int run_ctl_command(CLI::App& ctl);

}  // namespace rdmablk::target

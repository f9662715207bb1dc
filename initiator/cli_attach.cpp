// attach --userspace / detach: volumes served through ublk by this process.
#include "initiator/cli_common.h"

namespace rdmablk::initiator::cli {

void add_attach_commands(CLI::App& /*app*/, const CliEnv& /*env*/, std::vector<Command>& /*out*/) {}

}  // namespace rdmablk::initiator::cli

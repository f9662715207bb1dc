// connect / connect-all / disconnect / list: volumes attached by the kernel's NVMe-oF host.
#include "initiator/cli_common.h"

namespace rdmablk::initiator::cli {

void add_fabrics_commands(CLI::App& /*app*/, const CliEnv& /*env*/, std::vector<Command>& /*out*/) {}

}  // namespace rdmablk::initiator::cli

// rdmablk: the initiator tool (discover, identify, bench). The command line lives in initiator/cli/;
// this file only plugs in the real transports.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>

#include "initiator/cli/cli.h"
#include "transport/host_queue.h"

int main(int argc, char** argv) {
  // Library log lines (a lost connection, a termination PDU) go to stderr: stdout carries the results,
  // which tools parse (fio's JSON layout, nvme-cli's discovery format).
  auto logger = spdlog::stderr_color_mt("rdmablk");
  logger->set_pattern("%^%l%$: %v");
  spdlog::set_default_logger(std::move(logger));
  rdmablk::initiator::CliEnv env;
  env.connector = [](const rdmablk::transport::HostQueueOptions& o) { return rdmablk::transport::connect_host_queue(o); };
  env.out = &std::cout;
  env.err = &std::cerr;
  env.progress_tty = ::isatty(STDERR_FILENO) == 1;
  return rdmablk::initiator::cli_main(argc, argv, env);
}

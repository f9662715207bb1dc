// rdmablk-target: the NVMe-oF target daemon. Exit status: 0 after a clean stop, 1 when it could not
// start (a port in use, a backend that fails to open), 2 for a configuration that cannot be used.
// `rdmablk-target ctl VERB` is the client of a running daemon's control socket (target/control/ctl_cli.h).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "target/config/config.h"
#include "target/control/ctl_cli.h"
#include "target/daemon/daemon.h"
#include "target/config/logging.h"

namespace {

// Exit status for a configuration that cannot be used (nothing was started).
constexpr int kExitBadConfig = 2;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rdmablk-target: NVMe over Fabrics target (RDMA and NVMe/TCP)"};
  std::string config_path = rdmablk::target::kDefaultConfigPath;
  std::string log_level;
  bool check_only = false;
  bool timestamps = true;
  std::string control_socket;
  app.add_option("-c,--config", config_path, "YAML configuration file")->capture_default_str();
  app.add_option("--log-level", log_level,
                 "trace, debug, info, warn, error, critical, off (overrides log_level in the config)");
  app.add_flag("--check-config", check_only,
               "validate the configuration (files, free ports included) and exit: 0 if usable, 2 if not");
  app.add_option("--log-timestamps", timestamps, "prefix log lines with a timestamp (off under systemd)")
      ->capture_default_str();
  app.add_option("--control-socket", control_socket, "the control socket's path (overrides control.socket)");
  app.set_version_flag("--version", std::string("rdmablk-target ") + rdmablk::target::kTargetVersion);
  CLI::App* ctl = rdmablk::target::add_ctl_command(app);
  CLI11_PARSE(app, argc, argv);
  if (*ctl) return rdmablk::target::run_ctl_command(*ctl);

  // The configuration is checked completely before anything starts: one message, exit status 2.
  // The file with the management API's changes replayed on it (target/manage/managed_config.h).
  auto managed = rdmablk::target::manage::load_managed_config(config_path);
  if (!managed) {
    std::fprintf(stderr, "rdmablk-target: %s\n", managed.error().message.c_str());
    return kExitBadConfig;
  }
  const rdmablk::target::TargetConfig* config = &managed->config;
  if (auto env = rdmablk::target::validate_environment(*config); !env) {
    std::fprintf(stderr, "rdmablk-target: %s\n", env.error().message.c_str());
    return kExitBadConfig;
  }
  auto level = log_level.empty() ? rdmablk::Result<spdlog::level::level_enum>(config->log_level)
                                 : rdmablk::target::parse_log_level(log_level);
  if (!level) {
    std::fprintf(stderr, "rdmablk-target: --log-level: %s\n", level.error().message.c_str());
    return kExitBadConfig;
  }

  if (check_only) {
    for (const auto& warning : config->warnings) std::fprintf(stderr, "warning: %s\n", warning.c_str());
    std::printf("config OK: %zu listeners, %zu subsystems, %zu namespaces\n", config->listeners.size(),
                config->subsystems.size(), rdmablk::target::namespace_count(*config));
    return 0;
  }

  // Under systemd the journal stamps every line already.
  if (std::getenv("JOURNAL_STREAM") != nullptr) timestamps = false;
  rdmablk::target::setup_logging(*level, timestamps);
  for (const auto& warning : config->warnings) spdlog::warn("{}", warning);
  spdlog::info("configuration {}: {}", config_path, rdmablk::target::describe(*config));

  rdmablk::target::block_daemon_signals();
  auto daemon =
      rdmablk::target::Daemon::start(std::move(*managed), {.config_path = config_path, .control_socket = control_socket});
  if (!daemon) {
    spdlog::error("cannot start: {}", daemon.error().message);
    return 1;
  }
  return (*daemon)->run();
}

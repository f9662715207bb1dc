// The daemon around the target core: reactor threads with their buffer pools, the listeners, signals
// (SIGTERM/SIGINT: drain and stop; SIGHUP: reload the config) and systemd notification.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "protocol/result.h"
#include "target/config.h"

namespace rdmablk::target {

struct DaemonOptions {
  std::string config_path;                    // reread on SIGHUP
  std::chrono::milliseconds drain_timeout{10'000};  // SIGTERM: how long in-flight I/O may take to finish
};

class Daemon {
 public:
  // Starts reactors, opens every namespace, binds every listener. Nothing is left running on error.
  static Result<std::unique_ptr<Daemon>> start(const TargetConfig& config, const DaemonOptions& options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Blocks handling signals until SIGTERM or SIGINT, then drains and stops. Returns the exit status.
  // The caller must have blocked those signals in every thread (block_daemon_signals) before start().
  int run();
  // Applies the config file again (what SIGHUP does). On error nothing changes and the error is logged.
  Result<void> reload();
  // Stops listeners, disconnects every host, waits for in-flight I/O (up to drain_timeout), stops the
  // reactors. Idempotent.
  void stop();

 private:
  Daemon() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (threads started later inherit the mask), so
// that Daemon::run() receives them with sigwaitinfo. SIGPIPE is ignored (peers vanish mid-send).
void block_daemon_signals();

}  // namespace rdmablk::target

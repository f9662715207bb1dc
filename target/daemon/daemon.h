// The daemon around the target core: reactor threads with their buffer pools, the listeners, signals
// (SIGTERM/SIGINT: drain and stop; SIGHUP: reload the config) and systemd notification.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "protocol/result.h"
#include "target/config/config.h"
#include "target/core/status.h"
#include "target/manage/managed_config.h"

namespace rdmablk::target {

struct DaemonOptions {
  std::string config_path;                    // reread on SIGHUP
  std::chrono::milliseconds drain_timeout{10'000};  // SIGTERM: how long in-flight I/O may take to finish
  std::string control_socket;  // non-empty: the control socket's path, overriding the config (--control-socket)
};

inline constexpr const char* kTargetVersion = "0.1.0";

class Daemon {
 public:
  // Starts reactors, opens every namespace, binds every listener. Nothing is left running on error.
  // `managed`: the config file and the management API's overlay (manage::load_managed_config).
  static Result<std::unique_ptr<Daemon>> start(manage::ManagedConfig managed, const DaemonOptions& options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Blocks handling signals until SIGTERM or SIGINT, then drains and stops. Returns the exit status.
  // The caller must have blocked those signals in every thread (block_daemon_signals) before start().
  int run();
  // Applies the config file again (what SIGHUP does): the summary of what changed, or the error (nothing
  // changed). reload_notifying() also tells systemd (RELOADING=1 ... READY=1) and logs the outcome.
  Result<std::string> reload();
  Result<std::string> reload_notifying(const char* why);
  // A management verb (target/manage/config_edits.h): checked, saved to the overlay, applied; the reply's
  // result ({"changed": bool, "summary": ...}) or the error (nothing changed). Control thread.
  Result<nlohmann::json> manage(const std::string& verb, const nlohmann::json& params);
  // What the control socket and /metrics report (control thread).
  TargetStatus status() const;
  // Stops listeners, disconnects every host, waits for in-flight I/O (up to drain_timeout), stops the
  // reactors. Idempotent.
  void stop();

 private:
  Daemon() = default;
  // A management verb in a gateway group: stored in the group's state, applied, the members told.
  Result<nlohmann::json> manage_group(const std::string& verb, const nlohmann::json& params);
  // Every few seconds on the control thread: the watchdog ping (only when every reactor answered the previous
  // heartbeat), the next heartbeat, busy ratios, IOPS and the systemd STATUS= line.
  void periodic();
  bool handle_signals(int sfd);  // true once SIGTERM/SIGINT stopped the daemon
  // Asks every reactor to record its buffer-pool use and answer with the returned sequence number.
  uint64_t post_probes() const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (threads started later inherit the mask), so
// that Daemon::run() receives them with sigwaitinfo. SIGPIPE is ignored (peers vanish mid-send).
void block_daemon_signals();

}  // namespace rdmablk::target

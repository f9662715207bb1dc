// The one way tests start rdmablk-target (the e2e and ceph suites; tests/support/, docs/testing.md): the
// real binary as a child process (TargetProcess), run to completion on a config it should refuse or check
// (run_target), and its control socket (ctl); helpers to run the rdmablk CLI and to talk to the target
// with the initiator library. The file that includes this one is compiled with RDMABLK_TARGET_BINARY.
//
// TargetProcess writes a YAML config into a fresh temporary directory, picks free TCP ports for it
// (the config refuses port 0, so a port is found by binding port 0 and releasing it; a start that loses
// the race - "already in use" - is retried with new ports), starts rdmablk-target with its stdout/stderr
// in <dir>/target.log, waits for "rdmablk-target ready" (never a fixed sleep), and stops it with SIGTERM,
// expecting exit status 0. Any failure prints the target's log.
//
// Config templates may use these placeholders, replaced before the file is written:
//   ${IO_PORT}    the io listener's port          ${DISC_PORT}  the discovery listener's port
//   ${DIR}        the temporary directory         ${NQN}        kSubnqn
//
// The child gets PR_SET_PDEATHSIG(SIGKILL) so that a crashed test binary never leaves a target behind;
// that signal follows the *thread* that forked, so start() must be called from the test's own thread.
#pragma once

#include <sys/types.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "initiator/host/controller.h"
#include "support/pattern.h"
#include "support/ports.h"
#include "support/temp_dir.h"

namespace e2e {

using namespace std::chrono_literals;

inline constexpr const char* kSubnqn = "nqn.2024-11.io.rdmablk:e2e";
inline constexpr const char* kHostA = "nqn.2024-11.io.rdmablk:host-a";
inline constexpr const char* kHostB = "nqn.2024-11.io.rdmablk:host-b";

// The e2e tests' directories (tests/support/temp_dir.h): under $TMPDIR (or /tmp), removed with their
// contents at the end unless the test failed (then the path is printed, to look at the logs).
using rdmablk::testing::TempDir;
inline const TempDir::Options kE2eDir{.prefix = "rdmablk-e2e", .parent = {}, .keep_on_failure = true};

// A TCP port that was free a moment ago on `address` (tests/support/ports.h).
using rdmablk::testing::pick_free_port;

std::string read_file(const std::filesystem::path& p);
void write_file(const std::filesystem::path& p, std::string_view text);

// Replace every "${KEY}" by its value.
std::string substitute(std::string text, const std::vector<std::pair<std::string, std::string>>& values);

class TargetProcess {
 public:
  TargetProcess();
  ~TargetProcess();  // stops a running target (SIGTERM; a failure there is a test failure)
  TargetProcess(const TargetProcess&) = delete;
  TargetProcess& operator=(const TargetProcess&) = delete;

  // Every wait below ends at its event (the log line, the exit); the default limits only bound a hang, and
  // are far above what the step takes on a loaded 2-core machine with qemu beside it (normally < 1 s).
  //
  // Writes the config (placeholders substituted) and starts the target; retries with fresh ports when
  // the start lost a race for a port. Extra arguments go after `--config FILE`.
  ::testing::AssertionResult start(const std::string& yaml_template, std::vector<std::string> extra_args = {},
                                   std::chrono::milliseconds ready_timeout = 60s);
  // Starts again on the same ports and directory (after stop()), e.g. to check that a file survived.
  ::testing::AssertionResult restart(std::chrono::milliseconds ready_timeout = 60s);
  // Rewrites the config (same ports), sends SIGHUP and waits for the daemon's "reloaded FILE" line. Fails
  // on "reload failed" or a timeout.
  ::testing::AssertionResult reload(const std::string& yaml_template, std::chrono::milliseconds timeout = 30s);
  // SIGTERM, wait up to `timeout` for the exit, expect status 0. After the timeout: SIGKILL and a failure.
  ::testing::AssertionResult stop(std::chrono::milliseconds timeout = 60s);
  // SIGKILL without judgement (cleanup).
  void kill_now();

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  uint16_t io_port() const { return io_port_; }
  uint16_t discovery_port() const { return disc_port_; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  std::filesystem::path config_path() const { return dir_.path() / "target.yaml"; }
  std::filesystem::path log_path() const { return dir_.path() / "target.log"; }
  std::string log() const { return read_file(log_path()); }
  // Waits until the log, from byte `from` on, contains `needle` (true) or `timeout` passes (false).
  bool wait_for_log(std::string_view needle, std::chrono::milliseconds timeout = 30s, std::size_t from = 0) const;
  std::size_t log_size() const;
  // The rendered config text for `yaml_template` with this target's ports and directory.
  std::string render(const std::string& yaml_template) const;
  // Exit status of the last stopped run (-1 = killed / unknown).
  int last_exit_status() const { return last_status_; }
  // The next start() and restart() run `launcher` with the target's argv appended (none: the target itself).
  // It must exec the target, so that pid() stays the target's: e.g. a shell that first moves itself into a
  // cgroup (tests/ceph/group_faults_test.cpp).
  void set_launcher(std::vector<std::string> launcher) { launcher_ = std::move(launcher); }

 private:
  ::testing::AssertionResult spawn_and_wait_ready(std::chrono::milliseconds ready_timeout, bool* port_conflict);
  // Waits for the child; true when it exited (status in *status, -1 if killed by a signal).
  bool wait_exit(std::chrono::milliseconds timeout, int* status);
  ::testing::AssertionResult failure(const std::string& what) const;

  TempDir dir_{kE2eDir};
  pid_t pid_ = -1;
  uint16_t io_port_ = 0;
  uint16_t disc_port_ = 0;
  std::vector<std::string> extra_args_;
  std::vector<std::string> launcher_;
  int last_status_ = -1;
};

// A child process run to completion with a timeout (SIGKILL after it); stdout and stderr captured.
struct ProcessResult {
  bool timed_out = false;
  int exit_status = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};
};
ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& work_dir,
                          std::chrono::milliseconds timeout = 120s);

// `rdmablk-target ARGS...` run to completion in `work_dir` (a config it refuses, --check-config, --version):
// the target exits at once there; `timeout` only ends one that started after all.
ProcessResult run_target(const std::vector<std::string>& args, const std::filesystem::path& work_dir,
                         std::chrono::milliseconds timeout = 60s);
// `rdmablk-target ctl --socket DIR/target.sock [-o json] ARGS...` against a running TargetProcess (its
// default control socket, which start() passes).
ProcessResult ctl(const TargetProcess& t, const std::vector<std::string>& args, bool as_json = true,
                  std::chrono::milliseconds timeout = 60s);

// A child process started now, collected later (the bench during SIGTERM).
class BackgroundProcess {
 public:
  BackgroundProcess(const std::vector<std::string>& argv, const std::filesystem::path& work_dir,
                    const std::string& name);
  ~BackgroundProcess();  // kills a child still running
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;
  bool started() const { return pid_ > 0; }
  // Waits up to `timeout`; on timeout kills the child and reports timed_out.
  ProcessResult wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  std::filesystem::path out_path_, err_path_;
  std::chrono::steady_clock::time_point started_at_;
};

// ---- the initiator library against a TargetProcess ----------------------------------------------------

// A connector that remembers the admin queue it created (the Controller keeps its queues private), for
// commands the library has no call for (an Asynchronous Event Request held across a reload).
struct RecordingConnector {
  rdmablk::transport::HostQueue* admin_queue = nullptr;
  rdmablk::initiator::QueueConnector connector();
};

// One command on a raw HostQueue (e.g. RecordingConnector::admin_queue), polled to completion.
struct RawCommand {
  rdmablk::transport::HostCommand cmd;
  bool done = false;
  rdmablk::protocol::Cqe cqe{};
  static void on_complete(rdmablk::transport::HostCommand& c, const rdmablk::protocol::Cqe& cqe) noexcept {
    auto* self = static_cast<RawCommand*>(c.context);
    self->done = true;
    self->cqe = cqe;
  }
  RawCommand() {
    cmd.on_complete = &on_complete;
    cmd.context = this;
  }
  // Polls `q` until this command completed or `limit` passed; false on timeout or connection loss.
  bool wait(rdmablk::transport::HostQueue& q, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done && std::chrono::steady_clock::now() < deadline) {
      if (q.poll(1, std::chrono::milliseconds(20)) < 0) break;
    }
    return done;
  }
};

// As the Linux host does: enable Namespace Attribute notices (Set Features, Asynchronous Event
// Configuration), then hold an Asynchronous Event Request on `admin` (the RecordingConnector's queue of
// `ctrl`). `aer` must outlive the controller (the queue may complete it while closing).
::testing::AssertionResult request_namespace_events(rdmablk::initiator::Controller& ctrl,
                                                    rdmablk::transport::HostQueue& admin, RawCommand& aer);
// Waits for `aer` to complete as a Namespace Attribute Changed notice, then reads the Changed Namespace List
// (which re-arms the event). Returns the NSIDs listed.
::testing::AssertionResult wait_namespace_changed(rdmablk::initiator::Controller& ctrl,
                                                  rdmablk::transport::HostQueue& admin, RawCommand& aer,
                                                  std::chrono::milliseconds limit, std::vector<uint32_t>* changed);

rdmablk::initiator::HostIdentity host_identity(const std::string& hostnqn);

// KATO 120 s: a test that holds a controller without calling service() (no Keep Alive) while its other
// steps run on a loaded machine must not lose it to the target's keep-alive timer. Command and connect
// timeouts of 30 s: they only end a hang (a loopback command normally answers in microseconds).
rdmablk::initiator::ControllerOptions controller_options(uint16_t port, const std::string& subnqn,
                                                         const std::string& hostnqn = kHostA,
                                                         uint32_t kato_ms = 120'000, uint16_t io_queues = 1);

// Synchronous I/O on one queue; the data must be a whole number of blocks.
rdmablk::Result<rdmablk::protocol::Cqe> write_blocks(rdmablk::initiator::IoQueue& q, uint32_t nsid, uint64_t slba,
                                                     uint32_t block_size, std::span<uint8_t> data);
rdmablk::Result<rdmablk::protocol::Cqe> read_blocks(rdmablk::initiator::IoQueue& q, uint32_t nsid, uint64_t slba,
                                                    uint32_t block_size, std::span<uint8_t> data);
rdmablk::Result<rdmablk::protocol::Cqe> flush(rdmablk::initiator::IoQueue& q, uint32_t nsid);

// Deterministic pseudo-random bytes (tests/support/pattern.h).
using rdmablk::testing::pattern;

// A raw TCP connection to 127.0.0.1:port (blocking, TCP_NODELAY); -1 on failure (tests/support/ports.h).
using rdmablk::testing::raw_connect;
// True when the peer closes (EOF or reset) within `limit`; the bytes received meanwhile go to *received.
bool wait_peer_closed(int fd, std::chrono::milliseconds limit, std::vector<uint8_t>* received = nullptr);

}  // namespace e2e

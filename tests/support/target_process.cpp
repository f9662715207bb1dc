#include "support/target_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/log_pages.h"
#include "transport/host_queue.h"

namespace e2e {

namespace fs = std::filesystem;
using rdmablk::Result;
using rdmablk::protocol::Cqe;
using rdmablk::transport::DataDirection;

// ---------------------------------------------------------------------------------------------------------
// Files and directories
// ---------------------------------------------------------------------------------------------------------

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& p, std::string_view text) {
  // Write a sibling and rename it into place: the target may be reading the old file at this moment.
  fs::path tmp = p;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  fs::rename(tmp, p);
}

std::string substitute(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [key, value] : values) {
    const std::string token = "${" + key + "}";
    for (std::size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + value.size())) {
      text.replace(at, token.size(), value);
    }
  }
  return text;
}

// ---------------------------------------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------------------------------------

namespace {

// fork + exec with stdout/stderr redirected; everything the child needs is prepared before the fork (only
// async-signal-safe calls after it: the test binary may have threads).
pid_t spawn(const std::vector<std::string>& argv, const fs::path& out_path, const fs::path& err_path, bool append) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string out_s = out_path.string(), err_s = err_path.string();
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  const pid_t parent = ::getpid();
  sigset_t none;
  sigemptyset(&none);

  pid_t pid = ::fork();
  if (pid != 0) return pid;  // parent (or -1)

  // Child.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(126);  // the parent died before prctl
  int in = ::open("/dev/null", O_RDONLY);
  int out = ::open(out_s.c_str(), flags, 0644);
  int err = out_s == err_s ? out : ::open(err_s.c_str(), flags, 0644);
  if (in < 0 || out < 0 || err < 0) ::_exit(125);
  ::dup2(in, 0);
  ::dup2(out, 1);
  ::dup2(err, 2);
  for (int sig : {SIGPIPE, SIGTERM, SIGHUP, SIGINT}) ::signal(sig, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

// Polls waitpid until the child exits or `timeout` passes.
bool reap(pid_t pid, std::chrono::milliseconds timeout, int* raw_status) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    pid_t r = ::waitpid(pid, raw_status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;  // not our child any more
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

std::atomic<unsigned> g_output_counter{0};

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const fs::path& work_dir,
                          std::chrono::milliseconds timeout) {
  BackgroundProcess p(argv, work_dir, fs::path(argv.at(0)).filename().string());
  return p.wait(timeout);
}

ProcessResult run_target(const std::vector<std::string>& args, const fs::path& work_dir,
                         std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {RDMABLK_TARGET_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, work_dir, timeout);
}

ProcessResult ctl(const TargetProcess& t, const std::vector<std::string>& args, bool as_json,
                  std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {"ctl", "--socket", (t.dir() / "target.sock").string()};
  if (as_json) argv.insert(argv.end(), {"-o", "json"});
  argv.insert(argv.end(), args.begin(), args.end());
  return run_target(argv, t.dir(), timeout);
}

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv, const fs::path& work_dir,
                                     const std::string& name) {
  unsigned n = g_output_counter++;
  out_path_ = work_dir / (name + "." + std::to_string(n) + ".out");
  err_path_ = work_dir / (name + "." + std::to_string(n) + ".err");
  started_at_ = std::chrono::steady_clock::now();
  pid_ = spawn(argv, out_path_, err_path_, false);
  if (pid_ < 0) ADD_FAILURE() << "fork: " << std::strerror(errno);
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
}

ProcessResult BackgroundProcess::wait(std::chrono::milliseconds timeout) {
  ProcessResult r;
  if (pid_ <= 0) return r;
  int st = 0;
  if (!reap(pid_, timeout, &st)) {
    r.timed_out = true;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &st, 0);
  }
  pid_ = -1;
  r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_at_);
  if (WIFEXITED(st)) r.exit_status = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) r.signal = WTERMSIG(st);
  r.out = read_file(out_path_);
  r.err = read_file(err_path_);
  return r;
}

// ---------------------------------------------------------------------------------------------------------
// TargetProcess
// ---------------------------------------------------------------------------------------------------------

TargetProcess::TargetProcess() = default;

TargetProcess::~TargetProcess() {
  if (running()) {
    auto r = stop();
    if (!r) ADD_FAILURE() << r.message();
  }
}

std::string TargetProcess::render(const std::string& yaml_template) const {
  std::string text = substitute(yaml_template, {{"IO_PORT", std::to_string(io_port_)},
                                                {"DISC_PORT", std::to_string(disc_port_)},
                                                {"DIR", dir().string()},
                                                {"NQN", kSubnqn}});
  // The target's state (reservations, the management overlay) in the test's directory, not /var/lib/rdmablk,
  // unless the test says where.
  if (text.find("state_dir:") == std::string::npos) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += "state_dir: " + (dir() / "state").string() + "\n";
  }
  return text;
}

std::size_t TargetProcess::log_size() const {
  std::error_code ec;
  auto n = fs::file_size(log_path(), ec);
  return ec ? 0 : static_cast<std::size_t>(n);
}

bool TargetProcess::wait_for_log(std::string_view needle, std::chrono::milliseconds timeout, std::size_t from) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::string text = log();
    if (text.size() > from && text.find(needle, from) != std::string::npos) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

::testing::AssertionResult TargetProcess::failure(const std::string& what) const {
  return ::testing::AssertionFailure() << what << "\n----- " << log_path().string() << " -----\n"
                                       << log() << "----- end of target log -----";
}

::testing::AssertionResult TargetProcess::start(const std::string& yaml_template, std::vector<std::string> extra_args,
                                                std::chrono::milliseconds ready_timeout) {
  if (running()) return ::testing::AssertionFailure() << "target already running";
  extra_args_ = std::move(extra_args);
  constexpr int kAttempts = 5;
  ::testing::AssertionResult last = ::testing::AssertionFailure() << "not started";
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    // Listeners on 0.0.0.0 and 127.0.0.1 collide on the same port: pick on the wildcard to be safe.
    io_port_ = pick_free_port("0.0.0.0");
    do {
      disc_port_ = pick_free_port("0.0.0.0");
    } while (disc_port_ == io_port_);
    if (io_port_ == 0 || disc_port_ == 0) return ::testing::AssertionFailure() << "no free TCP port";
    write_file(config_path(), render(yaml_template));
    bool conflict = false;
    last = spawn_and_wait_ready(ready_timeout, &conflict);
    if (last || !conflict) return last;
    std::fprintf(stderr, "[e2e] port %u/%u taken meanwhile, retrying\n", io_port_, disc_port_);
  }
  return last;
}

::testing::AssertionResult TargetProcess::restart(std::chrono::milliseconds ready_timeout) {
  if (running()) return ::testing::AssertionFailure() << "target already running";
  // The ports were free while the target was down: something may hold one for a moment (a port check of
  // another test). Wait for it, up to 30 s.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    bool conflict = false;
    auto r = spawn_and_wait_ready(ready_timeout, &conflict);
    if (r || !conflict || std::chrono::steady_clock::now() >= deadline) return r;
    std::fprintf(stderr, "[e2e] port %u/%u held by someone else, retrying the restart\n", io_port_, disc_port_);
    std::this_thread::sleep_for(200ms);
  }
}

::testing::AssertionResult TargetProcess::spawn_and_wait_ready(std::chrono::milliseconds ready_timeout,
                                                               bool* port_conflict) {
  // Every target gets its own control socket (the default /run/rdmablk/target.sock is one per machine).
  std::vector<std::string> argv = {RDMABLK_TARGET_BINARY, "--config", config_path().string(), "--control-socket",
                                   (dir_.path() / "target.sock").string()};
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  argv.insert(argv.begin(), launcher_.begin(), launcher_.end());
  const std::size_t from = log_size();
  pid_ = spawn(argv, log_path(), log_path(), true);
  if (pid_ < 0) return ::testing::AssertionFailure() << "fork: " << std::strerror(errno);

  auto deadline = std::chrono::steady_clock::now() + ready_timeout;
  for (;;) {
    std::string text = log();
    if (text.size() > from && text.find("rdmablk-target ready", from) != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      last_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      text = log();
      *port_conflict = text.find("in use", from) != std::string::npos;
      return failure("rdmablk-target exited before it was ready (status " + std::to_string(last_status_) + ")");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill_now();
      return failure("rdmablk-target not ready after " + std::to_string(ready_timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(5ms);
  }
}

::testing::AssertionResult TargetProcess::reload(const std::string& yaml_template, std::chrono::milliseconds timeout) {
  if (!running()) return ::testing::AssertionFailure() << "reload: target not running";
  write_file(config_path(), render(yaml_template));
  const std::size_t from = log_size();
  if (::kill(pid_, SIGHUP) != 0) return failure(std::string("kill(SIGHUP): ") + std::strerror(errno));
  const std::string done = "reloaded " + config_path().string();
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::string text = log();
    if (text.size() > from) {
      if (text.find(done, from) != std::string::npos) return ::testing::AssertionSuccess();
      if (text.find("reload failed", from) != std::string::npos) return failure("SIGHUP: reload failed");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return failure("SIGHUP: no '" + done + "' line after " + std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(5ms);
  }
}

bool TargetProcess::wait_exit(std::chrono::milliseconds timeout, int* status) {
  int st = 0;
  if (!reap(pid_, timeout, &st)) return false;
  pid_ = -1;
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (WIFSIGNALED(st)) {
    std::fprintf(stderr, "[e2e] rdmablk-target killed by signal %d%s\n", WTERMSIG(st),
                 WCOREDUMP(st) ? " (core dumped)" : "");
  }
  return true;
}

::testing::AssertionResult TargetProcess::stop(std::chrono::milliseconds timeout) {
  if (!running()) return ::testing::AssertionSuccess();
  ::kill(pid_, SIGTERM);
  int status = -1;
  if (!wait_exit(timeout, &status)) {
    kill_now();
    return failure("rdmablk-target did not exit within " + std::to_string(timeout.count()) +
                   " ms of SIGTERM (killed)");
  }
  last_status_ = status;
  if (status != 0) return failure("rdmablk-target exited with status " + std::to_string(status) + " after SIGTERM");
  return ::testing::AssertionSuccess();
}

void TargetProcess::kill_now() {
  if (!running()) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
  pid_ = -1;
  last_status_ = -1;
}

// ---------------------------------------------------------------------------------------------------------
// Initiator helpers
// ---------------------------------------------------------------------------------------------------------

rdmablk::initiator::QueueConnector RecordingConnector::connector() {
  return [this](const rdmablk::transport::HostQueueOptions& o)
             -> Result<std::unique_ptr<rdmablk::transport::HostQueue>> {
    auto q = rdmablk::transport::connect_host_queue(o);
    if (q && o.qid == 0) admin_queue = q->get();
    return q;
  };
}

::testing::AssertionResult request_namespace_events(rdmablk::initiator::Controller& ctrl,
                                                    rdmablk::transport::HostQueue& admin, RawCommand& aer) {
  namespace p = rdmablk::protocol;
  auto aec = ctrl.admin(p::to_sqe(p::make_set_features(0, p::FeatureId::async_event_configuration,
                                                       p::kAecNamespaceAttribute)));
  if (!aec) return ::testing::AssertionFailure() << "Set Features (AEC): " << aec.error().message;
  aer.done = false;
  aer.cmd.sqe = p::make_async_event_request(0);
  if (!admin.submit(aer.cmd).ok()) return ::testing::AssertionFailure() << "the AER was not accepted";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult wait_namespace_changed(rdmablk::initiator::Controller& ctrl,
                                                  rdmablk::transport::HostQueue& admin, RawCommand& aer,
                                                  std::chrono::milliseconds limit, std::vector<uint32_t>* changed) {
  namespace p = rdmablk::protocol;
  if (!aer.wait(admin, limit)) return ::testing::AssertionFailure() << "no asynchronous event";
  if (!aer.cqe.get_status().ok()) return ::testing::AssertionFailure() << "the AER failed";
  const uint32_t dw0 = aer.cqe.dw0.get();
  if (p::async_event_type(dw0) != p::AsyncEventType::notice ||
      p::async_event_info(dw0) != static_cast<uint8_t>(p::AsyncEventNotice::namespace_attribute_changed) ||
      p::async_event_lid(dw0) != static_cast<uint8_t>(p::LogPageId::changed_namespace_list))
    return ::testing::AssertionFailure() << "not a Namespace Attribute Changed notice: dw0 0x" << std::hex << dw0;
  auto log = ctrl.get_log_page(p::LogPageId::changed_namespace_list, 0, 4096);
  if (!log) return ::testing::AssertionFailure() << "Changed Namespace List: " << log.error().message;
  changed->clear();
  for (std::size_t off = 0; off + 4 <= log->size(); off += 4) {
    uint32_t nsid = 0;
    std::memcpy(&nsid, log->data() + off, 4);
    if (nsid == 0) break;
    changed->push_back(nsid);
  }
  return ::testing::AssertionSuccess();
}

rdmablk::initiator::HostIdentity host_identity(const std::string& hostnqn) {
  rdmablk::initiator::HostIdentity h;
  h.hostnqn = hostnqn;
  // A host identifier derived from the NQN: stable, and different for different hosts.
  uint64_t x = 1469598103934665603ull;
  for (char c : hostnqn) x = (x ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  for (std::size_t i = 0; i < h.hostid.size(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    h.hostid[i] = static_cast<uint8_t>(x >> 56);
  }
  h.hostid[6] = static_cast<uint8_t>((h.hostid[6] & 0x0F) | 0x40);
  h.hostid[8] = static_cast<uint8_t>((h.hostid[8] & 0x3F) | 0x80);
  return h;
}

rdmablk::initiator::ControllerOptions controller_options(uint16_t port, const std::string& subnqn,
                                                         const std::string& hostnqn, uint32_t kato_ms,
                                                         uint16_t io_queues) {
  rdmablk::initiator::ControllerOptions o;
  o.address.type = rdmablk::transport::TransportType::tcp;
  o.address.traddr = "127.0.0.1";
  o.address.trsvcid = port;
  o.subnqn = subnqn;
  o.host = host_identity(hostnqn);
  o.kato_ms = kato_ms;
  o.io_queues = io_queues;
  o.command_timeout = 30s;
  o.connect_timeout = 30s;
  o.connector = &rdmablk::transport::connect_host_queue;
  return o;
}

Result<Cqe> write_blocks(rdmablk::initiator::IoQueue& q, uint32_t nsid, uint64_t slba, uint32_t block_size,
                         std::span<uint8_t> data) {
  auto blocks = static_cast<uint32_t>(data.size() / block_size);
  auto sqe = rdmablk::protocol::to_sqe(
      rdmablk::protocol::make_write(0, nsid, slba, blocks, rdmablk::protocol::SglDescriptor{}));
  return q.execute(sqe, data, DataDirection::host_to_controller);
}

Result<Cqe> read_blocks(rdmablk::initiator::IoQueue& q, uint32_t nsid, uint64_t slba, uint32_t block_size,
                        std::span<uint8_t> data) {
  auto blocks = static_cast<uint32_t>(data.size() / block_size);
  auto sqe = rdmablk::protocol::to_sqe(
      rdmablk::protocol::make_read(0, nsid, slba, blocks, rdmablk::protocol::SglDescriptor{}));
  return q.execute(sqe, data, DataDirection::controller_to_host);
}

Result<Cqe> flush(rdmablk::initiator::IoQueue& q, uint32_t nsid) {
  return q.execute(rdmablk::protocol::make_flush(0, nsid), {}, DataDirection::none);
}

bool wait_peer_closed(int fd, std::chrono::milliseconds limit, std::vector<uint8_t>* received) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    int n = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (n <= 0) continue;
    uint8_t buf[4096];
    ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) return true;
    if (received != nullptr) received->insert(received->end(), buf, buf + r);
  }
}

}  // namespace e2e

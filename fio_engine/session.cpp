// The C++ half of the fio engine (see engine_api.h): one rdmablk controller per fio job, its I/O queues,
// and fio's io_us as HostCommands. The data path is the host library's: IoQueue::submit_* queue a
// command, IoQueue::poll runs completions on this thread, and each completion lands in `done` until
// fio's getevents hands it out. Nothing here allocates per I/O.
#include <fmt/format.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "fio_engine/engine_api.h"
#include "fio_engine/target_spec.h"
#include "initiator/host/controller.h"
#include "transport/host_queue.h"

namespace fe = rdmablk::fio_engine;
namespace ini = rdmablk::initiator;
namespace tr = rdmablk::transport;
namespace p = rdmablk::protocol;
using namespace std::chrono_literals;

namespace {

std::atomic<void (*)(const char*)> g_log{nullptr};

void log_line(const std::string& line) noexcept {
  if (auto* log = g_log.load()) {
    log(line.c_str());
  } else {
    std::fputs(line.c_str(), stderr);
  }
}

// spdlog (the host library's warnings) goes where fio's own messages go: never onto stdout, which
// carries fio's report (--output-format=json must stay parseable).
class FioSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    log_line(std::string(buf.data(), buf.size()));
  }
  void flush_() override {}
};

void install_logger() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto sink = std::make_shared<FioSink>();
    sink->set_pattern("rdmablk: %l: %v");
    auto logger = std::make_shared<spdlog::logger>("rdmablk-fio", std::move(sink));
    logger->set_level(spdlog::level::warn);
    spdlog::set_default_logger(std::move(logger));
  });
}

void set_err(char* err, std::size_t len, const std::string& msg) noexcept {
  if (err == nullptr || len == 0) return;
  std::snprintf(err, len, "%s", msg.c_str());
}

fe::EngineOptions engine_options(const rdmablk_fio_options& o) {
  fe::EngineOptions e;
  auto str = [](const char* s) -> std::optional<std::string> {
    if (s == nullptr || *s == '\0') return std::nullopt;
    return fe::unescape_option(s);
  };
  e.transport = str(o.transport);
  e.traddr = str(o.traddr);
  e.trsvcid = str(o.trsvcid);
  e.subnqn = str(o.subnqn);
  e.hostnqn = str(o.hostnqn);
  e.hostid = str(o.hostid);
  e.nsid = o.nsid;
  return e;
}

rdmablk::Result<ini::ControllerOptions> controller_options(const rdmablk_fio_options& o, const fe::TargetSpec& t,
                                                           uint16_t io_queues) {
  auto host = ini::resolve_host_identity(t.hostnqn, t.hostid);
  if (!host) return tl::unexpected(host.error());
  ini::ControllerOptions co;
  co.address = t.address;
  co.subnqn = t.subnqn;
  co.host = *host;
  co.kato_ms = o.kato * 1000u;
  co.io_queues = io_queues;
  co.header_digest = o.hdgst != 0;
  co.data_digest = o.ddgst != 0;
  co.io_busy_poll = std::chrono::microseconds(o.busy_poll_us);
  auto secret = [](const char* s) { return s != nullptr ? fe::unescape_option(s) : std::string(); };
  auto dhchap = ini::make_dhchap_settings(secret(o.dhchap_secret), secret(o.dhchap_ctrl_secret), "dhchap_secret",
                                          "dhchap_ctrl_secret");
  if (!dhchap) return tl::unexpected(dhchap.error());
  co.dhchap = std::move(*dhchap);
  co.connector = [](const tr::HostQueueOptions& qo) { return tr::connect_host_queue(qo); };
  return co;
}

rdmablk::Result<rdmablk_fio_namespace> namespace_of(const ini::Controller& ctrl, uint32_t nsid) {
  const ini::NamespaceInfo* ns = ctrl.find_namespace(nsid);
  if (ns == nullptr) {
    std::string active;
    for (const auto& n : ctrl.namespaces()) active += (active.empty() ? "" : ", ") + std::to_string(n.nsid);
    return rdmablk::make_error(fmt::format("{}: namespace {} is not active (active: {})", ctrl.where(), nsid,
                                           active.empty() ? "none" : active),
                               ENODEV);
  }
  if (ns->block_size == 0) return rdmablk::make_error(fmt::format("{}: namespace {} has no block size", ctrl.where(), nsid), EIO);
  return rdmablk_fio_namespace{nsid, ns->block_size, ns->size_blocks * ns->block_size};
}

const char* op_name(uint8_t op) noexcept {
  switch (op) {
    case RDMABLK_FIO_READ: return "read";
    case RDMABLK_FIO_WRITE: return "write";
    case RDMABLK_FIO_TRIM: return "trim (dataset management)";
    default: return "flush";
  }
}

}  // namespace

struct rdmablk_fio_cmd {
  tr::HostCommand hc{};
  rdmablk_fio_session* session = nullptr;
  void* cookie = nullptr;
  unsigned queue = 0;
  // What was asked, for an error message.
  uint8_t op = 0;
  unsigned file = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  alignas(16) std::array<uint8_t, sizeof(p::DsmRange)> range{};  // the DSM range a trim sends
};

struct rdmablk_fio_session {
  struct Done {
    void* cookie;
    int error;
  };

  std::unique_ptr<ini::Controller> ctrl;  // outlives the queues (declared first, destroyed last)
  std::vector<rdmablk_fio_namespace> files;
  std::vector<Done> done;    // completed, not yet handed to fio
  std::vector<Done> events;  // handed out by the last getevents
  std::string where;
  std::string error;
  unsigned errors_logged = 0;
  unsigned commands = 0;
  unsigned in_flight = 0;  // queued and not completed
  unsigned unsent = 0;     // queued since the queues were last polled (TCP sends them from poll)
  int conn_error = 0;
  uint32_t max_transfer = 0;
  bool trim = false;
  std::vector<std::unique_ptr<ini::IoQueue>> queues;  // destroyed first: their close may complete commands

  void fail_connection(int err, std::string msg) {
    if (conn_error == 0) {
      conn_error = err;
      error = std::move(msg);
      log_line(fmt::format("rdmablk: {}\n", error));
    }
  }

  int poll_all(unsigned min, std::chrono::milliseconds timeout) noexcept {
    unsent = 0;  // every poll sends what is queued first
    int total = 0;
    for (std::size_t i = 0; i < queues.size() && conn_error == 0; ++i) {
      int rc = queues[i]->poll(queues.size() == 1 ? min : 0, queues.size() == 1 ? timeout : 0ms);
      if (rc < 0) {
        try {
          fail_connection(-rc, fmt::format("{}: I/O queue {} failed: {}", where, queues[i]->qid(), std::strerror(-rc)));
        } catch (...) {
          conn_error = -rc;
        }
        break;
      }
      total += rc;
    }
    if (queues.size() > 1 && total == 0 && min != 0 && timeout.count() != 0 && conn_error == 0) {
      // Several queues: sleep briefly on the busiest one rather than spinning on all of them.
      std::size_t busiest = 0;
      for (std::size_t i = 1; i < queues.size(); ++i) {
        if (queues[i]->queue().outstanding() > queues[busiest]->queue().outstanding()) busiest = i;
      }
      int rc = queues[busiest]->poll(1, std::min(timeout, std::chrono::milliseconds(1)));
      if (rc < 0) {
        try {
          fail_connection(-rc, fmt::format("{}: I/O queue {} failed: {}", where, queues[busiest]->qid(),
                                           std::strerror(-rc)));
        } catch (...) {
          conn_error = -rc;
        }
      } else {
        total += rc;
      }
    }
    return total;
  }

  void service() noexcept {
    ctrl->service();
    if (ctrl->failed() && conn_error == 0) {
      try {
        fail_connection(EIO, fmt::format("{}: {}", where, ctrl->failure()));
      } catch (...) {
        conn_error = EIO;
      }
    }
  }

  static void on_complete(tr::HostCommand& hc, const p::Cqe& cqe) noexcept {
    auto& c = *static_cast<rdmablk_fio_cmd*>(hc.context);
    auto& s = *c.session;
    const p::Status st = cqe.get_status();
    int err = 0;
    if (!st.ok()) {
      err = st.is(p::status::lba_out_of_range) || st.is(p::status::invalid_field) ? EINVAL : EIO;
      if (s.errors_logged < 10) {
        ++s.errors_logged;
        try {
          s.error = fmt::format("{} nsid {}: {} of {} bytes at offset {} failed: {}", s.where, s.files[c.file].nsid,
                                op_name(c.op), c.length, c.offset, ini::describe_status(st));
          log_line(fmt::format("rdmablk: {}\n", s.error));
        } catch (...) {
        }
      }
    }
    --s.in_flight;
    s.done.push_back(Done{c.cookie, err});  // capacity reserved for every command: no allocation
  }
};

namespace {
// fio asks for file sizes in its main process, before it forks the job processes (create_serialize).
// RDMA cannot be used across fork: librdmacm keeps the device contexts it opened, and a job process
// inheriting them cannot create its own queue on them. So the namespace is looked up in a short-lived
// child process and fio's main process never touches RDMA (nor keeps a connection of its own).
struct ProbeReply {
  int rc;                      // 0 or -errno
  rdmablk_fio_namespace ns;
  char message[1024];
};

ProbeReply probe_here(const rdmablk_fio_options& opts, const fe::TargetSpec& t) noexcept {
  ProbeReply r{};
  auto fail = [&](const rdmablk::Error& e, int fallback) {
    set_err(r.message, sizeof(r.message), e.message);
    r.rc = -(e.errno_value ? e.errno_value : fallback);
    return r;
  };
  try {
    auto co = controller_options(opts, t, 1);
    if (!co) return fail(co.error(), EINVAL);
    auto ctrl = ini::Controller::connect(*co);
    if (!ctrl) return fail(ctrl.error(), ECONNREFUSED);
    auto ns = namespace_of(**ctrl, t.nsid);
    (void)(*ctrl)->shutdown(1000ms);
    if (!ns) return fail(ns.error(), ENODEV);
    r.ns = *ns;
  } catch (const std::exception& e) {
    return fail(rdmablk::Error{e.what(), EIO}, EIO);
  }
  return r;
}

ProbeReply probe_in_child(const rdmablk_fio_options& opts, const fe::TargetSpec& t) {
  ProbeReply r{};
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.rc = -errno;
    std::snprintf(r.message, sizeof(r.message), "pipe: %s", std::strerror(errno));
    return r;
  }
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t pid = ::fork();
  if (pid < 0) {
    r.rc = -errno;
    std::snprintf(r.message, sizeof(r.message), "fork: %s", std::strerror(errno));
    ::close(fds[0]);
    ::close(fds[1]);
    return r;
  }
  if (pid == 0) {
    ::close(fds[0]);
    const ProbeReply mine = probe_here(opts, t);
    const auto* p = reinterpret_cast<const char*>(&mine);
    std::size_t done = 0;
    while (done < sizeof(mine)) {
      ssize_t n = ::write(fds[1], p + done, sizeof(mine) - done);
      if (n <= 0 && errno != EINTR) break;
      if (n > 0) done += static_cast<std::size_t>(n);
    }
    ::_exit(0);  // fio's exit handlers and our destructors belong to the parent
  }
  ::close(fds[1]);
  std::size_t got = 0;
  auto* p = reinterpret_cast<char*>(&r);
  // The child's own timeouts (connect 5 s, commands 10 s) end it well before this.
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (got < sizeof(r)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd pfd{fds[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) == 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    ssize_t n = ::read(fds[0], p + got, sizeof(r) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof(r)) {
    r = ProbeReply{};
    r.rc = -EIO;
    std::snprintf(r.message, sizeof(r.message), "%s: the process that looks up the namespace size died or hung",
                  t.describe().c_str());
  }
  r.message[sizeof(r.message) - 1] = '\0';
  return r;
}

// A refused submission: the message for rdmablk_fio_error(), -errno for the caller.
template <typename... Args>
int refuse(rdmablk_fio_session* s, int e, fmt::format_string<Args...> f, Args&&... args) noexcept {
  try {
    s->error = fmt::format(f, std::forward<Args>(args)...);
  } catch (...) {
  }
  return -e;
}
}  // namespace

extern "C" {

void rdmablk_fio_set_log(void (*log)(const char*)) {
  g_log = log;
  try {
    install_logger();
  } catch (...) {
  }
}

rdmablk_fio_session* rdmablk_fio_connect(const rdmablk_fio_options* opts, const char* const* filenames, unsigned nfiles,
                                         char* err, std::size_t errlen) {
  try {
    install_logger();
    if (nfiles == 0) {
      set_err(err, errlen, "no file: give filename= (see the engine's options)");
      return nullptr;
    }
    const fe::EngineOptions eo = engine_options(*opts);
    std::vector<fe::TargetSpec> specs;
    for (unsigned i = 0; i < nfiles; ++i) {
      auto t = fe::resolve_target(eo, filenames[i]);
      if (!t) {
        set_err(err, errlen, t.error().message);
        return nullptr;
      }
      if (!specs.empty() && t->controller_key() != specs.front().controller_key()) {
        set_err(err, errlen,
                fmt::format("one controller per fio job: file '{}' names {} but file '{}' names {} (use one job per "
                            "controller)",
                            filenames[i], t->describe(), filenames[0], specs.front().describe()));
        return nullptr;
      }
      specs.push_back(std::move(*t));
    }
    const unsigned want_queues = std::clamp(opts->io_queues, 1u, 65535u);
    auto co = controller_options(*opts, specs.front(), static_cast<uint16_t>(want_queues));
    if (!co) {
      set_err(err, errlen, co.error().message);
      return nullptr;
    }
    auto ctrl = ini::Controller::connect(*co);
    if (!ctrl) {
      set_err(err, errlen, ctrl.error().message);
      return nullptr;
    }
    auto s = std::make_unique<rdmablk_fio_session>();
    s->ctrl = std::move(*ctrl);
    s->where = s->ctrl->where();
    for (const auto& t : specs) {
      auto ns = namespace_of(*s->ctrl, t.nsid);
      if (!ns) {
        set_err(err, errlen, ns.error().message);
        return nullptr;
      }
      s->files.push_back(*ns);
    }
    const unsigned nq = std::min<unsigned>(want_queues, std::max<uint16_t>(s->ctrl->granted_io_queues(), 1));
    if (nq < want_queues) {
      log_line(fmt::format("rdmablk: {} granted {} I/O queues of the {} asked for (io_queues)\n", s->where, nq,
                           want_queues));
    }
    const unsigned depth = std::max(opts->iodepth, 1u);
    const unsigned per_queue = (depth + nq - 1) / nq;
    for (unsigned q = 1; q <= nq; ++q) {
      auto io = s->ctrl->connect_io_queue(static_cast<uint16_t>(q), static_cast<uint16_t>(std::min(per_queue + 1, 65535u)));
      if (!io) {
        set_err(err, errlen, io.error().message);
        return nullptr;
      }
      s->queues.push_back(std::move(*io));
    }
    s->max_transfer = s->queues.front()->max_transfer_bytes();
    s->trim = (s->ctrl->identity().oncs.get() & p::idctl::kOncsDsm) != 0;
    return s.release();
  } catch (const std::exception& e) {
    set_err(err, errlen, e.what());
  } catch (...) {
    set_err(err, errlen, "unexpected error");
  }
  return nullptr;
}

void rdmablk_fio_close(rdmablk_fio_session* s) {
  if (s == nullptr) return;
  try {
    s->queues.clear();
    if (s->ctrl && !s->ctrl->failed() && s->conn_error == 0) (void)s->ctrl->shutdown(1000ms);
  } catch (...) {
  }
  delete s;
}

int rdmablk_fio_file(rdmablk_fio_session* s, unsigned index, rdmablk_fio_namespace* out, char* err, std::size_t errlen) {
  if (index >= s->files.size()) {
    set_err(err, errlen, fmt::format("file {} is not one the job connected for", index));
    return -EINVAL;
  }
  *out = s->files[index];
  return 0;
}

int rdmablk_fio_probe(const rdmablk_fio_options* opts, const char* filename, rdmablk_fio_namespace* out, char* err,
                      std::size_t errlen) {
  static std::mutex mu;
  static std::map<std::string, rdmablk_fio_namespace> cache;
  try {
    install_logger();
    auto t = fe::resolve_target(engine_options(*opts), filename);
    if (!t) {
      set_err(err, errlen, t.error().message);
      return -(t.error().errno_value ? t.error().errno_value : EINVAL);
    }
    const std::string key = t->controller_key() + "|" + std::to_string(t->nsid);
    std::lock_guard lock(mu);
    if (auto it = cache.find(key); it != cache.end()) {
      *out = it->second;
      return 0;
    }
    ProbeReply reply = probe_in_child(*opts, *t);
    if (reply.rc != 0) {
      set_err(err, errlen, reply.message);
      return reply.rc;
    }
    const rdmablk_fio_namespace* ns = &reply.ns;
    cache.emplace(key, *ns);
    *out = *ns;
    return 0;
  } catch (const std::exception& e) {
    set_err(err, errlen, e.what());
  } catch (...) {
    set_err(err, errlen, "unexpected error");
  }
  return -EIO;
}

uint32_t rdmablk_fio_max_transfer(const rdmablk_fio_session* s) { return s->max_transfer; }
int rdmablk_fio_supports_trim(const rdmablk_fio_session* s) { return s->trim ? 1 : 0; }
const char* rdmablk_fio_where(const rdmablk_fio_session* s) { return s->where.c_str(); }

unsigned rdmablk_fio_queue_depth(const rdmablk_fio_session* s) {
  unsigned d = 0;
  for (const auto& q : s->queues) d += q->queue().entries() - 1u;
  return d;
}

int rdmablk_fio_register_memory(rdmablk_fio_session* s, void* addr, std::size_t len, char* err, std::size_t errlen) {
  try {
    for (auto& q : s->queues) {
      if (auto r = q->queue().register_buffer({static_cast<uint8_t*>(addr), len}); !r) {
        set_err(err, errlen, fmt::format("{}: cannot register fio's {}-byte I/O buffer: {}", s->where, len, r.error().message));
        return -(r.error().errno_value ? r.error().errno_value : EIO);
      }
    }
    return 0;
  } catch (...) {
    set_err(err, errlen, "out of memory");
    return -ENOMEM;
  }
}

rdmablk_fio_cmd* rdmablk_fio_cmd_alloc(rdmablk_fio_session* s, void* cookie, unsigned slot) {
  try {
    auto c = std::make_unique<rdmablk_fio_cmd>();
    c->session = s;
    c->cookie = cookie;
    c->queue = slot % static_cast<unsigned>(s->queues.size());
    c->hc.context = c.get();
    c->hc.on_complete = &rdmablk_fio_session::on_complete;
    ++s->commands;
    s->done.reserve(s->commands);
    s->events.reserve(s->commands);
    return c.release();
  } catch (...) {
    return nullptr;
  }
}

void rdmablk_fio_cmd_free(rdmablk_fio_cmd* c) { delete c; }

int rdmablk_fio_submit(rdmablk_fio_session* s, rdmablk_fio_cmd* c, unsigned file, rdmablk_fio_op op, uint64_t offset,
                       uint64_t length, void* buf) {
  if (s->conn_error != 0) return refuse(s, s->conn_error, "{}", s->error);
  if (file >= s->files.size()) return refuse(s, EINVAL, "file {} is not one the job connected for", file);
  const rdmablk_fio_namespace& ns = s->files[file];
  if (c->session != s) {
    // io_submit_mode=offload: fio's submit workers are thread_datas of their own (one engine session,
    // one connection each) that queue the job's io_us, allocated by the job's session. The command
    // completes into the session that sent it, whose getevents the worker calls.
    try {
      s->done.reserve(s->done.size() + s->in_flight + 1);
      s->events.reserve(s->done.capacity());
    } catch (...) {
      return refuse(s, ENOMEM, "out of memory");
    }
    c->session = s;
    c->queue %= static_cast<unsigned>(s->queues.size());
  }
  ini::IoQueue& q = *s->queues[c->queue];
  c->op = static_cast<uint8_t>(op);
  c->file = file;
  c->offset = offset;
  c->length = length;
  p::Status st;
  if (op == RDMABLK_FIO_FLUSH) {
    st = q.submit_flush(c->hc, ns.nsid);
  } else {
    if (length == 0 || offset % ns.lba_size || length % ns.lba_size) {
      return refuse(s, EINVAL, "{} nsid {}: {} of {} bytes at offset {} is not in whole {}-byte blocks", s->where, ns.nsid,
                    op_name(op), length, offset, ns.lba_size);
    }
    if (offset > ns.size_bytes || length > ns.size_bytes - offset) {
      return refuse(s, EINVAL, "{} nsid {}: {} of {} bytes at offset {} runs past the namespace's end ({} bytes)", s->where,
                    ns.nsid, op_name(op), length, offset, ns.size_bytes);
    }
    const uint64_t slba = offset / ns.lba_size;
    const uint64_t blocks = length / ns.lba_size;
    if (op == RDMABLK_FIO_TRIM) {
      if (blocks > UINT32_MAX) return refuse(s, EINVAL, "trim of {} blocks: at most {} per range", blocks, UINT32_MAX);
      p::DsmRange r{};
      r.nlb.set(static_cast<uint32_t>(blocks));
      r.slba.set(slba);
      std::memcpy(c->range.data(), &r, sizeof(r));
      st = q.submit_dsm(c->hc, ns.nsid, c->range);
    } else {
      if (blocks > 65536 || (s->max_transfer != 0 && length > s->max_transfer)) {
        return refuse(s, EINVAL, "{}: a {}-byte {} exceeds the controller's largest transfer of {} bytes (MDTS)", s->where,
                      length, op_name(op), s->max_transfer);
      }
      std::span<uint8_t> data(static_cast<uint8_t*>(buf), length);
      st = op == RDMABLK_FIO_READ ? q.submit_read(c->hc, ns.nsid, slba, static_cast<uint32_t>(blocks), data)
                                  : q.submit_write(c->hc, ns.nsid, slba, static_cast<uint32_t>(blocks), data);
    }
  }
  if (st.ok()) {
    ++s->in_flight;
    ++s->unsent;
    return 0;
  }
  if (st.is(p::status::command_interrupted)) return -EBUSY;
  if (st.is(p::status::transient_transport_error)) {
    return refuse(s, EIO, "{}: the I/O queue is disconnected", s->where);
  }
  return refuse(s, EINVAL, "{} nsid {}: cannot queue a {} of {} bytes at offset {}: {}", s->where, ns.nsid, op_name(op),
                length, offset, ini::describe_status(st));
}

// fio commits after every queued io_u (iodepth_batch_submit=1), but always calls getevents (or
// quiesces, which does) before it waits for anything: with commands already on the wire, the new
// ones go out with the next getevents, many per send, as `rdmablk bench` sends them. Only when the
// wire is idle does the commit send at once (QD1 pays no extra wait).
int rdmablk_fio_commit(rdmablk_fio_session* s) {
  if (s->conn_error == 0 && s->unsent != 0 && s->in_flight == s->unsent) {
    s->poll_all(0, 0ms);
  }
  s->service();
  return s->conn_error != 0 && s->done.empty() ? -s->conn_error : 0;
}

int rdmablk_fio_getevents(rdmablk_fio_session* s, unsigned min, unsigned max, int64_t timeout_ns) {
  using Clock = std::chrono::steady_clock;
  s->events.clear();
  const bool forever = timeout_ns < 0;
  const auto deadline = Clock::now() + std::chrono::nanoseconds(forever ? 0 : timeout_ns);
  // fio reaps one event per call by default (iodepth_batch_complete_max = _min = 1): while completions
  // from an earlier poll are waiting, hand those out without a syscall; the commands queued meanwhile
  // then leave together with the next poll.
  if (s->conn_error == 0 && (s->done.empty() || s->done.size() < min)) {
    s->poll_all(0, 0ms);  // what is already there, and send what is queued
    while (s->done.size() < min && s->conn_error == 0) {
      auto slice = std::chrono::milliseconds(100);  // keep-alive gets its turn at least this often
      if (!forever) {
        const auto left = deadline - Clock::now();
        if (left <= Clock::duration::zero()) break;
        slice = std::min(slice, std::chrono::ceil<std::chrono::milliseconds>(left));
      }
      s->poll_all(min - static_cast<unsigned>(s->done.size()), slice);
      s->service();
    }
    s->service();
  }
  const std::size_t n = std::min<std::size_t>(s->done.size(), max);
  s->events.assign(s->done.begin(), s->done.begin() + static_cast<std::ptrdiff_t>(n));
  s->done.erase(s->done.begin(), s->done.begin() + static_cast<std::ptrdiff_t>(n));
  if (n == 0 && s->conn_error != 0) return -s->conn_error;
  return static_cast<int>(n);
}

void* rdmablk_fio_event(rdmablk_fio_session* s, unsigned i, int* error) {
  const auto& e = s->events[i];
  *error = e.error;
  return e.cookie;
}

const char* rdmablk_fio_error(const rdmablk_fio_session* s) { return s->error.c_str(); }

}  // extern "C"

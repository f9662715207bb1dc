#include "initiator/ublk/queue.h"

#include <spdlog/spdlog.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rdmablk::initiator::ublk {

namespace {

constexpr uint64_t kMailTag = ~uint64_t{0};  // user_data of the mailbox eventfd's poll
constexpr uint8_t kMaxRetries = 4;          // transport errors on a live connection before -EIO
constexpr std::chrono::seconds kIoTimeout{30};  // the Linux host's default nvme_core.io_timeout
constexpr std::size_t kSector = 512;

std::size_t page_round(std::size_t n) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

bool same_code(protocol::Status a, protocol::Status b) noexcept { return a.sct() == b.sct() && a.sc() == b.sc(); }

}  // namespace

Queue::Queue(const QueueConfig& cfg, int supervisor_event_fd) : cfg_(cfg), supervisor_efd_(supervisor_event_fd) {}

Result<std::unique_ptr<Queue>> Queue::create(const QueueConfig& cfg, int supervisor_event_fd) {
  std::unique_ptr<Queue> q(new Queue(cfg, supervisor_event_fd));
  if (auto r = q->setup(); !r) return tl::unexpected(r.error());
  return q;
}

Result<void> Queue::setup() {
  const std::size_t desc_slot = page_round(kMaxQueueDepth * sizeof(ublksrv_io_desc));
  descs_bytes_ = page_round(cfg_.depth * sizeof(ublksrv_io_desc));
  void* d = ::mmap(nullptr, descs_bytes_, PROT_READ, MAP_SHARED | MAP_POPULATE, cfg_.cdev_fd,
                   static_cast<off_t>(UBLKSRV_CMD_BUF_OFFSET + cfg_.q_id * desc_slot));
  if (d == MAP_FAILED) {
    return make_error(fmt::format("ublk queue {}: mmap of the descriptors: {}", cfg_.q_id, std::strerror(errno)), errno);
  }
  descs_ = static_cast<const ublksrv_io_desc*>(d);
  buffers_bytes_ = static_cast<std::size_t>(cfg_.depth) * cfg_.geometry.max_io_bytes;
  void* b = ::mmap(nullptr, buffers_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (b == MAP_FAILED) {
    return make_error(fmt::format("ublk queue {}: {} bytes of buffers: {}", cfg_.q_id, buffers_bytes_,
                                  std::strerror(errno)),
                      errno);
  }
  buffers_ = static_cast<uint8_t*>(b);
  mail_efd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (mail_efd_ < 0) return make_error(fmt::format("eventfd: {}", std::strerror(errno)), errno);
  // One SQE per tag (a tag has one command in the driver at a time) plus the mailbox poll.
  int rc = io_uring_queue_init(cfg_.depth + 2u, &ring_, 0);
  if (rc < 0) return make_error(fmt::format("ublk queue {}: io_uring: {}", cfg_.q_id, std::strerror(-rc)), -rc);
  ring_ready_ = true;
  tags_.resize(cfg_.depth);
  for (uint16_t i = 0; i < cfg_.depth; ++i) {
    tags_[i].queue = this;
    tags_[i].tag = i;
    tags_[i].cmd.context = &tags_[i];
    tags_[i].cmd.on_complete = &Queue::on_complete;
  }
  held_.reserve(cfg_.depth);
  scratch_.reserve(cfg_.depth);
  return {};
}

Queue::~Queue() {
  io_.reset();
  mail_queue_.reset();
  if (ring_ready_) io_uring_queue_exit(&ring_);
  if (mail_efd_ >= 0) ::close(mail_efd_);
  if (descs_ != nullptr) ::munmap(const_cast<ublksrv_io_desc*>(descs_), descs_bytes_);
  if (buffers_ != nullptr) ::munmap(buffers_, buffers_bytes_);
}

// --- Supervisor side ----------------------------------------------------------------------------------

template <typename Change>
void Queue::post(Change&& change) {
  {
    std::lock_guard lock(mail_mutex_);
    change();
    mail_ = true;
  }
  uint64_t one = 1;
  (void)!::write(mail_efd_, &one, sizeof(one));  // wakes the thread through the ring's poll on it
}

void Queue::give_connection(std::unique_ptr<IoQueue> q, int path) {
  post([&] {
    mail_queue_ = std::move(q);  // a connection posted earlier and not yet taken is superseded
    mail_path_ = path;
  });
}

void Queue::drop_connection(int path) {
  post([&] {
    mail_drop_.push_back(path);
    if (mail_queue_ && mail_path_ == path) mail_queue_.reset();
  });
}

void Queue::resume() {
  post([&] { mail_resume_ = true; });
}

bool Queue::has_connection() const {
  std::lock_guard lock(mail_mutex_);
  return mail_queue_ != nullptr || io_path_ >= 0 || next_path_ >= 0;
}

bool Queue::holds_path(int path) const {
  std::lock_guard lock(mail_mutex_);
  return (mail_queue_ != nullptr && mail_path_ == path) || io_path_ == path || next_path_ == path;
}

void Queue::set_fail_fast(bool on) {
  post([&] { mail_fail_fast_ = on; });
}

void Queue::finish() {
  post([&] { mail_finish_ = true; });
}

void Queue::notify_supervisor() noexcept {
  uint64_t one = 1;
  (void)!::write(supervisor_efd_, &one, sizeof(one));
}

// --- The queue's thread -------------------------------------------------------------------------------

void Queue::take_mail() noexcept {
  std::unique_ptr<IoQueue> next;
  int next_path = -1;
  std::vector<int> drops;
  bool resume = false;
  {
    std::lock_guard lock(mail_mutex_);
    next = std::move(mail_queue_);
    next_path = mail_path_;
    drops.swap(mail_drop_);
    resume = mail_resume_;
    mail_resume_ = false;
    fail_fast_ = mail_fail_fast_;
    finishing_ = mail_finish_;
    mail_ = false;
  }
  bool released = false;
  for (int path : drops) {
    if (next_io_ && pending_path_ == path) {
      next_io_.reset();
      pending_path_ = -1;
      released = true;
    }
    if (io_ && cur_path_ == path) {
      // Closing fails what is on the wire with a transport error: those requests are held.
      auto dying = std::move(io_);
      dying.reset();
      cur_path_ = -1;
      released = true;
    }
  }
  if (resume) paused_ = false;
  if (next) {
    if (next_io_) next_io_.reset();  // superseded before it was installed
    next_io_ = std::move(next);
    pending_path_ = next_path;
  }
  publish_paths();
  if (next_io_ && (!io_ || io_->queue().outstanding() == 0)) install_next();
  if (released || !drops.empty()) release_connection();
  fail_held_if_fast();
}

void Queue::publish_paths() noexcept {
  std::lock_guard lock(mail_mutex_);
  io_path_ = io_ ? cur_path_ : -1;
  next_path_ = next_io_ ? pending_path_ : -1;
}

void Queue::install_next() noexcept {
  if (io_) {
    // Drained: nothing of it is on the wire any more. Closing is enough (no Disconnect round trip on
    // this thread while requests wait).
    auto old = std::move(io_);
    old.reset();
  }
  io_ = std::move(next_io_);
  cur_path_ = pending_path_;
  pending_path_ = -1;
  paused_ = false;
  publish_paths();
  notify_supervisor();  // the old connection is gone: its Controller may go
  io_->queue().set_wake_fd(ring_.ring_fd);
  if (auto r = io_->queue().register_buffer({buffers_, buffers_bytes_}); !r) {
    spdlog::error("ublk queue {}: registering the I/O buffers: {}", cfg_.q_id, r.error().message);
    on_lost(r.error().errno_value != 0 ? r.error().errno_value : EIO);
  } else {
    for (auto& t : tags_) t.retries = 0;
  }
}

void Queue::release_connection() noexcept {
  publish_paths();
  notify_supervisor();
}

void Queue::fail_held_if_fast() noexcept {
  // No connection, or one on a path that answered with a path-related status: nothing will serve them.
  if ((io_ && !paused_) || !fail_fast_ || held_.empty()) return;
  for (uint16_t tag : held_) complete(tags_[tag], -EIO);
  held_.clear();
}

void Queue::queue_fetch(uint16_t tag, bool commit, int result) noexcept {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {  // cannot happen with depth + 2 entries, but never drop a tag
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      spdlog::critical("ublk queue {}: no submission slot for tag {}", cfg_.q_id, tag);
      return;
    }
  }
  *sqe = io_uring_sqe{};
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = cfg_.cdev_fd;
  if (cfg_.ioctl_encoded) {
    sqe->cmd_op = commit ? UBLK_U_IO_COMMIT_AND_FETCH_REQ : UBLK_U_IO_FETCH_REQ;
  } else {
    sqe->cmd_op = commit ? UBLK_IO_COMMIT_AND_FETCH_REQ : UBLK_IO_FETCH_REQ;
  }
  static_assert(sizeof(ublksrv_io_cmd) <= 16, "ublksrv_io_cmd must fit a 64-byte SQE's command area");
  auto* cmd = reinterpret_cast<ublksrv_io_cmd*>(sqe->cmd);
  cmd->q_id = cfg_.q_id;
  cmd->tag = tag;
  cmd->result = result;
  cmd->addr = reinterpret_cast<uintptr_t>(buffer(tag).data());
  sqe->user_data = tag;
  tags_[tag].state = commit ? TagState::committing : TagState::fetching;
}

void Queue::arm_mail_poll() noexcept {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) return;  // retried on the next loop
  io_uring_prep_poll_multishot(sqe, mail_efd_, POLLIN);
  sqe->user_data = kMailTag;
  mail_poll_armed_ = true;
}

bool Queue::reap_ring() noexcept {
  unsigned head = 0, seen = 0;
  io_uring_cqe* cqe = nullptr;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    ++seen;
    if (cqe->user_data == kMailTag) {
      uint64_t v = 0;
      (void)!::read(mail_efd_, &v, sizeof(v));
      if ((cqe->flags & IORING_CQE_F_MORE) == 0) mail_poll_armed_ = false;
      continue;
    }
    Tag& t = tags_[static_cast<uint16_t>(cqe->user_data)];
    if (cqe->res == UBLK_IO_RES_OK) {
      start(t);
    } else {
      // UBLK_IO_RES_ABORT: the device is going away; anything else is a driver refusal, also final.
      if (cqe->res != UBLK_IO_RES_ABORT) {
        spdlog::error("ublk queue {} tag {}: the driver refused the command: {}", cfg_.q_id, t.tag,
                      std::strerror(-cqe->res));
      }
      t.state = TagState::dead;
      ++aborted_;
    }
  }
  io_uring_cq_advance(&ring_, seen);
  if (!mail_poll_armed_) arm_mail_poll();
  return seen != 0;
}

void Queue::start(Tag& t) noexcept {
  const ublksrv_io_desc d = descs_[t.tag];  // a copy: the driver owns the array
  const uint8_t op = static_cast<uint8_t>(d.op_flags & 0xff);
  if (!can_submit()) {
    if (fail_fast_ && (!io_ || paused_)) {
      complete(t, -EIO);
    } else {
      hold(t);  // no connection yet, a switch draining the old one, or a path-related status
    }
    return;
  }
  const uint32_t bs = cfg_.geometry.block_size;
  const uint64_t offset = d.start_sector * kSector;
  const uint64_t bytes = static_cast<uint64_t>(d.nr_sectors) * kSector;
  const bool data_op = op == UBLK_IO_OP_READ || op == UBLK_IO_OP_WRITE;
  // A flush carries no range (the kernel leaves its start sector at ~0): only ranged ops are checked.
  if (op != UBLK_IO_OP_FLUSH &&
      (offset % bs != 0 || bytes % bs != 0 || (data_op && (bytes == 0 || bytes > cfg_.geometry.max_io_bytes)))) {
    spdlog::error("ublk queue {} tag {}: request op {} sector {} count {} does not fit the device", cfg_.q_id, t.tag,
                  op, d.start_sector, d.nr_sectors);
    complete(t, -EIO);
    return;
  }
  const uint64_t slba = offset / bs;
  const auto blocks = static_cast<uint32_t>(bytes / bs);
  const bool fua = (d.op_flags & UBLK_IO_F_FUA) != 0;
  protocol::Status st = protocol::status::success;
  switch (op) {
    case UBLK_IO_OP_READ:
      st = io_->submit_read(t.cmd, cfg_.nsid, slba, blocks, buffer(t.tag).first(bytes), fua);
      break;
    case UBLK_IO_OP_WRITE:
      st = io_->submit_write(t.cmd, cfg_.nsid, slba, blocks, buffer(t.tag).first(bytes), fua);
      break;
    case UBLK_IO_OP_FLUSH:
      st = io_->submit_flush(t.cmd, cfg_.nsid);
      break;
    case UBLK_IO_OP_DISCARD: {
      // The range list travels as data: the tag's buffer (registered with the connection) holds it.
      protocol::DsmRange range{};
      range.nlb.set(blocks);
      range.slba.set(slba);
      std::memcpy(buffer(t.tag).data(), &range, sizeof(range));
      st = io_->submit_dsm(t.cmd, cfg_.nsid, buffer(t.tag).first(sizeof(range)));
      break;
    }
    case UBLK_IO_OP_WRITE_ZEROES:
      st = io_->submit_write_zeroes(t.cmd, cfg_.nsid, slba, blocks, (d.op_flags & UBLK_IO_F_NOUNMAP) == 0);
      break;
    default:
      complete(t, -EOPNOTSUPP);
      return;
  }
  if (st.ok()) {
    t.state = TagState::in_flight;
    t.sent = std::chrono::steady_clock::now();
  } else if (same_code(st, protocol::status::command_interrupted)) {
    hold(t);  // the queue is full: a completion frees a slot
  } else if (same_code(st, protocol::status::transient_transport_error)) {
    // The connection failed under submit() (an RDMA post error fails it right there, with nothing left
    // outstanding for poll() to report): hold, and let the loop declare it lost.
    hold(t);
    submit_failed_ = true;
  } else {
    complete(t, errno_for_status(st));
  }
}

void Queue::on_complete(transport::HostCommand& cmd, const protocol::Cqe& cqe) noexcept {
  Tag& t = *static_cast<Tag*>(cmd.context);
  Queue& q = *t.queue;
  const protocol::Status st = cqe.get_status();
  if (st.ok()) {
    const ublksrv_io_desc& d = q.descs_[t.tag];
    const uint8_t op = static_cast<uint8_t>(d.op_flags & 0xff);
    const bool data_op = op == UBLK_IO_OP_READ || op == UBLK_IO_OP_WRITE;
    q.complete(t, data_op ? static_cast<int>(d.nr_sectors * kSector) : 0);
  } else if (same_code(st, protocol::status::transient_transport_error) && t.retries < kMaxRetries) {
    // What a closing connection answers for everything it had on the wire: not the data's fault.
    ++t.retries;
    q.hold(t);
  } else if (st.sct() == protocol::StatusCodeType::path_related && !st.dnr()) {
    // ANA inaccessible / persistent loss / transition, or another path error: the command may succeed
    // on another path (the Linux host's nvme_failover_req). Hold it, stop sending, and let the supervisor
    // re-read ANA and choose.
    q.hold(t);
    if (!q.paused_) {
      q.paused_ = true;
      spdlog::info("ublk queue {}: {} from the target: holding I/O for a path decision", q.cfg_.q_id,
                   describe_status(st));
    }
    q.path_error_ = true;
    q.notify_supervisor();
  } else {
    q.complete(t, errno_for_status(st));
  }
}

void Queue::hold(Tag& t) noexcept {
  t.state = TagState::held;
  held_.push_back(t.tag);
}

void Queue::complete(Tag& t, int result) noexcept {
  queue_fetch(t.tag, true, result);
  completed_.fetch_add(1, std::memory_order_relaxed);
}

bool Queue::submit_held() noexcept {
  if (held_.empty() || !can_submit()) return false;
  scratch_.swap(held_);
  held_.clear();
  bool progress = false;
  for (std::size_t i = 0; i < scratch_.size(); ++i) {
    Tag& t = tags_[scratch_[i]];
    start(t);
    if (t.state == TagState::held) {
      // Full again (or the connection failed): keep the rest behind it, in order.
      held_.insert(held_.end(), scratch_.begin() + static_cast<std::ptrdiff_t>(i) + 1, scratch_.end());
      break;
    }
    progress = true;
  }
  scratch_.clear();
  return progress;
}

void Queue::on_lost(int error) noexcept {
  spdlog::warn("ublk queue {}: connection lost ({}); holding I/O until it is back", cfg_.q_id, std::strerror(error));
  auto dying = std::move(io_);  // io_ is null while closing: completions it fails are held, not resubmitted
  dying.reset();
  lost_path_ = cur_path_;
  cur_path_ = -1;
  release_connection();
  fail_held_if_fast();
}

void Queue::check_timeouts() noexcept {
  // Once a second at most: a command unanswered for kIoTimeout means a stalled connection (the admin
  // queue's keep-alive may still be answered); drop it, hold what it had, and let the supervisor reconnect.
  const auto now = std::chrono::steady_clock::now();
  if (!io_ || io_->queue().outstanding() == 0 || now < next_timeout_check_) return;
  next_timeout_check_ = now + std::chrono::seconds(1);
  for (const auto& t : tags_) {
    if (t.state == TagState::in_flight && now - t.sent > kIoTimeout) {
      spdlog::warn("ublk queue {} tag {}: no answer in {} s", cfg_.q_id, t.tag, kIoTimeout.count());
      on_lost(ETIMEDOUT);
      return;
    }
  }
}

bool Queue::idle() const noexcept {
  for (const auto& t : tags_) {
    if (t.state == TagState::in_flight || t.state == TagState::held) return false;
  }
  return true;
}

void Queue::run() noexcept {
  constexpr std::chrono::milliseconds kTick{1000};  // mailbox flags are also checked at least this often
  for (uint16_t tag = 0; tag < cfg_.depth; ++tag) queue_fetch(tag, false, 0);
  arm_mail_poll();
  io_uring_submit(&ring_);
  // Each turn: take what arrived (mail, requests), send what waits, then block in ONE place: the host
  // queue's poll() while commands are on the wire (it sends, receives, and wakes on the ring's fd for
  // new requests), else io_uring_submit_and_wait (commits out, next request in). Few syscalls per I/O.
  while (aborted_ < cfg_.depth) {
    if (mail_.load()) take_mail();
    // After STOP_DEV the disk is gone and nothing can be in flight; tags the driver has not aborted yet
    // are cancelled when the ring closes.
    if (next_io_ && (!io_ || io_->queue().outstanding() == 0)) install_next();
    if (finishing_ && idle()) {
      io_uring_submit(&ring_);  // commits queued by the last completions
      break;
    }
    reap_ring();
    submit_held();
    if (submit_failed_) {
      submit_failed_ = false;
      if (io_) on_lost(ENOTCONN);
    }
    fail_held_if_fast();
    check_timeouts();
    if (io_ && io_->queue().outstanding() > 0) {
      if (io_uring_sq_ready(&ring_) != 0) io_uring_submit(&ring_);  // commits before sleeping
      const bool ring_has_work = io_uring_cq_ready(&ring_) != 0;
      int n = io_->poll(ring_has_work ? 0 : 1, ring_has_work ? std::chrono::milliseconds(0) : kTick);
      if (n < 0) on_lost(-n);
    } else {
      __kernel_timespec ts{};
      ts.tv_sec = kTick.count() / 1000;
      io_uring_cqe* cqe = nullptr;
      (void)io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    }
  }
  if (io_) {
    auto closing = std::move(io_);
    closing->disconnect();
  }
  next_io_.reset();
  cur_path_ = pending_path_ = -1;
  publish_paths();
  finished_ = true;
  notify_supervisor();
}

}  // namespace rdmablk::initiator::ublk

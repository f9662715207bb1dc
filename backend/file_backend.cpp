// The `file` backend: a regular file or a block device, driven through io_uring.
//
// Per queue: one io_uring sized to the queue depth, the file registered as fixed file 0, the caller's
// buffers registered as fixed buffers, and a preallocated slot array indexed by a free list
// (user_data = slot index). Nothing is allocated per I/O.
//
// Choices (documented here because they are behaviour the target relies on):
// - O_DIRECT by default when the file system supports it and the block size is a multiple of its
//   direct-I/O offset alignment (statx STATX_DIOALIGN, or the device's logical block size); otherwise
//   buffered, with a warning. Files always report a volatile write cache: even with O_DIRECT, the
//   block allocation of a sparse file is not durable before fdatasync. Block devices report it
//   unless sysfs says "write through".
// - FUA = RWF_DSYNC on that write (for O_DIRECT files too: the kernel turns it into REQ_FUA or a flush).
// - Flush = IORING_OP_FSYNC with IORING_FSYNC_DATASYNC.
// - Write Zeroes = IORING_OP_FALLOCATE FALLOC_FL_ZERO_RANGE|KEEP_SIZE; Deallocate = FALLOC_FL_PUNCH_HOLE|
//   KEEP_SIZE. Both also on block devices: blkdev_fallocate turns ZERO_RANGE into a zero-out and
//   PUNCH_HOLE into an unmapping zero-out, asynchronously in io_uring's worker, so the reactor never
//   blocks in a BLKDISCARD/BLKZEROOUT ioctl. When a mode is refused with EOPNOTSUPP the queue falls
//   back (write zeroes: zero range -> punch -> write zeroes from a shared zero buffer; deallocate:
//   punch -> zero range -> write) and remembers it. Reads of a deallocated range therefore always
//   return zeroes.
// - Short reads/writes are resubmitted for the rest; -EAGAIN/-EINTR are resubmitted up to
//   kMaxRetries times, then complete with the mapped status (Command Interrupted). A read that
//   returns 0 (the file was truncated behind our back) completes with zeroes for the missing part.
// - Size: a missing file is created sparse (ftruncate) when a size is given; an existing file that
//   is smaller than the configured size is extended sparse (growing never loses data; a log line
//   says so), refused when read-only; a larger file serves its first `size` bytes.
// - Full queue: submit() returns `queue_full` (transient; not an NVMe status).
// - The ring is created with SINGLE_ISSUER|DEFER_TASKRUN|COOP_TASKRUN|TASKRUN_FLAG|SUBMIT_ALL when the
//   kernel has them (probed, falling back step by step to none) and R_DISABLED: it is enabled by the
//   first flush()/reap(), so the thread that first uses a queue owns it. Use and destroy a queue on
//   that thread (the destructor waits for in-flight requests; it cannot from another thread).
//   event_fd() is an eventfd registered with the ring (IORING_REGISTER_EVENTFD), not the ring's own
//   descriptor: with DEFER_TASKRUN the ring fd polls readable only once its owner has entered the kernel to
//   run the deferred completions, so an io_uring POLL_ADD armed on it while idle never fires. The eventfd
//   is signalled as completions become due; clear_event() reads it.
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <liburing.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/file_backend_testing.h"
#include "backend/file_open.h"
#include "backend/request_check.h"

#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#endif

namespace rdmablk::backend {

namespace {

namespace st = protocol::status;

constexpr unsigned kMaxRetries = 8;
constexpr uint64_t kMaxChunk = 1ull << 30;  // bytes per read/write SQE (the kernel caps at ~2 GiB)
constexpr size_t kZeroBufBytes = 128 * 1024;  // a multiple of every valid block size

enum class ZeroMode : uint8_t { zero_range, punch, write };

struct Slot {
  uint64_t user_data;
  uint64_t offset;     // next byte offset
  uint64_t remaining;  // bytes still to transfer / zero
  char* buf;           // next byte of the caller's buffer (read/write)
  int buf_index;
  Op op;
  ZeroMode zero_mode;
  bool fua;
  uint8_t retries;
};


class FileBackend final : public Backend {
 public:
  FileBackend(std::string path, int fd, const Geometry& geo, bool direct, bool block_device, void* zero_buf,
              bool sized_by_store)
      : path_(std::move(path)),
        fd_(fd),
        geo_(geo),
        direct_(direct),
        block_device_(block_device),
        zero_buf_(zero_buf),
        sized_by_store_(sized_by_store),
        blocks_(geo.num_blocks) {}
  ~FileBackend() override {
    ::close(fd_);
    ::munmap(zero_buf_, kZeroBufBytes);
  }

  const Geometry& geometry() const noexcept override { return geo_; }
  std::string describe() const override {
    return fmt::format("{} {} ({}{})", block_device_ ? "block device" : "file", path_, direct_ ? "O_DIRECT" : "buffered",
                       geo_.caps.read_only ? ", read-only" : "");
  }
  Result<std::unique_ptr<Queue>> open_queue(const QueueOptions& opts) const override;
  Result<uint64_t> refresh_size() const override;
  uint64_t num_blocks() const noexcept override { return blocks_.load(std::memory_order_relaxed); }

  int fd() const noexcept { return fd_; }
  const std::string& path() const noexcept { return path_; }
  void* zero_buf() const noexcept { return zero_buf_; }
  bool block_device() const noexcept { return block_device_; }

 private:
  std::string path_;
  int fd_;
  Geometry geo_;
  bool direct_;
  bool block_device_;
  void* zero_buf_;  // kZeroBufBytes of zeroes, page-aligned, shared read-only by every queue
  bool sized_by_store_;  // no configured size: the namespace is as large as the file / device
  mutable std::atomic<uint64_t> blocks_;
};

// A file or device that grew or shrank (only when its size is not configured: a configured size is the
// namespace's, and a reload with another one replaces the namespace). Whole blocks only.
Result<uint64_t> FileBackend::refresh_size() const {
  if (!sized_by_store_) return num_blocks();
  uint64_t bytes = 0;
  if (block_device_) {
    if (::ioctl(fd_, BLKGETSIZE64, &bytes) != 0)
      return make_error(fmt::format("{}: BLKGETSIZE64: {}", path_, errstr(errno)), errno);
  } else {
    struct stat sb {};
    if (::fstat(fd_, &sb) != 0) return make_error(fmt::format("{}: fstat: {}", path_, errstr(errno)), errno);
    bytes = static_cast<uint64_t>(sb.st_size);
  }
  const uint64_t blocks = bytes / geo_.block_size;
  if (blocks == 0) return make_error(fmt::format("{}: now has {} bytes, less than one block", path_, bytes), EINVAL);
  blocks_.store(blocks, std::memory_order_relaxed);
  return blocks;
}

class FileQueue final : public Queue {
 public:
  FileQueue(const FileBackend& backend, unsigned depth)
      : backend_(backend),
        geo_(backend.geometry()),
        depth_(depth),
        slots_(std::make_unique<Slot[]>(depth)),
        free_(std::make_unique<uint32_t[]>(depth)) {
    for (unsigned i = 0; i < depth; ++i) free_[i] = depth - 1 - i;
    nfree_ = depth;
  }

  ~FileQueue() override {
    if (ring_ready_) {
      // Requests still in flight would write into buffers the caller is about to free: wait for them.
      Completion sink[32];
      while (in_flight_ > 0) {
        const unsigned before = in_flight_;
        reap(sink, 1);
        if (in_flight_ == before && last_enter_error_ != 0) break;  // e.g. -EEXIST from another thread
      }
      io_uring_queue_exit(&ring_);
    }
    if (event_fd_ >= 0) ::close(event_fd_);
  }

  Result<void> init(std::span<const iovec> buffers) {
    // Optional features, newest first; the kernel says EINVAL to flags it does not know.
    // DEFER_TASKRUN (6.1): completions are processed only when this thread asks for events, in one
    // batch, instead of interrupting it per I/O; the owner thread is the only one that may reap,
    // which is the contract of a Queue anyway. R_DISABLED: the owner is whoever first uses the queue.
    static constexpr unsigned kCandidates[] = {
        IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG |
            IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED,
        IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG |
            IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED,
        IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        IORING_SETUP_SUBMIT_ALL,
        0,
    };
    int rc = -EINVAL;
    for (unsigned flags : kCandidates) {
      io_uring_params p{};
      p.flags = flags | IORING_SETUP_CLAMP;
      rc = io_uring_queue_init_params(depth_, &ring_, &p);
      if (rc == 0) {
        ring_flags_ = p.flags;
        break;
      }
      if (rc != -EINVAL) break;
    }
    if (rc != 0)
      return make_error(fmt::format("{}: cannot create an io_uring of depth {}: {}", backend_.path(), depth_,
                                    errstr(-rc)),
                        -rc);
    ring_ready_ = true;
    enabled_ = (ring_flags_ & IORING_SETUP_R_DISABLED) == 0;
    event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (event_fd_ < 0)
      return make_error(fmt::format("{}: eventfd: {}", backend_.path(), errstr(errno)), errno);
    rc = io_uring_register_eventfd(&ring_, event_fd_);
    if (rc != 0)
      return make_error(fmt::format("{}: cannot register an eventfd with io_uring: {}", backend_.path(), errstr(-rc)),
                        -rc);
    if (ring_.sq.ring_entries < depth_) {
      return make_error(fmt::format("{}: queue depth {} exceeds the io_uring limit {}", backend_.path(), depth_,
                                    ring_.sq.ring_entries),
                        EINVAL);
    }

    if (!buffers.empty()) {
      rc = io_uring_register_buffers(&ring_, buffers.data(), static_cast<unsigned>(buffers.size()));
      if (rc != 0)
        return make_error(fmt::format("{}: cannot register {} I/O buffers with io_uring: {}", backend_.path(),
                                      buffers.size(), errstr(-rc)),
                          -rc);
      buffers_.assign(buffers.begin(), buffers.end());
    }
    const int fd = backend_.fd();
    rc = io_uring_register_files(&ring_, &fd, 1);
    if (rc == 0) {
      fixed_file_ = true;
      file_ = 0;
    } else {
      spdlog::debug("{}: io_uring_register_files failed ({}), using the plain descriptor", backend_.path(),
                    errstr(-rc));
      file_ = fd;
    }
    return {};
  }

  Status submit(const Request& req) noexcept override {
    const Status s = detail::check_request(req, geo_, backend_.num_blocks());
    if (!s.ok()) return s;
    const uint64_t bytes = uint64_t{req.nlb} * geo_.block_size;
    if (req.buf_index >= 0 && (req.op == Op::read || req.op == Op::write)) {
      // READ_FIXED/WRITE_FIXED need the whole transfer inside the registered buffer.
      if (static_cast<size_t>(req.buf_index) >= buffers_.size()) return st::invalid_field;
      const iovec& iov = buffers_[static_cast<size_t>(req.buf_index)];
      const auto base = reinterpret_cast<uintptr_t>(iov.iov_base);
      const auto p = reinterpret_cast<uintptr_t>(req.buf);
      if (p < base || p - base > iov.iov_len || bytes > iov.iov_len - (p - base)) return st::invalid_field;
    }
    if (nfree_ == 0) return queue_full;
    const uint32_t idx = free_[--nfree_];
    Slot& slot = slots_[idx];
    slot.user_data = req.user_data;
    slot.op = req.op;
    slot.offset = req.slba * geo_.block_size;
    slot.remaining = bytes;
    slot.buf = static_cast<char*>(req.buf);
    slot.buf_index = req.buf_index;
    slot.fua = req.fua && req.op == Op::write;
    slot.retries = 0;
    slot.zero_mode = first_zero_mode(req.op);
    if (!prepare(idx)) {  // cannot happen: the SQ has at least depth entries
      free_[nfree_++] = idx;
      return queue_full;
    }
    ++in_flight_;
    return st::success;
  }

  int flush() noexcept override {
    if (io_uring_sq_ready(&ring_) == 0) return 0;
    if (!enable()) return last_enter_error_;
    int rc;
    do rc = io_uring_submit(&ring_);
    while (rc == -EINTR);
    if (rc < 0) last_enter_error_ = rc;
    return rc;
  }

  unsigned reap(std::span<Completion> out, unsigned min_complete) noexcept override {
    if (out.empty()) return 0;
    unsigned n = 0;
    min_complete = std::min({min_complete, static_cast<unsigned>(out.size()), in_flight_});
    if (!enable()) return 0;
    for (;;) {
      const unsigned want = n < min_complete ? min_complete - n : 0;
      // COOP/DEFER_TASKRUN: finished requests become CQEs only when we enter the kernel asking
      // for events; the kernel raises IORING_SQ_TASKRUN when there are some.
      const bool events_pending = (ring_flags_ & IORING_SETUP_TASKRUN_FLAG) != 0 &&
                                  (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN) != 0;
      if (want > 0) {
        int rc;
        do rc = io_uring_submit_and_wait(&ring_, want);
        while (rc == -EINTR);
        last_enter_error_ = rc < 0 ? rc : 0;
        if (rc < 0 && io_uring_cq_ready(&ring_) == 0) {
          // Could not submit (-EAGAIN/-EBUSY: out of kernel resources): wait for what is already in
          // the kernel, if anything, so that progress frees resources; otherwise give up for now.
          const unsigned in_kernel = in_flight_ - io_uring_sq_ready(&ring_);
          if (in_kernel == 0) return n;
          io_uring_cqe* cqe = nullptr;
          if (io_uring_wait_cqe(&ring_, &cqe) < 0 && io_uring_cq_ready(&ring_) == 0) return n;
        }
      } else if (io_uring_sq_ready(&ring_) > 0) {
        int rc;
        // With a TASKRUN ring, ask for events on the way: the completions that are due come back
        // in the same system call.
        const bool get_events = (ring_flags_ & IORING_SETUP_TASKRUN_FLAG) != 0;
        do rc = get_events ? io_uring_submit_and_get_events(&ring_) : io_uring_submit(&ring_);
        while (rc == -EINTR);
        last_enter_error_ = rc < 0 ? rc : 0;
      } else if (events_pending) {
        io_uring_get_events(&ring_);
      }
      // Consume at most as many CQEs as `out` has room for: each yields at most one completion.
      io_uring_cqe* cqes[64];
      const unsigned room = std::min(static_cast<unsigned>(out.size()) - n, 64u);
      const unsigned got = io_uring_peek_batch_cqe(&ring_, cqes, room);
      for (unsigned i = 0; i < got; ++i)
        if (handle(*cqes[i], out[n])) ++n;
      io_uring_cq_advance(&ring_, got);
      if (n == out.size() || in_flight_ == 0) break;
      if (n >= min_complete && got < room) break;  // enough, and nothing more is ready
    }
    if (io_uring_sq_ready(&ring_) > 0) flush();  // resubmissions go out now, not at the next call
    return n;
  }

  unsigned in_flight() const noexcept override { return in_flight_; }
  int event_fd() const noexcept override { return event_fd_; }
  void clear_event() noexcept override {
    uint64_t value;
    ssize_t rc = ::read(event_fd_, &value, sizeof(value));  // EAGAIN: already clear
    (void)rc;
  }

  // --- test seams ---
  testing::FileQueueCounters counters() const {
    auto c = counters_;
    c.ring_flags = ring_flags_;
    c.fixed_file = fixed_file_;
    c.registered_buffers = static_cast<unsigned>(buffers_.size());
    return c;
  }
  void inject(const testing::FaultInjection& f) {
    faults_ = f;
    inject_ = f.short_every != 0 || f.eagain_every != 0;
  }

 private:
  bool enable() noexcept {
    if (enabled_) return true;
    // SINGLE_ISSUER: the thread that enables the ring is the only one allowed to submit, so a queue
    // opened on one thread can be handed to its reactor.
    // liburing 2.3 declares io_uring_enable_rings() but does not export it: the raw syscall.
    const long r = ::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
    const int rc = r < 0 ? -errno : 0;
    if (rc < 0) {
      last_enter_error_ = rc;
      spdlog::error("{}: cannot enable io_uring: {}", backend_.path(), errstr(-rc));
      return false;
    }
    enabled_ = true;
    return true;
  }

  ZeroMode first_zero_mode(Op op) const noexcept {
    if (op == Op::deallocate) {
      if (!punch_unsupported_) return ZeroMode::punch;
      if (!zero_range_unsupported_) return ZeroMode::zero_range;
      return ZeroMode::write;
    }
    if (!zero_range_unsupported_) return ZeroMode::zero_range;
    if (!punch_unsupported_) return ZeroMode::punch;
    return ZeroMode::write;
  }

  // Queues the SQE for the slot's current state. False only if the SQ is full.
  bool prepare(uint32_t idx) noexcept {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return false;
    Slot& s = slots_[idx];
    switch (s.op) {
      case Op::read:
      case Op::write: {
        const auto len = static_cast<unsigned>(std::min(s.remaining, kMaxChunk));
        if (s.op == Op::read) {
          if (s.buf_index >= 0)
            io_uring_prep_read_fixed(sqe, file_, s.buf, len, s.offset, s.buf_index);
          else
            io_uring_prep_read(sqe, file_, s.buf, len, s.offset);
        } else {
          if (s.buf_index >= 0)
            io_uring_prep_write_fixed(sqe, file_, s.buf, len, s.offset, s.buf_index);
          else
            io_uring_prep_write(sqe, file_, s.buf, len, s.offset);
          if (s.fua) {
            sqe->rw_flags = RWF_DSYNC;
            ++counters_.dsync_writes;
          }
        }
        break;
      }
      case Op::flush:
      case Op::compare_and_write:  // never: check_request refuses it (no such capability here)
        io_uring_prep_fsync(sqe, file_, IORING_FSYNC_DATASYNC);
        break;
      case Op::write_zeroes:
      case Op::deallocate:
        switch (s.zero_mode) {
          case ZeroMode::zero_range:
            io_uring_prep_fallocate(sqe, file_, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
                                    static_cast<off_t>(s.offset), static_cast<off_t>(s.remaining));
            break;
          case ZeroMode::punch:
            io_uring_prep_fallocate(sqe, file_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                    static_cast<off_t>(s.offset), static_cast<off_t>(s.remaining));
            break;
          case ZeroMode::write:
            io_uring_prep_write(sqe, file_, backend_.zero_buf(),
                                static_cast<unsigned>(std::min<uint64_t>(s.remaining, kZeroBufBytes)), s.offset);
            break;
        }
        break;
    }
    if (fixed_file_) sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, idx);
    return true;
  }

  // Rewrites a read/write result for the fault-injection seam.
  int injected(int res) noexcept {
    if (res <= 0) return res;
    ++rw_seen_;
    if (faults_.eagain_every != 0 && rw_seen_ % faults_.eagain_every == 0) return -EAGAIN;
    if (faults_.short_every != 0 && rw_seen_ % faults_.short_every == 0 &&
        static_cast<uint32_t>(res) > geo_.block_size) {
      const uint32_t half = (static_cast<uint32_t>(res) / 2) & ~(geo_.block_size - 1);
      return static_cast<int>(std::max(half, geo_.block_size));
    }
    return res;
  }

  void finish(uint32_t idx, Status status, Completion& out) noexcept {
    out = Completion{slots_[idx].user_data, status};
    free_[nfree_++] = idx;
    --in_flight_;
  }

  // Resubmits the slot, or completes it with Internal Error if that is impossible. False = completed.
  bool resubmit(uint32_t idx, Completion& out) noexcept {
    if (prepare(idx)) return true;
    finish(idx, st::internal_error, out);
    return false;
  }

  // One CQE. True when it completed its request into `out`; false when the request was resubmitted.
  bool handle(const io_uring_cqe& cqe, Completion& out) noexcept {
    const auto idx = static_cast<uint32_t>(cqe.user_data);
    Slot& s = slots_[idx];
    int res = cqe.res;
    switch (s.op) {
      case Op::read:
      case Op::write: {
        if (inject_) res = injected(res);
        if (res > 0) {
          const auto done = static_cast<uint64_t>(res);
          if (done >= s.remaining) {
            finish(idx, st::success, out);
            return true;
          }
          s.offset += done;
          s.remaining -= done;
          s.buf += done;
          s.retries = 0;  // progress was made
          ++counters_.short_resubmits;
          return !resubmit(idx, out);
        }
        if (res == 0 && s.op == Op::read) {
          std::memset(s.buf, 0, s.remaining);  // end of a file shorter than the namespace: a hole
          finish(idx, st::success, out);
          return true;
        }
        if (res == 0) res = -EAGAIN;  // a write that made no progress: retry, bounded
        if ((res == -EAGAIN || res == -EINTR) && s.retries < kMaxRetries) {
          ++s.retries;
          ++counters_.eagain_resubmits;
          return !resubmit(idx, out);
        }
        break;
      }
      case Op::flush:
      case Op::compare_and_write:  // never submitted here
        if (res == -EINTR && s.retries < kMaxRetries) {
          ++s.retries;
          return !resubmit(idx, out);
        }
        break;
      case Op::write_zeroes:
      case Op::deallocate:
        if (s.zero_mode == ZeroMode::write) {
          if (res > 0) {
            const auto done = static_cast<uint64_t>(res);
            s.offset += done;
            s.remaining -= std::min(done, s.remaining);
            if (s.remaining == 0) {
              finish(idx, st::success, out);
              return true;
            }
            s.retries = 0;
            return !resubmit(idx, out);
          }
          if (res == 0) res = -EAGAIN;
        } else if (res == -EOPNOTSUPP) {
          // The file system or device cannot do this mode: remember, and fall back.
          if (s.zero_mode == ZeroMode::zero_range)
            zero_range_unsupported_ = true;
          else
            punch_unsupported_ = true;
          s.zero_mode = first_zero_mode(s.op);
          ++counters_.zero_fallbacks;
          return !resubmit(idx, out);
        }
        if ((res == -EAGAIN || res == -EINTR) && s.retries < kMaxRetries) {
          ++s.retries;
          ++counters_.eagain_resubmits;
          return !resubmit(idx, out);
        }
        break;
    }
    finish(idx, res >= 0 ? st::success : status_from_errno(res, s.op), out);
    return true;
  }

  const FileBackend& backend_;
  const Geometry& geo_;
  const unsigned depth_;
  io_uring ring_{};
  int event_fd_ = -1;  // registered with ring_: signalled when completions are due
  bool ring_ready_ = false;
  bool enabled_ = true;
  unsigned ring_flags_ = 0;
  bool fixed_file_ = false;
  int file_ = -1;  // fixed-file index 0, or the descriptor
  std::vector<iovec> buffers_;
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<uint32_t[]> free_;
  unsigned nfree_ = 0;
  unsigned in_flight_ = 0;
  int last_enter_error_ = 0;
  bool zero_range_unsupported_ = false;
  bool punch_unsupported_ = false;
  bool inject_ = false;
  testing::FaultInjection faults_;
  uint64_t rw_seen_ = 0;
  testing::FileQueueCounters counters_;
};

Result<std::unique_ptr<Queue>> FileBackend::open_queue(const QueueOptions& opts) const {
  if (opts.depth == 0) return make_error(fmt::format("{}: queue depth must be at least 1", path_), EINVAL);
  auto q = std::make_unique<FileQueue>(*this, opts.depth);
  if (auto r = q->init(opts.buffers); !r) return tl::unexpected(r.error());
  return std::unique_ptr<Queue>(std::move(q));
}

}  // namespace

Result<std::unique_ptr<Backend>> open_file_backend(const FileOptions& opts) {
  auto file = open_backing_file(opts);
  if (!file) return tl::unexpected(file.error());
  Geometry geo = file->geo;
  geo.caps.flush = true;
  geo.caps.fua = true;
  geo.caps.write_zeroes = true;
  geo.caps.deallocate = true;
  geo.caps.deallocated_reads_zeroes = true;  // punch, zero range or written zeroes: see the header comment
  geo.caps.read_only = opts.read_only;
  geo.caps.volatile_write_cache = !file->block_device || !file->direct || device_write_cache_volatile(file->rdev);

  void* zero_buf = ::mmap(nullptr, kZeroBufBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (zero_buf == MAP_FAILED) {
    const int err = errno;
    ::close(file->fd);
    return make_error(fmt::format("{}: cannot map the zero buffer: {}", opts.path, errstr(err)), err);
  }
  std::memset(zero_buf, 0, kZeroBufBytes);  // real pages (not the shared zero page) for O_DIRECT writes
  return std::unique_ptr<Backend>(std::make_unique<FileBackend>(opts.path, file->fd, geo, file->direct,
                                                                file->block_device, zero_buf, opts.size == 0));
}

namespace testing {

bool file_queue_counters(const Queue& q, FileQueueCounters& out) {
  const auto* fq = dynamic_cast<const FileQueue*>(&q);
  if (fq == nullptr) return false;
  out = fq->counters();
  return true;
}

bool inject_faults(Queue& q, const FaultInjection& faults) {
  auto* fq = dynamic_cast<FileQueue*>(&q);
  if (fq == nullptr) return false;
  fq->inject(faults);
  return true;
}

}  // namespace testing
}  // namespace rdmablk::backend

// `ram` and `null` backends. Both complete every request inside submit() and hand the completions
// out at the next reap(); event_fd() is -1 (nothing to poll: completions are ready at once).
//
// ram: one anonymous mapping of the namespace size (MAP_NORESERVE: pages appear on first write, so
// never-written blocks read as zeroes without a memset). Write zeroes and deallocate zero the range
// and give whole pages back to the kernel (MADV_DONTNEED: they read as zeroes again).
// null: validates like every backend and never touches data or buffers (so deallocated blocks do not
// read back as zeroes: caps.deallocated_reads_zeroes is false).
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/request_check.h"

namespace rdmablk::backend {

namespace {

namespace st = protocol::status;

class MemoryBackend;

// Completions produced at submit time, returned at reap time: a fixed ring of `depth` entries.
class MemoryQueue final : public Queue {
 public:
  MemoryQueue(const MemoryBackend& backend, unsigned depth)
      : backend_(backend), depth_(depth), ring_(std::make_unique<Completion[]>(depth)) {}

  Status submit(const Request& req) noexcept override;
  int flush() noexcept override { return 0; }
  unsigned reap(std::span<Completion> out, unsigned /*min_complete*/) noexcept override {
    unsigned n = 0;
    while (n < out.size() && count_ > 0) {
      out[n++] = ring_[head_];
      head_ = head_ + 1 == depth_ ? 0 : head_ + 1;
      --count_;
    }
    return n;
  }
  unsigned in_flight() const noexcept override { return count_; }
  int event_fd() const noexcept override { return -1; }

 private:
  const MemoryBackend& backend_;
  unsigned depth_;
  std::unique_ptr<Completion[]> ring_;
  unsigned head_ = 0;
  unsigned count_ = 0;
};

class MemoryBackend final : public Backend {
 public:
  MemoryBackend(const Geometry& geo, uint64_t bytes, char* data) : geo_(geo), bytes_(bytes), data_(data) {}
  ~MemoryBackend() override {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }

  const Geometry& geometry() const noexcept override { return geo_; }
  std::string describe() const override {
    const char* kind = data_ != nullptr ? "ram" : "null";
    if (bytes_ % (1ull << 30) == 0) return fmt::format("{} {} GiB", kind, bytes_ >> 30);
    if (bytes_ % (1ull << 20) == 0) return fmt::format("{} {} MiB", kind, bytes_ >> 20);
    return fmt::format("{} {} bytes", kind, bytes_);
  }
  Result<std::unique_ptr<Queue>> open_queue(const QueueOptions& opts) const override {
    if (opts.depth == 0) return make_error("queue depth must be at least 1", EINVAL);
    return std::unique_ptr<Queue>(std::make_unique<MemoryQueue>(*this, opts.depth));
  }

  // Performs a validated request.
  void execute(const Request& req) const noexcept {
    if (data_ == nullptr) return;  // null
    const uint64_t off = req.slba * geo_.block_size;
    const uint64_t len = uint64_t{req.nlb} * geo_.block_size;
    switch (req.op) {
      case Op::read:
        std::memcpy(req.buf, data_ + off, len);
        break;
      case Op::write:
        std::memcpy(data_ + off, req.buf, len);
        break;
      case Op::write_zeroes:
      case Op::deallocate:
        zero(off, len);
        break;
      case Op::flush:
      case Op::compare_and_write:  // never: check_request refuses it (no such capability here)
        break;
    }
  }

 private:
  void zero(uint64_t off, uint64_t len) const noexcept {
    constexpr uint64_t page = 4096;
    const uint64_t first = (off + page - 1) & ~(page - 1);
    const uint64_t last = (off + len) & ~(page - 1);
    if (last > first && last - first >= 16 * page) {
      // MADV_DONTNEED on private anonymous memory: the pages read back as zeroes and are freed.
      std::memset(data_ + off, 0, first - off);
      if (::madvise(data_ + first, last - first, MADV_DONTNEED) != 0)
        std::memset(data_ + first, 0, last - first);
      std::memset(data_ + last, 0, off + len - last);
    } else {
      std::memset(data_ + off, 0, len);
    }
  }

  Geometry geo_;
  uint64_t bytes_;
  char* data_;  // nullptr for null
};

Status MemoryQueue::submit(const Request& req) noexcept {
  const Status s = detail::check_request(req, backend_.geometry(), backend_.geometry().num_blocks);
  if (!s.ok()) return s;
  if (count_ == depth_) return queue_full;
  backend_.execute(req);
  unsigned tail = head_ + count_;
  if (tail >= depth_) tail -= depth_;
  ring_[tail] = Completion{req.user_data, st::success};
  ++count_;
  return st::success;
}

Result<Geometry> memory_geometry(const MemoryOptions& opts, const char* kind) {
  if (!detail::valid_block_size(opts.block_size))
    return make_error(fmt::format("{} backend: block size {} is not a power of two in [512, 65536]", kind,
                                  opts.block_size),
                      EINVAL);
  if (opts.size == 0) return make_error(fmt::format("{} backend: size must be greater than 0", kind), EINVAL);
  if (opts.size % opts.block_size != 0)
    return make_error(fmt::format("{} backend: size {} is not a multiple of the block size {}", kind, opts.size,
                                  opts.block_size),
                      EINVAL);
  Geometry geo;
  geo.block_size = opts.block_size;
  geo.num_blocks = opts.size / opts.block_size;
  geo.caps.flush = true;
  geo.caps.fua = true;
  geo.caps.write_zeroes = true;
  geo.caps.deallocate = true;
  geo.caps.deallocated_reads_zeroes = true;  // ram; make_null_backend clears it
  geo.caps.volatile_write_cache = false;  // nothing is durable, and nothing gets more durable by a flush
  geo.caps.read_only = opts.read_only;
  return geo;
}

}  // namespace

Result<std::unique_ptr<Backend>> make_ram_backend(const MemoryOptions& opts) {
  auto geo = memory_geometry(opts, "ram");
  if (!geo) return tl::unexpected(geo.error());
  void* p = ::mmap(nullptr, opts.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    return make_error(fmt::format("ram backend: cannot map {} bytes: {}", opts.size, std::strerror(err)), err);
  }
  return std::unique_ptr<Backend>(std::make_unique<MemoryBackend>(*geo, opts.size, static_cast<char*>(p)));
}

Result<std::unique_ptr<Backend>> make_null_backend(const MemoryOptions& opts) {
  auto geo = memory_geometry(opts, "null");
  if (!geo) return tl::unexpected(geo.error());
  geo->caps.deallocated_reads_zeroes = false;  // deallocate completes without touching anything
  return std::unique_ptr<Backend>(std::make_unique<MemoryBackend>(*geo, opts.size, nullptr));
}

}  // namespace rdmablk::backend

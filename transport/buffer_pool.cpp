#include "transport/buffer_pool.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

namespace rdmablk::transport {

namespace {
constexpr std::size_t kPage = 4096;
constexpr std::size_t round_up(std::size_t v, std::size_t a) noexcept { return (v + a - 1) / a * a; }
}  // namespace

Result<std::unique_ptr<BufferPool>> BufferPool::create(const BufferPoolOptions& opts) {
  if (opts.small_size == 0 || opts.large_size < opts.small_size || opts.small_size > UINT32_MAX ||
      opts.large_size > UINT32_MAX) {
    return make_error("buffer pool: sizes must satisfy 0 < small_size <= large_size < 4 GiB", EINVAL);
  }
  if (opts.small_count + uint64_t{opts.large_count} == 0 ||
      opts.small_count + uint64_t{opts.large_count} > UINT32_MAX) {
    return make_error("buffer pool: bad buffer count", EINVAL);
  }
  std::unique_ptr<BufferPool> pool(new BufferPool());
  pool->opts_ = opts;
  // Page-aligned chunks: O_DIRECT backends and the NIC both like them.
  pool->opts_.small_size = round_up(opts.small_size, kPage);
  pool->opts_.large_size = round_up(opts.large_size, kPage);
  const std::size_t len =
      pool->opts_.small_size * opts.small_count + pool->opts_.large_size * opts.large_count;
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    return make_error("buffer pool: mmap of " + std::to_string(len) + " bytes: " + std::strerror(e), e);
  }
  ::madvise(p, len, MADV_HUGEPAGE);  // best effort
  pool->base_ = static_cast<uint8_t*>(p);
  pool->length_ = len;
  // Free lists are stacks filled so that the lowest slot is handed out first (warm pages).
  pool->free_small_.reserve(opts.small_count);
  for (uint32_t i = opts.small_count; i-- > 0;) pool->free_small_.push_back(i);
  pool->free_large_.reserve(opts.large_count);
  for (uint32_t i = opts.large_count; i-- > 0;) pool->free_large_.push_back(opts.small_count + i);
  pool->in_use_.assign(std::size_t{opts.small_count} + opts.large_count, 0);
  return pool;
}

BufferPool::~BufferPool() {
  if (base_ != nullptr) ::munmap(base_, length_);
}

Buffer BufferPool::acquire(std::size_t bytes) noexcept {
  uint32_t slot;
  if (bytes <= opts_.small_size && !free_small_.empty()) {
    slot = free_small_.back();
    free_small_.pop_back();
  } else if (bytes <= opts_.large_size && !free_large_.empty()) {
    slot = free_large_.back();
    free_large_.pop_back();
  } else {
    return Buffer{};
  }
  in_use_[slot] = 1;
  Buffer b;
  b.slot = slot;
  if (slot < opts_.small_count) {
    b.data = base_ + std::size_t{slot} * opts_.small_size;
    b.size = static_cast<uint32_t>(opts_.small_size);
  } else {
    b.data = base_ + std::size_t{opts_.small_count} * opts_.small_size +
             std::size_t{slot - opts_.small_count} * opts_.large_size;
    b.size = static_cast<uint32_t>(opts_.large_size);
  }
  return b;
}

void BufferPool::release(Buffer b) noexcept {
  if (!b) return;
  if (b.slot >= in_use_.size() || in_use_[b.slot] == 0) {
    spdlog::error("buffer pool: release of a buffer that is not in use (slot {})", b.slot);
    return;
  }
  // Hand it straight to the oldest waiter it is big enough for.
  if (BufferWaiter* w = waiters_.take_first([&b](const BufferWaiter& x) noexcept { return x.bytes <= b.size; })) {
    w->waiting = false;
    --waiter_count_;
    w->fn(w, b);  // may release or acquire again: the list is consistent already
    return;
  }
  in_use_[b.slot] = 0;
  if (b.slot < opts_.small_count) {
    free_small_.push_back(b.slot);
  } else {
    free_large_.push_back(b.slot);
  }
}

void BufferPool::wait(BufferWaiter& w) noexcept {
  if (w.waiting) return;
  w.waiting = true;
  waiters_.push_back(w);
  ++waiter_count_;
}

void BufferPool::cancel_wait(BufferWaiter& w) noexcept {
  if (!w.waiting) return;
  if (waiters_.remove(w)) --waiter_count_;
  w.next = nullptr;
  w.waiting = false;
}

iovec BufferPool::region() const noexcept { return iovec{base_, length_}; }
unsigned BufferPool::free_small() const noexcept { return static_cast<unsigned>(free_small_.size()); }
unsigned BufferPool::free_large() const noexcept { return static_cast<unsigned>(free_large_.size()); }

}  // namespace rdmablk::transport

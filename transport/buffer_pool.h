// Per-reactor pool of data buffers, allocated once (one mmap region) and registered once: with
// io_uring as fixed buffer index 0 of every backend queue on the reactor (QueueOptions.buffers = the
// pool's region), and with the NIC (ibv_reg_mr) for RDMA. Requests take a buffer when their transfer
// needs one and give it back when the completion is sent; a request that finds the pool empty waits
// on its queue's pending list (never allocates).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "protocol/defaults.h"
#include "protocol/result.h"
#include "transport/slot_fifo.h"

namespace rdmablk::transport {

struct BufferPoolOptions {
  std::size_t small_size = protocol::defaults::kSmallBufferBytes;  // in-capsule data and small I/O
  unsigned small_count = 1024;
  std::size_t large_size = 1024 * 1024;  // up to the target's max I/O size (MDTS)
  unsigned large_count = 64;
};

struct Buffer {
  uint8_t* data = nullptr;
  uint32_t size = 0;       // capacity in bytes
  uint32_t slot = 0;       // internal: which chunk
  explicit operator bool() const noexcept { return data != nullptr; }
};

// A request waiting for a buffer (embed it in the request; no allocation). release() hands a freed buffer
// that is large enough to the oldest such waiter by calling fn (on the pool's reactor thread).
struct BufferWaiter {
  void (*fn)(BufferWaiter* w, Buffer b) noexcept = nullptr;
  std::size_t bytes = 0;  // what the waiter needs
  BufferWaiter* next = nullptr;  // internal
  bool waiting = false;          // internal
};

class BufferPool {
 public:
  static Result<std::unique_ptr<BufferPool>> create(const BufferPoolOptions& opts);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of at least `bytes`, or an empty Buffer when none is free (or bytes > large_size).
  Buffer acquire(std::size_t bytes) noexcept;
  void release(Buffer b) noexcept;
  // Queue `w` (w.fn and w.bytes set) until a large enough buffer is released. Call only after acquire()
  // failed. cancel_wait() is a no-op when `w` is not waiting.
  void wait(BufferWaiter& w) noexcept;
  void cancel_wait(BufferWaiter& w) noexcept;
  unsigned waiters() const noexcept { return waiter_count_; }
  // The capacity of the buffer acquire(bytes) normally returns (a small one falls back to large when none
  // is free): what a queue's buffer limit counts.
  std::size_t capacity_for(std::size_t bytes) const noexcept {
    return bytes <= opts_.small_size ? opts_.small_size : opts_.large_size;
  }

  // The whole region, for io_uring_register_buffers (index 0) and ibv_reg_mr.
  iovec region() const noexcept;
  static constexpr int kFixedBufferIndex = 0;
  unsigned free_small() const noexcept;
  unsigned free_large() const noexcept;

 private:
  BufferPool() = default;
  uint8_t* base_ = nullptr;
  std::size_t length_ = 0;
  BufferPoolOptions opts_;
  std::vector<uint32_t> free_small_;
  std::vector<uint32_t> free_large_;
  PtrFifo<BufferWaiter, &BufferWaiter::next> waiters_;
  unsigned waiter_count_ = 0;
  std::vector<uint8_t> in_use_;  // per slot, catches double release
};

}  // namespace rdmablk::transport

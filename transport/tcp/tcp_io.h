// Building blocks shared by the NVMe/TCP target connection and host queue: a receive staging buffer that
// can steer PDU data straight into a request buffer, and a gather batch for sendmsg/writev.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include <sys/socket.h>

#include "protocol/result.h"
#include "transport/address.h"
#include "transport/socket_address.h"

namespace rdmablk::transport::tcp {

// Receive side. Bytes arrive in a staging buffer where PDU headers are parsed in place. When the parser
// wants PDU data in a request buffer it calls set_destination(): bytes already staged are copied (the
// tail of one read), and the next read is a two-element readv/recvmsg whose first iovec is the rest of
// the destination (zero copy) and whose second is staging space for the digest and the next headers.
class RxBuffer {
 public:
  explicit RxBuffer(std::size_t capacity) : buf_(new uint8_t[capacity]), cap_(capacity) {}

  const uint8_t* data() const noexcept { return buf_.get() + head_; }
  std::size_t size() const noexcept { return tail_ - head_; }
  void consume(std::size_t n) noexcept {
    head_ += n;
    if (head_ == tail_) head_ = tail_ = 0;
  }
  std::size_t capacity() const noexcept { return cap_; }

  // Steer the next `len` bytes to `dst`. Returns true when all of them are there already.
  bool set_destination(uint8_t* dst, std::size_t len) noexcept {
    std::size_t take = std::min(len, size());
    if (take != 0) std::memcpy(dst, data(), take);
    consume(take);
    dst_ = dst + take;
    dst_left_ = len - take;
    return dst_left_ == 0;
  }
  bool destination_done() const noexcept { return dst_left_ == 0; }
  void clear_destination() noexcept {
    dst_ = nullptr;
    dst_left_ = 0;
  }

  // Drop `n` bytes of the stream (data of a command that failed). Returns bytes still to skip.
  std::size_t skip(std::size_t n) noexcept {
    std::size_t take = std::min(n, size());
    consume(take);
    return n - take;
  }

  // iovecs for the next read (1 or 2). `staging_cap_when_direct` limits how much of the following stream
  // lands in staging while a destination is open, so that little of the next PDU's data gets copied.
  unsigned prepare(iovec* iov, std::size_t staging_cap_when_direct = 4096) noexcept {
    if (head_ != 0 && (cap_ - tail_) < cap_ / 2) {
      std::memmove(buf_.get(), buf_.get() + head_, tail_ - head_);
      tail_ -= head_;
      head_ = 0;
    }
    unsigned n = 0;
    std::size_t room = cap_ - tail_;
    if (dst_left_ != 0) {
      iov[n++] = iovec{dst_, dst_left_};
      room = std::min(room, staging_cap_when_direct);
    }
    if (room != 0) iov[n++] = iovec{buf_.get() + tail_, room};
    return n;
  }
  // `n` bytes arrived through the iovecs of the last prepare().
  void commit(std::size_t n) noexcept {
    std::size_t d = std::min(n, dst_left_);
    dst_ += d;
    dst_left_ -= d;
    tail_ += n - d;
  }

 private:
  std::unique_ptr<uint8_t[]> buf_;
  std::size_t cap_;
  std::size_t head_ = 0;
  std::size_t tail_ = 0;
  uint8_t* dst_ = nullptr;
  std::size_t dst_left_ = 0;
};

// Send side: a batch of iovecs over PDU headers (kept in the batch's arena) and request data (left where
// it is). One batch is in flight at a time; consume() walks it forward after a (possibly short) send.
struct TxBatch {
  static constexpr unsigned kMaxIov = 128;
  static constexpr std::size_t kArena = 8192;
  static constexpr std::size_t kMaxPduOverhead = 128 + 4 + 4;  // header (pdo <= 128 with PDA) + digests

  std::array<iovec, kMaxIov> iov{};
  unsigned count = 0;  // iovecs filled
  unsigned pos = 0;    // first iovec not completely sent
  std::size_t used = 0;
  alignas(16) std::array<uint8_t, kArena> arena{};

  bool empty() const noexcept { return pos == count; }
  void reset() noexcept { count = pos = 0, used = 0; }
  bool room(unsigned iovs, std::size_t arena_bytes) const noexcept {
    return count + iovs <= kMaxIov && used + arena_bytes <= kArena;
  }
  uint8_t* alloc(std::size_t n) noexcept {
    uint8_t* p = arena.data() + used;
    used += n;  // no padding: consecutive headers stay contiguous and share an iovec
    return p;
  }
  void add(const void* p, std::size_t n) noexcept {
    if (n == 0) return;
    // Merge with the previous iovec when contiguous (headers written back to back in the arena).
    if (count > pos) {
      iovec& last = iov[count - 1];
      if (static_cast<const uint8_t*>(last.iov_base) + last.iov_len == p) {
        last.iov_len += n;
        return;
      }
    }
    iov[count++] = iovec{const_cast<void*>(p), n};
  }
  iovec* pending() noexcept { return iov.data() + pos; }
  unsigned pending_count() const noexcept { return count - pos; }
  // Account `n` bytes sent. Returns true when the whole batch is out.
  bool consume(std::size_t n) noexcept {
    while (n != 0 && pos < count) {
      iovec& v = iov[pos];
      if (n >= v.iov_len) {
        n -= v.iov_len;
        ++pos;
      } else {
        v.iov_base = static_cast<uint8_t*>(v.iov_base) + n;
        v.iov_len -= n;
        n = 0;
      }
    }
    return pos == count;
  }
};

// The local address of a socket as a TransportAddress (type tcp).
TransportAddress local_address_of(int fd);

// "1.2.3.4:5678" / "[::1]:5678" for a connected socket's peer (or "?" when unknown).
std::string peer_name_of(int fd);

}  // namespace rdmablk::transport::tcp

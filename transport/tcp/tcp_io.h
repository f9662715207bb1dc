// Building blocks shared by the NVMe/TCP target connection and host queue: a gather batch for
// sendmsg/writev and socket names (the receive side is pdu_receiver.h).
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

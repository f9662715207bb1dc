#include "protocol/crc32c.h"

#include <isa-l/crc.h>

#include <climits>

namespace rdmablk::protocol {

namespace {
// crc32_iscsi() takes an int length and a non-const pointer (it only reads); feed it in chunks that fit.
uint32_t raw_update(uint32_t state, const void* data, std::size_t len) noexcept {
  auto* p = const_cast<unsigned char*>(static_cast<const unsigned char*>(data));
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  while (len > 0) {
    std::size_t n = len < kChunk ? len : kChunk;
    state = crc32_iscsi(p, static_cast<int>(n), state);
    p += n;
    len -= n;
  }
  return state;
}
}  // namespace

uint32_t crc32c(const void* data, std::size_t len) noexcept { return ~raw_update(0xFFFFFFFFu, data, len); }

uint32_t crc32c_extend(uint32_t crc, const void* data, std::size_t len) noexcept {
  return ~raw_update(~crc, data, len);
}

void Crc32c::update(const void* data, std::size_t len) noexcept { state_ = raw_update(state_, data, len); }

}  // namespace rdmablk::protocol

// CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the NVMe/TCP header and data digest
// (NVMe/TCP Transport Specification 1.0, 3.6.2.2 "Digests"; the same CRC as iSCSI, RFC 3720 B.4).
//
// The standard CRC32C starts from 0xFFFFFFFF and XORs the result with 0xFFFFFFFF. ISA-L's crc32_iscsi()
// does neither: it takes and returns the raw register, so crc32c(x) == ~crc32_iscsi(x, len, ~0u) (checked
// against the RFC 3720 vectors in tests/protocol/test_crc32c.cpp). This header hides that detail: every
// value in and out of it is a finished, standard CRC32C.
//
// On the wire NVMe/TCP stores a digest as a little-endian 32-bit word (the kernel's crc32c shash and SPDK's
// MAKE_DIGEST_WORD both do); see tcp_pdu.h store_digest()/load_digest().
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace rdmablk::protocol {

// CRC32C of one buffer. crc32c of nothing is 0.
uint32_t crc32c(const void* data, std::size_t len) noexcept;
inline uint32_t crc32c(std::span<const uint8_t> data) noexcept { return crc32c(data.data(), data.size()); }

// Continue a finished CRC over more bytes: crc32c_extend(crc32c(a), b) == crc32c(a || b).
uint32_t crc32c_extend(uint32_t crc, const void* data, std::size_t len) noexcept;

// Incremental CRC32C for data that arrives in pieces (a data digest over scattered buffers, or over a PDU
// received in several socket reads). update() in any split gives the same value() as one crc32c() call.
class Crc32c {
 public:
  constexpr Crc32c() noexcept = default;
  void update(const void* data, std::size_t len) noexcept;
  void update(std::span<const uint8_t> data) noexcept { update(data.data(), data.size()); }
  // The finished CRC of everything so far; update() may continue afterwards.
  constexpr uint32_t value() const noexcept { return ~state_; }
  constexpr void reset() noexcept { state_ = kInit; }

 private:
  static constexpr uint32_t kInit = 0xFFFFFFFFu;
  uint32_t state_ = kInit;  // raw register (pre-inverted), what crc32_iscsi() consumes and returns
};

}  // namespace rdmablk::protocol

// The input format of the `controller` harness, shared with make_seeds (which records real answers).
//
//   [0]   options: bit 0 discovery controller (else an I/O controller), bit 1 connect an I/O queue,
//         bit 2 the transport limits transfers to 128 KiB (else no limit), bits 4-7 I/O queues asked for
//   then one answer per command the initiator sends, in order:
//   [dw0 le32] [dw1 le32] [status le16: the CQE's status half-word, phase bit included]
//   and for a command that reads data: [n le16] [n bytes]: the start of the data (the rest is zeroes).
// When the input runs out the connection is lost: the command in flight fails with a transport error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace rdmablk::fuzz {

struct ControllerInputOptions {
  static constexpr uint8_t kDiscovery = 0x01;
  static constexpr uint8_t kIoQueue = 0x02;
  static constexpr uint8_t kTransferLimit = 0x04;
};

inline void put_answer(std::vector<uint8_t>& out, uint32_t dw0, uint32_t dw1, uint16_t status,
                       std::span<const uint8_t> data, bool reads_data) {
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(dw0, 4);
  put(dw1, 4);
  put(status, 2);
  if (!reads_data) return;
  std::size_t n = data.size();
  while (n > 0 && data[n - 1] == 0) --n;  // trailing zeroes are implied
  if (n > 0xFFFF) n = 0xFFFF;
  put(n, 2);
  out.insert(out.end(), data.begin(), data.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace rdmablk::fuzz

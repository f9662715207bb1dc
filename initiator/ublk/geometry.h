// What the ublk block device looks like, derived from what the remote controller reported: size and
// logical block size from Identify Namespace, the largest I/O from MDTS and the transport, flush only
// when the controller has a volatile write cache (VWC), discard and write zeroes only when ONCS says the
// controller supports Dataset Management / Write Zeroes, read-only when the namespace is write protected.
// And the reverse mapping of NVMe statuses to the errno the block layer understands.
//
// Pure functions: unit tested without a kernel.
#pragma once

#include <cstdint>

#include "initiator/host/controller.h"
#include "initiator/ublk/uapi.h"
#include "protocol/status.h"

namespace rdmablk::initiator::ublk {

struct Geometry {
  uint64_t size_bytes = 0;
  uint32_t block_size = 512;
  uint32_t max_io_bytes = 0;      // one request's data: <= MDTS, the transport's limit and kMaxIoBytes
  bool volatile_cache = false;    // pass flushes (and FUA) through
  bool discard = false;           // DSM deallocate
  bool write_zeroes = false;
  bool read_only = false;
};

// The per-tag buffer size, and so the largest request, when the controller sets no lower limit.
// (512 KiB, ublksrv's default: big enough for streaming, small enough for depth x queues of buffers.)
inline constexpr uint32_t kMaxIoBytes = 512 * 1024;

// max_transfer_bytes: min(MDTS, the transport's limit), 0 = none (Controller::max_transfer_bytes()).
Result<Geometry> geometry_for(const protocol::IdentifyController& ctrl, const NamespaceInfo& ns,
                              uint32_t max_transfer_bytes);

// SET_PARAMS content for `g` (basic + discard parameters).
ublk_params params_for(const Geometry& g);

// A failed NVMe completion as a negative errno for the ublk COMMIT (the block layer turns -ENOSPC into
// BLK_STS_NOSPC, -EOPNOTSUPP into BLK_STS_NOTSUPP, ..., the rest into an I/O error).
int errno_for_status(protocol::Status s) noexcept;

}  // namespace rdmablk::initiator::ublk

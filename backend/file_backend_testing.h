// Test seams of the file backend: counters that show which path a request took, and fault injection
// that rewrites CQE results to exercise the short-transfer and -EAGAIN resubmission paths. Not for
// production code; the data path pays one predictable branch for the injection.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace rdmablk::backend::testing {

struct FileQueueCounters {
  uint64_t dsync_writes = 0;        // writes submitted with RWF_DSYNC (FUA)
  uint64_t short_resubmits = 0;     // short transfers resubmitted for the rest
  uint64_t eagain_resubmits = 0;    // -EAGAIN / -EINTR results resubmitted
  uint64_t zero_fallbacks = 0;      // write zeroes / deallocate that fell back to another method
  unsigned ring_flags = 0;          // IORING_SETUP_* the ring was created with
  bool fixed_file = false;          // the file is registered (IOSQE_FIXED_FILE)
  unsigned registered_buffers = 0;
};

// Every nth read/write CQE: short_every truncates a successful result to about half (a multiple of
// the block size, at least one block, only when the result is larger than one block); eagain_every
// replaces the result with -EAGAIN. 0 = off.
struct FaultInjection {
  unsigned short_every = 0;
  unsigned eagain_every = 0;
};

// False when q is not a file backend queue.
bool file_queue_counters(const Queue& q, FileQueueCounters& out);
bool inject_faults(Queue& q, const FaultInjection& faults);

}  // namespace rdmablk::backend::testing

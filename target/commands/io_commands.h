// What an NVM I/O command's entry in the command table does before the core runs it: the checks that depend
// on the opcode, and the request state they fill (commands/io.cpp). The core's I/O path (TargetCore::handle_io)
// does the rest the same way for every opcode: controller ready, flags, ANA, the namespace access check,
// fetching the host data, the backend requests, completion.
#pragma once

#include <cstdint>

#include "protocol/status.h"
#include "target/core/core_internal.h"

namespace rdmablk::target {

// What an I/O command touches in its namespace, for the access check (check_access in commands/io.cpp).
struct IoAccess {
  bool writes = false;  // it modifies the namespace: Write, Write Zeroes, DSM deallocate
  uint64_t slba = 0;    // its LBA range [slba, slba + nlb); nlb = 0: none (Flush, DSM)
  uint64_t nlb = 0;
  // Host data received for that range, which must be exactly nlb blocks; 0 = not checked (before the data
  // moves, check_data() checks the SGL length against the same namespace).
  uint64_t data_bytes = 0;
  const uint8_t* dsm_ranges = nullptr;  // DSM deallocate, once received: dsm_range_count DsmRange entries
  uint32_t dsm_range_count = 0;
};

// One command being prepared on an active namespace.
struct IoPrep {
  CoreQueue& q;
  TargetRequest& req;
  RequestState& rs;
  const Namespace& ns;
  const QueueLimits& limits;
  IoAccess& access;  // filled for the access check that follows
};

protocol::Status prepare_read_write(IoPrep& p) noexcept;
protocol::Status prepare_flush(IoPrep& p) noexcept;
protocol::Status prepare_write_zeroes(IoPrep& p) noexcept;
protocol::Status prepare_dataset_management(IoPrep& p) noexcept;

// The backend request number rs.next of a prepared command (ReactorState::submit runs them in order),
// moving rs.next past empty DSM ranges. False when they have all been submitted.
bool next_backend_request(TargetRequest& req, RequestState& rs, backend::Request& b) noexcept;

}  // namespace rdmablk::target

// What an NVM I/O command's entry in the command table does before the core runs it: the checks that depend
// on the opcode, and the request state they fill (commands/io.cpp). The core's I/O path (TargetCore::handle_io)
// does the rest the same way for every opcode: controller ready, flags, ANA, the namespace access check,
// fetching the host data, the backend requests, completion.
#pragma once

#include <cstddef>
#include <cstdint>

#include "protocol/status.h"
#include "target/core/core_internal.h"
#include "target/reservations/reservation_model.h"

namespace rdmablk::target {

// What an I/O command touches in its namespace, for the access check (check_access in commands/io.cpp).
struct IoAccess {
  bool writes = false;  // it modifies the namespace: Write, Write Zeroes, DSM deallocate
  // Its command group in the reservation access table (reservations::io_access): read, write or neither.
  reservations::Access group = reservations::Access::none;
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
protocol::Status prepare_compare(IoPrep& p) noexcept;  // commands/compare_copy.cpp
protocol::Status prepare_copy(IoPrep& p) noexcept;
protocol::Status prepare_reservation(IoPrep& p) noexcept;  // commands/reservations.cpp
protocol::Status prepare_reservation_report(IoPrep& p) noexcept;

// Validates a new I/O command and fills its RequestState (commands/io.cpp): success, or the status to
// complete it with. Fused halves come here too (commands/fused.cpp checks their fuse bits).
protocol::Status prepare_io(CoreQueue& q, TargetRequest& req, const QueueLimits& limits) noexcept;
// Checks a Write or DSM deallocate again once its host data has arrived, and finishes its RequestState.
protocol::Status prepare_with_data(CoreQueue& q, TargetRequest& req) noexcept;
// The access check (namespace active, writable, the host's reservation rights, ranges inside it) and the
// path's ANA state.
protocol::Status check_io_access(const CoreQueue& q, const NsSlot* slot, const IoAccess& a) noexcept;
// The namespace's backend queue on this reactor, recorded in rs.channel: Internal Error when it cannot open.
protocol::Status open_io_channel(CoreQueue& q, RequestState& rs, NsSlot& slot) noexcept;
// A write-class command whose backend requests ended leaves its namespace's RangeLocks.
void end_write(TargetRequest& req) noexcept;
// RangeWaiter::resume of a request's own wait (RequestState::range): TargetCore::range_granted on its reactor.
void resume_request(RangeWaiter& w) noexcept;
// The host's reservation rights on the namespace for `group`, checked again when a command that waited on a
// range lock goes on (a Preempt and Abort may have taken them meanwhile).
protocol::Status check_reservation(const CoreQueue& q, const Namespace& ns, reservations::Access group) noexcept;

// Copy (commands/compare_copy.cpp): the limits Identify Namespace reports (MSRC, MSSRL, MCL).
inline constexpr uint32_t kCopyMaxRanges = 128;
struct CopyLimits {
  uint64_t max_blocks = 0;        // MCL: one copy, in blocks (it is staged in one scratch buffer)
  uint32_t max_range_blocks = 0;  // MSSRL
  uint32_t max_ranges = 0;        // MSRC + 1
};
CopyLimits copy_limits(const Namespace& ns, const QueueLimits& limits) noexcept;
// Scratch buffers of Compare, Copy and fused Compare and Write (RequestState::scratch).
bool allocate_scratch(RequestState& rs, std::size_t bytes) noexcept;
void free_scratch(RequestState& rs) noexcept;
// Where Copy's source range `index` is read to in the scratch buffer.
std::size_t copy_range_offset(const TargetRequest& req, uint32_t index, uint32_t block_size) noexcept;

// The backend request number rs.next of a prepared command (ReactorState::submit runs them in order),
// moving rs.next past empty DSM ranges. False when they have all been submitted.
bool next_backend_request(TargetRequest& req, RequestState& rs, backend::Request& b) noexcept;

}  // namespace rdmablk::target

// Compare (05h) and Copy (19h) (NVM Command Set 1.0, 3.2.1 and 3.3.1): commands that read the namespace
// before they complete or write. Compare reads the blocks into a scratch buffer and compares them with the
// host's data (Compare Failure on a mismatch). Copy reads every source range into a scratch buffer, then
// writes it to the destination in one write: inside the target, never through the host. Their backend
// requests go through the same ReactorState::submit as every other command (io_commands.h:
// next_backend_request), one phase after the other (RequestState::phase); io_request_done moves them on.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "protocol/reservation.h"
#include "target/commands/command_table.h"
#include "target/commands/io_commands.h"

namespace rdmablk::target {

namespace {

using transport::DataDirection;

// Scratch buffers are aligned for O_DIRECT on any device (4 KiB), and so is each Copy range in them.
constexpr std::size_t kScratchAlign = 4096;

std::size_t round_up(std::size_t n, std::size_t a) noexcept { return (n + a - 1) / a * a; }

}  // namespace

CopyLimits copy_limits(const Namespace& ns, const QueueLimits& limits) noexcept {
  CopyLimits c;
  // One scratch buffer holds the whole copy: at most MDTS, like any other transfer.
  c.max_blocks = std::max<uint64_t>(1, limits.max_io_size / ns.geometry.block_size);
  c.max_range_blocks = static_cast<uint32_t>(std::min<uint64_t>(c.max_blocks, 65536));
  c.max_ranges = kCopyMaxRanges;
  return c;
}

bool allocate_scratch(RequestState& rs, std::size_t bytes) noexcept {
  rs.scratch = static_cast<uint8_t*>(
      std::aligned_alloc(kScratchAlign, round_up(std::max<std::size_t>(bytes, 1), kScratchAlign)));
  return rs.scratch != nullptr;
}

void free_scratch(RequestState& rs) noexcept {
  std::free(rs.scratch);
  rs.scratch = nullptr;
}

// Where Copy's source range `index` goes in the scratch buffer: after the ones before it, each at an aligned
// offset (an O_DIRECT read needs an aligned buffer; the write after them needs them packed: copy_pack).
std::size_t copy_range_offset(const TargetRequest& req, uint32_t index, uint32_t block_size) noexcept {
  std::size_t off = 0;
  for (uint32_t i = 0; i < index; ++i) {
    const auto r =
        protocol::load<protocol::CopySourceRange>(req.data + std::size_t{i} * sizeof(protocol::CopySourceRange));
    off += round_up(std::size_t{r.block_count()} * block_size, kScratchAlign);
  }
  return off;
}

// Compare: like a Write (the host's data comes to the target) that only reads the namespace.
Status prepare_compare(IoPrep& p) noexcept {
  const auto cmd = protocol::as<protocol::ReadWriteCommand>(p.req.sqe);
  const uint64_t bytes = uint64_t{cmd.block_count()} * p.ns.geometry.block_size;
  if (bytes > p.limits.max_io_size) return st::invalid_field;  // above MDTS
  if (Status s = check_data(p.req, DataDirection::host_to_controller, static_cast<uint32_t>(bytes)); !s.ok()) return s;
  p.access.slba = cmd.start_lba();
  p.access.nlb = cmd.block_count();
  p.rs.stage = Stage::compare;
  p.rs.slba = cmd.start_lba();
  p.rs.blocks = cmd.block_count();
  return st::success;
}

// Copy: the source range list comes as the command's data; the ranges are checked once it is here.
Status prepare_copy(IoPrep& p) noexcept {
  const auto cmd = protocol::as<protocol::CopyCommand>(p.req.sqe);
  if (cmd.descriptor_format() != 0) return st::invalid_field;  // only format 0 (OCFS bit 0)
  if (cmd.prinfor() != 0 || cmd.prinfow() != 0) return st::invalid_field;  // no protection information
  if (cmd.range_count() > copy_limits(p.ns, p.limits).max_ranges) return st::command_size_limit_exceeded;
  if (p.req.data_length < cmd.range_count() * sizeof(protocol::CopySourceRange)) return st::data_sgl_length_invalid;
  p.access.writes = true;
  p.rs.stage = Stage::copy;
  return st::success;
}

// The source ranges of a Copy whose list arrived: each inside the namespace and within the limits. Fills the
// destination range (slba, blocks) for the access check and the write.
Status check_copy_ranges(const TargetRequest& req, RequestState& rs, const Namespace& ns, const QueueLimits& limits,
                         IoAccess& access) noexcept {
  const auto cmd = protocol::as<protocol::CopyCommand>(req.sqe);
  const CopyLimits lim = copy_limits(ns, limits);
  const uint64_t nsze = ns.geometry.num_blocks;
  uint64_t total = 0;
  for (uint32_t i = 0; i < cmd.range_count(); ++i) {
    const auto r =
        protocol::load<protocol::CopySourceRange>(req.data + std::size_t{i} * sizeof(protocol::CopySourceRange));
    if (r.block_count() > lim.max_range_blocks) return st::command_size_limit_exceeded;  // MSSRL
    if (r.slba.get() >= nsze || r.block_count() > nsze - r.slba.get()) return st::lba_out_of_range;
    total += r.block_count();
  }
  if (total > lim.max_blocks) return st::command_size_limit_exceeded;  // MCL
  access.writes = true;
  access.group = reservations::Access::write;  // the Copy group: the Write group's rights
  access.slba = cmd.sdlba.get();
  access.nlb = total;
  rs.slba = cmd.sdlba.get();
  rs.blocks = static_cast<uint32_t>(total);
  rs.fua = cmd.fua();
  return st::success;
}

// Copy's ranges, read at aligned offsets, packed together for the write (memmove: they only move down).
void copy_pack(TargetRequest& req, RequestState& rs, uint32_t block_size) noexcept {
  const auto cmd = protocol::as<protocol::CopyCommand>(req.sqe);
  std::size_t packed = 0, at = 0;
  for (uint32_t i = 0; i < cmd.range_count(); ++i) {
    const auto r =
        protocol::load<protocol::CopySourceRange>(req.data + std::size_t{i} * sizeof(protocol::CopySourceRange));
    const std::size_t bytes = std::size_t{r.block_count()} * block_size;
    if (packed != at) std::memmove(rs.scratch + packed, rs.scratch + at, bytes);
    packed += bytes;
    at += round_up(bytes, kScratchAlign);
  }
}

// ---------------------------------------------------------------------------------------------------------
// The core's side: data arrived, phases done
// ---------------------------------------------------------------------------------------------------------

namespace {

// Once the data is here: the access check against the namespace as it is now, its channel, a scratch buffer.
Status ready_to_read(CoreQueue& q, RequestState& rs, NsSlot* slot, const IoAccess& access,
                     std::size_t scratch_bytes) noexcept {
  if (Status s = check_io_access(q, slot, access); !s.ok()) return s;
  if (Status s = open_io_channel(q, rs, *slot); !s.ok()) return s;
  return allocate_scratch(rs, scratch_bytes) ? st::success : st::internal_error;
}

}  // namespace

void TargetCore::compare_data_ready(CoreQueue& q, TargetRequest& req) noexcept {
  RequestState& rs = request_state(req);
  IoAccess access;
  access.group = reservations::Access::read;
  access.slba = rs.slba;
  access.nlb = rs.blocks;
  access.data_bytes = req.data_length;
  if (Status s = ready_to_read(q, rs, find_slot(q, req.sqe.hdr.nsid.get()), access, req.data_length); !s.ok()) {
    finish(req, s);
    return;
  }
  rs.phase = Phase::compare_read;
  rs.count = 1;
  q.rs->submit(q, req);
}

void TargetCore::copy_data_ready(CoreQueue& q, TargetRequest& req) noexcept {
  RequestState& rs = request_state(req);
  NsSlot* const slot = find_slot(q, req.sqe.hdr.nsid.get());
  if (slot == nullptr) {
    finish(req, st::invalid_namespace);
    return;
  }
  IoAccess access;
  if (Status s = check_copy_ranges(req, rs, *slot->ns, limits_, access); !s.ok()) {
    finish(req, s);
    return;
  }
  const uint32_t ranges = protocol::as<protocol::CopyCommand>(req.sqe).range_count();
  const std::size_t bytes = copy_range_offset(req, ranges, slot->ns->geometry.block_size);
  if (Status s = ready_to_read(q, rs, slot, access, bytes); !s.ok()) {
    finish(req, s);
    return;
  }
  // With the volatile write cache turned off by the host, the copy's write must be durable (as a Write).
  if (slot->ns->volatile_cache() && !q.ctrl->write_cache.load(std::memory_order_relaxed)) rs.fua = true;
  rs.phase = Phase::copy_read;
  rs.count = static_cast<uint16_t>(ranges);
  q.rs->submit(q, req);
}

// A Compare's or Copy's backend requests of one phase ended (io_request_done): the next phase, or the end.
void TargetCore::io_phase_done(CoreQueue& q, TargetRequest& req) noexcept {
  RequestState& rs = request_state(req);
  const Status failed = rs.status_field != 0 ? Status::from_field(rs.status_field) : st::success;
  switch (rs.phase) {
    case Phase::compare_read: {
      const bool same = failed.ok() && std::memcmp(rs.scratch, req.data, req.data_length) == 0;
      free_scratch(rs);
      finish(req, !failed.ok() ? failed : same ? st::success : st::compare_failure);
      return;
    }
    case Phase::copy_read:
      if (!failed.ok() || q.closed) break;
      copy_pack(req, rs, rs.channel->ns->geometry.block_size);
      rs.phase = Phase::copy_write;
      rs.count = 1;
      rs.next = 0;
      submit_io(q, req);  // the destination is a write like any other: range locks apply
      return;
    case Phase::copy_write: end_write(req); break;
    case Phase::caw_read:
    case Phase::caw_write:
    case Phase::caw_native: fused_phase_done(q, req); return;
    case Phase::single: break;
  }
  free_scratch(rs);
  finish(req, q.closed && failed.ok() ? st::aborted_sq_deletion : failed);
}

}  // namespace rdmablk::target

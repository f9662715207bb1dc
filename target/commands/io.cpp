// NVM I/O commands (NVM Command Set 1.0, 3): Read, Write, Flush, Write Zeroes, Dataset Management, and the
// per-reactor backend queues they run on. No locks here: an I/O queue reaches its namespaces through its
// reactor's SubsystemView and the backend queues through NsChannels, both owned by the reactor thread.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "protocol/ana.h"
#include "protocol/reservation.h"
#include "target/commands/command_table.h"
#include "target/commands/io_commands.h"

namespace rdmablk::target {

namespace {

using protocol::IoOpcode;
using transport::DataDirection;

// LBA range check without computing slba + nlb (overflow safe).
constexpr bool range_ok(uint64_t slba, uint64_t nlb, uint64_t nsze) noexcept {
  return slba < nsze && nlb <= nsze - slba;
}

// The access check of every I/O command, when it arrives and again once its host data is here (a reload may
// have removed or replaced the namespace while the data moved, a Preempt and Abort taken the host's rights):
// the namespace is active (Invalid Namespace), a command that writes is not on a write-protected namespace
// (Namespace Write Protected), the host's reservation rights allow it (Reservation Conflict), its LBA range,
// the data received for it, and each non-empty DSM range fit the namespace (LBA Out of Range; the data no
// longer fits when the namespace was replaced by one with another block size).
Status check_access(const CoreQueue& q, const NsSlot* slot, const IoAccess& a) noexcept {
  if (slot == nullptr) return st::invalid_namespace;
  const Namespace& ns = *slot->ns;
  if (a.writes && ns.read_only) return st::namespace_write_protected;
  if (Status s = check_reservation(q, ns, a.group); !s.ok()) return s;
  const uint64_t nsze = ns.geometry.num_blocks;
  if (a.nlb != 0 && !range_ok(a.slba, a.nlb, nsze)) return st::lba_out_of_range;
  if (a.data_bytes != 0 && a.data_bytes != a.nlb * ns.geometry.block_size) return st::lba_out_of_range;
  for (uint32_t i = 0; i < a.dsm_range_count; ++i) {
    const auto r = protocol::load<protocol::DsmRange>(a.dsm_ranges + std::size_t{i} * sizeof(protocol::DsmRange));
    if (r.nlb.get() != 0 && !range_ok(r.slba.get(), r.nlb.get(), nsze)) return st::lba_out_of_range;
  }
  return st::success;
}

// The namespace's backend queue on this reactor, recorded in the request: Internal Error when it cannot be
// opened.
Status open_channel(CoreQueue& q, RequestState& rs, NsSlot& slot) noexcept {
  rs.channel = q.rs->channel(slot);
  return rs.channel != nullptr ? st::success : st::internal_error;
}

// The path's ANA state for the namespace (nvmet_check_ana_state): I/O through a listener where its group is
// inaccessible, lost or in transition fails with a path-related status, without DNR, so the host retries on
// another path.
Status check_ana(const CoreQueue& q, const Namespace& ns) noexcept {
  return protocol::ana_io_status(q.ana_port->get(ns.ana_group.load(std::memory_order_relaxed)));
}

}  // namespace

Status check_reservation(const CoreQueue& q, const Namespace& ns, reservations::Access group) noexcept {
  return ns.reservations->check(q.ctrl->hostid, group);
}

Status check_io_access(const CoreQueue& q, const NsSlot* slot, const IoAccess& a) noexcept {
  if (Status s = check_access(q, slot, a); !s.ok()) return s;
  return check_ana(q, *slot->ns);
}

Status open_io_channel(CoreQueue& q, RequestState& rs, NsSlot& slot) noexcept { return open_channel(q, rs, slot); }

// The opcode's own checks (the command table's I/O entries; see io_commands.h).
Status prepare_read_write(IoPrep& p) noexcept {
  const auto cmd = protocol::as<protocol::ReadWriteCommand>(p.req.sqe);
  const uint64_t bytes = uint64_t{cmd.block_count()} * p.ns.geometry.block_size;
  if (bytes > p.limits.max_io_size) return st::invalid_field;  // above MDTS
  const bool write = static_cast<IoOpcode>(p.req.sqe.hdr.opcode) == IoOpcode::write;
  if (Status s = check_data(p.req, write ? DataDirection::host_to_controller : DataDirection::controller_to_host,
                            static_cast<uint32_t>(bytes));
      !s.ok())
    return s;
  p.access.writes = write;
  p.access.slba = cmd.start_lba();
  p.access.nlb = cmd.block_count();
  p.rs.op = write ? backend::Op::write : backend::Op::read;
  p.rs.stage = write ? Stage::write : Stage::none;
  p.rs.slba = cmd.start_lba();
  p.rs.blocks = cmd.block_count();
  p.rs.count = 1;
  return st::success;
}

Status prepare_flush(IoPrep& p) noexcept {
  p.rs.op = backend::Op::flush;
  p.rs.count = 1;
  return st::success;
}

Status prepare_write_zeroes(IoPrep& p) noexcept {
  const auto cmd = protocol::as<protocol::WriteZeroesCommand>(p.req.sqe);
  const backend::Geometry& geo = p.ns.geometry;
  p.access.writes = true;
  p.access.slba = cmd.start_lba();
  p.access.nlb = cmd.block_count();
  // DEAC: the host allows deallocation, which zeroes only where deallocated blocks read as zeroes (DLFEAT).
  p.rs.op = cmd.deallocate() && geo.caps.deallocate && geo.caps.deallocated_reads_zeroes ? backend::Op::deallocate
                                                                                          : backend::Op::write_zeroes;
  p.rs.slba = cmd.start_lba();
  p.rs.blocks = cmd.block_count();
  p.rs.fua = cmd.fua();
  p.rs.count = 1;
  return st::success;
}

Status prepare_dataset_management(IoPrep& p) noexcept {
  // Only the deallocate attribute does something; IDR/IDW hints alone complete at once (count 0).
  if (protocol::as<protocol::DsmCommand>(p.req.sqe).deallocate()) {
    p.access.writes = true;
    p.rs.stage = Stage::dsm;
  }
  return st::success;
}

// Validates a new I/O command and fills its RequestState: success, or the status to complete it with. The
// order of the checks decides the status of a command with several faults: controller ready, command flags,
// opcode (the command table), namespace, the opcode's own checks (its entry's prepare: the transfer of Read
// and Write, MDTS, data SGL), the access (check_access), the range list transfer of a DSM deallocate.
Status prepare_io(CoreQueue& q, TargetRequest& req, const QueueLimits& limits) noexcept {
  Controller& ctrl = *q.ctrl;
  const auto& h = req.sqe.hdr;
  if (!ctrl.ready.load(std::memory_order_relaxed)) return st::command_sequence_error;
  // (Fused halves get here too: handle_io sorted them out, commands/fused.cpp.)
  if (h.psdt() != protocol::Psdt::sgl_mptr_contiguous) return st::invalid_field;
  ctrl.touch_if_traffic_based();
  const CommandEntry* const cmd = find_command(CommandSet::io, h.opcode);
  if (cmd == nullptr) return st::invalid_opcode;
  NsSlot* const slot = find_slot(q, h.nsid.get());
  RequestState& rs = request_state(req);
  IoAccess access;
  access.group = reservations::io_access(h.opcode);
  if (slot != nullptr) {  // (a missing namespace is check_access's to report)
    rs.ns_stats = slot->stats;
    if (Status s = check_ana(q, *slot->ns); !s.ok()) return s;  // before the command's own checks, as nvmet
    IoPrep prep{q, req, rs, *slot->ns, limits, access};
    if (Status s = cmd->prepare(prep); !s.ok()) return s;
  }
  if (Status s = check_access(q, slot, access); !s.ok()) return s;
  if (rs.stage == Stage::dsm) {
    // The range list comes next (io_data_ready checks the ranges), in a transfer the transport planned and at
    // least as long as the ranges (nvmet: the transfer may be longer, not shorter).
    if (req.data_length < protocol::as<protocol::DsmCommand>(req.sqe).data_length()) return st::data_sgl_length_invalid;
  }
  if (rs.stage == Stage::none && rs.count != 0) return open_channel(q, rs, *slot);
  return st::success;
}

// Checks a Write or DSM deallocate again once its host data has arrived, against the namespace as it is now,
// and finishes its RequestState: success, or the status to complete it with.
Status prepare_with_data(CoreQueue& q, TargetRequest& req) noexcept {
  RequestState& rs = request_state(req);
  NsSlot* const slot = find_slot(q, req.sqe.hdr.nsid.get());
  const bool write = rs.stage == Stage::write;
  const uint32_t ranges = write ? 0 : protocol::as<protocol::DsmCommand>(req.sqe).range_count();
  IoAccess access;
  access.writes = true;
  access.group = reservations::Access::write;
  if (write) {
    access.slba = rs.slba;
    access.nlb = rs.blocks;
    access.data_bytes = req.data_length;
  } else {
    access.dsm_ranges = req.data;  // handle_io checked that they all arrived
    access.dsm_range_count = ranges;
  }
  if (Status s = check_access(q, slot, access); !s.ok()) return s;
  const Namespace& ns = *slot->ns;
  if (Status s = check_ana(q, ns); !s.ok()) return s;  // the state may have changed while the data moved
  if (write) {
    // With the volatile write cache turned off by the host, every write must be durable.
    rs.fua = protocol::as<protocol::ReadWriteCommand>(req.sqe).fua() ||
             (ns.volatile_cache() && !q.ctrl->write_cache.load(std::memory_order_relaxed));
  } else {
    // One deallocate per range; none where the backend cannot deallocate (deallocation is advisory).
    rs.count = ns.geometry.caps.deallocate ? static_cast<uint16_t>(ranges) : 0;
  }
  return rs.count != 0 ? open_channel(q, rs, *slot) : st::success;
}

bool next_backend_request(TargetRequest& req, RequestState& rs, backend::Request& b) noexcept {
  if (rs.stage == Stage::dsm) {
    for (; rs.next < rs.count; ++rs.next) {
      const auto r = protocol::load<protocol::DsmRange>(req.data + std::size_t{rs.next} * sizeof(protocol::DsmRange));
      if (r.nlb.get() == 0) continue;
      b = backend::Request{};
      b.op = backend::Op::deallocate;
      b.slba = r.slba.get();
      b.nlb = r.nlb.get();
      return true;
    }
    return false;
  }
  if (rs.next >= rs.count) return false;
  b = backend::Request{};
  b.op = rs.op;
  b.slba = rs.slba;
  b.nlb = rs.blocks;
  b.fua = rs.fua;
  switch (rs.phase) {
    case Phase::single:
      if (rs.op == backend::Op::read || rs.op == backend::Op::write) {
        b.buf = req.data;
        b.buf_index = rs.channel->fixed_buffers ? req.fixed_buffer_index : -1;
      }
      return true;
    case Phase::compare_read:
    case Phase::caw_read:
      b.op = backend::Op::read;
      b.fua = false;
      b.buf = rs.scratch;
      return true;
    case Phase::caw_write:  // the fused Write's data, under the range lock
      b.op = backend::Op::write;
      b.buf = rs.fused->data;
      b.buf_index = rs.channel->fixed_buffers ? rs.fused->fixed_buffer_index : -1;
      return true;
    case Phase::caw_native:  // one request: the backend compares and writes atomically (rbd)
      b.op = backend::Op::compare_and_write;
      b.buf = rs.fused->data;
      b.cmp_buf = req.data;
      return true;
    case Phase::copy_read: {
      const auto r = protocol::load<protocol::CopySourceRange>(req.data + std::size_t{rs.next} * sizeof(protocol::CopySourceRange));
      b.op = backend::Op::read;
      b.fua = false;
      b.slba = r.slba.get();
      b.nlb = r.block_count();
      b.buf = rs.scratch + copy_range_offset(req, rs.next, rs.channel->ns->geometry.block_size);
      return true;
    }
    case Phase::copy_write:
      b.op = backend::Op::write;
      b.buf = rs.scratch;
      return true;
  }
  return false;
}

namespace {

// What a write-class command keeps out of a locked range: its own, or the whole namespace for a DSM
// deallocate (its ranges are many; locks are rare).
bool takes_range(const RequestState& rs) noexcept {
  if (rs.count == 0 || rs.channel == nullptr) return false;
  if (rs.stage == Stage::dsm) return true;
  return rs.op == backend::Op::write || rs.op == backend::Op::write_zeroes || rs.op == backend::Op::deallocate ||
         rs.phase == Phase::copy_write;
}

}  // namespace

// RangeWaiter::resume: the lock the command waited for let it go; on its own reactor.
void resume_request(RangeWaiter& w) noexcept {
  auto& req = *static_cast<TargetRequest*>(w.context);
  core_queue(req).rs->post_range_granted(req);
}

void end_write(TargetRequest& req) noexcept {
  RequestState& rs = request_state(req);
  if (!rs.range_registered) return;
  rs.range_registered = false;
  rs.channel->ns->range_locks->end_write(rs.range);
}

void TargetCore::submit_io(CoreQueue& q, TargetRequest& req) noexcept {
  const RequestState& rs = request_state(req);
  // An unlimited namespace pays this one check (a relaxed load); Compare, Copy and fused phases pass.
  if (rs.channel != nullptr && rs.channel->qos->active() && rs.phase == Phase::single &&
      (rs.op == backend::Op::read || rs.op == backend::Op::write) && !q.rs->qos_admit(q, req))
    return;  // waits for its budget: qos_release -> submit_admitted
  submit_admitted(q, req);
}

void TargetCore::submit_admitted(CoreQueue& q, TargetRequest& req) noexcept {
  RequestState& rs = request_state(req);
  if (!takes_range(rs)) {
    q.rs->submit(q, req);
    return;
  }
  rs.range = RangeWaiter{};
  if (rs.stage == Stage::dsm) {
    rs.range.nlb = rs.channel->ns->geometry.num_blocks;
  } else {
    rs.range.slba = rs.slba;
    rs.range.nlb = rs.blocks;
  }
  rs.range.context = &req;
  rs.range.resume = &resume_request;
  rs.range_registered = true;
  if (rs.channel->ns->range_locks->begin_write(rs.range)) {
    q.rs->submit(q, req);
    return;
  }
  ++q.parked;  // until range_granted
}

void TargetCore::range_granted(TargetRequest& req) noexcept {
  CoreQueue& q = core_queue(req);
  RequestState& rs = request_state(req);
  --q.parked;
  if (rs.phase == Phase::caw_read) {
    fused_lock_granted(q, req);
    return;
  }
  if (rs.stage == Stage::reservation) {
    reservation_lock_granted(q, req);  // a Preempt and Abort waited out the writes before it
    return;
  }
  // The host is gone: write nothing more of it. Its rights were preempted while it waited: neither.
  const Status s = q.closed ? st::aborted_sq_deletion
                            : check_reservation(q, *rs.channel->ns, reservations::io_access(rs.opcode));
  if (!s.ok()) {
    end_write(req);
    free_scratch(rs);
    finish(req, s);
    release_queue_if_drained(q);
    return;
  }
  q.rs->submit(q, req);
}


// ---------------------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------------------

void TargetCore::handle_io(CoreQueue& q, TargetRequest& req) noexcept {
  if (q.fused_first != nullptr || req.sqe.hdr.fuse() != protocol::FusedOperation::normal) {
    handle_fused(q, req);  // commands/fused.cpp; it calls start_io for a command that is not fused
    return;
  }
  start_io(q, req);
}

void TargetCore::start_io(CoreQueue& q, TargetRequest& req) noexcept {
  if (const Status s = prepare_io(q, req, limits_); !s.ok()) {
    finish(req, s);
    return;
  }
  if (request_state(req).stage == Stage::reservation_report) {
    reservation_report(q, req);  // commands/reservations.cpp
  } else if (request_state(req).stage == Stage::none) {
    submit_io(q, req);  // Read, Flush, Write Zeroes, DSM hints
  } else if (req.data_in_capsule) {
    io_data_ready(q, req, st::success);  // the data came with the command
  } else {
    req.queue->fetch_data(req);  // then on_data_ready -> io_data_ready
  }
}

void TargetCore::io_data_ready(CoreQueue& q, TargetRequest& req, Status /*status*/) noexcept {
  switch (request_state(req).stage) {
    case Stage::compare:
      compare_data_ready(q, req);
      return;
    case Stage::copy:
      copy_data_ready(q, req);
      return;
    case Stage::reservation:
      reservation_data_ready(q, req);  // commands/reservations.cpp
      return;
    default:
      break;
  }
  if (const Status s = prepare_with_data(q, req); !s.ok()) {
    finish(req, s);
    return;
  }
  submit_io(q, req);  // Write, DSM deallocate
}

// ---------------------------------------------------------------------------------------------------------
// Completion
// ---------------------------------------------------------------------------------------------------------

void TargetCore::backend_completed(TargetRequest& req, Status status) noexcept {
  CoreQueue& q = core_queue(req);
  RequestState& rs = request_state(req);
  --q.backend_in_flight;
  if (!status.ok() && rs.status_field == 0) rs.status_field = status.field();
  if (--rs.pending > 0) return;
  io_request_done(q, req);
}

void TargetCore::io_request_done(CoreQueue& q, TargetRequest& req) noexcept {
  RequestState& rs = request_state(req);
  if (rs.phase != Phase::single) {
    io_phase_done(q, req);  // Compare, Copy, fused Compare and Write: the next phase or the end
    release_queue_if_drained(q);
    return;
  }
  end_write(req);
  const Status status = rs.status_field != 0 ? Status::from_field(rs.status_field) : st::success;
  const auto op = static_cast<IoOpcode>(rs.opcode);
  finish(req, status, 0, op == IoOpcode::read);
  release_queue_if_drained(q);
}

}  // namespace rdmablk::target

// Fused Compare and Write (Base 2.0, 3.4.2 "Fused Operations"; FUSES bit 0): a Compare marked first half and
// a Write marked second half, next to each other on one queue, over the same blocks. The pair is atomic
// against every other write to those blocks from any queue, controller or reactor of this target: it holds a
// lock on its range in the namespace's RangeLocks (core/range_lock.h) while it reads, compares and writes.
//
// The first half is held on its queue (CoreQueue::fused_first) until the next command says whether it is
// the second half. Anything else next: the first half completes with Missing Fused Command and the other
// command runs on its own; a second half without a first gets Missing Fused Command too. A half that fails
// its own checks (or its data transfer) completes with that status and the other with Failed Fused Command
// (the second half with it whenever the first failed, whatever its own faults).
// Halves that do not agree (namespace, LBA range) or are not Compare then Write: Invalid Field, both.
// On a miscompare the Compare completes with Compare Failure and the Write with Failed Fused Command, having
// written nothing. The Compare's request drives the pair's backend requests (phases caw_read, caw_write).
// A backend that compares and writes atomically in the store (Capabilities::compare_and_write: rbd, where
// the OSD does it, so the pair is atomic against other targets exporting the image too) gets the pair as
// one request and no range lock (phase caw_native).
#include <spdlog/spdlog.h>

#include <cstring>
#include <utility>

#include "target/commands/command_table.h"
#include "target/commands/io_commands.h"

namespace rdmablk::target {

namespace {

using protocol::FusedOperation;
using protocol::IoOpcode;

Status held_status(const RequestState& rs) noexcept {
  return rs.status_field != 0 ? Status::from_field(rs.status_field) : st::success;
}

bool is(const TargetRequest& req, IoOpcode op) noexcept { return req.sqe.hdr.opcode == static_cast<uint8_t>(op); }

}  // namespace

void TargetCore::handle_fused(CoreQueue& q, TargetRequest& req) noexcept {
  const FusedOperation fuse = req.sqe.hdr.fuse();
  if (TargetRequest* first = std::exchange(q.fused_first, nullptr)) {
    if (fuse == FusedOperation::second) {
      start_fused_pair(q, *first, req);
      return;
    }
    const Status s = held_status(request_state(*first));
    finish(*first, s.ok() ? st::aborted_missing_fused : s);
  }
  switch (fuse) {
    case FusedOperation::normal: start_io(q, req); return;
    case FusedOperation::first: {
      // Checked now (the status is kept), answered when the next command arrives.
      RequestState& rs = request_state(req);
      const Status s = is(req, IoOpcode::compare) ? prepare_io(q, req, limits_) : st::invalid_field;
      if (!s.ok()) rs.status_field = s.field();
      q.fused_first = &req;
      return;
    }
    case FusedOperation::second: finish(req, st::aborted_missing_fused); return;
  }
  finish(req, st::invalid_field);  // FUSE 11b is reserved
}

void TargetCore::start_fused_pair(CoreQueue& q, TargetRequest& first, TargetRequest& second) noexcept {
  RequestState& c = request_state(first);
  RequestState& w = request_state(second);
  Status sc = held_status(c);
  Status sw = is(second, IoOpcode::write) ? prepare_io(q, second, limits_) : st::invalid_field;
  if (sc.ok() && sw.ok()) {
    const auto a = protocol::as<protocol::ReadWriteCommand>(first.sqe);
    const auto b = protocol::as<protocol::ReadWriteCommand>(second.sqe);
    if (first.sqe.hdr.nsid.get() != second.sqe.hdr.nsid.get() || a.start_lba() != b.start_lba() ||
        a.block_count() != b.block_count()) {
      finish(first, st::invalid_field);  // the pair as such is malformed: both say so
      finish(second, st::invalid_field);
      return;
    }
  }
  if (!sc.ok() || !sw.ok()) {
    finish_fused(q, first, second, sc, sw);
    return;
  }
  c.fused = &second;
  w.fused = &first;
  for (TargetRequest* half : {&first, &second}) {
    if (half->data_in_capsule) {
      fused_data_ready(q, *half, st::success);
    } else {
      half->queue->fetch_data(*half);  // then on_data_ready -> fused_data_ready
    }
  }
}

void TargetCore::fused_data_ready(CoreQueue& q, TargetRequest& req, Status status) noexcept {
  RequestState& rs = request_state(req);
  rs.data_here = true;
  if (!status.ok() && rs.status_field == 0) rs.status_field = status.field();
  TargetRequest& other = *rs.fused;
  if (!request_state(other).data_here) return;  // the other half's data is still on its way
  if (is(req, IoOpcode::compare)) {
    start_compare_and_write(q, req, other);
  } else {
    start_compare_and_write(q, other, req);
  }
}

void TargetCore::start_compare_and_write(CoreQueue& q, TargetRequest& cmp, TargetRequest& wr) noexcept {
  RequestState& c = request_state(cmp);
  Status sc = held_status(c);
  Status sw = held_status(request_state(wr));
  NsSlot* const slot = find_slot(q, cmp.sqe.hdr.nsid.get());
  if (sc.ok() && sw.ok()) {
    // Both checked again with their data here: a reload may have changed the namespace meanwhile.
    IoAccess access;
    access.group = reservations::Access::read;  // the Compare's; the Write's is prepare_with_data's
    access.slba = c.slba;
    access.nlb = c.blocks;
    access.data_bytes = cmp.data_length;
    sc = check_io_access(q, slot, access);
    if (sc.ok()) sw = prepare_with_data(q, wr);
    if (sc.ok() && sw.ok()) sc = open_io_channel(q, c, *slot);
  }
  if (!sc.ok() || !sw.ok()) {
    finish_fused(q, cmp, wr, sc, sw);
    return;
  }
  c.count = 1;
  c.next = 0;
  c.fua = request_state(wr).fua;
  if (const uint32_t native = slot->ns->geometry.caps.compare_and_write_blocks; native != 0) {
    // The store compares and writes (no scratch, no lock), atomically for every client of it. A larger
    // pair is refused rather than made atomic only within this target (NACWU says what fits).
    if (c.blocks > native) {
      finish(cmp, st::invalid_field);
      finish(wr, st::aborted_failed_fused);
      c.fused = request_state(wr).fused = nullptr;
      return;
    }
    c.phase = Phase::caw_native;
    q.rs->submit(q, cmp);
    return;
  }
  if (!allocate_scratch(c, cmp.data_length)) {
    finish_fused(q, cmp, wr, st::internal_error, st::success);
    return;
  }
  c.phase = Phase::caw_read;
  c.range = RangeWaiter{};
  c.range.slba = c.slba;
  c.range.nlb = c.blocks;
  c.range.context = &cmp;
  c.range.resume = &resume_request;  // range_granted -> fused_lock_granted
  c.range_registered = true;
  RangeLocks& locks = *c.channel->ns->range_locks;
  if (locks.lock(c.range)) {
    q.rs->submit(q, cmp);
  } else if (c.range.tracked) {
    ++q.parked;  // until range_granted -> fused_lock_granted
  } else {
    c.range_registered = false;
    finish_fused(q, cmp, wr, st::internal_error, st::success);  // no memory to wait
  }
}

void TargetCore::fused_lock_granted(CoreQueue& q, TargetRequest& cmp) noexcept {
  if (q.closed) {
    finish_fused(q, cmp, *request_state(cmp).fused, st::aborted_sq_deletion, st::aborted_sq_deletion);
    release_queue_if_drained(q);
    return;
  }
  // A Preempt and Abort may have taken the host's right to write while the pair waited for its lock.
  RequestState& c = request_state(cmp);
  if (Status s = check_reservation(q, *c.channel->ns, reservations::Access::write); !s.ok()) {
    finish_fused(q, cmp, *c.fused, st::success, s);
    release_queue_if_drained(q);
    return;
  }
  q.rs->submit(q, cmp);
}

void TargetCore::fused_phase_done(CoreQueue& q, TargetRequest& cmp) noexcept {
  RequestState& c = request_state(cmp);
  TargetRequest& wr = *c.fused;
  const Status failed = held_status(c);
  if (c.phase == Phase::caw_native) {
    // One outcome for both: a miscompare is the Compare's, and so is any other failure (which half failed
    // is not known); the Write is then Failed Fused.
    finish_fused(q, cmp, wr, q.closed && failed.ok() ? st::aborted_sq_deletion : failed, st::success);
    return;
  }
  if (c.phase == Phase::caw_write) {
    // The Compare matched; the Write's own outcome is the Write's.
    finish_fused(q, cmp, wr, st::success, q.closed && failed.ok() ? st::aborted_sq_deletion : failed);
    return;
  }
  if (!failed.ok() || q.closed) {
    finish_fused(q, cmp, wr, failed.ok() ? st::aborted_sq_deletion : failed, st::success);
    return;
  }
  if (std::memcmp(c.scratch, cmp.data, cmp.data_length) != 0) {
    finish_fused(q, cmp, wr, st::compare_failure, st::success);
    return;
  }
  c.phase = Phase::caw_write;  // still under the lock: no RangeLocks::begin_write for this one
  c.next = 0;
  c.count = 1;
  q.rs->submit(q, cmp);
}

void TargetCore::finish_fused(CoreQueue& /*q*/, TargetRequest& cmp, TargetRequest& wr, Status sc, Status sw) noexcept {
  RequestState& c = request_state(cmp);
  if (c.range_registered) {
    c.range_registered = false;
    c.channel->ns->range_locks->unlock(c.range);
  }
  free_scratch(c);
  c.fused = nullptr;
  request_state(wr).fused = nullptr;
  // Only a Compare that ran and matched lets a failed Write stand alone (its status is the Write's).
  const bool compared = c.phase == Phase::caw_write;
  // A failed first half aborts the second whatever the second's own faults (Base 2.0, 3.4.2).
  finish(cmp, !sc.ok() ? sc : !sw.ok() && !compared ? st::aborted_failed_fused : sc);
  finish(wr, !sc.ok() ? st::aborted_failed_fused : sw);
}

}  // namespace rdmablk::target

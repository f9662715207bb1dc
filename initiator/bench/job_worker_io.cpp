// The data path of a job: one I/O onto the queue (its buffer filled or restored first), one completion
// off it (verified, counted, logged). Completions run inside IoQueue::poll on the job's thread.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "initiator/bench/job_worker.h"

namespace rdmablk::initiator::bench::detail {

bool JobWorker::submit(const IoUnit& u, bool verify_read) {
  Slot& s = slots_[free_.back()];
  free_.pop_back();
  s.kind = SlotKind::io;
  s.offset = u.offset;
  s.len = u.len;
  s.ddir = u.ddir;
  s.verify_read = verify_read;
  const uint64_t slba = u.offset / lba_size_;
  const auto nlb = static_cast<uint32_t>(u.len / lba_size_);
  std::span<uint8_t> buf(s.buf, u.len);
  protocol::Status st;
  if (u.ddir == kWrite) {
    if (verifier_) {
      verifier_->fill(buf, u.offset, seed_);
    } else {
      // A read may have landed in this buffer since it was filled: zero/pattern contents are put back.
      if (s.read_into && filler_->content() != BufferFiller::Content::random) filler_->restore(buf);
      if (filler_->refill_each_write()) filler_->fill(buf);
    }
  }
  s.read_into = u.ddir == kRead;
  s.submit_ns = now_ns();
  switch (u.ddir) {
    case kRead: st = io_->submit_read(s.cmd, nsid_, slba, nlb, buf); break;
    case kWrite: st = io_->submit_write(s.cmd, nsid_, slba, nlb, buf); break;
    case kTrim: {
      protocol::DsmRange range{};
      range.nlb.set(nlb);
      range.slba.set(slba);
      std::memcpy(s.dsm, &range, sizeof(range));
      st = io_->submit_dsm(s.cmd, nsid_, std::span<uint8_t>(s.dsm, sizeof(s.dsm)));
      break;
    }
  }
  if (!st.ok()) {
    free_.push_back(s.index);
    fail(EIO, fmt::format("{}: could not queue a {} at offset {}: {}", ctrl_->where(), ddir_name(u.ddir), u.offset,
                          describe_status(st)));
    return false;
  }
  return true;
}

void JobWorker::submit_flush() {
  Slot& s = slots_[free_.back()];
  free_.pop_back();
  s.kind = SlotKind::flush;
  s.submit_ns = now_ns();
  protocol::Status st = io_->submit_flush(s.cmd, nsid_);
  if (!st.ok()) {
    free_.push_back(s.index);
    fail(EIO, fmt::format("{}: could not queue a flush: {}", ctrl_->where(), describe_status(st)));
  }
}

void JobWorker::fail(int err, std::string message) noexcept {
  if (failed_) return;
  failed_ = true;
  error_ = err;
  error_message_ = std::move(message);
}

void JobWorker::on_complete(transport::HostCommand& cmd, const protocol::Cqe& cqe) noexcept {
  auto& s = *static_cast<Slot*>(cmd.context);
  s.job->complete(s, cqe);
}

void JobWorker::complete(Slot& s, const protocol::Cqe& cqe) noexcept {
  const uint64_t done = now_ns();
  const uint64_t lat = done - s.submit_ns;
  const protocol::Status st = cqe.get_status();
  free_.push_back(s.index);
  if (!st.ok()) {
    try {
      if (s.kind == SlotKind::flush) fail(EIO, fmt::format("{}: flush failed: {}", ctrl_->where(), describe_status(st)));
      else fail(EIO, fmt::format("{}: {} at offset {} failed: {}", ctrl_->where(), ddir_name(s.ddir), s.offset, describe_status(st)));
    } catch (...) {
      fail(EIO, {});
    }
    return;
  }
  if (s.kind == SlotKind::flush) return;
  if (s.ddir == kWrite && track_writes_) {
    try {
      add_extent(written_, s.offset, s.len);
    } catch (...) {
      fail(ENOMEM, "out of memory tracking written blocks for verify");
      return;
    }
  }
  if (s.ddir == kRead && check_reads_) {
    auto f = verifier_->check(std::span<const uint8_t>(s.buf, s.len), s.offset, s.verify_read ? verify_seed_ : std::nullopt);
    if (f) {
      try {
        fail(EILSEQ, describe(*f, s.offset, s.len));
      } catch (...) {
        fail(EILSEQ, {});
      }
      return;
    }
  }
  progress_.done_bytes += s.len;
  if (s.ddir == kWrite) {
    progress_.write_bytes += s.len;
    ++progress_.write_ios;
  } else if (s.ddir == kRead) {
    progress_.read_bytes += s.len;
    ++progress_.read_ios;
  }
  ++interval_ios_[s.ddir];
  interval_bytes_[s.ddir] += s.len;
  if (window_hist_) window_hist_->record(lat);
  if (!stats_active_) return;
  DirectionStats& d = stats_[s.ddir];
  ++d.ios;
  d.bytes += s.len;
  d.clat.record(lat);
  if (logs_.enabled()) {
    logs_.on_io((done - io_t0_ns_) / 1000000, s.ddir, lat, s.len, s.offset);
  }
}

}  // namespace rdmablk::initiator::bench::detail

// One pass of a job's I/O: keep the queue at its depth (within the iodepth_batch / iodepth_low /
// latency_target rules) while think time, the rate limiter and flow control allow, reap completions,
// send keep-alives, and stop at the pass's budget, its end of units, the runtime or the first error.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "initiator/bench/job_worker.h"

namespace rdmablk::initiator::bench::detail {

using namespace std::chrono_literals;

Result<void> JobWorker::run_pass(const Pass& p) {
  if (!p.main) extent_it_ = p.extents->begin();
  progress_.phase = pass_phase(p);
  const auto pass_start = Clock::now();
  check_ramp(pass_start);
  PassState st;
  window_start_ns_ = now_ns();

  for (;;) {
    const auto now_tp = Clock::now();
    const uint64_t now = ns_since_epoch(now_tp);  // the same instant: an I/O due after the ramp is counted
    tick(now_tp, now);
    bool stop = failed_ || st.exhausted || st.budget_spent(p) || (p.main && time_up());
    // verify_backlog: after N writes, let the queue drain and check what they wrote.
    const bool backlog_due = p.main && track_writes_ && spec_.verify_backlog && st.backlog >= spec_.verify_backlog;
    const uint64_t wait_until = issue(p, st, now, stop, backlog_due);  // earliest due time of a held I/O (0 = none)
    const unsigned now_in_flight = in_flight();
    if (now_in_flight >= depth_limit_ && spec_.iodepth_low && spec_.iodepth_low < depth_limit_) refill_hold_ = true;
    if (now_in_flight == 0) {
      if (backlog_due && !failed_) {
        if (auto r = verify_backlog(st); !r) return r;
        continue;
      }
      if (flush_requested_ && !failed_) continue;
      if (stop || failed_ || st.exhausted) break;
    }
    if (!wait_for_io(now_in_flight, wait_until)) break;
    ctrl_->service();
    if (ctrl_->failed()) {
      fail(EIO, ctrl_->failure());
      // Outstanding I/O completes (with errors) through the queue; don't wait for more.
      break;
    }
  }
  account_pass_time(p, pass_start);
  if (failed_) return make_error(error_message_, error_);
  return {};
}

// The letter of the progress line: V verifying, M mixed, D trimming, W writing, R reading.
char JobWorker::pass_phase(const Pass& p) const noexcept {
  const RwMode mode = spec_.rw;
  return !p.main                                      ? 'V'
         : mode == RwMode::rw || mode == RwMode::randrw ? 'M'
         : does_trims(mode)                             ? 'D'
         : does_writes(mode) && !spec_.verify_only      ? 'W'
                                                        : 'R';
}

// What runs on the clock whatever the pass does: the ramp's end, the timeline, the logs, latency_target.
void JobWorker::tick(Clock::time_point now_tp, uint64_t now) {
  check_ramp(now_tp);
  const uint64_t t_ms = (now - io_t0_ns_) / 1000000;
  close_interval(t_ms, false);
  if (logs_.enabled()) logs_.tick(t_ms);
  latency_window_check(now);
}

// Submits what may go now (a requested flush first); returns when the next held I/O is due (0: none
// held). `stop` turns true once the pass's budget is spent.
uint64_t JobWorker::issue(const Pass& p, PassState& st, uint64_t now, bool& stop, bool backlog_due) {
  uint64_t wait_until = 0;
  const unsigned before = in_flight();
  if (refill_hold_ && before <= spec_.iodepth_low) refill_hold_ = false;
  const unsigned room = depth_limit_ > before ? depth_limit_ - before : 0;
  const unsigned batch = std::max(1u, std::min(spec_.iodepth_batch_submit, depth_limit_));
  const bool may_submit = !refill_hold_ && (room >= batch || (stop && room));
  if (flush_requested_ && !free_.empty() && !failed_) {
    submit_flush();
    flush_requested_ = false;
  }
  while (!stop && !backlog_due && may_submit && !free_.empty() && depth_limit_ > in_flight() && !flush_requested_) {
    if (!ready_to_issue(p, st, now, wait_until)) break;
    const IoUnit u = *st.pending;
    st.pending.reset();
    if (!submit(u, !p.main)) break;
    ++st.issued_ios;
    st.issued_bytes += u.len;
    if (p.main) issued_main(u, st);
    stop = st.budget_spent(p);
  }
  return wait_until;
}

// Takes the pass's next unit unless one is pending, and says whether it may go now: false when it is
// held (think time, rate, flow: `wait_until` says until when) or when the pass has no more (exhausted).
bool JobWorker::ready_to_issue(const Pass& p, PassState& st, uint64_t now, uint64_t& wait_until) {
  if (now < st.think_until) {
    wait_until = st.think_until;
    return false;
  }
  if (!st.pending) {
    IoUnit u;
    if (!next_unit(p, u)) {
      st.exhausted = true;
      return false;
    }
    st.pending = u;
  }
  if (p.main && rate_->enabled()) {
    const uint64_t due = rate_->due_ns(st.pending->ddir);
    if (due && io_t0_ns_ + due > now) {
      wait_until = io_t0_ns_ + due;
      return false;
    }
  }
  if (p.main && flow_ahead()) {
    wait_until = now + std::max<uint64_t>(static_cast<uint64_t>(spec_.flow_sleep.count()), 50000);
    return false;
  }
  return true;
}

// The bookkeeping of a main-pass I/O that went out: rate, flow, verify_backlog, fsync=N, think time.
void JobWorker::issued_main(const IoUnit& u, PassState& st) {
  if (rate_->enabled()) rate_->issued(u.ddir, u.len);
  if (flow_) {
    ++flow_own_;
    flow_->total.fetch_add(1, std::memory_order_relaxed);
  }
  if (u.ddir == kWrite) {
    ++st.backlog;
    if (track_writes_ && spec_.verify_backlog) add_extent(st.backlog_extents, u.offset, u.len);
    if (spec_.fsync && ++st.writes_since_flush >= spec_.fsync) {
      st.writes_since_flush = 0;
      flush_requested_ = true;
    }
  }
  if (spec_.thinktime.count() && ++st.since_think >= std::max(1u, spec_.thinktime_blocks)) {
    st.since_think = 0;
    think(static_cast<uint64_t>(spec_.thinktime.count()), static_cast<uint64_t>(spec_.thinktime_spin.count()),
          st.think_until);
  }
}

// The queue has drained after verify_backlog writes: read them back and check them now.
Result<void> JobWorker::verify_backlog(PassState& st) {
  st.backlog = 0;
  // The backlog's blocks are checked now; they need not be read again at the end.
  for (const auto& [off, len] : st.backlog_extents) written_.erase(off);
  const ExtentMap to_check = std::move(st.backlog_extents);
  st.backlog_extents.clear();
  // Only verify passes walk extent_it_: this main pass does not need it back.
  if (auto r = verify_extents(to_check); !r) return r;
  progress_.phase = 'W';
  return {};
}

// Waits for completions if any are in flight, else until the held I/O is due. False: the I/O queue's
// connection is lost (the job has failed).
bool JobWorker::wait_for_io(unsigned now_in_flight, uint64_t wait_until) {
  if (now_in_flight > 0) {
    unsigned min_c = std::max(1u, std::min(spec_.iodepth_batch_complete_min, now_in_flight));
    auto timeout = 10ms;
    if (wait_until) {
      const uint64_t left = wait_until > now_ns() ? wait_until - now_ns() : 0;
      if (left < 1000000) min_c = 0;  // spin briefly: the held I/O is due within a millisecond
      timeout = std::chrono::milliseconds(std::min<uint64_t>(left / 1000000, 10));
    }
    if (io_->poll(min_c, timeout) < 0) {
      fail(ECONNRESET, fmt::format("{}: I/O queue connection lost", ctrl_->where()));
      return false;
    }
  } else if (wait_until) {
    const uint64_t t = now_ns();
    if (wait_until > t) {
      const uint64_t left = wait_until - t;
      // Sleep rather than spin (another job or the target may need this CPU); a rate limiter's due
      // times are absolute, so oversleeping a little is caught up on the next I/O.
      if (left > 20000) std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(left, 10000000)));
    }
  }
  return true;
}

// Active time: from the pass's start or the ramp's end, whichever came later (a verify_backlog pass
// run inside this one may have been the one to see the ramp end).
void JobWorker::account_pass_time(const Pass& p, Clock::time_point pass_start) {
  const RwMode mode = spec_.rw;
  const auto end_tp = Clock::now();
  const uint64_t elapsed =
      stats_active_ ? static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                end_tp - std::max(pass_start, stats_start_))
                                                .count())
                    : 0;
  if (p.main) {
    if (does_reads(mode) || spec_.verify_only) stats_[kRead].runtime_ns += elapsed;
    if (does_writes(mode) && !spec_.verify_only) stats_[kWrite].runtime_ns += elapsed;
    if (does_trims(mode)) stats_[kTrim].runtime_ns += elapsed;
  } else if (!p.extents->empty()) {
    stats_[kRead].runtime_ns += elapsed;
  }
}

// Latency target: every latency_window, double the depth while the window's percentile latency meets
// the target; after the first miss, bisect between the last depth that met it and the first that missed.
void JobWorker::latency_window_check(uint64_t now) {
  if (!window_hist_ || now - window_start_ns_ < static_cast<uint64_t>(spec_.latency_window.count())) return;
  const uint64_t p = window_hist_->percentile(spec_.latency_percentile);
  const bool met = window_hist_->count() > 0 && p <= static_cast<uint64_t>(spec_.latency_target.count());
  if (window_hist_->count() > 0 && !depth_settled_) {
    if (met) {
      lat_good_ = depth_limit_;
      depth_limit_ = lat_bad_ ? (lat_good_ + lat_bad_) / 2 : std::min(qd_, depth_limit_ * 2);
      if (depth_limit_ == lat_good_) depth_settled_ = true;
    } else {
      lat_bad_ = depth_limit_;
      depth_limit_ = std::max(1u, (lat_good_ + lat_bad_) / 2);
      if (depth_limit_ <= lat_good_) {
        depth_limit_ = std::max(1u, lat_good_);
        depth_settled_ = true;
      }
    }
  }
  window_hist_->reset();
  window_start_ns_ = now;
}

// The flow= rule: this job is ahead of its share of its flow group.
bool JobWorker::flow_ahead() const noexcept {
  if (!flow_ || spec_.flow == 0) return false;
  const uint64_t total = flow_->total.load(std::memory_order_relaxed);
  const uint64_t weight = flow_->total_weight.load(std::memory_order_relaxed);
  if (total == 0 || weight == 0) return false;
  const double mine = static_cast<double>(flow_own_) / static_cast<double>(total);
  const double share = static_cast<double>(std::abs(spec_.flow)) / static_cast<double>(weight);
  return mine > share;
}

// Next unit of a pass. Main passes ask the generator; verify passes walk the extent list.
bool JobWorker::next_unit(const Pass& p, IoUnit& u) {
  if (p.main) {
    u = gen_->next();
    return true;
  }
  if (extent_it_ == p.extents->end()) return false;
  u = IoUnit{kRead, extent_it_->first, extent_it_->second};
  ++extent_it_;
  return true;
}

// Think time: spin `spin` ns of it here, the rest is a hold on issuing (completions still run).
void JobWorker::think(uint64_t total, uint64_t spin, uint64_t& think_until) noexcept {
  const uint64_t start = now_ns();
  spin = std::min(spin, total);
  while (now_ns() - start < spin) {
  }
  think_until = start + total;
}

}  // namespace rdmablk::initiator::bench::detail

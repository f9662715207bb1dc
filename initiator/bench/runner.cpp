#include "initiator/bench/runner.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "initiator/bench/buffers.h"
#include "initiator/bench/log.h"
#include "initiator/bench/verify.h"
#include "initiator/bench/workload.h"

namespace rdmablk::initiator::bench {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

uint64_t ns_since_epoch(Clock::time_point t) noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

uint64_t now_ns() noexcept { return ns_since_epoch(Clock::now()); }

struct Progress {
  std::atomic<uint64_t> read_bytes{0}, write_bytes{0}, read_ios{0}, write_ios{0};
  std::atomic<uint64_t> done_bytes{0}, total_bytes{0};
  std::atomic<char> phase{'P'};  // P setup/waiting, R/W/M/D running, V verifying, _ done
  std::atomic<bool> finished{false};
  uint64_t planned_ns = 0;       // time_based: ramp + runtime
};

// fio's flow control: the jobs sharing a flow_id keep their I/O counts in the ratio of their weights.
// A job that ends takes its weight and its I/O out (fio's flow_exit_job), so that it holds nobody back.
struct FlowShared {
  std::atomic<uint64_t> total{0};
  std::atomic<uint64_t> total_weight{0};
};

// What the jobs of one run share: who has finished (wait_for) and the flow counters.
struct RunShared {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<bool> finished;
  std::map<unsigned, std::unique_ptr<FlowShared>> flows;
};

// Extents a job wrote and must read back: offset -> length; a later write replaces the extents it
// overlaps (their old contents are gone, so they are not checked).
using ExtentMap = std::map<uint64_t, uint64_t>;

void add_extent(ExtentMap& m, uint64_t off, uint64_t len) {
  auto it = m.lower_bound(off);
  if (it != m.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second > off) it = prev;
  }
  while (it != m.end() && it->first < off + len) it = m.erase(it);
  m.emplace(off, len);
}

class Job {
 public:
  Job(const JobSpec& spec, unsigned job_number, const ConnectionDefaults& conn, Progress& progress, FlowShared* flow)
      : spec_(spec), job_number_(job_number), conn_(conn), progress_(progress), flow_(flow), logs_(spec, job_number) {}

  JobResult run() {
    JobResult res;
    res.spec = spec_;
    res.job_start_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    rusage ru0{}, ru1{};
    getrusage(RUSAGE_THREAD, &ru0);
    job_t0_ = Clock::now();
    auto r = execute();
    if (flow_) {
      flow_->total.fetch_sub(flow_own_);
      flow_->total_weight.fetch_sub(static_cast<uint64_t>(std::abs(spec_.flow)));
    }
    if (!r) {
      res.error = r.error().errno_value ? r.error().errno_value : EIO;
      res.error_message = r.error().message;
    }
    io_.reset();
    if (ctrl_) (void)ctrl_->shutdown(1000ms);
    auto elapsed = Clock::now() - job_t0_;
    getrusage(RUSAGE_THREAD, &ru1);
    res.job_runtime_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count());
    auto usec = [](const timeval& a, const timeval& b) {
      return static_cast<double>(b.tv_sec - a.tv_sec) * 1e6 + static_cast<double>(b.tv_usec - a.tv_usec);
    };
    double run_us = static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count());
    if (run_us > 0) {
      res.usr_cpu = 100.0 * usec(ru0.ru_utime, ru1.ru_utime) / run_us;
      res.sys_cpu = 100.0 * usec(ru0.ru_stime, ru1.ru_stime) / run_us;
    }
    res.ctx = static_cast<uint64_t>((ru1.ru_nvcsw - ru0.ru_nvcsw) + (ru1.ru_nivcsw - ru0.ru_nivcsw));
    res.majf = static_cast<uint64_t>(ru1.ru_majflt - ru0.ru_majflt);
    res.minf = static_cast<uint64_t>(ru1.ru_minflt - ru0.ru_minflt);
    // Logs: the last partial interval, then the files.
    const uint64_t t_end = io_t0_ns_ ? (now_ns() - io_t0_ns_) / 1000000 : 0;
    close_interval(t_end, true);
    if (logs_.enabled()) {
      logs_.finish(t_end);
      if (auto w = logs_.write(); !w && !res.error) {
        res.error = w.error().errno_value ? w.error().errno_value : EIO;
        res.error_message = w.error().message;
      }
    }
    res.read = std::move(stats_[kRead]);
    res.write = std::move(stats_[kWrite]);
    res.trim = std::move(stats_[kTrim]);
    res.timeline = std::move(timeline_);
    progress_.phase = '_';
    progress_.finished = true;
    return res;
  }

 private:
  enum class SlotKind : uint8_t { io, flush };
  struct Slot {
    transport::HostCommand cmd{};
    uint8_t* buf = nullptr;
    alignas(16) uint8_t dsm[sizeof(protocol::DsmRange)]{};
    uint64_t offset = 0;
    uint64_t len = 0;
    uint64_t submit_ns = 0;
    Ddir ddir = kRead;
    SlotKind kind = SlotKind::io;
    bool verify_read = false;  // a read-back of the verify pass
    bool read_into = false;    // the buffer holds data read from the namespace
    uint32_t index = 0;
    Job* job = nullptr;
  };

  // Where the I/O of a pass comes from: the generator (the job's workload) or a list of extents to read
  // back and check (the verify pass).
  struct Pass {
    bool main = true;
    bool time_based = false;
    uint64_t budget_bytes = UINT64_MAX;
    uint64_t budget_ios = UINT64_MAX;
    const ExtentMap* extents = nullptr;  // verify pass
  };

  Result<void> execute() {
    if (spec_.startdelay.count()) {
      progress_.phase = 'P';
      std::this_thread::sleep_for(spec_.startdelay);
    }
    transport::TransportAddress address;
    std::string subnqn;
    uint32_t nsid = spec_.nsid;
    if (spec_.filename) {
      address = spec_.filename->address;
      subnqn = spec_.filename->subnqn;
      if (!nsid) nsid = spec_.filename->nsid;
    } else {
      address = *conn_.address;
      subnqn = *conn_.subnqn;
    }
    if (!nsid) nsid = 1;

    ControllerOptions co;
    co.address = address;
    co.subnqn = subnqn;
    co.host = conn_.host;
    co.kato_ms = conn_.kato_ms;
    co.header_digest = conn_.header_digest;
    co.data_digest = conn_.data_digest;
    co.dhchap = conn_.dhchap;
    co.tls = conn_.tls;
    co.io_queues = 1;
    // Poll the I/O queue without sleeping for a while after each completion, as the target's reactor
    // does (and spdk_nvme_perf, which never sleeps): a sleep and wake-up per batch costs more than the I/O.
    co.io_busy_poll = std::chrono::microseconds(50);
    co.connector = conn_.connector;
    auto ctrl = Controller::connect(co);
    if (!ctrl) return tl::unexpected(ctrl.error());
    ctrl_ = std::move(*ctrl);

    const NamespaceInfo* ns = ctrl_->find_namespace(nsid);
    if (!ns) return make_error(fmt::format("{}: namespace {} is not active", ctrl_->where(), nsid), ENODEV);
    nsid_ = nsid;
    lba_size_ = ns->block_size;
    max_bs_ = spec_.max_bs();
    if (ctrl_->max_transfer_bytes() && max_bs_ > ctrl_->max_transfer_bytes()) {
      return make_error(fmt::format("bs={} exceeds the controller's maximum transfer of {} bytes (MDTS); use a smaller bs",
                                    max_bs_, ctrl_->max_transfer_bytes()),
                        EINVAL);
    }
    if (max_bs_ / lba_size_ > 65536) return make_error(fmt::format("bs={} is more than 65536 blocks", max_bs_), EINVAL);

    // The region: offset (or offset=N%) .. size (size=N%, fill_device, or up to the end).
    const uint64_t ns_bytes = ns->size_blocks * lba_size_;
    uint64_t offset = spec_.offset;
    if (spec_.offset_percent) {
      offset = ns_bytes / 100 * spec_.offset_percent / lba_size_ * lba_size_ + uint64_t{spec_.clone} * spec_.offset_increment;
    }
    if (offset % lba_size_) {
      return make_error(fmt::format("offset={} is not a multiple of the block size {}", offset, lba_size_), EINVAL);
    }
    if (offset >= ns_bytes) {
      return make_error(fmt::format("offset={} is beyond the end of namespace {} ({} bytes)", offset, nsid, ns_bytes), EINVAL);
    }
    uint64_t len = ns_bytes - offset;
    if (spec_.size_percent) len = len / 100 * spec_.size_percent;
    else if (spec_.size && !spec_.fill_device) len = spec_.size;
    if (offset + len > ns_bytes) {
      return make_error(fmt::format("offset={} + size={} runs past the end of namespace {} ({} bytes)", offset, len, nsid,
                                    ns_bytes),
                        EINVAL);
    }
    region_start_ = offset;
    region_len_ = len;

    // The seed: fio's randrepeat makes every run issue the same sequence (per job number); randrepeat=0
    // draws a new one.
    if (spec_.randrepeat) {
      seed_ = (spec_.randseed + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t{job_number_} << 32);
    } else {
      std::random_device rd;
      seed_ = (uint64_t{rd()} << 32) ^ rd() ^ (uint64_t{job_number_} << 48);
    }
    seed_ |= 1;
    auto gen = IoGenerator::create(spec_, region_start_, region_len_, lba_size_, seed_);
    if (!gen) return make_error(fmt::format("{}: {}", spec_.where, gen.error().message), EINVAL);
    gen_.emplace(std::move(*gen));
    rate_.emplace(spec_, seed_);

    auto io = ctrl_->connect_io_queue(1, static_cast<uint16_t>(std::min<unsigned>(spec_.iodepth + 1, 65535)));
    if (!io) return tl::unexpected(io.error());
    io_ = std::move(*io);
    qd_ = std::max<unsigned>(1, std::min<unsigned>(spec_.iodepth, io_->queue().entries() - 1u));
    depth_limit_ = qd_;
    if (spec_.latency_target.count()) {
      depth_limit_ = 1;  // probe upwards from 1 (fio's latency_target)
      window_hist_.emplace();
    }

    // Everything the data path needs, allocated once.
    std::size_t slot_bytes = (max_bs_ + 4095) / 4096 * 4096;
    std::size_t buf_bytes = qd_ * slot_bytes;
    buffers_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, buf_bytes)));
    if (!buffers_) return make_error("out of memory for I/O buffers", ENOMEM);
    if (!spec_.buffer_pattern.empty() && spec_.scramble_buffers) {
      // fio: buffer_pattern turns scramble_buffers off (options.c str_buffer_pattern_cb), so that the
      // written blocks hold the pattern and nothing else.
      JobSpec unscrambled = spec_;
      unscrambled.scramble_buffers = false;
      filler_.emplace(unscrambled, seed_);
    } else {
      filler_.emplace(spec_, seed_);
    }
    filler_->initial_fill(std::span<uint8_t>(buffers_.get(), buf_bytes), slot_bytes);
    if (spec_.verify != VerifyKind::none) {
      auto v = Verifier::create(spec_);
      if (!v) return make_error(fmt::format("{}: {}", spec_.where, v.error().message), EINVAL);
      verifier_.emplace(std::move(*v));
    }
    slots_.resize(qd_);
    free_.reserve(qd_);
    for (uint32_t i = 0; i < qd_; ++i) {
      slots_[i].buf = buffers_.get() + uint64_t{i} * slot_bytes;
      slots_[i].index = i;
      slots_[i].job = this;
      slots_[i].cmd.context = &slots_[i];
      slots_[i].cmd.on_complete = &Job::on_complete;
      free_.push_back(i);
    }

    const bool writes = does_writes(spec_.rw);
    const bool verifying = verifier_.has_value();
    // Write jobs read back what they wrote (do_verify); read jobs check every read whatever do_verify says
    // (fio verifies the reads of a read-only job regardless); verify_only is a write job's verify phase.
    track_writes_ = verifying && writes && spec_.do_verify && !spec_.verify_only;
    check_reads_ = verifying && (!writes || (spec_.verify_only && spec_.do_verify));
    if (spec_.verify_only) gen_->set_mode(spec_.rw == RwMode::randwrite || spec_.rw == RwMode::randrw ? RwMode::randread : RwMode::read);
    interval_ms_ = spec_.log_avg_msec.count() ? static_cast<uint64_t>(spec_.log_avg_msec.count()) : 500;
    next_sample_ms_ = interval_ms_;

    Pass main;
    main.time_based = spec_.time_based;
    if (!spec_.time_based) {
      main.budget_bytes = spec_.io_size ? spec_.io_size : region_len_;
      if (spec_.number_ios) main.budget_ios = spec_.number_ios;
    }
    progress_.total_bytes = spec_.time_based ? 0 : main.budget_bytes * spec_.loops * (track_writes_ ? 2 : 1);
    progress_.planned_ns = spec_.time_based ? static_cast<uint64_t>((spec_.ramp_time + spec_.runtime).count()) : 0;

    const auto io_t0 = Clock::now();
    io_t0_ns_ = ns_since_epoch(io_t0);
    // The ramp is time from the job's first I/O (fio's epoch), whatever pass runs then.
    ramp_end_ = io_t0 + std::chrono::duration_cast<Clock::duration>(spec_.ramp_time);
    const unsigned loops = spec_.time_based ? 1 : std::max(1u, spec_.loops);
    for (unsigned loop = 0; loop < loops && !time_up(); ++loop) {
      if (loop) gen_->reset();
      if (auto r = run_pass(main); !r) return r;
      if (track_writes_ && !written_.empty()) {
        if (auto r = verify_extents(written_); !r) return r;
        written_.clear();
      }
    }
    if (spec_.end_fsync && writes) {
      if (auto r = flush_and_wait(); !r) return r;
    }
    return {};
  }

  // The ramp has ended: statistics count from now on.
  void check_ramp(Clock::time_point now) noexcept {
    if (stats_active_ || now < ramp_end_) return;
    for (auto& s : stats_) s.reset();
    stats_active_ = true;
    stats_start_ = now;
  }

  // The job's runtime (after the ramp) has passed.
  bool time_up() const noexcept { return spec_.runtime.count() && stats_active_ && Clock::now() - stats_start_ >= spec_.runtime; }

  Result<void> verify_extents(const ExtentMap& extents) {
    Pass v;
    v.main = false;
    v.extents = &extents;
    const bool saved = check_reads_;
    check_reads_ = true;
    verify_seed_ = seed_;
    auto r = run_pass(v);
    check_reads_ = saved;
    verify_seed_.reset();
    return r;
  }

  Result<void> flush_and_wait() {
    if (free_.empty()) return {};
    flush_requested_ = true;
    Pass none;
    none.main = false;
    ExtentMap empty;
    none.extents = &empty;
    return run_pass(none);
  }

  void close_interval(uint64_t t_ms, bool final) {
    if (!final && t_ms < next_sample_ms_) return;
    IntervalSample s;
    s.t_ms = t_ms;
    s.ios = interval_ios_;
    s.bytes = interval_bytes_;
    if (final && s.ios == std::array<uint64_t, 3>{} && !timeline_.empty()) return;
    timeline_.push_back(s);
    interval_ios_ = {};
    interval_bytes_ = {};
    next_sample_ms_ = t_ms + interval_ms_;
  }

  // Latency target: every latency_window, double the depth while the window's percentile latency meets
  // the target; after the first miss, bisect between the last depth that met it and the first that missed.
  void latency_window_check(uint64_t now) {
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
  bool flow_ahead() const noexcept {
    if (!flow_ || spec_.flow == 0) return false;
    const uint64_t total = flow_->total.load(std::memory_order_relaxed);
    const uint64_t weight = flow_->total_weight.load(std::memory_order_relaxed);
    if (total == 0 || weight == 0) return false;
    const double mine = static_cast<double>(flow_own_) / static_cast<double>(total);
    const double share = static_cast<double>(std::abs(spec_.flow)) / static_cast<double>(weight);
    return mine > share;
  }

  // Next unit of a pass. Main passes ask the generator; verify passes walk the extent list.
  bool next_unit(const Pass& p, IoUnit& u) {
    if (p.main) {
      u = gen_->next();
      return true;
    }
    if (extent_it_ == p.extents->end()) return false;
    u = IoUnit{kRead, extent_it_->first, extent_it_->second};
    ++extent_it_;
    return true;
  }

  Result<void> run_pass(const Pass& p) {
    if (!p.main) extent_it_ = p.extents->begin();
    const RwMode mode = spec_.rw;
    progress_.phase = !p.main                                      ? 'V'
                      : mode == RwMode::rw || mode == RwMode::randrw ? 'M'
                      : does_trims(mode)                             ? 'D'
                      : does_writes(mode) && !spec_.verify_only      ? 'W'
                                                                     : 'R';
    const auto pass_start = Clock::now();
    check_ramp(pass_start);
    uint64_t issued_bytes = 0, issued_ios = 0;
    bool exhausted = false;
    std::optional<IoUnit> pending;
    uint64_t think_until = 0;      // ns (now_ns clock) before which no I/O is issued
    unsigned since_think = 0;
    unsigned writes_since_flush = 0;
    uint64_t backlog = 0;
    ExtentMap backlog_extents;
    window_start_ns_ = now_ns();

    for (;;) {
      const auto now_tp = Clock::now();
      const uint64_t now = ns_since_epoch(now_tp);  // the same instant: an I/O due after the ramp is counted
      check_ramp(now_tp);
      const uint64_t t_ms = (now - io_t0_ns_) / 1000000;
      close_interval(t_ms, false);
      if (logs_.enabled()) logs_.tick(t_ms);
      latency_window_check(now);

      bool stop = failed_ || exhausted || issued_bytes >= p.budget_bytes || issued_ios >= p.budget_ios ||
                  (p.main && time_up());
      // verify_backlog: after N writes, let the queue drain and check what they wrote.
      const bool backlog_due = p.main && track_writes_ && spec_.verify_backlog && backlog >= spec_.verify_backlog;
      uint64_t wait_until = 0;  // earliest due time of a held I/O (0 = none)
      const unsigned in_flight = qd_ - static_cast<unsigned>(free_.size());
      if (refill_hold_ && in_flight <= spec_.iodepth_low) refill_hold_ = false;
      const unsigned room = depth_limit_ > in_flight ? depth_limit_ - in_flight : 0;
      const unsigned batch = std::max(1u, std::min(spec_.iodepth_batch_submit, depth_limit_));
      const bool may_submit = !refill_hold_ && (room >= batch || (stop && room));
      if (flush_requested_ && !free_.empty() && !failed_) {
        submit_flush();
        flush_requested_ = false;
      }
      while (!stop && !backlog_due && may_submit && !free_.empty() &&
             depth_limit_ > qd_ - static_cast<unsigned>(free_.size()) && !flush_requested_) {
        if (now < think_until) {
          wait_until = think_until;
          break;
        }
        if (!pending) {
          IoUnit u;
          if (!next_unit(p, u)) {
            exhausted = true;
            break;
          }
          pending = u;
        }
        if (p.main && rate_->enabled()) {
          const uint64_t due = rate_->due_ns(pending->ddir);
          if (due && io_t0_ns_ + due > now) {
            wait_until = io_t0_ns_ + due;
            break;
          }
        }
        if (p.main && flow_ahead()) {
          wait_until = now + std::max<uint64_t>(static_cast<uint64_t>(spec_.flow_sleep.count()), 50000);
          break;
        }
        const IoUnit u = *pending;
        pending.reset();
        if (!submit(u, !p.main)) break;
        ++issued_ios;
        issued_bytes += u.len;
        if (p.main) {
          if (rate_->enabled()) rate_->issued(u.ddir, u.len);
          if (flow_) {
            ++flow_own_;
            flow_->total.fetch_add(1, std::memory_order_relaxed);
          }
          if (u.ddir == kWrite) {
            ++backlog;
            if (track_writes_ && spec_.verify_backlog) add_extent(backlog_extents, u.offset, u.len);
            if (spec_.fsync && ++writes_since_flush >= spec_.fsync) {
              writes_since_flush = 0;
              flush_requested_ = true;
            }
          }
          if (spec_.thinktime.count() && ++since_think >= std::max(1u, spec_.thinktime_blocks)) {
            since_think = 0;
            think(static_cast<uint64_t>(spec_.thinktime.count()), static_cast<uint64_t>(spec_.thinktime_spin.count()),
                  think_until);
          }
        }
        stop = issued_bytes >= p.budget_bytes || issued_ios >= p.budget_ios;
      }
      const unsigned now_in_flight = qd_ - static_cast<unsigned>(free_.size());
      if (now_in_flight >= depth_limit_ && spec_.iodepth_low && spec_.iodepth_low < depth_limit_) refill_hold_ = true;
      if (now_in_flight == 0) {
        if (backlog_due && !failed_) {
          backlog = 0;
          // The backlog's blocks are checked now; they need not be read again at the end.
          for (const auto& [off, len] : backlog_extents) written_.erase(off);
          const ExtentMap to_check = std::move(backlog_extents);
          backlog_extents.clear();
          // Only verify passes walk extent_it_: this main pass does not need it back.
          if (auto r = verify_extents(to_check); !r) return r;
          progress_.phase = 'W';
          continue;
        }
        if (flush_requested_ && !failed_) continue;
        if (stop || failed_ || exhausted) break;
      }
      // Wait: for completions if any are in flight, else until the held I/O is due.
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
          break;
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
      ctrl_->service();
      if (ctrl_->failed()) {
        fail(EIO, ctrl_->failure());
        // Outstanding I/O completes (with errors) through the queue; don't wait for more.
        break;
      }
    }
    // Active time: from the pass's start or the ramp's end, whichever came later (a verify_backlog pass
    // run inside this one may have been the one to see the ramp end).
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
    if (failed_) return make_error(error_message_, error_);
    return {};
  }

  // Think time: spin `spin` ns of it here, the rest is a hold on issuing (completions still run).
  void think(uint64_t total, uint64_t spin, uint64_t& think_until) noexcept {
    const uint64_t start = now_ns();
    spin = std::min(spin, total);
    while (now_ns() - start < spin) {
    }
    think_until = start + total;
  }

  bool submit(const IoUnit& u, bool verify_read) {
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

  void submit_flush() {
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

  void fail(int err, std::string message) noexcept {
    if (failed_) return;
    failed_ = true;
    error_ = err;
    error_message_ = std::move(message);
  }

  static void on_complete(transport::HostCommand& cmd, const protocol::Cqe& cqe) noexcept {
    auto& s = *static_cast<Slot*>(cmd.context);
    s.job->complete(s, cqe);
  }

  void complete(Slot& s, const protocol::Cqe& cqe) noexcept {
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

  struct FreeDeleter {
    void operator()(uint8_t* p) const noexcept { std::free(p); }
  };

  const JobSpec& spec_;
  const unsigned job_number_;
  const ConnectionDefaults& conn_;
  Progress& progress_;
  FlowShared* flow_;
  JobLogs logs_;
  std::unique_ptr<Controller> ctrl_;
  std::unique_ptr<IoQueue> io_;
  uint32_t nsid_ = 1;
  uint64_t lba_size_ = 512;
  uint64_t max_bs_ = 4096;
  uint64_t region_start_ = 0;
  uint64_t region_len_ = 0;
  unsigned qd_ = 1;
  unsigned depth_limit_ = 1;
  bool refill_hold_ = false;
  std::optional<IoGenerator> gen_;
  std::optional<RateLimiter> rate_;
  std::optional<Verifier> verifier_;
  std::optional<BufferFiller> filler_;
  std::unique_ptr<uint8_t, FreeDeleter> buffers_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  ExtentMap written_;
  ExtentMap::const_iterator extent_it_;
  bool track_writes_ = false;
  bool check_reads_ = false;
  bool flush_requested_ = false;
  std::optional<uint64_t> verify_seed_;
  uint64_t seed_ = 1;
  uint64_t flow_own_ = 0;
  // Latency target probing.
  std::optional<LatencyHistogram> window_hist_;
  uint64_t window_start_ns_ = 0;
  unsigned lat_good_ = 0, lat_bad_ = 0;
  bool depth_settled_ = false;
  // Time.
  Clock::time_point job_t0_{};
  Clock::time_point stats_start_{};
  Clock::time_point ramp_end_{};
  uint64_t io_t0_ns_ = 0;
  bool stats_active_ = false;
  // Timeline.
  uint64_t interval_ms_ = 500;
  uint64_t next_sample_ms_ = 0;
  std::array<uint64_t, 3> interval_ios_{};
  std::array<uint64_t, 3> interval_bytes_{};
  std::vector<IntervalSample> timeline_;
  bool failed_ = false;
  int error_ = 0;
  std::string error_message_;
  std::array<DirectionStats, kDdirs> stats_;
};

std::string rate(uint64_t bytes_per_s) { return num2str(bytes_per_s, 4, 1, true, N2sUnit::byte_per_sec); }

void print_progress(std::FILE* out, const std::vector<std::unique_ptr<Progress>>& progress, Clock::time_point start,
                    uint64_t& last_r, uint64_t& last_w, uint64_t& last_ri, uint64_t& last_wi, double dt) {
  unsigned running = 0;
  std::string phases;
  double fraction = 0;
  uint64_t r = 0, w = 0, ri = 0, wi = 0;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto& p : progress) {
    char ph = p->phase.load();
    if (ph != '_' && ph != 'P') ++running;
    phases += ph;
    r += p->read_bytes;
    w += p->write_bytes;
    ri += p->read_ios;
    wi += p->write_ios;
    double f = 1.0;
    if (ph != '_') {
      if (p->planned_ns) f = std::min(1.0, elapsed * 1e9 / static_cast<double>(p->planned_ns));
      else if (p->total_bytes) f = std::min(1.0, static_cast<double>(p->done_bytes) / static_cast<double>(p->total_bytes));
      else f = 0;
    }
    fraction += f / static_cast<double>(progress.size());
  }
  auto per_s = [dt](uint64_t now, uint64_t before) { return static_cast<uint64_t>(static_cast<double>(now - before) / dt); };
  uint64_t eta = fraction > 0.001 ? static_cast<uint64_t>(elapsed * (1 - fraction) / fraction) : 0;
  std::fprintf(out, "\rJobs: %u (f=%u): [%s][%.1f%%][r=%s,w=%s][r=%s,w=%s IOPS][eta %02llum:%02llus]\033[K", running,
               running, phases.c_str(), 100.0 * fraction, rate(per_s(r, last_r)).c_str(), rate(per_s(w, last_w)).c_str(),
               num2str(per_s(ri, last_ri), 4, 1, false, N2sUnit::none).c_str(),
               num2str(per_s(wi, last_wi), 4, 1, false, N2sUnit::none).c_str(),
               static_cast<unsigned long long>(eta / 60), static_cast<unsigned long long>(eta % 60));
  std::fflush(out);
  last_r = r;
  last_w = w;
  last_ri = ri;
  last_wi = wi;
}

// Pins the calling thread to the job's cpus_allowed (split: one CPU per numjobs copy).
void apply_cpus_allowed(const JobSpec& spec) {
  if (spec.cpus_allowed.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (spec.cpus_allowed_split) {
    CPU_SET(spec.cpus_allowed[spec.clone % spec.cpus_allowed.size()], &set);
  } else {
    for (unsigned c : spec.cpus_allowed) CPU_SET(c, &set);
  }
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// fio prints the sizes with num2str (4 significant figures, base 2): "4096B", "64.0KiB".
std::string bs_range(const BlockSizeSpec& b) {
  uint64_t lo = b.min, hi = b.max;
  if (!b.split.empty()) {
    lo = UINT64_MAX;
    hi = 0;
    for (const auto& s : b.split) {
      lo = std::min(lo, s.bs);
      hi = std::max(hi, s.bs);
    }
  }
  return num2str(lo, 4, 1, true, N2sUnit::byte) + "-" + num2str(hi, 4, 1, true, N2sUnit::byte);
}

}  // namespace

std::string describe_jobs(const JobFile& file) {
  std::string out;
  unsigned groups = 0;
  std::vector<unsigned> seen;
  for (const auto& j : file.jobs) {
    if (std::find(seen.begin(), seen.end(), j.groupid) == seen.end()) {
      seen.push_back(j.groupid);
      ++groups;
    }
    std::string rw = rw_name(j.rw);
    if (j.seq_skip) rw += fmt::format(":{}", j.seq_skip);
    if (j.random_nr > 1) rw += fmt::format(":{}", j.random_nr);
    out += fmt::format("{}: (g={}): rw={}, bs=(R) {}, (W) {}, (T) {}, ioengine=rdmablk, iodepth={}\n", j.name, j.groupid, rw,
                       bs_range(j.bs[kRead]), bs_range(j.bs[kWrite]), bs_range(j.bs[kTrim]), j.iodepth);
  }
  out += fmt::format("{} job{} in {} group{}\n", file.jobs.size(), file.jobs.size() == 1 ? "" : "s", groups, groups == 1 ? "" : "s");
  return out;
}

Result<std::vector<JobResult>> run_bench(const JobFile& file, const RunnerOptions& opts) {
  if (!opts.connection.connector) return make_error("no transport available");
  for (const auto& j : file.jobs) {
    if (!j.filename && (!opts.connection.address || !opts.connection.subnqn)) {
      return make_error(fmt::format("{}: job '{}' names no target: set filename=tcp://ADDR:PORT/NQN/NSID in the job "
                                    "file or pass -a ADDR -n NQN",
                                    j.where, j.name));
    }
  }
  const std::size_t n = file.jobs.size();
  std::vector<JobResult> results(n);
  std::vector<std::unique_ptr<Progress>> progress;
  for (std::size_t i = 0; i < n; ++i) progress.push_back(std::make_unique<Progress>());
  RunShared shared;
  shared.finished.assign(n, false);

  // Jobs run in phases: a stonewall job waits for every job before it (groupid is only the reporting
  // group: new_group starts one without waiting, as in fio).
  std::vector<unsigned> phase_of(n, 0);
  unsigned phases = n ? 1 : 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i && file.jobs[i].stonewall) ++phases;
    phase_of[i] = phases - 1;
  }
  const auto start = Clock::now();
  std::atomic<bool> all_done{false};
  std::thread progress_thread;
  if (opts.progress) {
    progress_thread = std::thread([&] {
      uint64_t lr = 0, lw = 0, lri = 0, lwi = 0;
      auto last = Clock::now();
      while (!all_done.load()) {
        std::this_thread::sleep_for(100ms);
        auto now = Clock::now();
        if (now - last >= 1s) {
          print_progress(opts.progress_out, progress, start, lr, lw, lri, lwi, std::chrono::duration<double>(now - last).count());
          last = now;
        }
      }
      std::fprintf(opts.progress_out, "\r\033[K");
      std::fflush(opts.progress_out);
    });
  }
  for (unsigned g = 0; g < phases; ++g) {
    // Flow groups: the weights of the jobs of this phase that share a flow_id.
    shared.flows.clear();
    for (std::size_t i = 0; i < n; ++i) {
      const JobSpec& j = file.jobs[i];
      if (phase_of[i] != g || j.flow == 0) continue;
      auto& f = shared.flows[j.flow_id];
      if (!f) f = std::make_unique<FlowShared>();
      f->total_weight += static_cast<uint64_t>(std::abs(j.flow));
    }
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < n; ++i) {
      if (phase_of[i] != g) continue;
      threads.emplace_back([&, i] {
        const JobSpec& spec = file.jobs[i];
        apply_cpus_allowed(spec);
        if (!spec.wait_for.empty()) {
          std::unique_lock lk(shared.mu);
          shared.cv.wait(lk, [&] {
            for (std::size_t k = 0; k < n; ++k) {
              if (file.jobs[k].name == spec.wait_for && k != i && !shared.finished[k]) return false;
            }
            return true;
          });
        }
        FlowShared* flow = nullptr;
        if (spec.flow) {
          auto it = shared.flows.find(spec.flow_id);  // filled before the threads start; read-only now
          if (it != shared.flows.end()) flow = it->second.get();
        }
        Job job(spec, static_cast<unsigned>(i + 1), opts.connection, *progress[i], flow);
        results[i] = job.run();
        {
          std::lock_guard lk(shared.mu);
          shared.finished[i] = true;
        }
        shared.cv.notify_all();
      });
    }
    for (auto& t : threads) t.join();
  }
  all_done = true;
  if (progress_thread.joinable()) progress_thread.join();
  return results;
}

}  // namespace rdmablk::initiator::bench

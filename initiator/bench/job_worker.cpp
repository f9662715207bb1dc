#include "initiator/bench/job_worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <random>
#include <thread>

namespace rdmablk::initiator::bench::detail {

using namespace std::chrono_literals;

void add_extent(ExtentMap& m, uint64_t off, uint64_t len) {
  auto it = m.lower_bound(off);
  if (it != m.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second > off) it = prev;
  }
  while (it != m.end() && it->first < off + len) it = m.erase(it);
  m.emplace(off, len);
}

JobResult JobWorker::run() {
  JobResult res;
  res.spec = spec_;
  res.job_start_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  rusage ru0{};
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
  collect_usage(res, ru0, Clock::now() - job_t0_);
  finish_logs(res);
  res.read = std::move(stats_[kRead]);
  res.write = std::move(stats_[kWrite]);
  res.trim = std::move(stats_[kTrim]);
  res.timeline = std::move(timeline_);
  progress_.phase = '_';
  progress_.finished = true;
  return res;
}

// Runtime, CPU shares, context switches and faults of the job's thread, as fio reports them.
void JobWorker::collect_usage(JobResult& res, const rusage& ru0, Clock::duration elapsed) const {
  rusage ru1{};
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
}

// The last partial interval, then the log files (a file that cannot be written is the job's error
// unless it already has one).
void JobWorker::finish_logs(JobResult& res) {
  const uint64_t t_end = io_t0_ns_ ? (now_ns() - io_t0_ns_) / 1000000 : 0;
  close_interval(t_end, true);
  if (!logs_.enabled()) return;
  logs_.finish(t_end);
  if (auto w = logs_.write(); !w && !res.error) {
    res.error = w.error().errno_value ? w.error().errno_value : EIO;
    res.error_message = w.error().message;
  }
}

Result<void> JobWorker::execute() {
  if (spec_.startdelay.count()) {
    progress_.phase = 'P';
    std::this_thread::sleep_for(spec_.startdelay);
  }
  if (auto r = connect(); !r) return r;
  if (auto r = plan_region(); !r) return r;
  if (auto r = prepare_workload(); !r) return r;
  if (auto r = open_io_queue(); !r) return r;
  if (auto r = prepare_slots(); !r) return r;
  plan_verification();
  return run_loops();
}

Result<void> JobWorker::connect() {
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
  // Poll the I/O queue without sleeping for a while after each progress, as the target's reactor does:
  // a sleep and wake-up per batch costs more than the I/O. 50 us by default; with hipri, for the whole
  // job, as spdk_nvme_perf does (a QD1 job on a file namespace then does not measure its own wake-up
  // after each ~80 us device read). Not the default: a client that never sleeps takes the CPU from
  // whatever shares its core, e.g. a Ceph OSD on the same machine (rbd reads 0.5x instead of 0.8x of
  // librbd's rate in bench/rbd_vs_file.sh on 2 cores).
  co.io_busy_poll = spec_.hipri ? std::chrono::microseconds(std::chrono::seconds(1)) : std::chrono::microseconds(50);
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
  return {};
}

// The region: offset (or offset=N%) .. size (size=N%, fill_device, or up to the end).
Result<void> JobWorker::plan_region() {
  const NamespaceInfo* ns = ctrl_->find_namespace(nsid_);
  const uint64_t ns_bytes = ns->size_blocks * lba_size_;
  uint64_t offset = spec_.offset;
  if (spec_.offset_percent) {
    offset = ns_bytes / 100 * spec_.offset_percent / lba_size_ * lba_size_ + uint64_t{spec_.clone} * spec_.offset_increment;
  }
  if (offset % lba_size_) {
    return make_error(fmt::format("offset={} is not a multiple of the block size {}", offset, lba_size_), EINVAL);
  }
  if (offset >= ns_bytes) {
    return make_error(fmt::format("offset={} is beyond the end of namespace {} ({} bytes)", offset, nsid_, ns_bytes), EINVAL);
  }
  uint64_t len = ns_bytes - offset;
  if (spec_.size_percent) len = len / 100 * spec_.size_percent;
  else if (spec_.size && !spec_.fill_device) len = spec_.size;
  if (offset + len > ns_bytes) {
    return make_error(fmt::format("offset={} + size={} runs past the end of namespace {} ({} bytes)", offset, len, nsid_,
                                  ns_bytes),
                      EINVAL);
  }
  region_start_ = offset;
  region_len_ = len;
  return {};
}

Result<void> JobWorker::prepare_workload() {
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
  return {};
}

Result<void> JobWorker::open_io_queue() {
  auto io = ctrl_->connect_io_queue(1, static_cast<uint16_t>(std::min<unsigned>(spec_.iodepth + 1, 65535)));
  if (!io) return tl::unexpected(io.error());
  io_ = std::move(*io);
  qd_ = std::max<unsigned>(1, std::min<unsigned>(spec_.iodepth, io_->queue().entries() - 1u));
  depth_limit_ = qd_;
  if (spec_.latency_target.count()) {
    depth_limit_ = 1;  // probe upwards from 1 (fio's latency_target)
    window_hist_.emplace();
  }
  return {};
}

// Everything the data path needs, allocated once.
Result<void> JobWorker::prepare_slots() {
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
    slots_[i].cmd.on_complete = &JobWorker::on_complete;
    free_.push_back(i);
  }
  return {};
}

void JobWorker::plan_verification() {
  const bool writes = does_writes(spec_.rw);
  const bool verifying = verifier_.has_value();
  // Write jobs read back what they wrote (do_verify); read jobs check every read whatever do_verify says
  // (fio verifies the reads of a read-only job regardless); verify_only is a write job's verify phase.
  track_writes_ = verifying && writes && spec_.do_verify && !spec_.verify_only;
  check_reads_ = verifying && (!writes || (spec_.verify_only && spec_.do_verify));
  if (spec_.verify_only) gen_->set_mode(spec_.rw == RwMode::randwrite || spec_.rw == RwMode::randrw ? RwMode::randread : RwMode::read);
  interval_ms_ = spec_.log_avg_msec.count() ? static_cast<uint64_t>(spec_.log_avg_msec.count()) : 500;
  next_sample_ms_ = interval_ms_;
}

// The main pass loops times (each followed by reading back what it wrote), then the final flush.
Result<void> JobWorker::run_loops() {
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
  if (spec_.end_fsync && does_writes(spec_.rw)) {
    if (auto r = flush_and_wait(); !r) return r;
  }
  return {};
}

void JobWorker::check_ramp(Clock::time_point now) noexcept {
  if (stats_active_ || now < ramp_end_) return;
  for (auto& s : stats_) s.reset();
  stats_active_ = true;
  stats_start_ = now;
}

Result<void> JobWorker::verify_extents(const ExtentMap& extents) {
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

Result<void> JobWorker::flush_and_wait() {
  if (free_.empty()) return {};
  flush_requested_ = true;
  Pass none;
  none.main = false;
  ExtentMap empty;
  none.extents = &empty;
  return run_pass(none);
}

void JobWorker::close_interval(uint64_t t_ms, bool final) {
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

}  // namespace rdmablk::initiator::bench::detail

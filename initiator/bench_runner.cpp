#include "initiator/bench_runner.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "initiator/bench_verify.h"

namespace rdmablk::initiator::bench {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

uint64_t now_ns() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

struct Progress {
  std::atomic<uint64_t> read_bytes{0}, write_bytes{0}, read_ios{0}, write_ios{0};
  std::atomic<uint64_t> done_units{0}, total_units{0};
  std::atomic<char> phase{'P'};  // P setup, R/W/M running, V verifying, _ done
  std::atomic<bool> finished{false};
  uint64_t planned_ns = 0;       // time_based: ramp + runtime
};

struct Xorshift {
  uint64_t s;
  uint64_t operator()() noexcept {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};

class Job {
 public:
  Job(const JobSpec& spec, const ConnectionDefaults& conn, Progress& progress)
      : spec_(spec), conn_(conn), progress_(progress) {}

  JobResult run() {
    JobResult res;
    res.spec = spec_;
    res.job_start_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    rusage ru0{}, ru1{};
    getrusage(RUSAGE_THREAD, &ru0);
    auto t0 = Clock::now();
    auto r = execute();
    if (!r) {
      res.error = r.error().errno_value ? r.error().errno_value : EIO;
      res.error_message = r.error().message;
    }
    io_.reset();
    if (ctrl_) (void)ctrl_->shutdown(1000ms);
    auto elapsed = Clock::now() - t0;
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
    res.read = std::move(read_);
    res.write = std::move(write_);
    progress_.phase = '_';
    progress_.finished = true;
    return res;
  }

 private:
  struct Slot {
    transport::HostCommand cmd{};
    uint8_t* buf = nullptr;
    uint64_t offset = 0;
    uint64_t submit_ns = 0;
    bool write = false;
    uint32_t index = 0;
    Job* job = nullptr;
  };
  enum class PhaseKind { main, verify };

  Result<void> execute() {
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
    bs_ = spec_.bs[kRead].min;
    if (bs_ % lba_size_) {
      return make_error(fmt::format("bs={} is not a multiple of namespace {}'s block size {}", bs_, nsid, lba_size_), EINVAL);
    }
    if (ctrl_->max_transfer_bytes() && bs_ > ctrl_->max_transfer_bytes()) {
      return make_error(fmt::format("bs={} exceeds the controller's maximum transfer of {} bytes (MDTS); use a smaller bs",
                                    bs_, ctrl_->max_transfer_bytes()),
                        EINVAL);
    }
    if (bs_ / lba_size_ > 65536) return make_error(fmt::format("bs={} is more than 65536 blocks", bs_), EINVAL);
    const uint64_t ns_bytes = ns->size_blocks * lba_size_;
    if (spec_.offset % lba_size_) {
      return make_error(fmt::format("offset={} is not a multiple of the block size {}", spec_.offset, lba_size_), EINVAL);
    }
    if (spec_.offset >= ns_bytes) {
      return make_error(fmt::format("offset={} is beyond the end of namespace {} ({} bytes)", spec_.offset, nsid, ns_bytes),
                        EINVAL);
    }
    uint64_t len = spec_.size ? spec_.size : ns_bytes - spec_.offset;
    if (spec_.offset + len > ns_bytes) {
      return make_error(fmt::format("offset={} + size={} runs past the end of namespace {} ({} bytes)", spec_.offset, len,
                                    nsid, ns_bytes),
                        EINVAL);
    }
    region_start_ = spec_.offset;
    blocks_ = len / bs_;
    if (blocks_ == 0) return make_error(fmt::format("the region holds no block of bs={}", bs_), EINVAL);

    auto io = ctrl_->connect_io_queue(1, static_cast<uint16_t>(std::min<unsigned>(spec_.iodepth + 1, 65535)));
    if (!io) return tl::unexpected(io.error());
    io_ = std::move(*io);
    qd_ = std::max<unsigned>(1, std::min<unsigned>(spec_.iodepth, io_->queue().entries() - 1u));

    // Everything the data path needs, allocated once.
    std::size_t buf_bytes = (qd_ * bs_ + 4095) / 4096 * 4096;
    buffers_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, buf_bytes)));
    if (!buffers_) return make_error("out of memory for I/O buffers", ENOMEM);
    std::random_device rd;
    seed_ = (uint64_t{rd()} << 32) ^ rd() ^ (uint64_t{spec_.clone} << 48);
    rng_.s = seed_ | 1;
    for (std::size_t i = 0; i < buf_bytes; i += 8) {
      uint64_t v = rng_();
      std::memcpy(buffers_.get() + i, &v, std::min<std::size_t>(8, buf_bytes - i));
    }
    slots_.resize(qd_);
    free_.reserve(qd_);
    for (uint32_t i = 0; i < qd_; ++i) {
      slots_[i].buf = buffers_.get() + uint64_t{i} * bs_;
      slots_[i].index = i;
      slots_[i].job = this;
      slots_[i].cmd.context = &slots_[i];
      slots_[i].cmd.on_complete = &Job::on_complete;
      free_.push_back(i);
    }
    const bool write_then_verify = spec_.verify != VerifyKind::none && does_writes(spec_.rw);
    if (write_then_verify) written_.assign((blocks_ + 63) / 64, 0);
    check_reads_ = spec_.verify != VerifyKind::none && !does_writes(spec_.rw);
    m_ = std::bit_ceil(blocks_);
    perm_a_ = m_ >= 4 ? ((rng_() & (m_ - 1) & ~uint64_t{3}) | 1) : 1;
    perm_c_ = m_ >= 2 ? ((rng_() | 1) & (m_ - 1)) : 0;
    perm_x_ = rng_() & (m_ - 1);

    progress_.total_units = spec_.time_based ? 0 : blocks_ * (write_then_verify ? 2 : 1);
    progress_.planned_ns = spec_.time_based ? static_cast<uint64_t>((spec_.ramp_time + spec_.runtime).count()) : 0;

    if (auto r = run_phase(PhaseKind::main); !r) return r;
    if (write_then_verify) {
      check_reads_ = true;
      verify_seed_ = seed_;
      if (auto r = run_phase(PhaseKind::verify); !r) return r;
    }
    return {};
  }

  uint64_t next_random_block() noexcept {
    const uint64_t mask = m_ - 1;
    do {
      perm_x_ = (perm_a_ * perm_x_ + perm_c_) & mask;
    } while (perm_x_ >= blocks_);
    return perm_x_;
  }

  bool written(uint64_t block) const noexcept { return (written_[block / 64] >> (block % 64)) & 1; }

  Result<void> run_phase(PhaseKind kind) {
    const bool main = kind == PhaseKind::main;
    const RwMode mode = main ? spec_.rw : RwMode::read;
    progress_.phase = !main ? 'V' : (mode == RwMode::rw || mode == RwMode::randrw) ? 'M' : does_writes(mode) ? 'W' : 'R';
    const auto ramp = main ? spec_.ramp_time : std::chrono::nanoseconds(0);
    const auto phase_start = Clock::now();
    const auto ramp_end = phase_start + ramp;
    stats_active_ = ramp.count() == 0;
    auto stats_start = phase_start;
    const uint64_t limit = (main && spec_.time_based) ? UINT64_MAX : blocks_;
    uint64_t issued = 0, cursor = 0;
    bool exhausted = false;
    for (;;) {
      auto now = Clock::now();
      if (!stats_active_ && now >= ramp_end) {
        read_.reset();
        write_.reset();
        stats_active_ = true;
        stats_start = now;
      }
      bool stop = failed_ || exhausted || issued >= limit ||
                  (main && spec_.runtime.count() && stats_active_ && now - stats_start >= spec_.runtime);
      while (!stop && !free_.empty()) {
        uint64_t block;
        bool write;
        if (!main) {
          while (cursor < blocks_ && !written(cursor)) ++cursor;
          if (cursor >= blocks_) {
            exhausted = true;
            break;
          }
          block = cursor++;
          write = false;
        } else {
          block = is_random(mode) ? next_random_block() : cursor;
          if (!is_random(mode)) cursor = cursor + 1 == blocks_ ? 0 : cursor + 1;
          write = mode == RwMode::write || mode == RwMode::randwrite ||
                  ((mode == RwMode::rw || mode == RwMode::randrw) && rng_() % 100 >= spec_.rwmixread);
        }
        Slot& s = slots_[free_.back()];
        free_.pop_back();
        s.offset = region_start_ + block * bs_;
        s.write = write;
        std::span<uint8_t> buf(s.buf, bs_);
        if (write && !written_.empty()) fill_verify_block(buf, s.offset, seed_);
        uint64_t slba = s.offset / lba_size_;
        auto nlb = static_cast<uint32_t>(bs_ / lba_size_);
        s.submit_ns = now_ns();
        protocol::Status st = write ? io_->submit_write(s.cmd, nsid_, slba, nlb, buf) : io_->submit_read(s.cmd, nsid_, slba, nlb, buf);
        if (!st.ok()) {
          free_.push_back(s.index);
          fail(EIO, fmt::format("{}: could not queue a {} at offset {}: {}", ctrl_->where(), write ? "write" : "read",
                                s.offset, describe_status(st)));
          break;
        }
        ++issued;
        stop = issued >= limit;
      }
      if (free_.size() == qd_ && (stop || failed_ || exhausted)) break;
      int rc = io_->poll(1, 10ms);
      if (rc < 0) {
        fail(ECONNRESET, fmt::format("{}: I/O queue connection lost", ctrl_->where()));
        break;
      }
      ctrl_->service();
      if (ctrl_->failed()) {
        fail(EIO, ctrl_->failure());
        // Outstanding I/O completes (with errors) through the queue; don't wait for more.
        break;
      }
    }
    auto elapsed = stats_active_ ? static_cast<uint64_t>((Clock::now() - stats_start).count()) : 0;
    if (!main || does_reads(mode)) read_.runtime_ns += elapsed;
    if (main && does_writes(mode)) write_.runtime_ns += elapsed;
    if (failed_) return make_error(error_message_, error_);
    return {};
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
    const uint64_t lat = now_ns() - s.submit_ns;
    const protocol::Status st = cqe.get_status();
    free_.push_back(s.index);
    if (!st.ok()) {
      try {
        fail(EIO, fmt::format("{}: {} at offset {} failed: {}", ctrl_->where(), s.write ? "write" : "read", s.offset,
                              describe_status(st)));
      } catch (...) {
        fail(EIO, {});
      }
      return;
    }
    if (s.write && !written_.empty()) {
      uint64_t block = (s.offset - region_start_) / bs_;
      written_[block / 64] |= uint64_t{1} << (block % 64);
    }
    if (!s.write && check_reads_) {
      auto f = check_verify_block(std::span<const uint8_t>(s.buf, bs_), s.offset, verify_seed_);
      if (f) {
        try {
          fail(EILSEQ, describe(*f, s.offset, bs_));
        } catch (...) {
          fail(EILSEQ, {});
        }
        return;
      }
    }
    ++progress_.done_units;
    DirectionStats& d = s.write ? write_ : read_;
    (s.write ? progress_.write_bytes : progress_.read_bytes) += bs_;
    ++(s.write ? progress_.write_ios : progress_.read_ios);
    if (!stats_active_) return;
    ++d.ios;
    d.bytes += bs_;
    d.clat.record(lat);
  }

  struct FreeDeleter {
    void operator()(uint8_t* p) const noexcept { std::free(p); }
  };

  const JobSpec& spec_;
  const ConnectionDefaults& conn_;
  Progress& progress_;
  std::unique_ptr<Controller> ctrl_;
  std::unique_ptr<IoQueue> io_;
  uint32_t nsid_ = 1;
  uint64_t lba_size_ = 512;
  uint64_t bs_ = 4096;
  uint64_t region_start_ = 0;
  uint64_t blocks_ = 0;
  unsigned qd_ = 1;
  std::unique_ptr<uint8_t, FreeDeleter> buffers_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  std::vector<uint64_t> written_;
  bool check_reads_ = false;
  std::optional<uint64_t> verify_seed_;
  uint64_t seed_ = 0;
  Xorshift rng_{1};
  uint64_t m_ = 1, perm_a_ = 1, perm_c_ = 0, perm_x_ = 0;
  bool stats_active_ = true;
  bool failed_ = false;
  int error_ = 0;
  std::string error_message_;
  DirectionStats read_;
  DirectionStats write_;
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
    if (ph != '_') ++running;
    phases += ph;
    r += p->read_bytes;
    w += p->write_bytes;
    ri += p->read_ios;
    wi += p->write_ios;
    double f = 1.0;
    if (ph != '_') {
      if (p->planned_ns) f = std::min(1.0, elapsed * 1e9 / static_cast<double>(p->planned_ns));
      else if (p->total_units) f = static_cast<double>(p->done_units) / static_cast<double>(p->total_units);
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

}  // namespace

Result<std::vector<JobResult>> run_bench(const JobFile& file, const RunnerOptions& opts) {
  if (!opts.connection.connector) return make_error("no transport available");
  for (const auto& j : file.jobs) {
    if (!j.filename && (!opts.connection.address || !opts.connection.subnqn)) {
      return make_error(fmt::format("{}: job '{}' names no target: set filename=tcp://ADDR:PORT/NQN/NSID in the job "
                                    "file or pass -a ADDR -n NQN",
                                    j.where, j.name));
    }
  }
  std::vector<JobResult> results(file.jobs.size());
  std::vector<std::unique_ptr<Progress>> progress;
  for (std::size_t i = 0; i < file.jobs.size(); ++i) progress.push_back(std::make_unique<Progress>());
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < file.jobs.size(); ++i) {
    threads.emplace_back([&, i] {
      Job job(file.jobs[i], opts.connection, *progress[i]);
      results[i] = job.run();
    });
  }
  if (opts.progress) {
    uint64_t lr = 0, lw = 0, lri = 0, lwi = 0;
    auto last = Clock::now();
    for (;;) {
      bool all = std::all_of(progress.begin(), progress.end(), [](const auto& p) { return p->finished.load(); });
      if (all) break;
      std::this_thread::sleep_for(100ms);
      auto now = Clock::now();
      if (now - last >= 1s) {
        print_progress(opts.progress_out, progress, start, lr, lw, lri, lwi, std::chrono::duration<double>(now - last).count());
        last = now;
      }
    }
    std::fprintf(opts.progress_out, "\r\033[K");
    std::fflush(opts.progress_out);
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace rdmablk::initiator::bench

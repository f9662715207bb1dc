#include "bench/rdma_queue_bench/bench.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "protocol/properties.h"
#include "target/daemon/transport_options.h"

namespace rdmablk::bench::rdma_queue {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<unsigned>(cpu), &set);
  if (const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); rc != 0)
    die(fmt::format("cannot pin a reactor thread to CPU {}: {}", cpu, std::strerror(rc)));
}

// The CPUs the reactors run on: --cpus, or the first N the process may run on.
std::vector<int> pick_cpus(const Config& cfg) {
  if (!cfg.cpus.empty()) {
    if (cfg.cpus.size() < cfg.reactors) die(fmt::format("--cpus lists {} CPUs for {} reactors", cfg.cpus.size(), cfg.reactors));
    std::vector<int> cpus(cfg.cpus.begin(), cfg.cpus.begin() + cfg.reactors);
    auto sorted = cpus;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      fmt::print(stderr, "rdma_queue_bench: warning: reactors share a CPU (--cpus): they take turns on it\n");
    return cpus;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) die(fmt::format("sched_getaffinity: {}", std::strerror(errno)));
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < cfg.reactors; ++c)
    if (CPU_ISSET(static_cast<unsigned>(c), &set)) cpus.push_back(c);
  if (cpus.size() < cfg.reactors)
    die(fmt::format("--reactors {}: the process may run on {} CPUs only (taskset?); name them with --cpus", cfg.reactors,
                    cpus.size()));
  return cpus;
}

}  // namespace

void Bench::setup() {
  config = bench_config(cfg);
  const auto cpus = pick_cpus(cfg);
  // Like the daemon (target/daemon/daemon.cpp): the reactors, their adapters and buffer pools are made on the main
  // thread; the core gets all of them.
  std::vector<target::CoreReactor*> reactors;
  for (unsigned i = 0; i < cfg.reactors; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->index = i;
    lane->cpu = cpus[i];
    lane->qid = shared_controller() ? static_cast<uint16_t>(i + 1) : uint16_t{1};
    auto pl = transport::BufferPool::create(target::buffer_pool_options(config.limits));
    if (!pl) die("buffer pool: " + pl.error().message);
    lane->pool = std::move(*pl);
    lane->driver = std::make_unique<Driver>(cfg.driver, *lane->pool, i);
    reactors.push_back(&lane->driver->core_reactor());
    lanes.push_back(std::move(lane));
  }
  if (isolated()) {  // the control: nothing of the target shared between reactors
    auto one = config;
    one.reactors = 1;
    for (auto* r : reactors) {
      auto c = target::TargetCore::create(one, {r});
      if (!c) die("target core: " + c.error().message);
      cores.push_back(std::move(*c));
    }
  } else {
    auto c = target::TargetCore::create(config, reactors);
    if (!c) die("target core: " + c.error().message);
    cores.push_back(std::move(*c));
  }
  for (auto& lane : lanes) lane->thread = std::thread([this, l = lane.get()] { lane_main(*l); });

  run_task(Task{Op::connect_admin, admin_lanes(), 0});
  run_task(Task{Op::connect_io, cfg.reactors, 0});
  const uint32_t icd = lanes[0]->io.queue->sizing().in_capsule;
  if (cfg.bs > icd && std::find(cfg.workloads.begin(), cfg.workloads.end(), "write-icd") != cfg.workloads.end())
    die(fmt::format("--bs {} is above the I/O queue's in-capsule size {}", cfg.bs, icd));
}

// Main thread: hands `t` to the lanes and waits until those taking part are done.
void Bench::run_task(const Task& t) {
  {
    std::lock_guard lock(mu);
    task = t;
    done = 0;
    started.store(0, std::memory_order_relaxed);
    finished.store(0, std::memory_order_relaxed);
    ++generation;
  }
  task_cv.notify_all();
  if (t.op == Op::exit) return;
  std::unique_lock lock(mu);
  done_cv.wait(lock, [&] { return done == t.lanes; });
}

void Bench::lane_main(Lane& l) {
  pthread_setname_np(pthread_self(), fmt::format("bench-r{}", l.index).c_str());  // for perf and top
  pin_to(l.cpu);
  l.driver->bind();
  // Larger than what can be outstanding (RECVs + READ and SEND completions: 3 x QD while running; a queue's
  // flushed RECVs at teardown); an overrun fails the run.
  uint32_t cq_entries = 64;
  while (cq_entries < std::max(3 * cfg.qd, cfg.queue_size + 32) + 32) cq_entries *= 2;
  l.cq = std::make_unique<FakeCq>(cq_entries);
  l.cq->host = &l.host;
  l.driver->core_reactor().add_poller(l.cq.get());  // like DeviceCq: registered when the listener starts
  uint64_t seen = 0;
  for (;;) {
    Task t;
    {
      std::unique_lock lock(mu);
      task_cv.wait(lock, [&] { return generation != seen; });
      seen = generation;
      t = task;
    }
    if (t.op == Op::exit) return;
    if (l.index < t.first || l.index >= t.first + t.lanes) continue;
    perform(l, t);
    {
      std::lock_guard lock(mu);
      ++done;
    }
    done_cv.notify_one();
  }
}

void Bench::perform(Lane& l, const Task& t) {
  switch (t.op) {
    case Op::connect_admin:
      connect_admin(l);
      break;
    case Op::connect_io:
      connect_io(l);
      break;
    case Op::run:
      l.last = run(l, t.kind, t.count, t.lanes);
      break;
    case Op::close_io:
      close_queue(l, l.io);
      break;
    case Op::close_admin:
      if (l.admin.queue) close_queue(l, l.admin);
      break;
    case Op::exit:
      break;
  }
}

void Bench::connect_admin(Lane& l) {
  const auto opts = target::rdma_target_options(config.limits);
  l.admin = make_queue(*l.cq, *l.pool, core_of(l), opts, 0, 32, 0);
  auto r = connect(*l.driver, *l.cq, *l.admin.qp, ++l.next_cid, 0, 31, p::kCntlidDynamic);
  if (!r.get_status().ok()) die(fmt::format("admin Connect failed: {}", p::status_name(r.get_status())));
  l.cntlid = p::connect_result_cntlid(r.dw0.get());
  const uint32_t cc = p::Cc{}.set_en(true).set_iosqes(6).set_iocqes(4).value;
  auto prop = p::to_sqe(p::make_property_set(++l.next_cid, p::property::cc, cc, false));
  prop.hdr.dptr = p::make_keyed_sgl(0, 0, 0);  // no data: a null keyed SGL, as the Linux host sends
  r = exchange(*l.driver, *l.cq, *l.admin.qp, prop, {});
  if (!r.get_status().ok()) die(fmt::format("Property Set CC failed: {}", p::status_name(r.get_status())));
}

void Bench::connect_io(Lane& l) {
  const auto opts = target::rdma_target_options(config.limits);
  // lanes[0]->cntlid was written by lane 0 in an earlier task (ordered by the task mutex).
  const uint16_t cntlid = shared_controller() ? lanes[0]->cntlid : l.cntlid;
  const auto entries = static_cast<uint16_t>(cfg.queue_size);
  l.io = make_queue(*l.cq, *l.pool, core_of(l), opts, l.qid, entries, cntlid);
  auto r = connect(*l.driver, *l.cq, *l.io.qp, ++l.next_cid, l.qid, static_cast<uint16_t>(entries - 1), cntlid);
  if (!r.get_status().ok())
    die(fmt::format("I/O queue {} Connect failed: {}", l.qid, p::status_name(r.get_status())));
}

p::Sqe Bench::command(Kind kind) const {
  const uint32_t blocks = cfg.bs / kBlockSize;
  const auto keyed = p::make_keyed_sgl(kHostAddr, cfg.bs, kHostKey, cfg.invalidate);
  switch (kind) {
    case Kind::read:
      return p::to_sqe(p::make_read(0, kNsid, 0, blocks, keyed));
    case Kind::write_keyed:
      return p::to_sqe(p::make_write(0, kNsid, 0, blocks, keyed));
    case Kind::write_in_capsule:
      return p::to_sqe(p::make_write(0, kNsid, 0, blocks, p::make_in_capsule_sgl(0, cfg.bs)));
  }
  return {};
}

// On lane l's thread, one of `running` lanes: times `count` commands (a few more when the last poll batch
// completes several), then keeps the host sending, untimed, until every lane has timed its share, and
// drains the queue.
LaneRun Bench::run(Lane& l, Kind kind, uint64_t count, unsigned running) {
  FakeQp& qp = *l.io.qp;
  FakeCq& cq = *l.cq;
  RdmaTargetQueue& queue = *l.io.queue;
  qp.reset_counters();
  const uint32_t icd_len = kind == Kind::write_in_capsule ? cfg.bs : 0;
  const uint64_t lba_mask = (kNsBytes / kBlockSize - 1) & ~uint64_t{cfg.bs / kBlockSize - 1};
  const uint64_t limit = count * 64 + 1'000'000;  // turns before we call it a stall
  constexpr uint64_t kEndless = ~uint64_t{0};     // the host sends until stop()
  const p::Sqe sqe = command(kind);
  started.fetch_add(1, std::memory_order_acq_rel);
  while (started.load(std::memory_order_acquire) < running) cpu_relax();

  uint64_t n = 0;
  const auto wall0 = std::chrono::steady_clock::now();
  const uint64_t cpu0 = thread_cpu_ns();
  l.host.start(qp, &queue, sqe, icd_len, kEndless, cfg.qd, lba_mask, cfg.bs / kBlockSize);
  while (l.host.completed() < count && ++n < limit) l.driver->turn();
  const uint64_t cpu1 = thread_cpu_ns();
  const auto wall1 = std::chrono::steady_clock::now();
  LaneRun out;
  out.cpu_ns = cpu1 - cpu0;
  out.wall_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(wall1 - wall0).count());
  out.commands = l.host.completed();
  out.turns = n;
  out.rdma_writes = qp.rdma_writes;
  out.rdma_reads = qp.rdma_reads;
  out.sends = qp.sends;
  out.chains = qp.chains;
  if (out.commands < count)
    die(fmt::format("reactor {}: stalled after {} of {} commands ({} in flight)", l.index, out.commands, count,
                    l.host.outstanding()));

  finished.fetch_add(1, std::memory_order_acq_rel);
  while (finished.load(std::memory_order_acquire) < running)
    for (int i = 0; i < 64; ++i) l.driver->turn();
  l.host.stop();
  for (int i = 0; i < 1'000'000 && (!cq.empty() || queue.sq_used() != 0 || queue.core_held() != 0); ++i)
    l.driver->turn();  // what was in flight when the host stopped
  if (qp.failed_cqes != 0) {
    die(fmt::format("{} commands failed (last status {})", qp.failed_cqes, p::status_name(qp.last_cqe.get_status())));
  }
  if (l.host.starved) die("the host found no RECV posted");
  if (cq.overflows != 0) die("completion queue overrun");
  if (qp.unexpected_wrs != 0) die("unexpected work request opcode");
  if (queue.closing()) die("the queue closed");
  if (queue.core_held() != 0 || queue.sq_used() != 0) die("requests left in the queue after the run");
  return out;
}

// Runs `count` commands on each of lanes [first, first + running) at once; their results.
std::vector<LaneRun> Bench::run_lanes(Kind kind, uint64_t count, unsigned first, unsigned running) {
  run_task(Task{Op::run, running, first, kind, count});
  std::vector<LaneRun> out;
  for (unsigned i = first; i < first + running; ++i) out.push_back(lanes[i]->last);
  return out;
}

// Appends one round to `s`: runs[i] is lane i's.
void Bench::record(Series& s, const std::vector<LaneRun>& runs) {
  s.lane_ns_per_cmd.resize(runs.size());
  LaneRun sum;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const LaneRun& r = runs[i];
    s.lane_ns_per_cmd[i].push_back(static_cast<double>(r.cpu_ns) / static_cast<double>(r.commands));
    sum.cpu_ns += r.cpu_ns;
    sum.wall_ns += r.wall_ns;
    sum.commands += r.commands;
    sum.turns += r.turns;
    sum.rdma_writes += r.rdma_writes;
    sum.rdma_reads += r.rdma_reads;
    sum.sends += r.sends;
    sum.chains += r.chains;
  }
  const auto per = [&](uint64_t v) { return static_cast<double>(v) / static_cast<double>(sum.commands); };
  s.ns_per_cmd.push_back(per(sum.cpu_ns));
  s.wall_ns_per_cmd.push_back(per(sum.wall_ns));
  s.rdma_writes = per(sum.rdma_writes);
  s.rdma_reads = per(sum.rdma_reads);
  s.sends = per(sum.sends);
  s.chains = per(sum.chains);
  s.turns = per(sum.turns);
}

void Bench::summarize(Series& s) {
  if (s.ns_per_cmd.empty()) return;
  s.median = median_of(s.ns_per_cmd);
  s.min = *std::min_element(s.ns_per_cmd.begin(), s.ns_per_cmd.end());
  s.wall_median = median_of(s.wall_ns_per_cmd);
  for (const auto& v : s.lane_ns_per_cmd) s.lane_median.push_back(median_of(v));
}

// Warm-up of every workload on every reactor, then the rounds interleaved (read, write, write-icd, read,
// ...) so that noise from the rest of the machine spreads over all of them. With N > 1 reactors a round
// of a workload is each reactor alone in turn (reactor 0, 1, ...: so that the one-reactor figure is the
// same CPUs' as the N-reactor one, as vCPUs of a VM run at different speeds), then all N at once.
std::vector<WorkloadResult> Bench::measure(const std::vector<Workload>& workloads) {
  const unsigned n = cfg.reactors;
  std::vector<WorkloadResult> results(workloads.size());
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    results[i].name = workloads[i].name;
    if (cfg.warmup > 0) run_lanes(workloads[i].kind, cfg.warmup, 0, n);
  }
  for (unsigned r = 0; r < cfg.rounds; ++r) {
    for (std::size_t i = 0; i < workloads.size(); ++i) {
      const Kind kind = workloads[i].kind;
      if (n > 1) {
        std::vector<LaneRun> alone;
        for (unsigned l = 0; l < n; ++l) alone.push_back(run_lanes(kind, cfg.commands, l, 1).front());
        record(results[i].single, alone);
      }
      record(results[i].multi, run_lanes(kind, cfg.commands, 0, n));
    }
  }
  for (auto& res : results) {
    summarize(res.multi);
    summarize(res.single);
  }
  return results;
}

// On lane l's thread: close a queue the way a disconnect does and wait for the transport to free it.
void Bench::close_queue(Lane& l, BenchQueue& b) {
  b.queue->close("benchmark done");
  for (int i = 0; i < 100000 && !b.qp->destroyed; ++i) l.driver->turn();
  if (!b.qp->destroyed) die("a queue did not finish closing");
  b.queue.reset();
}

// I/O queues, then the admin queues, each on its reactor's thread; then the threads end and the core goes.
void Bench::teardown() {
  run_task(Task{Op::close_io, cfg.reactors, 0});
  run_task(Task{Op::close_admin, admin_lanes(), 0});
  run_task(Task{Op::exit, cfg.reactors, 0});
  for (auto& l : lanes) l->thread.join();
  cores.clear();
}

}  // namespace rdmablk::bench::rdma_queue

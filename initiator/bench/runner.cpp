#include "initiator/bench/runner.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "initiator/bench/job_worker.h"
#include "initiator/bench/progress.h"

namespace rdmablk::initiator::bench {

namespace {

using detail::FlowShared;
using detail::Progress;

// What the jobs of one run share: who has finished (wait_for) and the flow counters.
struct RunShared {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<bool> finished;
  std::map<unsigned, std::unique_ptr<FlowShared>> flows;
};

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

// Jobs run in phases: a stonewall job waits for every job before it (groupid is only the reporting
// group: new_group starts one without waiting, as in fio).
std::vector<unsigned> phases_of(const JobFile& file, unsigned& phases) {
  const std::size_t n = file.jobs.size();
  std::vector<unsigned> phase_of(n, 0);
  phases = n ? 1 : 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i && file.jobs[i].stonewall) ++phases;
    phase_of[i] = phases - 1;
  }
  return phase_of;
}

// Flow groups: the weights of the jobs of phase `g` that share a flow_id.
void prepare_flows(const JobFile& file, const std::vector<unsigned>& phase_of, unsigned g, RunShared& shared) {
  shared.flows.clear();
  for (std::size_t i = 0; i < file.jobs.size(); ++i) {
    const JobSpec& j = file.jobs[i];
    if (phase_of[i] != g || j.flow == 0) continue;
    auto& f = shared.flows[j.flow_id];
    if (!f) f = std::make_unique<FlowShared>();
    f->total_weight += static_cast<uint64_t>(std::abs(j.flow));
  }
}

// The thread of job i: its CPUs, wait_for, the job itself, then telling the jobs that wait for it.
void run_job_thread(const JobFile& file, std::size_t i, const RunnerOptions& opts, Progress& progress,
                    RunShared& shared, JobResult& result) {
  const std::size_t n = file.jobs.size();
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
  detail::JobWorker job(spec, static_cast<unsigned>(i + 1), opts.connection, progress, flow);
  result = job.run();
  {
    std::lock_guard lk(shared.mu);
    shared.finished[i] = true;
  }
  shared.cv.notify_all();
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
  unsigned phases = 0;
  const std::vector<unsigned> phase_of = phases_of(file, phases);
  detail::ProgressLine line(opts.progress_out, progress);
  if (opts.progress) line.start();
  for (unsigned g = 0; g < phases; ++g) {
    prepare_flows(file, phase_of, g, shared);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < n; ++i) {
      if (phase_of[i] != g) continue;
      threads.emplace_back([&, i] { run_job_thread(file, i, opts, *progress[i], shared, results[i]); });
    }
    for (auto& t : threads) t.join();
  }
  return results;
}

}  // namespace rdmablk::initiator::bench

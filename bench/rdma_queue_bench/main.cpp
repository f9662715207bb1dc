// rdma_queue_bench: CPU nanoseconds per 4 KiB command on the RDMA target path, without a NIC.
//
// The real code under test: transport::rdma::RdmaTargetQueue (capsule parse, SGL checks, buffer pool,
// send-queue budget, WR chains, slot recycling), target::TargetCore (dispatch, I/O command checks, the
// namespace view, per-reactor backend channel, completion), the `null` backend (backend/memory_backend.cpp:
// validates and queues a completion at submit, handed out at the next reap), and the reactor loop that
// drives it all. What replaces the device is a fake verbs layer (FakeQp: an RdmaQpOps that turns every
// signaled WR into a work completion at once; FakeCq: a transport::Poller standing in for the reactor's
// DeviceCq in transport/rdma/rdma_target.cpp, ibv_poll_cq in batches of 32 and dispatch by wr_id) and a
// host model (writes the 64-byte SQE into the next posted RECV buffer and completes that RECV).
//
// Bring-up goes through the real fabrics path: admin queue (qid 0) Connect with in-capsule Connect data,
// Property Set CC.EN = 1, then I/O queue Connect, all as capsules over RECV completions. Then each
// workload keeps --qd commands in flight on the I/O queue (queue size --queue-size, 128 like the Linux
// host): a SEND completion (the CQE went out) lets the host send its next command, which arrives as a RECV
// completion at the next CQ poll. Per command:
//   read:      RECV wc -> parse (keyed SGL 0x40) -> pool buffer -> core -> null READ submit
//              -> reap (ReactorState::poll) -> finish -> post RDMA WRITE + SEND chain -> SEND wc -> recycle
//   write:     RECV wc -> parse (keyed SGL 0x40) -> pool buffer -> core -> fetch_data -> post RDMA READ
//              -> READ wc -> on_data_ready -> null WRITE submit -> reap -> finish -> post SEND -> SEND wc
//   write-icd: RECV wc carrying 64 + 4096 bytes (in-capsule SGL 0x01) -> parse -> core -> null WRITE
//              submit -> reap -> finish -> RECV repost -> post SEND -> SEND wc -> recycle
//
// Reactors: --reactors N runs N reactor threads, each pinned to its own CPU (the i-th CPU the process may
// run on, so `taskset -c 1` still picks CPU 1, or the i-th of --cpus), each with what the daemon gives a
// reactor (transport::Reactor + ReactorAdapter + its own BufferPool, made on the main thread like
// target/daemon/daemon.cpp does; TargetCore::create gets all N, so it keeps one ReactorState per reactor) and its
// own fake CQ, host and QP. Queues are created on their reactor's thread, which is how the core assigns
// them to a reactor (TargetCore::on_queue_created -> CoreReactor::on_thread). --controllers shared
// (default): one controller (admin queue on reactor 0), I/O queue i + 1 on reactor i, as a Linux host
// spreads its I/O queues; per-reactor: each reactor has its own controller (admin queue + I/O queue 1);
// isolated: each reactor also has its own TargetCore (config, subsystem, null backend): nothing of the
// target is shared, the control for the other two (what is left is the machine's and the process's).
// With N > 1 every round of a workload runs first each reactor alone in turn (reactor 0, then 1, ...; the
// others idle, their queues connected: the "1 reactor" figure is then the same CPUs' as the N-reactor one,
// which matters on a VM whose vCPUs run at different speeds), then all N at once, the same --commands on
// each reactor every time: all start together (a spin barrier, not timed) and a reactor that is done keeps
// its host sending, untimed, until every reactor is done, so that each one's timed part runs with all the
// others busy. The point: N reactors with connections on all of them should cost what one costs per
// command (nothing shared on the data path: cache lines, locks, atomics). ratio = aggregate(N) /
// aggregate(1), from the medians over rounds; r(pair) = the median over rounds of each round's ratio (its
// runs ran back to back, which filters slow drifts of the machine). The goal is <= 1.10; above, look with
// `perf record -g` for atomics, locks and written-to shared structures. On a shared 2-vCPU VM the vCPUs'
// speed swings by up to 2x for seconds at a time (other tenants): many short rounds (-n 200000 -r 41),
// r(pair) and r(min) are the figures to trust, and --controllers isolated is the no-sharing control to
// compare with. Found there (2 vCPUs, 14 runs of 41 rounds per mode): r(pair) pooled 1.00-1.03 for
// per-reactor and isolated, 1.03-1.08 for shared (read the highest), r(min) 1.00-1.03 for all; perf finds
// no lock-prefixed instruction, libc/libstdc++/spdlog call or hot line on the data path (queue state is
// allocated on its reactor's thread; the Reactors and BufferPools made on the main thread share no written
// cache line; the shared Controller, Namespace and backend are only read).
//
// Turn: --driver reactor (default) is what the daemon does: transport::Reactor::run_once(false), which runs
// the pollers in registration order (the CQ first, as DeviceCq is added when the listener starts, then the
// core's ReactorState, added when the first I/O opens a backend channel), checks its message queue and
// timers, peeks its io_uring CQ ring and (nothing queued) makes no syscall. --driver pollers calls the
// same two pollers directly (no Reactor), to split out the loop's own cost.
//
// Measured: per reactor thread, CLOCK_THREAD_CPUTIME_ID around a loop that runs until --commands commands
// completed on that reactor (after --warmup commands of each workload on all reactors), --rounds rounds
// interleaved across workloads; ns per command = the thread's CPU delta / the commands it completed (a
// poll batch may end a few past --commands); with N reactors the aggregate is the sum of the threads' CPU
// over the sum of their commands. Median and min over rounds; commands/s = 1e9 / median (per CPU). "wall
// ns" is steady_clock over the same loop(s): above the CPU figure when something else ran on that CPU
// (then trust neither much; on a shared 2-vCPU VM rounds vary by +-30%).
// Included in that time: everything above, plus the fakes' own share (building ibv_wc entries in a small
// L1-resident ring, the host's 64-byte SQE store into the RECV buffer, copying the CQE out of the SEND's
// buffer to check its status): FakeCq::poll (with the host's refill inlined), FakeQp::post_send/post_recv,
// about 15% of perf samples. The host's SQE store takes the cache miss on the RECV buffer line (128 RECV
// buffers of 64 + 16 KiB each) that the target's parse would take on a real NIC's DMA write.
// NOT included: anything a real device costs the CPU: ibv_post_send/ibv_post_recv in the provider (WQE
// build, doorbell MMIO / BlueFlame write), ibv_poll_cq on a real CQ (reading the CQEs the NIC wrote, misses
// on them), completion-channel events and re-arming, the RDMA CM; the data (null never touches buffers, the
// fakes move no bytes, in-capsule data is not written); the backend's I/O (a file backend adds io_uring
// READ_FIXED/WRITE_FIXED submission and reaping, and syscalls); many queues per reactor.
// SPDK's ~730 ns per I/O is all-in on real NICs, so this figure is a lower bound for the daemon's.
//
// Usage (one reactor: pin it, the numbers are per CPU; the bench pins each reactor thread itself):
//   taskset -c 1 build/bench/rdma_queue_bench                       # 2,000,000 commands x 5 rounds each
//   taskset -c 1 build/bench/rdma_queue_bench -n 500000 -r 3 --json --workloads read,write
//   taskset -c 1 build/bench/rdma_queue_bench --driver pollers      # without the reactor loop
//   build/bench/rdma_queue_bench --reactors 2 -n 200000 -r 41       # 1 vs 2 reactors (CPUs 0 and 1), ratio
//   build/bench/rdma_queue_bench --reactors 2 -n 200000 -r 41 --controllers isolated   # the control
//   build/bench/rdma_queue_bench --reactors 2 --cpus 1,0 --controllers per-reactor
//   perf record -e cpu-clock -g -- taskset -c 1 build/bench/rdma_queue_bench -n 1000000 -r 1
#include <sched.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "bench/rdma_queue_bench/bench.h"

namespace {

using namespace rdmablk::bench::rdma_queue;

std::string join_list(const std::vector<double>& v, const char* fmt_one) {
  std::string out;
  for (double x : v) out += fmt::format(fmt::runtime(fmt_one), x);
  return out;
}

// Each reactor's median alone / with the others.
std::string lane_pairs(const WorkloadResult& r) {
  std::string out;
  for (std::size_t i = 0; i < r.multi.lane_median.size() && i < r.single.lane_median.size(); ++i)
    out += fmt::format(" {:.1f}/{:.1f}", r.single.lane_median[i], r.multi.lane_median[i]);
  return out;
}

// Per round: all reactors at once / each alone (run back to back).
std::vector<double> round_ratios(const WorkloadResult& r) {
  std::vector<double> out;
  for (std::size_t i = 0; i < r.multi.ns_per_cmd.size() && i < r.single.ns_per_cmd.size(); ++i)
    out.push_back(r.multi.ns_per_cmd[i] / r.single.ns_per_cmd[i]);
  return out;
}

// The command line into `cfg`; exits on an error or --help.
void parse_options(int argc, char** argv, Config& cfg) {
  CLI::App app{"CPU cost per command of the RDMA target path (RdmaTargetQueue + TargetCore + null backend) over fake verbs"};
  app.add_option("-n,--commands", cfg.commands, "commands per timed round (per reactor)")->check(CLI::Range(uint64_t{1000}, uint64_t{1} << 40));
  app.add_option("-r,--rounds", cfg.rounds, "timed rounds per workload (median and min reported)")->check(CLI::Range(1u, 1000u));
  app.add_option("--warmup", cfg.warmup, "untimed commands before the rounds of each workload");
  app.add_option("--qd", cfg.qd, "commands the host keeps in flight")->check(CLI::Range(1u, 1024u));
  app.add_option("--queue-size", cfg.queue_size, "I/O queue entries (HSQSIZE + 1)")->check(CLI::Range(2u, 1024u));
  app.add_option("--bs", cfg.bs, "bytes per command (a multiple of 4096)")->transform(CLI::AsSizeValue(false));
  app.add_option("--workloads", cfg.workloads, "read, write (keyed SGL, RDMA READ), write-icd (in-capsule data)")
      ->delimiter(',')
      ->check(CLI::IsMember({"read", "write", "write-icd"}));
  app.add_option("--driver", cfg.driver, "reactor: Reactor::run_once(false) per turn (the daemon); pollers: the "
                                          "CQ and backend pollers called directly")
      ->check(CLI::IsMember({"reactor", "pollers"}));
  app.add_option("--qos-iops", cfg.qos_iops, "a QoS limit on the namespace (0 = none): set it far above the rate "
                 "to measure what the check costs a command that is never throttled");
  app.add_flag("--invalidate", cfg.invalidate, "keyed SGL 0x4F (the CQE goes as SEND_WITH_INV)");
  app.add_option("--reactors", cfg.reactors, "reactor threads, each pinned to its own CPU with its own queue; "
                                             "N > 1: each round runs 1 reactor, then N, and reports the ratio")
      ->check(CLI::Range(1u, 64u));
  app.add_option("--cpus", cfg.cpus, "CPU of each reactor (default: the first N CPUs the process may run on)")
      ->delimiter(',')
      ->check(CLI::Range(0, CPU_SETSIZE - 1));
  app.add_option("--controllers", cfg.controllers,
                 "shared: one controller, I/O queue i + 1 on reactor i; per-reactor: a controller (admin + I/O "
                 "queue) per reactor; isolated: also a TargetCore (subsystem, backend) per reactor, the control")
      ->check(CLI::IsMember({"shared", "per-reactor", "isolated"}));
  app.add_flag("--json", cfg.json, "print the result as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  if (cfg.bs == 0 || cfg.bs % kBlockSize != 0 || cfg.bs > (1u << 20)) die("--bs must be a multiple of 4096, <= 1 MiB");
  if (cfg.qd > cfg.queue_size) die("--qd must not exceed --queue-size");
}

void print_json(const Config& cfg, const std::vector<int>& cpus, const std::vector<WorkloadResult>& results) {
  const bool multi = cfg.reactors > 1;
  nlohmann::json out;
  out["config"] = {{"commands", cfg.commands}, {"rounds", cfg.rounds},         {"warmup", cfg.warmup},
                   {"qd", cfg.qd},             {"queue_size", cfg.queue_size}, {"bs", cfg.bs},
                   {"driver", cfg.driver},     {"invalidate", cfg.invalidate}, {"backend", "null"},
                   {"reactors", cfg.reactors}, {"cpus", cpus},                 {"controllers", cfg.controllers}};
  out["results"] = nlohmann::json::array();
  for (const auto& r : results) {
    const Series& s = r.multi;
    nlohmann::json j = {{"workload", r.name},
                        {"ns_per_cmd_median", s.median},
                        {"ns_per_cmd_min", s.min},
                        {"cmds_per_s", 1e9 / s.median},
                        {"ns_per_cmd_rounds", s.ns_per_cmd},
                        {"wall_ns_per_cmd_median", s.wall_median},
                        {"per_cmd", {{"rdma_write_wrs", s.rdma_writes},
                                     {"rdma_read_wrs", s.rdma_reads},
                                     {"send_wrs", s.sends},
                                     {"post_send_calls", s.chains},
                                     {"reactor_turns", s.turns}}}};
    if (multi) {  // the figures above: all N reactors (sum of CPU / sum of commands)
      j["per_reactor_ns_per_cmd_median"] = s.lane_median;
      j["per_reactor_ns_per_cmd_rounds"] = s.lane_ns_per_cmd;
      j["one_reactor"] = {{"ns_per_cmd_median", r.single.median},  // each reactor alone in turn, summed
                          {"ns_per_cmd_min", r.single.min},
                          {"ns_per_cmd_rounds", r.single.ns_per_cmd},
                          {"wall_ns_per_cmd_median", r.single.wall_median},
                          {"per_reactor_ns_per_cmd_median", r.single.lane_median}};
      j["ratio_median"] = s.median / r.single.median;
      j["ratio_min"] = s.min / r.single.min;
      j["ratio_rounds"] = round_ratios(r);
      j["ratio_paired_median"] = median_of(round_ratios(r));
    }
    out["results"].push_back(std::move(j));
  }
  fmt::print("{}\n", out.dump(2));
}

void print_one_reactor(const std::vector<WorkloadResult>& results) {
  fmt::print("{:<10} {:>12} {:>10} {:>12} {:>10}   {}\n", "workload", "median ns", "min ns", "cmds/s", "wall ns",
             "per command: WRs (write/read/send), post_send calls, reactor turns");
  for (const auto& r : results) {
    const Series& s = r.multi;
    fmt::print("{:<10} {:>12.1f} {:>10.1f} {:>12.0f} {:>10.1f}   {:.2f}/{:.2f}/{:.2f}, {:.2f}, {:.3f}\n", r.name,
               s.median, s.min, 1e9 / s.median, s.wall_median, s.rdma_writes, s.rdma_reads, s.sends, s.chains,
               s.turns);
  }
  fmt::print("rounds (CPU ns per command):\n");
  for (const auto& r : results) fmt::print("  {:<10}{}\n", r.name, join_list(r.multi.ns_per_cmd, " {:.1f}"));
}

void print_reactors(const Bench& bench, const std::vector<int>& cpus, const std::vector<WorkloadResult>& results) {
  const Config& cfg = bench.cfg;
  std::string cpu_list;
  for (std::size_t i = 0; i < cpus.size(); ++i) cpu_list += fmt::format("{}{}", i == 0 ? "" : ",", cpus[i]);
  fmt::print("{} reactors on CPUs {}, {}; CPU ns per command (sum of the threads' CPU / sum of their commands):\n"
             "1 = each reactor alone in turn, {} = all at once; ratio = {} / 1\n",
             cfg.reactors, cpu_list,
             bench.shared_controller() ? "one controller, I/O queue i+1 on reactor i"
             : bench.isolated()        ? "a TargetCore and controller per reactor (isolated)"
                                       : "a controller per reactor",
             cfg.reactors, cfg.reactors);
  fmt::print("{:<10} {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}   {:>7} {:>7} {:>7}   {}\n", "workload", "1 median",
             "1 min", "1 wall", fmt::format("{} median", cfg.reactors), fmt::format("{} min", cfg.reactors),
             fmt::format("{} wall", cfg.reactors), "ratio", "r(min)", "r(pair)", "per reactor: alone/together (medians)");
  for (const auto& r : results) {
    fmt::print("{:<10} {:>9.1f} {:>9.1f} {:>9.1f}   {:>9.1f} {:>9.1f} {:>9.1f}   {:>7.3f} {:>7.3f} {:>7.3f}  {}\n",
               r.name, r.single.median, r.single.min, r.single.wall_median, r.multi.median, r.multi.min,
               r.multi.wall_median, r.multi.median / r.single.median, r.multi.min / r.single.min,
               median_of(round_ratios(r)), lane_pairs(r));
  }
  fmt::print("ratio = {0} median / 1 median, r(min) = {0} min / 1 min, r(pair) = median over rounds of the round's "
             "{0} / 1 (run back to back)\n",
             cfg.reactors);
  fmt::print("rounds (CPU ns per command, 1 reactor | {} reactors | ratio):\n", cfg.reactors);
  for (const auto& r : results) {
    fmt::print("  {:<10}{} |{} |{}\n", r.name, join_list(r.single.ns_per_cmd, " {:.1f}"),
               join_list(r.multi.ns_per_cmd, " {:.1f}"), join_list(round_ratios(r), " {:.3f}"));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  parse_options(argc, argv, cfg);
  spdlog::set_level(spdlog::level::warn);

  Bench bench;
  bench.cfg = cfg;
  bench.setup();
  std::vector<int> cpus;
  for (const auto& l : bench.lanes) cpus.push_back(l->cpu);
  std::vector<Workload> workloads;
  for (const auto& name : cfg.workloads) {
    const Kind kind = name == "read" ? Kind::read : name == "write" ? Kind::write_keyed : Kind::write_in_capsule;
    workloads.push_back(Workload{name, kind});
  }
  const auto results = bench.measure(workloads);
  bench.teardown();
  if (cfg.json) {
    print_json(cfg, cpus, results);
    return 0;
  }
  const bool multi = cfg.reactors > 1;
  fmt::print("RDMA target path over fake verbs, null backend: {} x {} commands per workload{} (+{} warm-up), "
             "QD {}, queue size {}, {} B, driver {}{}\n",
             cfg.rounds, cfg.commands, multi ? " per reactor" : "", cfg.warmup, cfg.qd, cfg.queue_size, cfg.bs,
             cfg.driver, cfg.invalidate ? ", SGL 0x4F" : "");
  if (multi) {
    print_reactors(bench, cpus, results);
  } else {
    print_one_reactor(results);
  }
  return 0;
}

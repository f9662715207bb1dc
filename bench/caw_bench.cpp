// The cost of fused Compare and Write against a plain Write of the same size, on one NVMe/TCP I/O queue of
// a running target: rounds alternate (write, caw, write, caw, ...), each keeps `qd` commands in flight for
// `seconds`, every slot on blocks of its own so no pair ever waits for another. Every pair matches (a slot
// compares what it wrote last). Prints the median IOPS of each and their ratio (JSON with --json).
//
//   caw_bench -a 127.0.0.1 -s 4420 -n NQN [--nsid 1] [--qd 1] [--seconds 3] [--rounds 3] [--json]
//
// bench/caw_cost.py starts a target pinned to one CPU and runs this pinned to another.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "initiator/host/controller.h"
#include "initiator/host/host_identity.h"
#include "transport/host_queue.h"

namespace {

using namespace rdmablk;
using Clock = std::chrono::steady_clock;

struct Slot {
  transport::HostCommand first{}, second{};
  std::vector<uint8_t> current, next;  // the block as written last, and what this command writes
  uint64_t lba = 0;
  int halves = 0;  // completions still expected
  bool failed = false;
};

void on_half(transport::HostCommand& cmd, const protocol::Cqe& cqe) noexcept {
  auto* s = static_cast<Slot*>(cmd.context);
  if (!cqe.get_status().ok()) s->failed = true;
  --s->halves;
}

struct Bench {
  initiator::IoQueue& q;
  uint32_t nsid;
  uint32_t block_size;
  std::vector<Slot> slots;

  protocol::Status submit(Slot& s, bool caw) {
    s.next = s.current;  // the pair compares what is there (the last write's data) and changes one byte
    s.next[0] = static_cast<uint8_t>(s.current[0] + 1);
    if (!caw) {
      s.halves = 1;
      return q.submit_write(s.first, nsid, s.lba, 1, s.next);
    }
    s.halves = 2;
    return q.submit_compare_and_write(s.first, s.second, nsid, s.lba, 1, s.current, s.next);
  }

  // IOPS of one round; -1 on an error.
  double round(bool caw, std::chrono::milliseconds length) {
    for (Slot& s : slots) {
      s.first.on_complete = s.second.on_complete = &on_half;
      s.first.context = s.second.context = &s;
      if (!submit(s, caw).ok()) return -1;
    }
    const auto start = Clock::now(), end = start + length;
    uint64_t counted = 0;
    std::vector<bool> busy(slots.size(), true);
    std::size_t in_flight = slots.size();
    while (in_flight > 0) {
      if (q.poll(1, std::chrono::milliseconds(1000)) < 0) return -1;
      const bool stop = Clock::now() >= end;
      for (std::size_t i = 0; i < slots.size(); ++i) {
        Slot& s = slots[i];
        if (!busy[i] || s.halves != 0) continue;
        if (s.failed) return -1;
        s.current = s.next;  // written
        ++counted;
        if (stop) {
          busy[i] = false;
          --in_flight;
        } else if (!submit(s, caw).ok()) {
          return -1;
        }
      }
    }
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    return static_cast<double>(counted) / secs;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fused Compare and Write vs Write on one NVMe/TCP queue"};
  std::string addr = "127.0.0.1", nqn;
  uint16_t port = 4420;
  uint32_t nsid = 1;
  unsigned qd = 1, rounds = 3;
  double seconds = 3;
  bool json = false;
  app.add_option("-a,--traddr", addr);
  app.add_option("-s,--trsvcid", port);
  app.add_option("-n,--nqn", nqn)->required();
  app.add_option("--nsid", nsid);
  app.add_option("--qd", qd)->check(CLI::Range(1, 64));
  app.add_option("--seconds", seconds)->check(CLI::Range(0.1, 600.0));
  app.add_option("--rounds", rounds)->check(CLI::Range(1, 100));
  app.add_flag("--json", json);
  CLI11_PARSE(app, argc, argv);

  initiator::ControllerOptions o;
  o.address.type = transport::TransportType::tcp;
  o.address.traddr = addr;
  o.address.trsvcid = port;
  o.subnqn = nqn;
  auto host = initiator::resolve_host_identity("nqn.2024-12.io.rdmablk:caw-bench", std::nullopt);
  if (!host) return fmt::print(stderr, "caw_bench: {}\n", host.error().message), 1;
  o.host = *host;
  o.kato_ms = 30000;
  o.connector = &transport::connect_host_queue;
  auto ctrl = initiator::Controller::connect(o);
  if (!ctrl) return fmt::print(stderr, "caw_bench: {}\n", ctrl.error().message), 1;
  auto ns = (*ctrl)->identify_namespace(nsid);
  if (!ns) return fmt::print(stderr, "caw_bench: {}\n", ns.error().message), 1;
  auto q = (*ctrl)->connect_io_queue(1, static_cast<uint16_t>(2 * qd + 2));
  if (!q) return fmt::print(stderr, "caw_bench: {}\n", q.error().message), 1;

  Bench b{**q, nsid, ns->block_size, std::vector<Slot>(qd)};
  for (unsigned i = 0; i < qd; ++i) {
    Slot& s = b.slots[i];
    s.lba = 64 + 8 * uint64_t{i};  // a block of its own, apart from every other slot's
    s.current.assign(ns->block_size, 0);
    s.next.assign(ns->block_size, 0);
  }
  // A first plain round puts known data (`current`) in every slot's block.
  const auto length = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  if (b.round(false, std::chrono::milliseconds(100)) < 0) return fmt::print(stderr, "caw_bench: warm-up failed\n"), 1;
  std::vector<double> writes, caws;
  for (unsigned r = 0; r < rounds; ++r) {
    const double w = b.round(false, length), c = b.round(true, length);
    if (w < 0 || c < 0) return fmt::print(stderr, "caw_bench: a command failed in round {}\n", r + 1), 1;
    writes.push_back(w);
    caws.push_back(c);
  }
  const double w = median(writes), c = median(caws);
  if (json) {
    nlohmann::json j{{"qd", qd},          {"block_size", ns->block_size}, {"write_iops", w},
                     {"caw_iops", c},     {"caw_over_write", c / w},      {"rounds", rounds},
                     {"seconds", seconds}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("QD{} {} B: write {:.0f} IOPS, compare and write {:.0f} IOPS, ratio {:.2f} (medians of {} rounds)\n", qd,
               ns->block_size, w, c, c / w, rounds);
  }
  return 0;
}

// rdma_host_bench: the RDMA host queue's own cost per command, without a NIC.
//
// The real code under test: transport::rdma's RdmaHostQueue (submit: slot and CID, SGL, capsule copy, post
// SEND; poll: CQ reaping, CQE checks, RECV repost, completion callbacks) over the fake verbs of
// tests/transport/fake_host_verbs.h (every SEND completes at once and its CQE is due at once), through the
// HostQueue interface as the initiator uses it. Per round: keep --qd commands in flight (refilled before
// each poll(1, ...)) until --commands completed; half are flushes (no data), half 4 KiB in-capsule writes.
// Included: the fake's own work (a steady_clock read and a deque per poll_cq, the CQE store per SEND).
// Meant for callgrind: instructions per command = (Ir(-n N2) - Ir(-n N1)) / (N2 - N1), e.g.
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null build/bench/rdma_host_bench -n 20000
// (the totals are printed on exit; see docs/benchmarking.md). Without valgrind it prints ns per command.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "protocol/command.h"
#include "tests/transport/fake_host_verbs.h"
#include "transport/host_queue.h"
#include "transport/rdma/rdma_host.h"

namespace {

namespace p = rdmablk::protocol;
using namespace rdmablk::transport;

unsigned g_done = 0;
void on_done(HostCommand& /*cmd*/, const p::Cqe& /*cqe*/) noexcept { ++g_done; }

}  // namespace

int main(int argc, char** argv) {
  unsigned commands = 100000;
  unsigned qd = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "-n") == 0) commands = static_cast<unsigned>(std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--qd") == 0) qd = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  fakes::FakeVerbs f;
  HostQueueOptions o;
  o.address.type = TransportType::rdma;
  o.address.traddr = "192.0.2.1";
  o.qid = 1;
  o.entries = static_cast<uint16_t>(qd + 1);
  o.in_capsule_limit = 8192;
  auto q = rdma::adopt_rdma_host_queue(o, f.verbs());
  if (!q) {
    std::fprintf(stderr, "%s\n", q.error().message.c_str());
    return 1;
  }
  std::vector<uint8_t> data(4096 * qd, 0xA5);
  std::vector<HostCommand> cmds(qd);
  std::vector<HostCommand*> free_cmds;
  for (unsigned i = 0; i < qd; ++i) {
    HostCommand& c = cmds[i];
    c.on_complete = [](HostCommand& cmd, const p::Cqe& cqe) noexcept {
      on_done(cmd, cqe);
      static_cast<std::vector<HostCommand*>*>(cmd.context)->push_back(&cmd);
    };
    c.context = &free_cmds;
    free_cmds.push_back(&c);
  }
  unsigned submitted = 0;
  const auto start = std::chrono::steady_clock::now();
  while (g_done < commands) {
    while (!free_cmds.empty() && submitted < commands) {
      HostCommand& c = *free_cmds.back();
      free_cmds.pop_back();
      const auto i = static_cast<std::size_t>(&c - cmds.data());
      if (submitted % 2 == 0) {
        c.sqe = p::make_flush(0, 1);
        c.direction = DataDirection::none;
        c.data = {};
      } else {
        c.sqe = p::to_sqe(p::make_write(0, 1, submitted, 8, p::SglDescriptor{}, false));
        c.direction = DataDirection::host_to_controller;
        c.data = std::span<uint8_t>(data.data() + 4096 * i, 4096);
      }
      if (!(*q)->submit(c).ok()) return 2;
      ++submitted;
    }
    if ((*q)->poll(1, std::chrono::milliseconds(1000)) < 0) return 3;
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  std::printf("%u commands, qd %u: %.1f ns per command\n", g_done, qd, ns / g_done);
  return 0;
}

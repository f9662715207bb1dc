// The Compare and Write counter of the shared-volume tests (test_reservations_e2e.cpp, and through two
// targets on one rbd image in tests/ceph/rbd_e2e_test.cpp): every connection adds 1 to a 64-bit counter in
// one block `rounds` times with fused Compare and Write, reading again and retrying on a miscompare. The
// counter ends at exactly connections x rounds only if no pair ever overwrote another's increment.
#pragma once

#include <atomic>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "initiator/host/controller.h"
#include "protocol/status.h"
#include "support/target_process.h"

namespace e2e {

struct CawCounterResult {
  uint64_t final_value = 0;
  int retries = 0;                  // miscompares retried
  std::vector<std::string> errors;  // one per connection that stopped early
};

namespace caw_detail {

constexpr uint32_t kBlock = 512;

struct Half {
  std::atomic<int> calls{0};
  rdmablk::protocol::Status status{};
  static void on_complete(rdmablk::transport::HostCommand& cmd, const rdmablk::protocol::Cqe& cqe) noexcept {
    auto* h = static_cast<Half*>(cmd.context);
    h->status = cqe.get_status();
    h->calls.fetch_add(1);
  }
};

inline uint64_t counter_of(const std::vector<uint8_t>& block) {
  uint64_t v = 0;
  std::memcpy(&v, block.data(), sizeof v);
  return v;
}

// One connection's increments; `error` says why it stopped early.
struct Worker {
  rdmablk::initiator::IoQueue& q;
  uint64_t lba;
  int rounds;
  int retries = 0;
  std::string error;

  // One pair; false with `error` set when it did not complete as a match or a miscompare.
  bool pair(std::vector<uint8_t>& seen, std::vector<uint8_t>& next, bool& matched) {
    namespace p = rdmablk::protocol;
    Half cmp, wr;
    rdmablk::transport::HostCommand first{}, second{};
    first.on_complete = second.on_complete = &Half::on_complete;
    first.context = &cmp;
    second.context = &wr;
    if (auto s = q.submit_compare_and_write(first, second, 1, lba, 1, seen, next); !s.ok()) {
      error = std::string("submit: ") + p::status_name(s);
      return false;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (cmp.calls.load() == 0 || wr.calls.load() == 0) {
      if (std::chrono::steady_clock::now() > deadline) return error = "no completion in 60 s", false;
      if (q.poll(1, std::chrono::milliseconds(100)) < 0) return error = "poll failed", false;
    }
    matched = cmp.status.ok() && wr.status.ok();
    if (matched || (cmp.status.is(p::status::compare_failure) && wr.status.is(p::status::aborted_failed_fused)))
      return true;
    error = std::string("pair: ") + p::status_name(cmp.status) + " / " + p::status_name(wr.status);
    return false;
  }

  void run() {
    std::vector<uint8_t> seen(kBlock), next(kBlock);
    for (int done = 0; done < rounds;) {
      if (auto r = read_blocks(q, 1, lba, kBlock, seen); !r) {
        error = "read: " + r.error().message;
        return;
      }
      next = seen;
      const uint64_t v = counter_of(seen) + 1;
      std::memcpy(next.data(), &v, sizeof v);
      bool matched = false;
      if (!pair(seen, next, matched)) return;
      if (matched) {
        ++done;
      } else {
        ++retries;
      }
    }
  }
};

}  // namespace caw_detail

// Zeroes the counter in block `lba` of namespace 1 through the first queue, runs one thread per queue, and
// reads the final value back.
inline CawCounterResult run_caw_counter(const std::vector<rdmablk::initiator::IoQueue*>& queues, uint64_t lba,
                                        int rounds) {
  CawCounterResult out;
  std::vector<uint8_t> block(caw_detail::kBlock, 0);
  if (auto w = write_blocks(*queues[0], 1, lba, caw_detail::kBlock, block); !w) {
    out.errors.push_back("zeroing: " + w.error().message);
    return out;
  }
  std::vector<caw_detail::Worker> workers;
  for (auto* q : queues) workers.push_back(caw_detail::Worker{*q, lba, rounds, 0, {}});
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w] { w.run(); });
  for (auto& th : threads) th.join();
  for (const auto& w : workers) {
    out.retries += w.retries;
    if (!w.error.empty()) out.errors.push_back(w.error);
  }
  if (auto r = read_blocks(*queues[0], 1, lba, caw_detail::kBlock, block); !r) {
    out.errors.push_back("reading the result: " + r.error().message);
    return out;
  }
  out.final_value = caw_detail::counter_of(block);
  return out;
}

// Hosts A and B connected to each of `targets`, one I/O queue each: the counter through several targets
// (two plain targets, or two members of a gateway group, on one rbd image). Fails the test on an error.
struct CawQueues {
  std::vector<std::unique_ptr<rdmablk::initiator::Controller>> ctrls;
  std::vector<std::unique_ptr<rdmablk::initiator::IoQueue>> queues;
  std::vector<rdmablk::initiator::IoQueue*> raw;  // what run_caw_counter takes
};
inline ::testing::AssertionResult connect_caw_queues(std::initializer_list<TargetProcess*> targets, CawQueues& out) {
  for (TargetProcess* t : targets) {
    for (const char* host : {kHostA, kHostB}) {
      auto c = rdmablk::initiator::Controller::connect(controller_options(t->io_port(), kSubnqn, host));
      if (!c) return ::testing::AssertionFailure() << c.error().message << "\n--- target log ---\n" << t->log();
      auto q = (*c)->connect_io_queue(1, 32);
      if (!q) return ::testing::AssertionFailure() << q.error().message;
      out.raw.push_back(q->get());
      out.queues.push_back(std::move(*q));
      out.ctrls.push_back(std::move(*c));
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace e2e

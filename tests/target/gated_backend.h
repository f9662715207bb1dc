// A backend wrapper for core tests: queues of a fixed depth whose completions come out only as a Gate lets
// them (testing::set_backend_wrapper), so a test can hold commands in the backend and see what else moves.
#pragma once

#include <climits>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "target/core/subsystem.h"

namespace rdmablk::target::testing {

// Shared by a test and the backend queues it wraps.
struct Gate {
  unsigned depth = 2;        // every backend queue gets this depth, whatever the core asks for
  unsigned open = UINT_MAX;  // completions reap() may still hand out (UINT_MAX: all)
  bool always_full = false;  // a broken backend: full with nothing in flight
  std::vector<uint64_t> accepted;  // the slba of every request the backend accepted, in order
  unsigned full_answers = 0;       // how many times submit() said queue_full
  unsigned queues_opened = 0;      // open_queue() calls
};

// A ram queue of depth gate.depth whose completions come out only as the gate lets them.
class GatedQueue final : public backend::Queue {
 public:
  GatedQueue(std::unique_ptr<backend::Queue> inner, Gate& gate) : inner_(std::move(inner)), gate_(gate) {}
  backend::Status submit(const backend::Request& req) noexcept override {
    const backend::Status s = gate_.always_full ? backend::queue_full : inner_->submit(req);
    if (s == backend::queue_full) ++gate_.full_answers;
    if (s.ok()) gate_.accepted.push_back(req.slba);
    return s;
  }
  int flush() noexcept override { return inner_->flush(); }
  unsigned reap(std::span<backend::Completion> out, unsigned min_complete) noexcept override {
    const std::size_t n = std::min<std::size_t>(out.size(), gate_.open);
    const unsigned got = inner_->reap(out.first(n), min_complete);
    if (gate_.open != UINT_MAX) gate_.open -= got;
    return got;
  }
  unsigned in_flight() const noexcept override { return inner_->in_flight(); }
  int event_fd() const noexcept override { return inner_->event_fd(); }

 private:
  std::unique_ptr<backend::Queue> inner_;
  Gate& gate_;
};

class GatedBackend final : public backend::Backend {
 public:
  GatedBackend(std::unique_ptr<backend::Backend> inner, Gate& gate) : inner_(std::move(inner)), gate_(gate) {}
  const backend::Geometry& geometry() const noexcept override { return inner_->geometry(); }
  std::string describe() const override { return "gated " + inner_->describe(); }
  Result<std::unique_ptr<backend::Queue>> open_queue(const backend::QueueOptions& opts) const override {
    backend::QueueOptions o = opts;
    o.depth = gate_.depth;
    ++gate_.queues_opened;
    auto q = inner_->open_queue(o);
    if (!q) return tl::unexpected(q.error());
    return std::unique_ptr<backend::Queue>(std::make_unique<GatedQueue>(std::move(*q), gate_));
  }

 private:
  std::unique_ptr<backend::Backend> inner_;
  Gate& gate_;
};

}  // namespace rdmablk::target::testing

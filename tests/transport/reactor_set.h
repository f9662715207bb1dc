// N reactors running on their own threads, each with a buffer pool: what a listener needs under it in a
// transport test (the daemon builds the same from its config).
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/buffer_pool.h"
#include "transport/reactor.h"

namespace rdmablk::transport {

struct ReactorSet {
  struct R {
    std::unique_ptr<Reactor> reactor;
    std::unique_ptr<BufferPool> pool;
    std::thread thread;
  };
  std::vector<R> reactors;

  ReactorSet(unsigned count, const BufferPoolOptions& pool_options, const std::string& name) {
    for (unsigned i = 0; i < count; ++i) {
      R r;
      ReactorOptions ro;
      ro.name = name + "-" + std::to_string(i);
      r.reactor = std::move(*Reactor::create(ro));
      r.pool = std::move(*BufferPool::create(pool_options));
      reactors.push_back(std::move(r));
    }
    for (auto& r : reactors) r.thread = std::thread([re = r.reactor.get()] { re->run(); });
  }
  ~ReactorSet() { stop(); }
  ReactorSet(const ReactorSet&) = delete;
  ReactorSet& operator=(const ReactorSet&) = delete;

  std::vector<ReactorSlot> slots() const {
    std::vector<ReactorSlot> out;
    for (const auto& r : reactors) out.push_back({r.reactor.get(), r.pool.get()});
    return out;
  }
  R& operator[](std::size_t i) { return reactors[i]; }

  // Stop every reactor and join its thread (idempotent).
  void stop() {
    for (auto& r : reactors) {
      if (!r.thread.joinable()) continue;
      r.reactor->stop();
      r.thread.join();
    }
  }
};

}  // namespace rdmablk::transport

// rdma_queue_bench's target: its config (one subsystem, one null namespace), queues over the fake verbs, and
// the fabrics exchanges that bring a controller up.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "bench/rdma_queue_bench/driver.h"
#include "bench/rdma_queue_bench/fake_verbs.h"
#include "protocol/completion.h"
#include "target/config/config.h"
#include "target/core/core.h"
#include "transport/buffer_pool.h"
#include "transport/rdma/rdma_queue.h"

namespace rdmablk::bench::rdma_queue {

target::TargetConfig bench_config(const Config& cfg);

struct BenchQueue {
  std::unique_ptr<FakeQp> qp;
  std::unique_ptr<AlignedRegion> region;
  std::unique_ptr<RdmaTargetQueue> queue;
};

// A queue over its own fake QP on `cq`, started and with its RECVs posted.
BenchQueue make_queue(FakeCq& cq, transport::BufferPool& pool, target::TargetCore& core,
                      const transport::rdma::RdmaTargetOptions& opts, uint16_t qid, uint16_t entries,
                      uint16_t cntlid);

// One setup command: capsule in, run the reactor until its CQE went out and the CQ is drained.
p::Cqe exchange(Driver& driver, FakeCq& cq, FakeQp& qp, const p::Sqe& sqe, std::span<const uint8_t> icd);

// A fabrics Connect (admin queue: qid 0, cntlid kCntlidDynamic).
p::Cqe connect(Driver& driver, FakeCq& cq, FakeQp& qp, uint16_t cid, uint16_t qid, uint16_t sqsize0,
               uint16_t cntlid);

}  // namespace rdmablk::bench::rdma_queue

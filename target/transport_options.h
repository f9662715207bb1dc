// How the target sizes its transports from the configuration's queue limits: each reactor's buffer pool and
// the NVMe/TCP and RDMA queue options. The daemon uses these; so do benchmarks that build a target in-process,
// so that they measure what the daemon runs.
#pragma once

#include "target/config.h"
#include "transport/buffer_pool.h"
#include "transport/connection_limits.h"
#include "transport/rdma/rdma_queue.h"
#include "transport/tcp/tcp_target_queue.h"

namespace rdmablk::target {

transport::BufferPoolOptions buffer_pool_options(const QueueLimits& limits);
transport::tcp::TcpTargetOptions tcp_target_options(const QueueLimits& limits);
transport::rdma::RdmaTargetOptions rdma_target_options(const QueueLimits& limits);
transport::ConnectionLimitOptions connection_limit_options(const QueueLimits& limits);

}  // namespace rdmablk::target

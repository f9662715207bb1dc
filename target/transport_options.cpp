#include "target/transport_options.h"

#include <algorithm>

namespace rdmablk::target {

transport::BufferPoolOptions buffer_pool_options(const QueueLimits& limits) {
  transport::BufferPoolOptions o;
  // Small buffers carry in-capsule data and small I/O; large ones anything up to the max I/O size.
  o.small_size = std::max<std::size_t>(16 * 1024, std::max(limits.admin_inline_data, limits.io_inline_data));
  o.small_count = 1024;
  o.large_size = limits.max_io_size;
  // About 64 MiB of large buffers per reactor: enough for a queue depth of data at 512 KiB each.
  o.large_count = std::max(16u, static_cast<unsigned>((64u << 20) / limits.max_io_size));
  return o;
}

transport::tcp::TcpTargetOptions tcp_target_options(const QueueLimits& limits) {
  transport::tcp::TcpTargetOptions o;
  o.admin_in_capsule = limits.admin_inline_data;
  o.io_in_capsule = limits.io_inline_data;
  o.max_queue_depth = static_cast<uint16_t>(std::max(limits.io_queue_depth, limits.admin_queue_depth));
  o.max_data_transfer = limits.max_io_size;
  o.max_buffer_bytes = limits.queue_buffer_bytes;
  return o;
}

transport::rdma::RdmaTargetOptions rdma_target_options(const QueueLimits& limits) {
  transport::rdma::RdmaTargetOptions o;
  o.admin_in_capsule = limits.admin_inline_data;
  // Equal to what Identify's IOCCSZ advertises, so hosts never send more in-capsule data than we post.
  o.io_in_capsule = limits.io_inline_data;
  o.max_queue_depth = static_cast<uint16_t>(std::max(limits.io_queue_depth, limits.admin_queue_depth));
  o.max_data_transfer = limits.max_io_size;
  o.max_buffer_bytes = limits.queue_buffer_bytes;
  return o;
}

transport::ConnectionLimitOptions connection_limit_options(const QueueLimits& limits) {
  transport::ConnectionLimitOptions o;
  o.per_listener = limits.connections.per_listener;
  o.per_host = limits.connections.per_host;
  return o;
}

}  // namespace rdmablk::target

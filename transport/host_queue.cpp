// connect_host_queue: the one place that picks a transport for the initiator.
#include "transport/host_queue.h"

#include <cerrno>

#include "transport/rdma/rdma_host.h"
#include "transport/tcp/tcp_host.h"

namespace rdmablk::transport {

Result<std::unique_ptr<HostQueue>> connect_host_queue(const HostQueueOptions& opts) {
  switch (opts.address.type) {
    case TransportType::tcp:
      return tcp::connect_tcp_host_queue(opts);
    case TransportType::rdma:
      return rdma::connect_rdma_host_queue(opts);
  }
  return make_error("unknown transport type", EINVAL);
}

}  // namespace rdmablk::transport

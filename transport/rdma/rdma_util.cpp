#include "transport/rdma/rdma_util.h"

#include <fcntl.h>

#include <cerrno>

namespace rdmablk::transport::rdma {

std::string cm_peer_name(rdma_cm_id* id) { return id == nullptr ? "?" : sockaddr_name(rdma_get_peer_addr(id)); }

TransportAddress cm_local_address(rdma_cm_id* id) {
  if (id == nullptr) {
    TransportAddress unknown;
    unknown.type = TransportType::rdma;
    return unknown;
  }
  return transport_address_of(rdma_get_local_addr(id), TransportType::rdma);
}

int set_nonblocking(int fd) noexcept {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0) return -1;
  return ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

}  // namespace rdmablk::transport::rdma

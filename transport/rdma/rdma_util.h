// Small helpers shared by the RDMA target and host: addresses of rdma_cm ids (socket_address.h has the
// sockaddr ones), non-blocking fds.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <string>

#include "protocol/result.h"
#include "transport/address.h"
#include "transport/socket_address.h"

namespace rdmablk::transport::rdma {

std::string cm_peer_name(rdma_cm_id* id);
TransportAddress cm_local_address(rdma_cm_id* id);  // type rdma

int set_nonblocking(int fd) noexcept;  // 0 or -1 (errno set)

}  // namespace rdmablk::transport::rdma

// Small helpers shared by the RDMA target and host: addresses of rdma_cm ids, non-blocking fds.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <string>

#include "protocol/result.h"
#include "transport/address.h"

namespace rdmablk::transport::rdma {

struct RdmaSockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
};

// An IPv4/IPv6 literal (or host name) + port as a sockaddr. passive: an empty traddr is the wildcard.
Result<RdmaSockAddr> resolve_rdma_address(const TransportAddress& a, bool passive);

// "10.0.0.2:53211" / "[fe80::1]:4420" from a sockaddr ("?" when unknown).
std::string sockaddr_name(const sockaddr* sa);
std::string cm_peer_name(rdma_cm_id* id);
TransportAddress cm_local_address(rdma_cm_id* id);  // type rdma

int set_nonblocking(int fd) noexcept;  // 0 or -1 (errno set)

}  // namespace rdmablk::transport::rdma

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

// IBV_ACCESS_LOCAL_WRITE as an int for ibv_reg_mr: verbs.h's ibv_reg_mr macro ANDs its access argument
// with IBV_ACCESS_OPTIONAL_RANGE, a value of another enum, which C++20 deprecates (clang errors on the
// bare enumerator with -Wdeprecated-enum-enum-conversion; g++ is silent inside a system macro).
inline constexpr int kLocalWriteAccess = IBV_ACCESS_LOCAL_WRITE;

}  // namespace rdmablk::transport::rdma

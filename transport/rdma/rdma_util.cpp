#include "transport/rdma/rdma_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace rdmablk::transport::rdma {

Result<RdmaSockAddr> resolve_rdma_address(const TransportAddress& a, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const std::string port = std::to_string(a.trsvcid);
  const char* host = a.traddr.empty() ? nullptr : a.traddr.c_str();
  if (host == nullptr && !passive) return make_error("no address to connect to", EINVAL);
  int rc = ::getaddrinfo(host, port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return make_error("cannot resolve '" + a.traddr + "': " + ::gai_strerror(rc), EINVAL);
  }
  RdmaSockAddr out;
  std::memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

std::string sockaddr_name(const sockaddr* sa) {
  if (sa == nullptr) return "?";
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, sa, sizeof(in));
    ::inet_ntop(AF_INET, &in.sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(ntohs(in.sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, sa, sizeof(in6));
    ::inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(in6.sin6_port));
  }
  return "?";
}

std::string cm_peer_name(rdma_cm_id* id) { return id == nullptr ? "?" : sockaddr_name(rdma_get_peer_addr(id)); }

TransportAddress cm_local_address(rdma_cm_id* id) {
  TransportAddress a;
  a.type = TransportType::rdma;
  if (id == nullptr) return a;
  const sockaddr* sa = rdma_get_local_addr(id);
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, sa, sizeof(in));
    ::inet_ntop(AF_INET, &in.sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, sa, sizeof(in6));
    ::inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof(buf));
  }
  a.traddr = buf;
  a.trsvcid = ntohs(rdma_get_src_port(id));
  return a;
}

int set_nonblocking(int fd) noexcept {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0) return -1;
  return ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

}  // namespace rdmablk::transport::rdma

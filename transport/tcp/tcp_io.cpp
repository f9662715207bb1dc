#include "transport/tcp/tcp_io.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstring>

namespace rdmablk::transport::tcp {

std::string peer_name_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  return "?";
}

Result<SocketAddress> resolve_address(const TransportAddress& a, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const std::string port = std::to_string(a.trsvcid);
  const char* host = a.traddr.empty() ? nullptr : a.traddr.c_str();
  int rc = ::getaddrinfo(host, port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return make_error("cannot resolve '" + a.traddr + "': " + ::gai_strerror(rc), EINVAL);
  }
  SocketAddress out;
  std::memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

TransportAddress local_address_of(int fd) {
  TransportAddress out;
  out.type = TransportType::tcp;
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return out;
  char host[INET6_ADDRSTRLEN] = "";
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    out.trsvcid = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    out.trsvcid = ntohs(in->sin6_port);
  }
  out.traddr = host;
  return out;
}

}  // namespace rdmablk::transport::tcp

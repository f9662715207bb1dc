#include "transport/socket_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace rdmablk::transport {

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

namespace {
// The host part and port of an IPv4/IPv6 sockaddr; false for anything else.
bool host_and_port(const sockaddr* sa, std::string& host, uint16_t& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa == nullptr) return false;
  if (sa->sa_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, sa, sizeof(in));
    ::inet_ntop(AF_INET, &in.sin_addr, buf, sizeof(buf));
    port = ntohs(in.sin_port);
  } else if (sa->sa_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, sa, sizeof(in6));
    ::inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof(buf));
    port = ntohs(in6.sin6_port);
  } else {
    return false;
  }
  host = buf;
  return true;
}
}  // namespace

std::string sockaddr_name(const sockaddr* sa) {
  std::string host;
  uint16_t port = 0;
  if (!host_and_port(sa, host, port)) return "?";
  return (sa->sa_family == AF_INET6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

TransportAddress transport_address_of(const sockaddr* sa, TransportType type) {
  TransportAddress out;
  out.type = type;
  (void)host_and_port(sa, out.traddr, out.trsvcid);
  return out;
}

}  // namespace rdmablk::transport

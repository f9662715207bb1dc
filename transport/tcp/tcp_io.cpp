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
  return sockaddr_name(reinterpret_cast<const sockaddr*>(&ss));
}

TransportAddress local_address_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    TransportAddress unknown;
    unknown.type = TransportType::tcp;
    return unknown;
  }
  return transport_address_of(reinterpret_cast<const sockaddr*>(&ss), TransportType::tcp);
}

}  // namespace rdmablk::transport::tcp

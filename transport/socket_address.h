// Socket addresses for both transports: NVMe/TCP sockets and rdma_cm ids take the same sockaddrs.
#pragma once

#include <sys/socket.h>

#include <string>

#include "protocol/result.h"
#include "transport/address.h"

namespace rdmablk::transport {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t len = 0;
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }
};

// traddr/trsvcid as a sockaddr (numeric addresses or host names). passive: an empty traddr is the
// wildcard (getaddrinfo's rules: for an active address, loopback).
Result<SocketAddress> resolve_address(const TransportAddress& a, bool passive);

// "10.0.0.2:53211" / "[fe80::1]:4420" ("?" when null or not IPv4/IPv6).
std::string sockaddr_name(const sockaddr* sa);

// The IP and port of an IPv4/IPv6 sockaddr as a TransportAddress of `type` (empty traddr otherwise).
TransportAddress transport_address_of(const sockaddr* sa, TransportType type);

}  // namespace rdmablk::transport

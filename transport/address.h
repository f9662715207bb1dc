// Transport addresses as NVMe-oF names them: a transport type (TRTYPE), an address (TRADDR) and a
// service id (TRSVCID, the port). Shared by the target's listeners and the initiator's connections.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/result.h"

namespace rdmablk::transport {

// Values are NVMe-oF TRTYPE codes (discovery log entry byte 0).
enum class TransportType : uint8_t { rdma = 1, tcp = 3 };

struct TransportAddress {
  TransportType type = TransportType::tcp;
  std::string traddr;      // IPv4 or IPv6 literal, or a host name resolved by the caller
  uint16_t trsvcid = 4420;  // port
};

inline constexpr uint16_t kDefaultIoPort = 4420;
inline constexpr uint16_t kDefaultDiscoveryPort = 8009;

const char* transport_name(TransportType t) noexcept;  // "tcp" / "rdma"
Result<TransportType> parse_transport_type(std::string_view s);  // "tcp" | "rdma" (any case)
Result<uint16_t> parse_port(std::string_view s);               // 1..65535, decimal only

// "tcp://127.0.0.1:4420", "rdma://[fe80::1]:4420"; the port may be omitted (4420).
Result<TransportAddress> parse_transport_uri(std::string_view uri);
std::string to_uri(const TransportAddress& a);

}  // namespace rdmablk::transport

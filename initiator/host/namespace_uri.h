// A remote namespace named in one string, as bench job files and the CLI accept it:
//   tcp://127.0.0.1:4420/nqn.2024-01.io.rdmablk:vol0/1
//   rdma://[fe80::1]:4420/nqn.2024-01.io.rdmablk:vol0      (NSID defaults to 1)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/result.h"
#include "transport/address.h"

namespace rdmablk::initiator {

struct NamespaceUri {
  transport::TransportAddress address;
  std::string subnqn;
  uint32_t nsid = 1;
};

Result<NamespaceUri> parse_namespace_uri(std::string_view uri);

}  // namespace rdmablk::initiator

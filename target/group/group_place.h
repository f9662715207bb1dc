// Where a gateway group keeps its RADOS objects (its state, its members' leases): a pool, an optional RADOS
// namespace, and the group's name, which every object name carries.
#pragma once

#include <string>
#include <string_view>

#include "backend/rados_cluster.h"
#include "protocol/result.h"

namespace rdmablk::target::group {

struct GroupPlace {
  std::string pool;             // the group's pool
  std::string rados_namespace;  // optional
  std::string group;            // the group's name

  // "pool[/namespace]/object", for messages.
  std::string where(const std::string& object) const;
  std::string pool_and_namespace() const;  // "POOL" or "POOL/NAMESPACE"
};

// An ioctx on the place's pool and namespace, for `object`. Errors start with `what` and name the pool.
Result<rados_ioctx_t> open_ioctx(const backend::RadosCluster& cluster, const GroupPlace& place,
                                 const std::string& object, std::string_view what);

}  // namespace rdmablk::target::group

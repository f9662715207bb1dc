#include "target/group/group_place.h"

#include <cerrno>

#include <fmt/format.h>

namespace rdmablk::target::group {

std::string GroupPlace::where(const std::string& object) const {
  return fmt::format("{}/{}", pool_and_namespace(), object);
}

std::string GroupPlace::pool_and_namespace() const {
  return rados_namespace.empty() ? pool : fmt::format("{}/{}", pool, rados_namespace);
}

Result<rados_ioctx_t> open_ioctx(const backend::RadosCluster& cluster, const GroupPlace& place,
                                 const std::string& object, std::string_view what) {
  if (place.pool.empty() || place.group.empty())
    return make_error(fmt::format("{}: pool and group are required", what), EINVAL);
  backend::AsyncSignalsBlocked blocked;  // librados may start threads
  rados_ioctx_t io = nullptr;
  const int rc = rados_ioctx_create(cluster.handle(), place.pool.c_str(), &io);
  if (rc < 0) {
    return make_error(fmt::format("{} {}: cannot open pool {}: {}", what, place.where(object), place.pool,
                                  backend::rados_errstr(rc)),
                      -rc);
  }
  if (!place.rados_namespace.empty()) rados_ioctx_set_namespace(io, place.rados_namespace.c_str());
  return io;
}

}  // namespace rdmablk::target::group

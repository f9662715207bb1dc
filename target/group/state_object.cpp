#include "target/group/state_object.h"

namespace rdmablk::target::group {

std::string state_object_name(const std::string& group) { return "rdmablk.group." + group; }

Result<std::unique_ptr<StateObject>> StateObject::open(std::shared_ptr<backend::RadosCluster> cluster,
                                                       const GroupPlace& o) {
  const std::string name = state_object_name(o.group);
  auto io = open_ioctx(*cluster, o, name, "group state");
  if (!io) return tl::unexpected(io.error());
  return std::make_unique<StateObject>(std::move(cluster), *io, name, "group state", o.where(name));
}

}  // namespace rdmablk::target::group

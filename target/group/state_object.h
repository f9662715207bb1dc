// A gateway group's shared state (issue 28; docs/gateway-groups.md): one RADOS object, rdmablk.group.GROUP,
// that every member reads whole, changes with an optimistic version check and watches for the others'
// changes (backend/rados_object.h says how).
#pragma once

#include <memory>
#include <string>

#include "backend/rados_object.h"
#include "target/group/group_place.h"

namespace rdmablk::target::group {

class StateObject final : public backend::RadosObject {
 public:
  using RadosObject::RadosObject;
  static Result<std::unique_ptr<StateObject>> open(std::shared_ptr<backend::RadosCluster> cluster, const GroupPlace& o);
};

// rdmablk.group.GROUP
std::string state_object_name(const std::string& group);

}  // namespace rdmablk::target::group

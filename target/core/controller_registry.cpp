// The controller registry (controller_registry.h): CNTLID allocation, lookup, and the events of one controller.
#include "target/core/controller_registry.h"

#include <algorithm>

#include "protocol/command.h"
#include "protocol/completion.h"
#include "protocol/log_pages.h"

namespace rdmablk::target {

uint16_t ControllerRegistry::allocate(uint16_t min, uint16_t max, uint16_t& next) const noexcept {
  min = std::max(min, kMinCntlid);
  max = std::min(max, kMaxCntlid);
  if (min > max) return 0;
  if (next < min || next > max) next = min;
  const uint32_t span = uint32_t{max} - min + 1;
  for (uint32_t tries = 0; tries < span; ++tries) {
    const uint16_t id = next;
    next = next >= max ? min : static_cast<uint16_t>(next + 1);
    if (controllers_.count(id) == 0) return id;
  }
  return 0;
}

void ControllerRegistry::add(std::shared_ptr<Controller> ctrl) {
  const uint16_t id = ctrl->cntlid;
  controllers_.emplace(id, std::move(ctrl));
}

std::shared_ptr<Controller> ControllerRegistry::find(uint16_t cntlid) const {
  auto it = controllers_.find(cntlid);
  return it == controllers_.end() ? nullptr : it->second;
}

void ControllerRegistry::queue_event(Controller& ctrl, uint32_t dw0, uint32_t mask_bit, uint32_t aec_bit) {
  if (ctrl.dead) return;
  if (aec_bit != 0 && (ctrl.aec & aec_bit) == 0) return;  // host did not ask for this event type
  if ((ctrl.aen_masked & mask_bit) != 0) return;  // already reported, log page not read yet
  ctrl.aen_masked |= mask_bit;
  ctrl.pending_events.push_back({dw0, ++ctrl.event_seq});
}

void ControllerRegistry::note_changed_namespaces(Controller& ctrl, const std::vector<uint32_t>& changed) {
  for (uint32_t nsid : changed) {
    if (ctrl.changed_overflow) break;
    if (std::find(ctrl.changed_namespaces.begin(), ctrl.changed_namespaces.end(), nsid) !=
        ctrl.changed_namespaces.end())
      continue;
    if (ctrl.changed_namespaces.size() == kMaxChangedNamespaces) {
      ctrl.changed_overflow = true;
      break;
    }
    ctrl.changed_namespaces.push_back(nsid);
  }
  queue_event(ctrl,
              protocol::async_event_result(
                  protocol::AsyncEventType::notice,
                  static_cast<uint8_t>(protocol::AsyncEventNotice::namespace_attribute_changed),
                  static_cast<uint8_t>(protocol::LogPageId::changed_namespace_list)),
              kAenMaskNamespace, protocol::kAecNamespaceAttribute);
}

}  // namespace rdmablk::target

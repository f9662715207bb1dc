// The reservation state of a namespace kept in its volume's store (backend::SideObject): for an rbd namespace,
// a RADOS object next to the image ("rdmablk.reservations.IMAGE" in its pool and RADOS namespace), so every
// target that exports the image reads the same state. Same bytes as the state file (state_format.h) and the
// same recovery rules (ptpl_store.h), except where unusable bytes go: copied to the side object "...corrupt"
// next to it. Coherence between targets that change it at the same time belongs to gateway groups (issue 28):
// here one target writes it, whole and atomically (write_full), and any target reads it when it opens the
// namespace.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "target/reservations/ptpl_store.h"

namespace rdmablk::target::reservations {

class ObjectReservationStore final : public ReservationStore {
 public:
  // `object`: where the state lives; `aside`: where an unusable one is copied.
  ObjectReservationStore(std::unique_ptr<backend::SideObject> object, std::unique_ptr<backend::SideObject> aside);

  Result<std::optional<ReservationState>> load() override;
  Result<void> save(const ReservationState& state) override;
  backend::RadosObject* shared_object() override { return object_->versioned(); }

 private:
  std::unique_ptr<backend::SideObject> object_;
  std::unique_ptr<backend::SideObject> aside_;
};

// The store for a namespace on `backend`: an ObjectReservationStore when the backend has side objects, else
// a FileReservationStore in `state_dir` (null when that is empty: the namespace cannot persist its state).
std::unique_ptr<ReservationStore> reservation_store_for(const backend::Backend& backend,
                                                        const std::filesystem::path& state_dir, std::string_view subnqn,
                                                        uint32_t nsid);

}  // namespace rdmablk::target::reservations

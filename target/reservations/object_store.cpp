// Reservation state in the volume's store (object_store.h).
#include "target/reservations/object_store.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "target/reservations/state_format.h"

namespace rdmablk::target::reservations {

ObjectReservationStore::ObjectReservationStore(std::unique_ptr<backend::SideObject> object,
                                               std::unique_ptr<backend::SideObject> aside)
    : object_(std::move(object)), aside_(std::move(aside)) {}

Result<std::optional<ReservationState>> ObjectReservationStore::load() {
  auto bytes = object_->read();
  if (!bytes) return tl::unexpected(bytes.error());
  if (!*bytes) {
    spdlog::debug("reservations: no saved state in {}", object_->describe());
    return std::optional<ReservationState>{};
  }
  return state_from_saved(**bytes, object_->describe(), [&]() -> std::string {
    // Copied, not moved: the next save replaces the original.
    if (auto copied = aside_->write(**bytes); !copied) return "not copied aside (" + copied.error().message + ")";
    return "copied to " + aside_->describe();
  });
}

Result<void> ObjectReservationStore::save(const ReservationState& state) {
  if (!state.ptpl) return object_->remove();
  return object_->write(serialize_state(state));
}

std::unique_ptr<ReservationStore> reservation_store_for(const backend::Backend& backend,
                                                        const std::filesystem::path& state_dir, std::string_view subnqn,
                                                        uint32_t nsid) {
  auto object = backend.side_object("reservations");
  auto aside = object ? backend.side_object("reservations-corrupt") : nullptr;
  if (object && aside) return std::make_unique<ObjectReservationStore>(std::move(object), std::move(aside));
  if (state_dir.empty()) return nullptr;
  return std::make_unique<FileReservationStore>(state_dir, state_file_name(subnqn, nsid));
}

}  // namespace rdmablk::target::reservations

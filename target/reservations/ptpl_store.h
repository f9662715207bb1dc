// Persist Through Power Loss: where a namespace's ReservationState survives a restart, a kill -9 or a power
// loss. With PTPL cleared it must not: "reservations are released and registrants are cleared on a power on"
// (Base 2.0, Reservation Register CPTPL 10b; the Reservation Persistence feature).
//
// ReservationStore is the interface the core uses; FileReservationStore keeps one file per namespace in a
// state directory. A store for RBD namespaces (a RADOS object next to the image) implements the same
// interface with the same bytes (state_format.h).
//
// The file store's recovery rules:
//   - NAME missing (nothing saved, PTPL never set or cleared since): no state. Normal; logged at debug.
//   - NAME empty (a truncating copy, a file system that lost the data of a fresh file): no state, a warning.
//   - NAME unreadable (permissions, I/O error): an error; the file stays where it is.
//   - NAME torn, corrupt, of an unknown version, or holding an impossible state: an error saying which, and
//     the file is renamed NAME.corrupt (replacing an older one). Kept, not deleted: it is the only copy of
//     the registrations an operator may want to see or restore, and moved aside, it neither stops the next
//     start nor is overwritten by the next save.
//   - NAME.tmp left by a crash before its rename: removed (NAME, if any, is the last complete save).
// An error from load() never stops a namespace from loading: the caller logs it and starts the namespace
// with no reservations (ReservationState{}), as if it had never had any.
//
// Crash safety of save(): write NAME.tmp, fsync it, rename it over NAME, fsync the directory. After a crash
// NAME is the old state or the new one, whole. One FileReservationStore per file, used by one thread at a
// time (the core saves under the namespace's reservation lock); two targets must not share a state directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/result.h"
#include "target/reservations/reservation_model.h"

namespace rdmablk::backend {
class RadosObject;
}

namespace rdmablk::target::reservations {

class ReservationStore {
 public:
  virtual ~ReservationStore() = default;
  // The saved state, or nullopt when there is none. An error: a saved state exists but cannot be used (see
  // the recovery rules above); the namespace starts with no reservations all the same.
  virtual Result<std::optional<ReservationState>> load() = 0;
  // After an Outcome with `changed`: with PTPL set, `state` is what load() returns after a crash; with PTPL
  // cleared, the saved state is removed (load() returns nullopt).
  virtual Result<void> save(const ReservationState& state) = 0;
  // The same place as an object several targets can change coherently (versioned writes, watch/notify),
  // when the store has one (RADOS); null otherwise.
  virtual backend::RadosObject* shared_object() { return nullptr; }
};

class FileReservationStore final : public ReservationStore {
 public:
  // The file `dir`/`name`; `dir` is created (0700) by the first save that needs it.
  FileReservationStore(std::filesystem::path dir, const std::string& name);

  Result<std::optional<ReservationState>> load() override;
  Result<void> save(const ReservationState& state) override;

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  Result<void> write(const ReservationState& state);
  Result<void> remove();

  std::filesystem::path dir_;
  std::filesystem::path path_;  // dir_/name
  std::filesystem::path tmp_;   // dir_/name.tmp
};

// The recovery rules above for the bytes a store read from `where` (a file, an object): the state, nullopt
// (empty, or saved without PTPL), or an error when they are not a usable state, after `set_aside()` moved
// them out of the way and said where to (for the message).
Result<std::optional<ReservationState>> state_from_saved(std::span<const uint8_t> bytes, const std::string& where,
                                                         const std::function<std::string()>& set_aside);

// The file name of namespace `nsid` of subsystem `subnqn` in a state directory: "<subnqn>-ns<nsid>.resv",
// every byte of the NQN outside [A-Za-z0-9.:_-] written as %XX (so '/' cannot leave the directory and two
// NQNs never share a name), and a leading '.' too (no hidden files).
std::string state_file_name(std::string_view subnqn, uint32_t nsid);

}  // namespace rdmablk::target::reservations

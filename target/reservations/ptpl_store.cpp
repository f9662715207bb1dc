// The reservation state file of one namespace (ptpl_store.h).
#include "target/reservations/ptpl_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "target/reservations/durable_file.h"
#include "target/reservations/state_format.h"

namespace rdmablk::target::reservations {

namespace fs = std::filesystem;

namespace {

std::string errstr(int err) { return std::strerror(err); }

// Removes `path` if it exists: whether it did.
Result<bool> remove_if_there(const fs::path& path) {
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  return make_error(fmt::format("removing {}: {}", path.string(), errstr(errno)), errno);
}

}  // namespace

FileReservationStore::FileReservationStore(fs::path dir, const std::string& name)
    : dir_(std::move(dir)), path_(dir_ / name), tmp_(dir_ / (name + ".tmp")) {}

Result<std::optional<ReservationState>> FileReservationStore::load() {
  // A crash between writing NAME.tmp and renaming it: NAME (if any) is the last complete save.
  if (auto gone = remove_if_there(tmp_); !gone)
    spdlog::warn("reservations: {}", gone.error().message);  // harmless: the next save replaces it
  else if (*gone) spdlog::warn("reservations: removed {} left by an interrupted save", tmp_.string());
  auto bytes = read_small_file(path_, kMaxStateSize);
  if (!bytes) return tl::unexpected(bytes.error());
  if (!*bytes) {
    spdlog::debug("reservations: no saved state in {}", path_.string());
    return std::optional<ReservationState>{};
  }
  return state_from_saved(**bytes, path_.string(), [&] {
    const fs::path aside = path_.string() + ".corrupt";
    std::error_code ec;
    fs::rename(path_, aside, ec);
    return ec ? fmt::format("left in place (renaming it to {}: {})", aside.string(), ec.message())
              : fmt::format("moved to {}", aside.string());
  });
}

Result<std::optional<ReservationState>> state_from_saved(std::span<const uint8_t> bytes, const std::string& where,
                                                         const std::function<std::string()>& set_aside) {
  if (bytes.empty()) {
    spdlog::warn("reservations: {} is empty: the namespace starts with no reservations", where);
    return std::optional<ReservationState>{};
  }
  auto state = parse_state(bytes);
  if (!state) {
    const std::string problem = state_format_problem_name(state.error().problem);
    return make_error(fmt::format("reservation state {} is {} ({}); {}; the namespace starts with no reservations",
                                  where, problem, state.error().detail, set_aside()));
  }
  if (!state->ptpl) {  // save() never writes one; a state without PTPL does not outlive its process
    spdlog::warn("reservations: {} holds a state without PTPL: ignored", where);
    return std::optional<ReservationState>{};
  }
  return std::optional<ReservationState>(std::move(*state));
}

Result<void> FileReservationStore::save(const ReservationState& state) { return state.ptpl ? write(state) : remove(); }

Result<void> FileReservationStore::write(const ReservationState& state) {
  return replace_file_durably(path_, serialize_state(state));
}

Result<void> FileReservationStore::remove() {
  auto tmp = remove_if_there(tmp_);
  if (!tmp) return tl::unexpected(tmp.error());
  auto removed = remove_if_there(path_);
  if (!removed) return tl::unexpected(removed.error());
  if (*removed || *tmp) return fsync_dir(dir_);
  return {};
}

std::string state_file_name(std::string_view subnqn, uint32_t nsid) {
  std::string out;
  for (std::size_t i = 0; i < subnqn.size(); ++i) {
    const auto c = static_cast<unsigned char>(subnqn[i]);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
                       c == '_' || c == '-' || (c == '.' && i != 0);
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return fmt::format("{}-ns{}.resv", out, nsid);
}

}  // namespace rdmablk::target::reservations

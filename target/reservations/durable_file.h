// Small files replaced whole and durably: write NAME.tmp, fsync it, rename it over NAME, fsync the directory.
// After a crash NAME is the old or the new content, never a mix. The reservation state files
// (ptpl_store.h) and the management API's overlay (target/manage/) are written this way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

#include "protocol/result.h"

namespace rdmablk::target {

// Creates `path`'s directory if needed; the file gets mode 0600 (it may hold secrets). On error `path`
// keeps its previous content and the temporary file is removed.
Result<void> replace_file_durably(const std::filesystem::path& path, std::span<const uint8_t> bytes);

// A rename or an unlink in `dir` survives a power loss once the directory itself is synced.
Result<void> fsync_dir(const std::filesystem::path& dir);

// The whole file, at most `max_size` + 1 bytes (the caller says "too big"); nullopt when it does not exist.
Result<std::optional<std::vector<uint8_t>>> read_small_file(const std::filesystem::path& path, std::size_t max_size);

}  // namespace rdmablk::target

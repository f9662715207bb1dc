// The configuration that runs: the config file (the base, as last loaded) with the changes made through the
// management API replayed on it (the overlay). The overlay is saved, crash-safe, in
// STATE_DIR/managed/<the config file's path, escaped>.json, so an API change survives a restart; the file
// stays as the operator wrote it, comments and all.
//
// Why an overlay of edits rather than writing the YAML back: yaml-cpp cannot keep comments or layout, and
// a writer of the whole TargetConfig would lose any key it forgot; replaying the requests as they came goes
// through the same parser as the file and keeps every edit visible (`ctl managed`).
//
// Reload and the API do not undo each other silently: a reload replays the overlay on the file as it now is,
// and fails, naming the overlay entry and the reason, when an entry no longer applies (a namespace added
// through the API that the file now defines differently, say). Removing what the file no longer has is
// not such a failure.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "protocol/result.h"
#include "target/config/config.h"
#include "target/config/config_document.h"

namespace rdmablk::target::manage {

struct ManagedEdit {
  std::string verb;
  nlohmann::json params;  // as requested (secrets included: the file is root's, mode 0600)
  std::string at;         // when, ISO 8601 UTC
};

struct ManagedConfig {
  ConfigDocument base;              // the config file as last loaded
  std::string overlay_path;         // empty: no state_dir, API changes last until restart
  std::vector<ManagedEdit> edits;   // in the order they were made
  TargetConfig config;              // base + edits: what runs
};

// Where the overlay of `config_path` lives under `state_dir` (empty when state_dir is).
std::string overlay_path_for(const std::string& state_dir, const std::string& config_path);

// Reads the config file and its overlay and replays it. Errors in the file name its lines; errors of the
// overlay name the overlay file and the entry.
Result<ManagedConfig> load_managed_config(const std::string& config_path);

// The same edits replayed on the file as it now is (a reload).
Result<ManagedConfig> reload_base(const ManagedConfig& running);

// A request: the next state, or the error (one line naming the field). `changed` is false when the request
// asks for what is already so (an *_add of an identical object, a set to the current values): nothing is
// saved or applied then.
struct Proposal {
  ManagedConfig next;
  bool changed = false;
};
Result<Proposal> propose_edit(const ManagedConfig& running, const std::string& verb, const nlohmann::json& params);

// What `ctl managed` shows: {"overlay": PATH or null, "edits": [{"verb", "params", "at"}]}, secrets redacted.
nlohmann::json overlay_json(const ManagedConfig& state);

// Writes the overlay file (write to a temporary file, fsync, rename, fsync the directory).
Result<void> save_overlay(const ManagedConfig& state);

// A gateway group keeps its members' shared edits in RADOS (target/daemon/group_edits.h) in the overlay's
// format: {"version": 1, "edits": [{"verb", "params", "at"}]}. decode_edits' errors start with `where`.
std::string encode_edits(const std::vector<ManagedEdit>& edits);
Result<std::vector<ManagedEdit>> decode_edits(std::span<const uint8_t> bytes, const std::string& where);
// `running`'s file with `edits` (the group's) in place of its own: errors name `where` and the entry.
Result<ManagedConfig> with_edits(const ManagedConfig& running, std::vector<ManagedEdit> edits,
                                 const std::string& where);

}  // namespace rdmablk::target::manage

// The config file plus the management API's overlay (managed_config.h).
#include "target/manage/managed_config.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <filesystem>

#include "target/core/reload_plan.h"
#include "target/manage/config_edits.h"
#include "target/reservations/durable_file.h"

namespace rdmablk::target::manage {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxOverlaySize = 16u << 20;
constexpr int kOverlayVersion = 1;

std::string now_iso() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", tm);
}

// The edits of an overlay document (a file's bytes, or a group's state object).
Result<std::vector<ManagedEdit>> parse_edits(std::span<const uint8_t> bytes, const std::string& where) {
  json doc = json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("edits") || !doc["edits"].is_array()) {
    return make_error(where + ": not a management overlay (expected a JSON object with an `edits` list)", EINVAL);
  }
  if (doc.value("version", 0) != kOverlayVersion) {
    return make_error(fmt::format("{}: overlay version {} (this target reads {})", where, doc.value("version", 0),
                                  kOverlayVersion),
                      EINVAL);
  }
  std::vector<ManagedEdit> edits;
  for (std::size_t i = 0; i < doc["edits"].size(); ++i) {
    const json& e = doc["edits"][i];
    if (!e.is_object() || !e.contains("verb") || !e["verb"].is_string() || !e.contains("params") ||
        !e["params"].is_object() || (e.contains("at") && !e["at"].is_string())) {
      return make_error(fmt::format("{}: entry {}: expected {{\"verb\": ..., \"params\": {{...}}}}", where, i + 1),
                        EINVAL);
    }
    if (find_edit_verb(e["verb"].get<std::string>()) == nullptr) {
      return make_error(fmt::format("{}: entry {}: unknown verb {}", where, i + 1, e["verb"].dump()), EINVAL);
    }
    edits.push_back({e["verb"].get<std::string>(), e["params"], e.value("at", std::string())});
  }
  return edits;
}

// The overlay's entries; an absent file is none.
Result<std::vector<ManagedEdit>> read_overlay(const std::string& path) {
  if (path.empty()) return std::vector<ManagedEdit>{};
  auto bytes = read_small_file(path, kMaxOverlaySize);
  if (!bytes) return tl::unexpected(bytes.error());
  if (!*bytes) return std::vector<ManagedEdit>{};
  if ((*bytes)->size() > kMaxOverlaySize) return make_error(path + ": larger than 16 MiB: not an overlay", EINVAL);
  auto edits = parse_edits(**bytes, path);
  if (!edits) {
    return make_error(edits.error().message + "; move it aside to start without the API's changes", EINVAL);
  }
  return edits;
}

json edits_json(const std::vector<ManagedEdit>& edits) {
  json out = json::array();
  for (const auto& e : edits) out.push_back({{"verb", e.verb}, {"params", e.params}, {"at", e.at}});
  return out;
}

std::string describe_edit(const ManagedEdit& e, std::size_t index) {
  std::string what = e.verb;
  for (const char* key : {"nqn", "subsystem", "nsid", "host", "address", "listener"}) {
    if (e.params.contains(key)) what += fmt::format(" {}", e.params[key].dump());
  }
  return fmt::format("entry {} ({})", index + 1, what);
}

// Whether two documents give the same configuration (as far as a reload applies it); an unparsable one
// differs from anything.
bool same_config(const ConfigDocument& a, const ConfigDocument& b) {
  auto ca = config_from_document(a);
  auto cb = config_from_document(b);
  return ca && cb && plan_changes(*ca, *cb).empty();
}

// base + edits, as a document and as a configuration. Errors name the overlay entry that failed.
Result<TargetConfig> replay(const ConfigDocument& base, const std::vector<ManagedEdit>& edits,
                            const std::string& overlay_path) {
  ConfigDocument doc = base.clone();
  for (std::size_t i = 0; i < edits.size(); ++i) {
    const ConfigDocument before = edits[i].verb.ends_with("_add") ? doc.clone() : ConfigDocument{};
    auto r = apply_edit(doc.root, edits[i].verb, edits[i].params, Mode::replay);
    if (!r) {
      return make_error(fmt::format("{}: {} no longer applies: {}", overlay_path, describe_edit(edits[i], i),
                                    r.error().message),
                        EINVAL);
    }
    if (*r == EditResult::replaced && !same_config(before, doc)) {
      return make_error(fmt::format("{}: {} no longer applies: {} now has it with other settings (remove it from "
                                    "one of the two)",
                                    overlay_path, describe_edit(edits[i], i), base.path),
                        EEXIST);
    }
  }
  auto config = config_from_document(doc, overlay_path.empty() ? base.path : overlay_path);
  if (config || edits.empty()) return config;
  // Which entry broke it: the first one after which the document no longer parses.
  ConfigDocument step = base.clone();
  for (std::size_t i = 0; i < edits.size(); ++i) {
    (void)apply_edit(step.root, edits[i].verb, edits[i].params, Mode::replay);
    auto c = config_from_document(step, overlay_path);
    if (!c) {
      return make_error(fmt::format("{}: {} no longer applies to {}: {}", overlay_path, describe_edit(edits[i], i),
                                    base.path, c.error().message),
                        EINVAL);
    }
  }
  return config;
}

std::string escape_path(const std::string& path) {
  std::string out;
  for (char c : path) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '/') {
      out += '-';
    } else if (std::isalnum(u) || c == '_' || c == '.') {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  return out;
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  std::string absolute = fs::absolute(path, ec).lexically_normal().string();
  return ec ? path : absolute;
}

}  // namespace

std::string overlay_path_for(const std::string& state_dir, const std::string& config_path) {
  if (state_dir.empty()) return {};
  std::string absolute = absolute_path(config_path);
  while (!absolute.empty() && absolute.front() == '/') absolute.erase(0, 1);
  return (fs::path(state_dir) / "managed" / (escape_path(absolute) + ".json")).string();
}

namespace {

// The file (read just now) with the overlay its state_dir holds.
Result<ManagedConfig> with_overlay(ConfigDocument base) {
  // The file alone first: its own errors carry its lines, and it says where the overlay is.
  auto alone = config_from_document(base);
  if (!alone) return tl::unexpected(alone.error());
  ManagedConfig out;
  out.overlay_path = overlay_path_for(alone->state_dir, base.path);
  auto edits = read_overlay(out.overlay_path);
  if (!edits) return tl::unexpected(edits.error());
  out.edits = std::move(*edits);
  if (out.edits.empty()) {
    out.config = std::move(*alone);
  } else {
    auto config = replay(base, out.edits, out.overlay_path);
    if (!config) return tl::unexpected(config.error());
    out.config = std::move(*config);
  }
  out.base = std::move(base);
  return out;
}

}  // namespace

Result<ManagedConfig> load_managed_config(const std::string& config_path) {
  auto base = read_config_document(config_path);
  if (!base) return tl::unexpected(base.error());
  return with_overlay(std::move(*base));
}

Result<ManagedConfig> reload_base(const ManagedConfig& running) {
  auto base = read_config_document(running.base.path);
  if (!base) return tl::unexpected(base.error());
  auto alone = config_from_document(*base);  // the file's own errors, with its lines
  if (!alone) return tl::unexpected(alone.error());
  // The edits this process knows (the overlay file holds the same; without a state_dir only this copy
  // does), at the overlay path it started with: state_dir takes effect at restart.
  ManagedConfig next;
  next.overlay_path = running.overlay_path;
  next.edits = running.edits;
  if (next.edits.empty()) {
    next.config = std::move(*alone);
  } else {
    auto config =
        replay(*base, next.edits, next.overlay_path.empty() ? std::string("the API's changes") : next.overlay_path);
    if (!config) return tl::unexpected(config.error());
    next.config = std::move(*config);
  }
  next.base = std::move(*base);
  return next;
}

Result<Proposal> propose_edit(const ManagedConfig& running, const std::string& verb, const json& params) {
  ConfigDocument doc = running.base.clone();
  for (const auto& e : running.edits) {
    if (auto r = apply_edit(doc.root, e.verb, e.params, Mode::replay); !r) return tl::unexpected(r.error());
  }
  auto result = apply_edit(doc.root, verb, params, Mode::request);
  if (!result) return tl::unexpected(result.error());
  auto config = config_from_document(doc, "request");
  if (!config) return tl::unexpected(config.error());
  const bool changed = !plan_changes(running.config, *config).empty();
  if (*result == EditResult::replaced && changed) {
    return make_error("it exists already, with other settings (change it with the _set verb, or remove it first)",
                      EEXIST);
  }
  Proposal p;
  p.changed = changed;
  p.next.base = running.base;
  p.next.overlay_path = running.overlay_path;
  p.next.edits = running.edits;
  if (changed) p.next.edits.push_back({verb, params, now_iso()});
  p.next.config = changed ? std::move(*config) : running.config;
  return p;
}

json overlay_json(const ManagedConfig& state) {
  json edits = json::array();
  for (const auto& e : state.edits) {
    edits.push_back({{"verb", e.verb}, {"params", redact_secrets(e.params)}, {"at", e.at}});
  }
  return json{{"overlay", state.overlay_path.empty() ? json() : json(state.overlay_path)}, {"edits", std::move(edits)}};
}

Result<void> save_overlay(const ManagedConfig& state) {
  if (state.overlay_path.empty()) return {};
  json edits = edits_json(state.edits);
  json doc{{"version", kOverlayVersion},
           {"config", absolute_path(state.base.path)},
           {"note",
            "changes made through rdmablk-target's management API, replayed on the config file at start "
            "and reload; edit with `rdmablk-target ctl`"},
           {"edits", std::move(edits)}};
  const std::string text = doc.dump(2) + "\n";
  return replace_file_durably(state.overlay_path,
                              std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace rdmablk::target::manage

namespace rdmablk::target::manage {

std::string encode_edits(const std::vector<ManagedEdit>& edits) {
  return json{{"version", kOverlayVersion}, {"edits", edits_json(edits)}}.dump();
}

Result<std::vector<ManagedEdit>> decode_edits(std::span<const uint8_t> bytes, const std::string& where) {
  if (bytes.size() > kMaxOverlaySize) return make_error(where + ": larger than 16 MiB: not an overlay", EINVAL);
  return parse_edits(bytes, where);
}

Result<ManagedConfig> with_edits(const ManagedConfig& running, std::vector<ManagedEdit> edits,
                                 const std::string& where) {
  ManagedConfig next;
  next.base = running.base.clone();
  next.overlay_path = running.overlay_path;
  next.edits = std::move(edits);
  auto config = next.edits.empty() ? config_from_document(next.base) : replay(next.base, next.edits, where);
  if (!config) return tl::unexpected(config.error());
  next.config = std::move(*config);
  return next;
}

}  // namespace rdmablk::target::manage

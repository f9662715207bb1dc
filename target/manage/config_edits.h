// The live management API's edits: each verb that changes the target (namespace_add, host_remove, ...) is
// an edit of the configuration document, the YAML tree the config file was read into. The edited document
// then goes through the config parser like the file does, so an API change is checked by the same rules,
// and the reload planner turns it into the same change list as the same edit made to the file.
//
// One table (kEditVerbs) lists the verbs, their identifying parameters and what they do; the control
// protocol, `rdmablk-target ctl` and docs/management-api.md follow it.
#pragma once

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <span>
#include <string>
#include <string_view>

#include "protocol/result.h"

namespace rdmablk::target::manage {

struct EditVerb {
  std::string_view name;
  std::string_view identity;  // the parameters that name the object, e.g. "subsystem, nsid"
  std::string_view summary;   // one line for help and docs
};

std::span<const EditVerb> edit_verbs() noexcept;
const EditVerb* find_edit_verb(std::string_view name) noexcept;

// What an edit did to the document.
enum class EditResult {
  added,     // a new object (or new keys)
  replaced,  // an *_add whose object existed: replaced by the request (the caller decides: same = no-op)
  removed,
  skipped,   // Mode::replay only: a removal of what is no longer there
};

enum class Mode {
  request,  // from a client: a missing object is an error
  replay,   // from the saved overlay at start or reload: removing what is gone already is no error
};

// Applies one verb to the document. Errors name the parameter: "nsid: no namespace 3 in nqn.x".
// Never throws; `params` must be a JSON object.
Result<EditResult> apply_edit(YAML::Node& root, std::string_view verb, const nlohmann::json& params,
                              Mode mode = Mode::request);

// A JSON value as a YAML node (objects as mappings, arrays as sequences, the rest as scalars; null as an
// empty value).
YAML::Node to_yaml(const nlohmann::json& value);

// `params` with secrets (DH-HMAC-CHAP keys, TLS PSKs given inline) replaced by "(secret)": what replies,
// logs and `ctl managed` may show.
nlohmann::json redact_secrets(const nlohmann::json& params);
// Whether `params` carry a secret itself (dhchap_key, dhchap_ctrl_key, tls_psk as a string) rather than
// a file that holds it: a gateway group's shared state, readable by every member's Ceph user, takes files only.
bool has_inline_secret(const nlohmann::json& params);

}  // namespace rdmablk::target::manage

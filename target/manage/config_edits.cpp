#include "target/manage/config_edits.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <optional>
#include <utility>

namespace rdmablk::target::manage {

using nlohmann::json;

namespace {

constexpr EditVerb kVerbs[] = {
    {"subsystem_add", "nqn", "add a subsystem: the request is an entry of the config file's `subsystems:`"},
    {"subsystem_set", "nqn", "set keys of a subsystem (null resets one); namespaces and hosts have their own verbs"},
    {"subsystem_remove", "nqn", "remove a subsystem; its controllers are disconnected"},
    {"namespace_add", "subsystem", "add a namespace: the rest of the request is an entry of `namespaces:`"},
    {"namespace_set", "subsystem, nsid",
     "set keys of a namespace (null resets one): size resizes, path/backend/... replace the backend, hosts masks"},
    {"namespace_remove", "subsystem, nsid", "remove a namespace; its queued I/O completes first"},
    {"namespace_add_host", "subsystem, nsid, host", "let one more host see a namespace (masking)"},
    {"namespace_remove_host", "subsystem, nsid, host", "hide a namespace from a host (masking)"},
    {"host_add", "subsystem, host", "allow a host; dhchap_key, tls_psk ... as in an entry of `hosts:`"},
    {"host_remove", "subsystem, host", "disallow a host; its controllers are disconnected"},
    {"listener_add", "address, port, transport", "add a listener: the request is an entry of `listeners:`"},
    {"listener_remove", "address, port, transport", "remove a listener; queues on it are disconnected"},
    {"ana_set", "listener, group", "set the state of an ANA group on an io listener (ADDR:PORT)"},
};

// Thrown inside this file only: apply_edit() turns it into its error.
struct EditError {
  std::string message;
};

[[noreturn]] void fail(std::string field, std::string problem) {
  throw EditError{field.empty() ? std::move(problem) : field + ": " + problem};
}

const json& need(const json& params, const char* key, const char* what) {
  auto it = params.find(key);
  if (it == params.end() || it->is_null()) fail(key, fmt::format("missing (required: {})", what));
  return *it;
}

std::string text_param(const json& params, const char* key, const char* what) {
  const json& v = need(params, key, what);
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) fail(key, fmt::format("expected {}", what));
  return v.get<std::string>();
}

uint64_t number_param(const json& params, const char* key, const char* what, uint64_t max) {
  const json& v = need(params, key, what);
  // A JSON integer: parsed text is unsigned when not negative, a value built in C++ may be signed.
  const bool positive = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() > 0);
  if (!positive || v.get<uint64_t>() < 1 || v.get<uint64_t>() > max) fail(key, fmt::format("expected {}", what));
  return v.get<uint64_t>();
}

// A scalar of the document as an integer (decimal or 0x hex, as the config parser reads them).
// (A missing key's node is invalid in yaml-cpp: anything but IsDefined() on it throws.)
std::optional<uint64_t> scalar_number(const YAML::Node& n) {
  if (!n.IsDefined() || !n.IsScalar()) return std::nullopt;
  std::string_view s = n.Scalar();
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string scalar_text(const YAML::Node& n) { return n.IsDefined() && n.IsScalar() ? n.Scalar() : std::string(); }

// The items of `parent[key]` (a missing or null value is an empty list); fails when it is something else.
std::vector<YAML::Node> items_of(const YAML::Node& parent, const char* key, const std::string& where) {
  const YAML::Node& p = parent;
  const YAML::Node list = p[key];
  std::vector<YAML::Node> out;
  if (!list.IsDefined() || list.IsNull()) return out;
  if (!list.IsSequence()) fail(where.empty() ? key : where + "." + key, "is not a list in the configuration");
  for (const auto& item : list) out.push_back(item);
  return out;
}

void set_items(YAML::Node parent, const char* key, const std::vector<YAML::Node>& items) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& item : items) list.push_back(item);
  parent[key] = list;
}

// The index of the first item for which `match` holds, else nullopt.
template <typename Match>
std::optional<std::size_t> find_item(const std::vector<YAML::Node>& items, Match match) {
  for (std::size_t i = 0; i < items.size(); ++i)
    if (match(items[i])) return i;
  return std::nullopt;
}

bool item_is_subsystem(const YAML::Node& item, const std::string& nqn) {
  return item.IsMap() && scalar_text(item["nqn"]) == nqn;
}

bool item_is_namespace(const YAML::Node& item, uint64_t nsid) {
  return item.IsMap() && scalar_number(item["nsid"]) == nsid;
}

// A `hosts:` item: a host NQN, or a mapping with `nqn`.
bool item_is_host(const YAML::Node& item, const std::string& nqn) {
  return item.IsMap() ? scalar_text(item["nqn"]) == nqn : scalar_text(item) == nqn;
}

struct Located {
  YAML::Node node;
  std::string path;  // "subsystem nqn.x", for messages
};

Located subsystem_of(YAML::Node& root, const std::string& nqn, const char* param) {
  auto subs = items_of(root, "subsystems", "");
  auto i = find_item(subs, [&](const YAML::Node& n) { return item_is_subsystem(n, nqn); });
  if (!i) fail(param, fmt::format("no subsystem {}", nqn));
  return {subs[*i], nqn};
}

Located namespace_of(YAML::Node& root, const json& params) {
  const std::string nqn = text_param(params, "subsystem", "the subsystem's NQN");
  const uint64_t nsid = number_param(params, "nsid", "an NSID, 1..4294967294", 0xFFFFFFFEu);
  Located sub = subsystem_of(root, nqn, "subsystem");
  auto nss = items_of(sub.node, "namespaces", nqn);
  auto i = find_item(nss, [&](const YAML::Node& n) { return item_is_namespace(n, nsid); });
  if (!i) fail("nsid", fmt::format("no namespace {} in {}", nsid, nqn));
  return {nss[*i], fmt::format("{} namespace {}", nqn, nsid)};
}

// `params` less the identifying keys, as a YAML mapping.
YAML::Node entry_without(const json& params, std::initializer_list<const char*> identity) {
  json rest = params;
  for (const char* key : identity) rest.erase(key);
  return to_yaml(rest);
}

// Sets (or, for null, removes) every key of `params` but the identifying ones.
EditResult set_keys(YAML::Node target, const json& params, std::initializer_list<const char*> identity,
                    std::initializer_list<const char*> not_here) {
  for (const auto& [key, value] : params.items()) {
    if (std::find_if(identity.begin(), identity.end(), [&](const char* k) { return key == k; }) != identity.end()) {
      continue;
    }
    for (const char* k : not_here) {
      if (key == k) fail(key, "not changed by this verb (see the verb list: it has its own)");
    }
    if (value.is_null()) {
      target.remove(key);
    } else {
      target[key] = to_yaml(value);
    }
  }
  return EditResult::added;
}

// An *_add: appends `entry` to `parent[key]`, or replaces the item `same` finds.
template <typename Same>
EditResult add_item(YAML::Node parent, const char* key, const std::string& where, YAML::Node entry, Same same) {
  auto items = items_of(parent, key, where);
  auto i = find_item(items, same);
  const EditResult result = i ? EditResult::replaced : EditResult::added;
  if (i) {
    items[*i] = entry;
  } else {
    items.push_back(entry);
  }
  set_items(parent, key, items);
  return result;
}

template <typename Same>
EditResult remove_item(YAML::Node parent, const char* key, const std::string& where, Same same, Mode mode,
                       const char* param, const std::string& missing) {
  auto items = items_of(parent, key, where);
  auto i = find_item(items, same);
  if (!i) {
    if (mode == Mode::replay) return EditResult::skipped;
    fail(param, missing);
  }
  items.erase(items.begin() + static_cast<std::ptrdiff_t>(*i));
  set_items(parent, key, items);
  return EditResult::removed;
}

EditResult subsystem_edit(YAML::Node& root, std::string_view verb, const json& params, Mode mode) {
  const std::string nqn = text_param(params, "nqn", "the subsystem's NQN");
  auto same = [&](const YAML::Node& n) { return item_is_subsystem(n, nqn); };
  if (verb == "subsystem_add") return add_item(root, "subsystems", "", to_yaml(params), same);
  if (verb == "subsystem_remove") {
    return remove_item(root, "subsystems", "", same, mode, "nqn", fmt::format("no subsystem {}", nqn));
  }
  Located sub = subsystem_of(root, nqn, "nqn");
  return set_keys(sub.node, params, {"nqn"}, {"namespaces", "hosts"});
}

EditResult namespace_edit(YAML::Node& root, std::string_view verb, const json& params, Mode mode) {
  if (verb == "namespace_add") {
    const std::string nqn = text_param(params, "subsystem", "the subsystem's NQN");
    const uint64_t nsid = number_param(params, "nsid", "an NSID, 1..4294967294", 0xFFFFFFFEu);
    Located sub = subsystem_of(root, nqn, "subsystem");
    return add_item(sub.node, "namespaces", nqn, entry_without(params, {"subsystem"}),
                    [&](const YAML::Node& n) { return item_is_namespace(n, nsid); });
  }
  if (verb == "namespace_remove") {
    const std::string nqn = text_param(params, "subsystem", "the subsystem's NQN");
    const uint64_t nsid = number_param(params, "nsid", "an NSID, 1..4294967294", 0xFFFFFFFEu);
    Located sub = subsystem_of(root, nqn, "subsystem");
    return remove_item(
        sub.node, "namespaces", nqn, [&](const YAML::Node& n) { return item_is_namespace(n, nsid); }, mode, "nsid",
        fmt::format("no namespace {} in {}", nsid, nqn));
  }
  Located ns = namespace_of(root, params);
  if (verb == "namespace_set") return set_keys(ns.node, params, {"subsystem", "nsid"}, {});
  const std::string host = text_param(params, "host", "a host NQN");
  auto same = [&](const YAML::Node& n) { return scalar_text(n) == host; };
  if (verb == "namespace_add_host") {
    if (find_item(items_of(ns.node, "hosts", ns.path), same)) return EditResult::replaced;
    return add_item(ns.node, "hosts", ns.path, YAML::Node(host), same);
  }
  return remove_item(ns.node, "hosts", ns.path, same, mode, "host",
                     fmt::format("{} is not in the hosts of {}", host, ns.path));
}

EditResult host_edit(YAML::Node& root, std::string_view verb, const json& params, Mode mode) {
  const std::string nqn = text_param(params, "subsystem", "the subsystem's NQN");
  const std::string host = text_param(params, "host", "a host NQN");
  Located sub = subsystem_of(root, nqn, "subsystem");
  auto same = [&](const YAML::Node& n) { return item_is_host(n, host); };
  if (verb == "host_remove") {
    return remove_item(sub.node, "hosts", nqn, same, mode, "host", fmt::format("{} is not a host of {}", host, nqn));
  }
  YAML::Node entry = entry_without(params, {"subsystem", "host"});
  if (entry.size() == 0) {
    entry = YAML::Node(host);
  } else {
    entry["nqn"] = host;
  }
  return add_item(sub.node, "hosts", nqn, entry, same);
}

// A listener as the config file names it: transport (default tcp), address, port (default by role).
struct ListenerId {
  std::string transport;
  std::string address;
  uint64_t port = 0;
};

ListenerId listener_id_of(const json& params) {
  ListenerId id;
  id.transport = params.contains("transport") ? text_param(params, "transport", "tcp or rdma") : "tcp";
  id.address = text_param(params, "address", "an IPv4 or IPv6 address");
  const bool discovery = params.contains("role") && params["role"] == "discovery";
  id.port = params.contains("port") ? number_param(params, "port", "a port, 1..65535", 65535) : discovery ? 8009 : 4420;
  return id;
}

bool item_is_listener(const YAML::Node& n, const ListenerId& id) {
  if (!n.IsMap()) return false;
  const std::string transport = n["transport"].IsDefined() ? scalar_text(n["transport"]) : "tcp";
  const bool discovery = scalar_text(n["role"]) == "discovery";
  const uint64_t port = n["port"].IsDefined() ? scalar_number(n["port"]).value_or(0) : discovery ? 8009 : 4420;
  return transport == id.transport && scalar_text(n["address"]) == id.address && port == id.port;
}

EditResult listener_edit(YAML::Node& root, std::string_view verb, const json& params, Mode mode) {
  const ListenerId id = listener_id_of(params);
  auto same = [&](const YAML::Node& n) { return item_is_listener(n, id); };
  if (verb == "listener_add") return add_item(root, "listeners", "", to_yaml(params), same);
  return remove_item(root, "listeners", "", same, mode, "address",
                     fmt::format("no {} listener at {}:{}", id.transport, id.address, id.port));
}

// ana_set {listener: "ADDR:PORT" or "[v6]:PORT", group, state}: the listener's `ana:` entry for the group.
EditResult ana_edit(YAML::Node& root, const json& params) {
  const std::string listener = text_param(params, "listener", "ADDR:PORT of an io listener");
  const uint64_t group = number_param(params, "group", "an ANA group ID", 0xFFFFFFFFu);
  const std::string state = text_param(params, "state", "an ANA state");
  const auto colon = listener.rfind(':');
  if (colon == std::string::npos) fail("listener", fmt::format("'{}' is not ADDR:PORT", listener));
  std::string address = listener.substr(0, colon);
  if (address.size() > 2 && address.front() == '[' && address.back() == ']')
    address = address.substr(1, address.size() - 2);
  uint64_t port = 0;
  const char* end = listener.data() + listener.size();
  const auto parsed = std::from_chars(listener.data() + colon + 1, end, port);
  if (parsed.ec != std::errc() || parsed.ptr != end || port == 0 || port > 65535) {
    fail("listener", fmt::format("'{}' is not ADDR:PORT", listener));
  }
  auto listeners = items_of(root, "listeners", "");
  auto i = find_item(listeners, [&](const YAML::Node& n) {
    return n.IsMap() && scalar_text(n["address"]) == address && scalar_text(n["role"]) != "discovery" &&
           (n["port"].IsDefined() ? scalar_number(n["port"]).value_or(0) : 4420) == port;
  });
  if (!i) fail("listener", fmt::format("no io listener at {}", listener));
  const YAML::Node& listener_node = listeners[*i];
  const YAML::Node ana = listener_node["ana"];
  YAML::Node out(YAML::NodeType::Map);
  bool set = false;
  if (ana.IsDefined() && ana.IsMap()) {
    for (auto it = ana.begin(); it != ana.end(); ++it) {
      const bool same = scalar_number(it->first) == group;
      out[it->first] = same ? YAML::Node(state) : it->second;
      set = set || same;
    }
  }
  if (!set) out[std::to_string(group)] = state;
  listeners[*i]["ana"] = out;
  return EditResult::added;
}

}  // namespace

std::span<const EditVerb> edit_verbs() noexcept { return kVerbs; }

const EditVerb* find_edit_verb(std::string_view name) noexcept {
  for (const auto& v : kVerbs)
    if (v.name == name) return &v;
  return nullptr;
}

Result<EditResult> apply_edit(YAML::Node& root, std::string_view verb, const json& params, Mode mode) {
  if (!params.is_object()) return make_error("params: expected an object", EINVAL);
  if (find_edit_verb(verb) == nullptr) return make_error(fmt::format("unknown verb '{}'", verb), EINVAL);
  try {
    if (!root.IsMap()) fail("", "the configuration is not a mapping");
    if (verb.starts_with("subsystem_")) return subsystem_edit(root, verb, params, mode);
    if (verb.starts_with("namespace_")) return namespace_edit(root, verb, params, mode);
    if (verb.starts_with("host_")) return host_edit(root, verb, params, mode);
    if (verb.starts_with("listener_")) return listener_edit(root, verb, params, mode);
    return ana_edit(root, params);
  } catch (const EditError& e) {
    return make_error(e.message, EINVAL);
  } catch (const YAML::Exception& e) {
    return make_error("the configuration document: " + e.msg, EINVAL);
  } catch (const json::exception& e) {
    return make_error(std::string("params: ") + e.what(), EINVAL);
  }
}

YAML::Node to_yaml(const json& value) {
  switch (value.type()) {
    case json::value_t::object: {
      YAML::Node map(YAML::NodeType::Map);
      for (const auto& [key, v] : value.items()) map[key] = to_yaml(v);
      return map;
    }
    case json::value_t::array: {
      YAML::Node seq(YAML::NodeType::Sequence);
      for (const auto& v : value) seq.push_back(to_yaml(v));
      return seq;
    }
    case json::value_t::string: return YAML::Node(value.get<std::string>());
    case json::value_t::null:
    case json::value_t::discarded: return YAML::Node(YAML::NodeType::Null);
    default: return YAML::Node(value.dump());  // numbers and booleans as they are written
  }
}

json redact_secrets(const json& params) {
  if (params.is_array()) {
    json out = json::array();
    for (const auto& v : params) out.push_back(redact_secrets(v));
    return out;
  }
  if (!params.is_object()) return params;
  json out = json::object();
  for (const auto& [key, v] : params.items()) {
    const bool secret = key == "dhchap_key" || key == "dhchap_ctrl_key" || key == "tls_psk";
    out[key] = secret && v.is_string() ? json("(secret)") : redact_secrets(v);
  }
  return out;
}

bool has_inline_secret(const json& params) {
  if (params.is_array()) {
    for (const auto& v : params) {
      if (has_inline_secret(v)) return true;
    }
    return false;
  }
  if (!params.is_object()) return false;
  for (const auto& [key, v] : params.items()) {
    const bool secret = key == "dhchap_key" || key == "dhchap_ctrl_key" || key == "tls_psk";
    if ((secret && v.is_string()) || has_inline_secret(v)) return true;
  }
  return false;
}

}  // namespace rdmablk::target::manage

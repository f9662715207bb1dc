#include "target/config/parser.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "protocol/fabrics.h"

namespace rdmablk::target::config_impl {

using protocol::kDiscoveryNqn;

namespace {

// The NQN rules live in protocol/ (shared with Connect and the initiator); this adapts its answer.
std::optional<std::string> nqn_problem(std::string_view nqn) {
  auto form = protocol::decode_nqn(nqn);
  if (form) return std::nullopt;
  return std::string(form.error().what) + " (at character " + std::to_string(form.error().offset + 1) + ")";
}

}  // namespace

void Parser::check_nqn(SourceLocation at, const std::string& field, const std::string& nqn) const {
  if (auto problem = nqn_problem(nqn)) fail(at, field, "invalid NQN " + in_quotes(nqn) + ": " + *problem);
}

// `subsystems:` (absent: discovery only), each NQN once.
void Parser::parse_subsystems(const Mapping& top, TargetConfig& config) {
  if (const Field* f = top.find("subsystems")) {
    auto nodes = sequence(*f);
    std::map<std::string, int> first_line;  // NQN -> line
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      std::string path = f->path + "[" + std::to_string(i) + "]";
      SubsystemConfig sub = parse_subsystem(nodes[i], path);
      auto [it, inserted] = first_line.emplace(sub.nqn, sub.nqn_at.line);
      if (!inserted) {
        fail(sub.nqn_at, path + ".nqn",
             "duplicate subsystem NQN " + in_quotes(sub.nqn) + " (first at line " + std::to_string(it->second) + ")");
      }
      config.subsystems.push_back(std::move(sub));
    }
    if (nodes.empty()) warn(f->value_at, f->path, "no subsystems: only discovery will be served");
  } else {
    warn(top.at(), "subsystems", "no subsystems: only discovery will be served");
  }
}

SubsystemConfig Parser::parse_subsystem(const YAML::Node& node, const std::string& path) {
  SourceLocation at = location_of(node.Mark());
  if (!node.IsMap())
    fail(at, path, std::string("expected a mapping (nqn, hosts, namespaces, ...), got a ") + node_kind(node));
  Mapping m(*this, node, path, at,
            {"nqn", "serial", "model", "allow_any_host", "hosts", "require_authentication", "namespaces", "cntlid_min",
             "cntlid_max"});
  SubsystemConfig sub;
  sub.at = at;

  const Field& nqn = m.require("nqn", "the subsystem's NQN, e.g. nqn.2024-11.io.rdmablk:vol1");
  sub.nqn = string_value(nqn);
  sub.nqn_at = nqn.value_at;
  check_nqn(nqn.value_at, nqn.path, sub.nqn);
  if (sub.nqn == kDiscoveryNqn) fail(nqn.value_at, nqn.path, "this NQN is reserved for the discovery controller");

  if (const Field* f = m.find("serial")) {
    sub.serial = string_value(*f);
    check_printable(*f, sub.serial, 20);
  } else {
    sub.serial = derive_serial(sub.nqn);
  }
  if (const Field* f = m.find("model")) {
    sub.model = string_value(*f);
    check_printable(*f, sub.model, 40);
  }
  if (const Field* f = m.find("allow_any_host")) sub.allow_any_host = boolean(*f);
  const Field* cntlid_min = m.find("cntlid_min");
  const Field* cntlid_max = m.find("cntlid_max");
  if (cntlid_min) sub.cntlid_min = static_cast<uint16_t>(integer(*cntlid_min, kConfigCntlidMin, kConfigCntlidMax));
  if (cntlid_max) sub.cntlid_max = static_cast<uint16_t>(integer(*cntlid_max, kConfigCntlidMin, kConfigCntlidMax));
  if (sub.cntlid_min > sub.cntlid_max) {
    const Field* f = cntlid_max ? cntlid_max : cntlid_min;
    fail(f->value_at, f->path,
         "cntlid_min " + std::to_string(sub.cntlid_min) + " is greater than cntlid_max " +
             std::to_string(sub.cntlid_max));
  }
  const Field* require_auth = m.find("require_authentication");
  if (require_auth) sub.require_authentication = boolean(*require_auth);

  const Field* hosts = m.find("hosts");
  if (hosts) parse_hosts(*hosts, sub);
  if (sub.require_authentication && sub.allow_any_host) {
    warn(require_auth->key_at, require_auth->path,
         "with allow_any_host: only the listed hosts with a dhchap_key can connect");
  }
  if (!sub.allow_any_host && sub.hosts.empty()) {
    fail(hosts ? hosts->value_at : at, path + ".hosts",
         "no host may connect: list host NQNs under hosts, or set allow_any_host: true");
  }
  if (sub.allow_any_host && !sub.hosts.empty()) {
    warn(hosts->key_at, hosts->path, "ignored: allow_any_host is true, so any host may connect");
  }

  parse_namespaces(m, path, at, sub);
  return sub;
}

// `hosts:` items: a host NQN, or a mapping (parse_host()); each NQN once.
void Parser::parse_hosts(const Field& hosts, SubsystemConfig& sub) {
  auto items = sequence(hosts);
  std::map<std::string, int> first_line;
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::string item_path = hosts.path + "[" + std::to_string(i) + "]";
    SourceLocation item_at = missing(items[i]) ? hosts.value_at : location_of(items[i].Mark());
    HostConfig host;
    if (items[i].IsMap()) {
      host = parse_host(items[i], item_path, item_at);
    } else {
      Field item{item_path, "", items[i], item_at, item_at};
      host.nqn = string_value(item, "a host NQN, or a mapping with nqn and dhchap_key or tls_psk");
      host.at = item_at;
      check_nqn(item_at, item_path, host.nqn);
    }
    const std::string nqn_path = items[i].IsMap() ? item_path + ".nqn" : item_path;
    if (host.nqn == kDiscoveryNqn) fail(host.at, nqn_path, "the discovery NQN is not a host NQN");
    auto [it, inserted] = first_line.emplace(host.nqn, item_at.line);
    if (!inserted) {
      fail(host.at, nqn_path, "duplicate host NQN (first at line " + std::to_string(it->second) + ")");
    }
    if (sub.require_authentication && !host.dhchap_key.configured()) {
      warn(item_at, item_path,
           "no dhchap_key, and the subsystem requires authentication: this host will be refused");
    }
    sub.hosts.push_back(host.nqn);
    sub.host_configs.push_back(std::move(host));
  }
}

// `namespaces:` with their UUID and NGUID derived where not given; each NSID once.
void Parser::parse_namespaces(const Mapping& m, const std::string& path, SourceLocation at, SubsystemConfig& sub) {
  if (const Field* f = m.find("namespaces")) {
    auto items = sequence(*f);
    std::map<uint32_t, int> first_line;  // NSID -> line
    for (std::size_t i = 0; i < items.size(); ++i) {
      std::string ns_path = f->path + "[" + std::to_string(i) + "]";
      NamespaceConfig ns = parse_namespace(items[i], ns_path);
      if (!ns.uuid_configured) ns.uuid = derive_uuid(sub.nqn, ns.nsid);
      if (!ns.nguid_configured) ns.nguid = derive_nguid(sub.nqn, ns.nsid);
      auto [it, inserted] = first_line.emplace(ns.nsid, ns.nsid_at.line);
      if (!inserted) {
        fail(ns.nsid_at, ns_path + ".nsid",
             "duplicate NSID " + std::to_string(ns.nsid) + " (first at line " + std::to_string(it->second) + ")");
      }
      check_namespace_hosts(sub, ns, ns_path + ".hosts");
      check_namespace_qos(sub, ns, ns_path + ".qos");
      sub.namespaces.push_back(std::move(ns));
    }
    if (items.empty()) warn(f->value_at, f->path, "no namespaces: hosts will see an empty subsystem");
  } else {
    warn(at, path + ".namespaces", "no namespaces: hosts will see an empty subsystem");
  }
}

HostConfig Parser::parse_host(const YAML::Node& node, const std::string& path, SourceLocation at) {
  Mapping m(*this, node, path, at,
            {"nqn", "dhchap_key", "dhchap_key_file", "dhchap_ctrl_key", "dhchap_ctrl_key_file", "dhchap_hashes",
             "dhchap_dhgroups", "tls_psk", "tls_psk_file"});
  HostConfig host;
  host.at = at;
  const Field& nqn = m.require("nqn", "the host's NQN");
  host.nqn = string_value(nqn);
  host.at = nqn.value_at;
  check_nqn(nqn.value_at, nqn.path, host.nqn);
  host.dhchap_key = parse_secret(m, "dhchap_key", "dhchap_key_file");
  host.dhchap_ctrl_key = parse_secret(m, "dhchap_ctrl_key", "dhchap_ctrl_key_file");
  host.tls_psk = parse_tls_psk(m);
  if (host.dhchap_ctrl_key.configured() && !host.dhchap_key.configured()) {
    const Field* f = m.find("dhchap_ctrl_key") ? m.find("dhchap_ctrl_key") : m.find("dhchap_ctrl_key_file");
    fail(f->key_at, f->path,
         "a controller secret needs the host's own dhchap_key (bidirectional authentication authenticates the "
         "host first)");
  }
  using protocol::auth::DhGroupId;
  using protocol::auth::HashId;
  if (const Field* f = m.find("dhchap_hashes")) {
    host.dhchap_hashes = distinct_list<HashId>(
        *f, "hash function", {{"sha256", HashId::sha256}, {"sha384", HashId::sha384}, {"sha512", HashId::sha512}});
    if (!host.dhchap_key.configured()) warn(f->key_at, f->path, "ignored: the host has no dhchap_key");
  }
  if (const Field* f = m.find("dhchap_dhgroups")) {
    host.dhchap_dhgroups = distinct_list<DhGroupId>(*f, "DH group",
                                                    {{"null", DhGroupId::null},
                                                     {"ffdhe2048", DhGroupId::ffdhe2048},
                                                     {"ffdhe3072", DhGroupId::ffdhe3072},
                                                     {"ffdhe4096", DhGroupId::ffdhe4096},
                                                     {"ffdhe6144", DhGroupId::ffdhe6144},
                                                     {"ffdhe8192", DhGroupId::ffdhe8192}});
    if (!host.dhchap_key.configured()) warn(f->key_at, f->path, "ignored: the host has no dhchap_key");
  }
  return host;
}

// backend: rbd's keys (pool, image, namespace, ceph_conf, client, keyring); refused with other backends.
void Parser::parse_rbd_keys(const Mapping& m, NamespaceConfig& ns) const {
  static constexpr std::string_view kKeys[] = {"pool", "image", "namespace", "ceph_conf", "client", "keyring"};
  if (ns.backend != BackendKind::rbd) {
    for (std::string_view k : kKeys) {
      if (const Field* f = m.find(k)) {
        fail(f->key_at, f->path, std::string(k) + " applies only to backend: rbd");
      }
    }
    return;
  }
  // A name librbd / cephx takes as one component: no '/' or '@' (image spec separators), no blanks.
  auto name = [&](const Field& f, std::string_view what) {
    std::string v = string_value(f, what);
    if (v.empty()) fail(f.value_at, f.path, "must not be empty");
    if (v.find_first_of("/@ \t") != std::string::npos) {
      fail(f.value_at, f.path, in_quotes(v) + " is not a valid name (no '/', '@' or blanks)");
    }
    return v;
  };
  ns.pool = name(m.require("pool", "the Ceph pool that holds the image"), "a pool name");
  const Field& image = m.require("image", "the RBD image that holds the namespace");
  ns.image = name(image, "an image name");
  ns.image_at = image.value_at;
  if (const Field* f = m.find("namespace")) ns.rados_namespace = name(*f, "a RADOS namespace name");
  ns.ceph_conf = "/etc/ceph/ceph.conf";
  if (const Field* f = m.find("ceph_conf")) {
    ns.ceph_conf = string_value(*f, "the path of a ceph.conf");
    if (ns.ceph_conf.empty()) fail(f->value_at, f->path, "must not be empty");
  }
  ns.client = "admin";
  if (const Field* f = m.find("client")) {
    ns.client = name(*f, "a cephx user id");
    if (ns.client.rfind("client.", 0) == 0) {
      fail(f->value_at, f->path,
           in_quotes(ns.client) + ": give the id without 'client.' (" + in_quotes(ns.client.substr(7)) + ")");
    }
  }
  if (const Field* f = m.find("keyring")) {
    ns.keyring = string_value(*f, "the path of a keyring file");
    if (ns.keyring.empty()) fail(f->value_at, f->path, "must not be empty");  // (string_value says so first)
  }
}

NamespaceConfig Parser::parse_namespace(const YAML::Node& node, const std::string& path) {
  SourceLocation at = location_of(node.Mark());
  if (!node.IsMap()) fail(at, path, std::string("expected a mapping (nsid, backend, ...), got a ") + node_kind(node));
  Mapping m(*this, node, path, at,
            {"nsid", "backend", "path", "size", "block_size", "direct", "read_only", "uuid", "nguid", "pool", "image",
             "namespace", "ceph_conf", "client", "keyring", "ana_group", "hosts", "qos"});
  NamespaceConfig ns;
  ns.at = at;

  const Field& nsid = m.require("nsid", "1..4294967294");
  ns.nsid = integer32(nsid, 1, kMaxNsid);
  ns.nsid_at = nsid.value_at;

  const Field& backend = m.require("backend", "file, ram, null or rbd");
  ns.backend = one_of<BackendKind>(backend, "backend",
                                   {{"file", BackendKind::file},
                                    {"ram", BackendKind::ram},
                                    {"null", BackendKind::null},
                                    {"rbd", BackendKind::rbd}});

  const Field* path_field = m.find("path");
  if (ns.backend == BackendKind::file) {
    const Field& p = m.require("path", "the file or block device that holds the namespace");
    ns.path = string_value(p);
    ns.path_at = p.value_at;
  } else if (path_field) {
    fail(path_field->key_at, path_field->path,
         std::string("path applies only to backend: file (a ") + backend_kind_name(ns.backend) +
             (ns.backend == BackendKind::rbd ? " namespace names its image with pool and image)"
                                             : " namespace keeps no data on disk)"));
  }
  parse_rbd_keys(m, ns);

  if (const Field* f = m.find("block_size")) {
    uint64_t bs = integer(*f, 0, UINT64_MAX);
    if (bs < 512 || bs > 65536 || (bs & (bs - 1)) != 0) {
      fail(f->value_at, f->path, "block size " + std::to_string(bs) + " is not a power of two in [512, 65536]");
    }
    if (ns.backend == BackendKind::rbd && bs != 512 && bs != 4096) {
      fail(f->value_at, f->path, "block size " + std::to_string(bs) + " is not 512 or 4096 (backend: rbd)");
    }
    ns.block_size = static_cast<uint32_t>(bs);
  } else if (ns.backend != BackendKind::file) {
    ns.block_size = kDefaultBlockSize;
  }

  const Field* size = m.find("size");
  if (size && ns.backend == BackendKind::rbd) {
    fail(size->key_at, size->path, "size does not apply to backend: rbd (the image's size is used)");
  }
  if (size) {
    ns.size = size_value(*size, 0, UINT64_MAX);
    ns.size_at = size->value_at;
    if (ns.size == 0) fail(size->value_at, size->path, "size must be greater than 0 (omit it to use the file's size)");
    uint32_t bs = block_size_or_default(ns);
    if (ns.size % bs != 0) {
      fail(size->value_at, size->path,
           "size " + std::to_string(ns.size) + " is not a multiple of the block size " + std::to_string(bs));
    }
  } else if (ns.backend == BackendKind::ram || ns.backend == BackendKind::null) {
    fail(at, path + ".size", std::string("missing (required for backend: ") + backend_kind_name(ns.backend) + ")");
  }

  if (const Field* f = m.find("direct")) {
    ns.direct = boolean(*f);
    if (ns.backend != BackendKind::file) {
      warn(f->key_at, f->path, std::string("has no effect with backend: ") + backend_kind_name(ns.backend));
    }
  }
  if (const Field* f = m.find("read_only")) ns.read_only = boolean(*f);
  if (const Field* f = m.find("ana_group")) ns.ana_group = integer32(*f, 1, kAnaGroupMax);
  if (const Field* f = m.find("hosts")) parse_namespace_hosts(*f, ns);
  if (const Field* f = m.find("qos")) parse_namespace_qos(*f, ns);

  parse_ids(m, ns);
  return ns;
}

// A namespace's `hosts:` (masking): host NQNs, each once, at least one.
void Parser::parse_namespace_hosts(const Field& f, NamespaceConfig& ns) const {
  auto items = sequence(f);
  if (items.empty()) {
    fail(f.value_at, f.path,
         "an empty list hides the namespace from every host: list the hosts that see it, or leave hosts out for "
         "every host the subsystem allows");
  }
  ns.hosts_at = f.value_at;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string item_path = f.path + "[" + std::to_string(i) + "]";
    const SourceLocation item_at = missing(items[i]) ? f.value_at : location_of(items[i].Mark());
    Field item{item_path, "", items[i], item_at, item_at};
    std::string nqn = string_value(item, "a host NQN");
    check_nqn(item_at, item_path, nqn);
    if (std::find(ns.hosts.begin(), ns.hosts.end(), nqn) != ns.hosts.end()) fail(item_at, item_path, "duplicate host NQN");
    ns.hosts.push_back(std::move(nqn));
  }
  std::sort(ns.hosts.begin(), ns.hosts.end());
}

// Every host a namespace is masked to must be able to connect to its subsystem.
void Parser::check_namespace_hosts(const SubsystemConfig& sub, const NamespaceConfig& ns, const std::string& path) const {
  if (sub.allow_any_host) return;
  for (const std::string& nqn : ns.hosts) {
    if (std::find(sub.hosts.begin(), sub.hosts.end(), nqn) == sub.hosts.end()) {
      fail(ns.hosts_at, path,
           in_quotes(nqn) + " is not among the subsystem's hosts, so it could never see this namespace");
    }
  }
}

// `uuid` and `nguid`, when given.
void Parser::parse_ids(const Mapping& m, NamespaceConfig& ns) const {
  if (const Field* f = m.find("uuid")) {
    std::string text = scalar(*f, "a UUID such as 3f2504e0-4f89-11d3-9a0c-0305e82c3301");
    auto id = parse_uuid(text);
    if (!id) fail(f->value_at, f->path, in_quotes(text) + " is not a UUID (8-4-4-4-12 hex digits)");
    if (all_zero(*id)) fail(f->value_at, f->path, "the nil UUID is not a namespace identifier");
    ns.uuid = *id;
    ns.uuid_configured = true;
  }
  if (const Field* f = m.find("nguid")) {
    std::string text = scalar(*f, "32 hex digits");
    auto id = parse_hex_id(text);
    if (!id) fail(f->value_at, f->path, in_quotes(text) + " is not an NGUID (32 hex digits, dashes allowed)");
    if (all_zero(*id)) fail(f->value_at, f->path, "an all-zero NGUID means 'none'; omit the key instead");
    ns.nguid = *id;
    ns.nguid_configured = true;
  }
}

void Parser::check_namespaces_across_subsystems(const TargetConfig& config) const {
  struct Seen {
    std::string where;  // "subsystems[0].namespaces[1] at line 12"
    bool read_only;
  };
  std::map<std::string, Seen> paths;
  std::map<std::array<uint8_t, 16>, std::string> uuids, nguids;
  for (std::size_t s = 0; s < config.subsystems.size(); ++s) {
    const auto& sub = config.subsystems[s];
    for (std::size_t n = 0; n < sub.namespaces.size(); ++n) {
      const auto& ns = sub.namespaces[n];
      std::string path = "subsystems[" + std::to_string(s) + "].namespaces[" + std::to_string(n) + "]";
      std::string where = path + " at line " + std::to_string(ns.at.line);
      if (ns.backend == BackendKind::file) {
        std::string key = std::filesystem::path(ns.path).lexically_normal().string();
        auto [it, inserted] = paths.emplace(key, Seen{where, ns.read_only});
        if (!inserted && !(ns.read_only && it->second.read_only)) {
          fail(ns.path_at, path + ".path",
               in_quotes(ns.path) + " already backs " + it->second.where +
                   " (two writable namespaces on one file would corrupt each other)");
        }
      }
      if (ns.backend == BackendKind::rbd) {
        // Same conf file = same cluster (relative conf paths are not resolved yet: compared as written). The
        // NUL after "rbd" keeps the key apart from any file path (a path cannot hold one).
        std::string key = std::string("rbd") + '\0' + ns.ceph_conf + '\0' + ns.pool + '/' + ns.rados_namespace + '/' + ns.image;
        auto [it, inserted] = paths.emplace(key, Seen{where, ns.read_only});
        if (!inserted && !(ns.read_only && it->second.read_only)) {
          fail(ns.image_at, path + ".image",
               "image " + ns.pool + "/" + (ns.rados_namespace.empty() ? "" : ns.rados_namespace + "/") + ns.image +
                   " already backs " + it->second.where +
                   " (one image is one namespace; other targets may export it under the same NSID)");
        }
      }
      auto [u, u_new] = uuids.emplace(ns.uuid, where);
      if (!u_new) fail(ns.at, path + ".uuid", "UUID " + format_uuid(ns.uuid) + " is also used by " + u->second);
      auto [g, g_new] = nguids.emplace(ns.nguid, where);
      if (!g_new) fail(ns.at, path + ".nguid", "NGUID " + format_hex_id(ns.nguid) + " is also used by " + g->second);
    }
  }
}

}  // namespace rdmablk::target::config_impl

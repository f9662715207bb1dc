// `group:`: this target as a member of a gateway group on Ceph (docs/gateway-groups.md).
#include <unistd.h>

#include "target/config/parser.h"

namespace rdmablk::target::config_impl {

namespace {

constexpr std::size_t kMaxGroupName = 64;
constexpr unsigned kMinLeaseSeconds = 2;
constexpr unsigned kMaxLeaseSeconds = 600;

// Letters, digits, '_', '.', '-': the names become parts of RADOS object names and appear in logs.
bool valid_group_name(const std::string& s) {
  if (s.empty() || s.size() > kMaxGroupName) return false;
  for (char c : s) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "";
  std::string h = host;
  return h.substr(0, h.find('.'));  // the short name
}

}  // namespace

GroupConfig Parser::parse_group(const Field& f) const {
  expect_mapping(f, "name, pool, member, ana_groups, ...", "write `group: {name: gw, pool: rbd, ana_groups: [1]}`");
  Mapping m(*this, f.value, f.path, f.value_at,
            {"name", "member", "pool", "namespace", "ceph_conf", "client", "keyring", "lease_seconds", "ana_groups",
             "failback", "blocklist", "standby_state"});
  GroupConfig g;
  g.enabled = true;
  g.at = f.value_at;
  auto name = [&](const Field& x, std::string_view what) {
    std::string v = scalar(x, what);
    if (!valid_group_name(v)) {
      fail(x.value_at, x.path,
           in_quotes(v) +
               " is not a valid name (1 to 64 of letters, digits, '_', '.' and '-': it is part of RADOS "
               "object names)");
    }
    return v;
  };
  g.name = name(m.require("name", "the gateway group's name"), "a group name");
  g.pool = name(m.require("pool", "the Ceph pool that holds the group's objects"), "a pool name");
  if (const Field* x = m.find("member")) {
    g.member = name(*x, "this member's name");
  } else {
    g.member = host_name();
    if (!valid_group_name(g.member)) {
      fail(f.value_at, f.path + ".member",
           "the host name " + in_quotes(g.member) + " is not a valid member name: set `member:`");
    }
  }
  if (const Field* x = m.find("namespace")) g.rados_namespace = name(*x, "a RADOS namespace name");
  if (const Field* x = m.find("ceph_conf")) {
    g.ceph_conf = scalar(*x, "the path of a ceph.conf");
    if (g.ceph_conf.empty()) fail(x->value_at, x->path, "must not be empty");
  }
  if (const Field* x = m.find("client")) {
    g.client = name(*x, "a cephx user id");
    if (g.client.rfind("client.", 0) == 0)
      fail(x->value_at, x->path, in_quotes(g.client) + ": give the id without 'client.'");
  }
  if (const Field* x = m.find("keyring")) {
    g.keyring = scalar(*x, "the path of a keyring file");
    if (g.keyring.empty()) fail(x->value_at, x->path, "must not be empty");
  }
  if (const Field* x = m.find("lease_seconds")) {
    g.lease_seconds = static_cast<unsigned>(integer(*x, kMinLeaseSeconds, kMaxLeaseSeconds));
  }
  if (const Field* x = m.find("ana_groups")) {
    auto items = sequence(*x);
    for (std::size_t i = 0; i < items.size(); ++i) {
      SourceLocation at = missing(items[i]) ? x->value_at : location_of(items[i].Mark());
      Field item{x->path + "[" + std::to_string(i) + "]", "", items[i], at, at};
      const uint32_t id = integer32(item, 1, kAnaGroupMax);
      if (std::find(g.ana_groups.begin(), g.ana_groups.end(), id) != g.ana_groups.end())
        fail(at, item.path, "listed twice");
      g.ana_groups.push_back(id);
    }
    std::sort(g.ana_groups.begin(), g.ana_groups.end());
  }
  if (const Field* x = m.find("failback")) {
    g.failback = one_of<GroupFailback>(*x, "failback",
                                       {{"automatic", GroupFailback::automatic}, {"manual", GroupFailback::manual}});
  }
  if (const Field* x = m.find("blocklist")) g.blocklist = boolean(*x);
  if (const Field* x = m.find("standby_state")) {
    g.standby_state = one_of<protocol::AnaState>(*x, "standby state",
                                                 {{"inaccessible", protocol::AnaState::inaccessible},
                                                  {"non_optimized", protocol::AnaState::non_optimized}});
  }
  return g;
}

// The group sets every listener's ANA states: a listener's own `ana:` would fight it.
void Parser::check_group(const TargetConfig& config) const {
  for (std::size_t i = 0; i < config.listeners.size(); ++i) {
    const ListenerConfig& l = config.listeners[i];
    if (l.ana.empty()) continue;
    fail(l.ana.front().at, "listeners[" + std::to_string(i) + "].ana",
         "ANA states are the gateway group's (group: at line " + std::to_string(config.group.at.line) +
             "): a member serves the groups it owns as optimized and the rest as inaccessible; remove `ana:`");
  }
}

}  // namespace rdmablk::target::config_impl

#include "target/group/member_registry.h"

#include <spdlog/spdlog.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "protocol/ana.h"
#include "target/group/member_lease.h"

namespace rdmablk::target::group {

namespace {

using nlohmann::json;


}  // namespace

std::string registry_object(const std::string& group) { return fmt::format("rdmablk.group.{}.members", group); }

std::string encode_record(const MemberRecord& r) {
  json listeners = json::array();
  for (const auto& l : r.listeners) {
    listeners.push_back(json{{"transport", l.transport}, {"address", l.address}, {"port", l.port}, {"tls", l.tls}});
  }
  return json{{"member", r.member},   {"ana_groups", r.ana_groups},           {"listeners", listeners},
              {"address", r.address}, {"stopped_cleanly", r.stopped_cleanly}, {"started_unix_ms", r.started_unix_ms}}
      .dump();
}

Result<MemberRecord> decode_record(const std::string& member, const std::string& bytes) {
  const json j = json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(fmt::format("member {}: the record is not a JSON object", member), EINVAL);
  MemberRecord r;
  r.member = member;
  const auto groups = j.find("ana_groups");
  if (groups == j.end() || !groups->is_array())
    return make_error(fmt::format("member {}: no ana_groups list", member), EINVAL);
  for (const auto& g : *groups) {
    if (!g.is_number_unsigned() || g.get<uint64_t>() == 0 || g.get<uint64_t>() > protocol::kAnaGroupMax)
      return make_error(fmt::format("member {}: ana_groups holds {} (expected 1..{})", member, g.dump(),
                                    protocol::kAnaGroupMax),
                        EINVAL);
    r.ana_groups.push_back(g.get<uint32_t>());
  }
  std::sort(r.ana_groups.begin(), r.ana_groups.end());
  if (const auto ls = j.find("listeners"); ls != j.end() && ls->is_array()) {
    for (const auto& l : *ls) {
      if (!l.is_object() || !l.value("transport", json()).is_string() || !l.value("address", json()).is_string() ||
          !l.value("port", json()).is_number_unsigned() || l["port"].get<uint64_t>() == 0 ||
          l["port"].get<uint64_t>() > 65535)
        return make_error(fmt::format("member {}: a listener is not {{transport, address, port}}: {}", member,
                                      l.dump()),
                          EINVAL);
      r.listeners.push_back(
          MemberListener{l["transport"].get<std::string>(), l["address"].get<std::string>(), l["port"].get<uint16_t>(),
                         l.value("tls", json("none")).is_string() ? l.value("tls", std::string("none"))
                                                                  : std::string("none")});
    }
  }
  const auto addr = j.find("address");
  if (addr != j.end() && addr->is_string()) r.address = addr->get<std::string>();
  if (const auto clean = j.find("stopped_cleanly"); clean != j.end() && clean->is_boolean())
    r.stopped_cleanly = clean->get<bool>();
  const auto started = j.find("started_unix_ms");
  if (started != j.end() && started->is_number_integer()) r.started_unix_ms = started->get<int64_t>();
  return r;
}

MemberRegistry::MemberRegistry(std::shared_ptr<backend::RadosCluster> cluster, rados_ioctx_t io, GroupPlace place)
    : cluster_(std::move(cluster)), io_(io), place_(std::move(place)), object_(registry_object(place_.group)) {}

MemberRegistry::~MemberRegistry() { rados_ioctx_destroy(io_); }

Result<std::unique_ptr<MemberRegistry>> MemberRegistry::open(std::shared_ptr<backend::RadosCluster> cluster,
                                                             const GroupPlace& place) {
  auto io = open_ioctx(*cluster, place, registry_object(place.group), "group members");
  if (!io) return tl::unexpected(io.error());
  return std::unique_ptr<MemberRegistry>(new MemberRegistry(std::move(cluster), *io, place));
}

Result<void> MemberRegistry::publish(const MemberRecord& r) {
  backend::AsyncSignalsBlocked blocked;
  const std::string value = encode_record(r);
  const char* keys[] = {r.member.c_str()};
  const char* values[] = {value.data()};
  const size_t lens[] = {value.size()};
  rados_write_op_t op = rados_create_write_op();
  rados_write_op_create(op, LIBRADOS_CREATE_IDEMPOTENT, nullptr);
  rados_write_op_omap_set(op, keys, values, lens, 1);
  const int rc = rados_write_op_operate(op, io_, object_.c_str(), nullptr, 0);
  rados_release_write_op(op);
  if (rc < 0)
    return make_error(fmt::format("group members {}: cannot write member {}: {}", place_.where(object_), r.member,
                                  backend::rados_errstr(rc)),
                      -rc);
  return {};
}

Result<std::vector<MemberRecord>> MemberRegistry::list() {
  backend::AsyncSignalsBlocked blocked;
  std::vector<MemberRecord> out;
  std::string after;
  for (;;) {  // pages of 256 keys
    rados_omap_iter_t it = nullptr;
    unsigned char more = 0;
    int get_rc = 0;
    rados_read_op_t op = rados_create_read_op();
    rados_read_op_omap_get_vals2(op, after.c_str(), "", 256, &it, &more, &get_rc);
    const int rc = rados_read_op_operate(op, io_, object_.c_str(), 0);
    rados_release_read_op(op);
    if (rc == -ENOENT) return out;
    if (rc < 0 || get_rc < 0) {
      if (it != nullptr) rados_omap_get_end(it);
      return make_error(fmt::format("group members {}: read: {}", place_.where(object_),
                                    backend::rados_errstr(rc < 0 ? rc : get_rc)),
                        rc < 0 ? -rc : -get_rc);
    }
    for (;;) {
      char* key = nullptr;
      char* val = nullptr;
      size_t key_len = 0, val_len = 0;
      if (rados_omap_get_next2(it, &key, &val, &key_len, &val_len) < 0 || key == nullptr) break;
      std::string k(key, key_len);
      auto r = decode_record(k, std::string(val, val_len));
      if (r) {
        out.push_back(std::move(*r));
      } else {
        spdlog::error("group members {}: {} (ignored)", place_.where(object_), r.error().message);
      }
      after = std::move(k);
    }
    rados_omap_get_end(it);
    if (more == 0) return out;
  }
}

Result<std::optional<MemberRecord>> MemberRegistry::find(const std::string& member) {
  auto all = list();
  if (!all) return tl::unexpected(all.error());
  for (auto& r : *all) {
    if (r.member == member) return std::optional<MemberRecord>(std::move(r));
  }
  return std::optional<MemberRecord>{};
}

Result<LockHolder> MemberRegistry::holder(const std::string& member, const std::string& lock) {
  const std::string object = lease_object(place_.group, member);
  auto h = lock_holder(io_, object, lock);
  if (!h)
    return make_error(fmt::format("member {}: {}", place_.where(object), h.error().message), h.error().errno_value);
  return h;
}

std::string MemberRegistry::client_address() const {
  char* addrs = nullptr;
  if (rados_getaddrs(cluster_->handle(), &addrs) < 0 || addrs == nullptr) return "";
  std::string out = addrs;
  std::free(addrs);
  return out;
}

Result<void> MemberRegistry::blocklist(const std::string& address, uint32_t expire_seconds) {
  backend::AsyncSignalsBlocked blocked;
  std::vector<char> addr(address.begin(), address.end());
  addr.push_back('\0');
  const int rc = rados_blocklist_add(cluster_->handle(), addr.data(), expire_seconds);
  if (rc < 0) return make_error(fmt::format("blocklist {}: {}", address, backend::rados_errstr(rc)), -rc);
  return {};
}

}  // namespace rdmablk::target::group

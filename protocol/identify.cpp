#include "protocol/identify.h"

#include <cstring>

namespace rdmablk::protocol {

NamespaceList make_active_namespace_list(std::span<const uint32_t> active_sorted, uint32_t after) noexcept {
  NamespaceList list{};
  std::size_t n = 0;
  for (uint32_t nsid : active_sorted) {
    if (nsid <= after || nsid == 0) continue;
    if (n == list.nsid.size()) break;
    list.nsid[n++].set(nsid);
  }
  return list;
}

namespace {
template <std::size_t N>
void put_descriptor(std::array<uint8_t, 4096>& out, std::size_t& pos, Nidt type, const uint8_t* id) noexcept {
  NsIdDescriptorHeader h{};
  h.nidt = static_cast<uint8_t>(type);
  h.nidl = static_cast<uint8_t>(N);
  store(out.data() + pos, h);
  std::memcpy(out.data() + pos + sizeof(h), id, N);
  pos += sizeof(h) + N;
}
}  // namespace

std::array<uint8_t, 4096> make_ns_id_descriptor_list(const NamespaceIds& ids) noexcept {
  std::array<uint8_t, 4096> out{};
  std::size_t pos = 0;
  if (ids.eui64) put_descriptor<8>(out, pos, Nidt::eui64, ids.eui64->data());
  if (ids.nguid) put_descriptor<16>(out, pos, Nidt::nguid, ids.nguid->data());
  if (ids.uuid) put_descriptor<16>(out, pos, Nidt::uuid, ids.uuid->data());
  if (ids.csi) put_descriptor<1>(out, pos, Nidt::csi, &*ids.csi);
  return out;
}

Decoded<NamespaceIds> parse_ns_id_descriptor_list(std::span<const uint8_t> list) noexcept {
  NamespaceIds ids;
  std::size_t pos = 0;
  while (pos < list.size()) {
    const uint8_t nidt = list[pos];
    if (nidt == 0) break;  // end of list
    const auto here = static_cast<uint32_t>(pos);
    if (list.size() - pos < sizeof(NsIdDescriptorHeader)) return reject(here, "descriptor header truncated");
    const auto h = load<NsIdDescriptorHeader>(list.data() + pos);
    const auto nidl_off = here + static_cast<uint32_t>(offsetof(NsIdDescriptorHeader, nidl));
    const uint8_t* id = list.data() + pos + sizeof(h);
    if (list.size() - pos - sizeof(h) < h.nidl) return reject(nidl_off, "descriptor runs past the end of the list");
    const auto type = static_cast<Nidt>(nidt);
    switch (type) {
      case Nidt::eui64:
      case Nidt::nguid:
      case Nidt::uuid:
      case Nidt::csi:
        if (h.nidl != nid_length(type)) return reject(nidl_off, "descriptor length wrong for its type");
        break;
      default:
        break;  // unknown type: skip it
    }
    switch (type) {
      case Nidt::eui64:
        if (ids.eui64) return reject(here, "duplicate EUI64 descriptor");
        ids.eui64.emplace();
        std::memcpy(ids.eui64->data(), id, 8);
        break;
      case Nidt::nguid:
        if (ids.nguid) return reject(here, "duplicate NGUID descriptor");
        ids.nguid.emplace();
        std::memcpy(ids.nguid->data(), id, 16);
        break;
      case Nidt::uuid:
        if (ids.uuid) return reject(here, "duplicate UUID descriptor");
        ids.uuid.emplace();
        std::memcpy(ids.uuid->data(), id, 16);
        break;
      case Nidt::csi:
        if (ids.csi) return reject(here, "duplicate CSI descriptor");
        ids.csi = id[0];
        break;
      default:
        break;
    }
    pos += sizeof(h) + h.nidl;
  }
  return ids;
}

}  // namespace rdmablk::protocol

#include "protocol/ana.h"

#include <cstring>

namespace rdmablk::protocol {

const char* ana_state_name(AnaState s) noexcept {
  switch (s) {
    case AnaState::optimized: return "optimized";
    case AnaState::non_optimized: return "non-optimized";
    case AnaState::inaccessible: return "inaccessible";
    case AnaState::persistent_loss: return "persistent-loss";
    case AnaState::change: return "change";
  }
  return "unknown";
}

std::vector<uint8_t> make_ana_log(uint64_t chgcnt, std::span<const AnaGroupEntry> groups, bool groups_only) {
  std::size_t size = sizeof(AnaLogHeader) + groups.size() * sizeof(AnaGroupDescriptor);
  if (!groups_only)
    for (const auto& g : groups) size += g.nsids.size() * sizeof(le32);
  std::vector<uint8_t> out(size, 0);
  AnaLogHeader hdr{};
  hdr.chgcnt.set(chgcnt);
  hdr.ngrps.set(static_cast<uint16_t>(groups.size()));
  std::memcpy(out.data(), &hdr, sizeof(hdr));
  std::size_t at = sizeof(hdr);
  for (const auto& g : groups) {
    AnaGroupDescriptor d{};
    d.anagrpid.set(g.anagrpid);
    d.nnsids.set(groups_only ? 0u : static_cast<uint32_t>(g.nsids.size()));
    d.chgcnt.set(g.chgcnt);
    d.anas = static_cast<uint8_t>(g.state);
    std::memcpy(out.data() + at, &d, sizeof(d));
    at += sizeof(d);
    if (groups_only) continue;
    for (uint32_t nsid : g.nsids) {
      le32 v;
      v.set(nsid);
      std::memcpy(out.data() + at, &v, sizeof(v));
      at += sizeof(v);
    }
  }
  return out;
}

}  // namespace rdmablk::protocol

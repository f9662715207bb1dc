#include "initiator/ublk/multipath.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace rdmablk::initiator::ublk {

const char* path_connection_name(PathConnection c) noexcept {
  switch (c) {
    case PathConnection::live: return "live";
    case PathConnection::connecting: return "connecting";
    case PathConnection::failed: return "failed";
  }
  return "unknown";
}

std::string ana_state_text(const std::optional<protocol::AnaState>& s) {
  return s ? protocol::ana_state_name(*s) : "none";
}

namespace {

// 2: optimized (or no ANA reporting), 1: non-optimized, 0: not usable.
int rank(const PathStatus& p) noexcept {
  if (p.connection != PathConnection::live) return 0;
  if (!p.ana || *p.ana == protocol::AnaState::optimized) return 2;
  return *p.ana == protocol::AnaState::non_optimized ? 1 : 0;
}

}  // namespace

std::optional<std::size_t> choose_path(std::span<const PathStatus> paths, std::optional<std::size_t> current) noexcept {
  std::optional<std::size_t> best;
  int best_rank = 0;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const int r = rank(paths[i]);
    if (r > best_rank) {
      best = i;
      best_rank = r;
    }
  }
  if (best && current && *current < paths.size() && rank(paths[*current]) == best_rank) return current;
  return best;
}

Result<AnaLog> parse_ana_log(std::span<const uint8_t> page) {
  using protocol::AnaGroupDescriptor;
  using protocol::AnaLogHeader;
  if (page.size() < sizeof(AnaLogHeader)) {
    return make_error(fmt::format("ANA log: {} bytes, shorter than its 16-byte header", page.size()), EPROTO);
  }
  AnaLogHeader hdr{};
  std::memcpy(&hdr, page.data(), sizeof(hdr));
  AnaLog log;
  log.chgcnt = hdr.chgcnt.get();
  const unsigned ngrps = hdr.ngrps.get();
  std::size_t at = sizeof(hdr);
  log.groups.reserve(ngrps);
  for (unsigned g = 0; g < ngrps; ++g) {
    if (page.size() - at < sizeof(AnaGroupDescriptor)) {
      return make_error(fmt::format("ANA log: descriptor {} of {} at byte {} runs past the {} bytes read", g, ngrps, at,
                                    page.size()),
                        EPROTO);
    }
    AnaGroupDescriptor d{};
    std::memcpy(&d, page.data() + at, sizeof(d));
    const uint8_t state = d.anas & protocol::kAnaStateMask;
    if (d.anagrpid.get() == 0) {
      return make_error(fmt::format("ANA log: descriptor {} at byte {} has ANAGRPID 0", g, at), EPROTO);
    }
    if (!protocol::is_valid_ana_state(state)) {
      return make_error(fmt::format("ANA log: group {} has the undefined ANA state {:#x}", d.anagrpid.get(), state),
                        EPROTO);
    }
    at += sizeof(d);
    const uint64_t nnsids = d.nnsids.get();
    if (nnsids > (page.size() - at) / 4) {
      return make_error(fmt::format("ANA log: group {} lists {} NSIDs, more than the {} bytes left hold",
                                    d.anagrpid.get(), nnsids, page.size() - at),
                        EPROTO);
    }
    protocol::AnaGroupEntry e;
    e.anagrpid = d.anagrpid.get();
    e.state = static_cast<protocol::AnaState>(state);
    e.chgcnt = d.chgcnt.get();
    e.nsids.reserve(static_cast<std::size_t>(nnsids));
    for (uint64_t n = 0; n < nnsids; ++n) {
      protocol::le32 v;
      std::memcpy(&v, page.data() + at, sizeof(v));
      e.nsids.push_back(v.get());
      at += sizeof(v);
    }
    log.groups.push_back(std::move(e));
  }
  return log;
}

std::optional<protocol::AnaState> ana_state_of(const AnaLog& log, uint32_t nsid, uint32_t anagrpid) noexcept {
  for (const auto& g : log.groups) {
    for (uint32_t n : g.nsids) {
      if (n == nsid) return g.state;
    }
  }
  for (const auto& g : log.groups) {
    if (anagrpid != 0 && g.anagrpid == anagrpid) return g.state;
  }
  return std::nullopt;
}

}  // namespace rdmablk::initiator::ublk

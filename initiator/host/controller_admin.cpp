// The admin commands a host sends after bring-up: properties, Identify, Set Features, log pages (discovery,
// ANA) and the Asynchronous Event configuration.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "initiator/host/controller.h"
#include "protocol/ana.h"

namespace rdmablk::initiator {

using transport::DataDirection;

Result<uint64_t> Controller::property_get(uint32_t offset, bool eight_bytes) {
  auto r = admin(protocol::to_sqe(protocol::make_property_get(0, offset, eight_bytes)));
  if (!r) return tl::unexpected(r.error());
  return eight_bytes ? r->result64() : r->dw0.get();
}

Result<void> Controller::property_set(uint32_t offset, uint64_t value, bool eight_bytes) {
  auto r = admin(protocol::to_sqe(protocol::make_property_set(0, offset, value, eight_bytes)));
  if (!r) return tl::unexpected(r.error());
  return {};
}

Result<protocol::IdentifyController> Controller::identify_controller() {
  std::array<uint8_t, protocol::kIdentifyDataSize> buf{};
  auto cmd = protocol::make_identify(0, protocol::Cns::controller, 0, protocol::SglDescriptor{});
  auto r = admin(protocol::to_sqe(cmd), buf, DataDirection::controller_to_host);
  if (!r) return tl::unexpected(r.error());
  return protocol::load<protocol::IdentifyController>(buf.data());
}

Result<std::vector<uint32_t>> Controller::active_namespaces() {
  std::vector<uint32_t> out;
  uint32_t after = 0;
  for (;;) {
    std::array<uint8_t, protocol::kIdentifyDataSize> buf{};
    auto cmd = protocol::make_identify(0, protocol::Cns::active_namespace_list, after, protocol::SglDescriptor{});
    auto r = admin(protocol::to_sqe(cmd), buf, DataDirection::controller_to_host);
    if (!r) return tl::unexpected(r.error());
    auto list = protocol::load<protocol::NamespaceList>(buf.data());
    std::size_t n = 0;
    for (const auto& e : list.nsid) {
      uint32_t nsid = e.get();
      if (nsid == 0) break;
      if (nsid <= after) return fail(fmt::format("{}: active namespace list is not increasing", where()), EPROTO);
      out.push_back(nsid);
      after = nsid;
      ++n;
    }
    if (n < list.nsid.size() || after >= 0xFFFFFFFEu) break;
  }
  return out;
}

Result<NamespaceInfo> Controller::identify_namespace(uint32_t nsid) {
  std::array<uint8_t, protocol::kIdentifyDataSize> buf{};
  auto cmd = protocol::make_identify(0, protocol::Cns::namespace_, nsid, protocol::SglDescriptor{});
  auto r = admin(protocol::to_sqe(cmd), buf, DataDirection::controller_to_host);
  if (!r) return tl::unexpected(r.error());
  NamespaceInfo ns;
  ns.nsid = nsid;
  ns.id = protocol::load<protocol::IdentifyNamespace>(buf.data());
  ns.size_blocks = ns.id.nsze.get();
  ns.capacity_blocks = ns.id.ncap.get();
  ns.utilization_blocks = ns.id.nuse.get();
  uint8_t fmt_index = ns.id.format_index();
  uint8_t lbads = fmt_index < ns.id.lbaf.size() ? ns.id.lbaf[fmt_index].lbads : 0;
  if (ns.capacity_blocks != 0 && (lbads < 9 || lbads > 31)) {
    return fail(fmt::format("{}: namespace {} reports an invalid LBA data size (LBADS {})", where(), nsid, lbads),
                EPROTO);
  }
  ns.block_size = lbads >= 9 && lbads <= 31 ? uint32_t{1} << lbads : 0;  // any LBADS of an inactive namespace
  static constexpr std::array<uint8_t, 16> kZero16{};
  if (ns.id.nguid != kZero16) ns.nguid = ns.id.nguid;
  if (ns.id.eui64 != std::array<uint8_t, 8>{}) ns.eui64 = ns.id.eui64;

  // Namespace identification descriptors (UUID, NGUID): optional, a failure is not fatal.
  std::array<uint8_t, protocol::kIdentifyDataSize> desc{};
  auto dcmd = protocol::make_identify(0, protocol::Cns::ns_id_descriptor_list, nsid, protocol::SglDescriptor{});
  if (!failed_ && admin(protocol::to_sqe(dcmd), desc, DataDirection::controller_to_host)) {
    if (auto ids = protocol::parse_ns_id_descriptor_list(desc)) {
      if (ids->uuid) ns.uuid = ids->uuid;
      if (ids->nguid && !ns.nguid) ns.nguid = ids->nguid;
      if (ids->eui64 && !ns.eui64) ns.eui64 = ids->eui64;
    }
  }
  if (failed_) return make_error(failure_, EIO);
  return ns;
}

Result<uint16_t> Controller::set_number_of_queues(uint16_t count) {
  if (count == 0) return make_error("number of queues must be at least 1", EINVAL);
  uint16_t n0 = static_cast<uint16_t>(count - 1);
  auto cmd = protocol::make_set_features(0, protocol::FeatureId::number_of_queues,
                                         protocol::number_of_queues_value(n0, n0));
  auto r = admin(protocol::to_sqe(cmd));
  if (!r) return tl::unexpected(r.error());
  uint32_t dw0 = r->dw0.get();
  uint32_t nsq = (dw0 & 0xFFFF) + 1, ncq = (dw0 >> 16) + 1;
  return static_cast<uint16_t>(std::min<uint32_t>({nsq, ncq, count}));
}

Result<std::vector<uint8_t>> Controller::get_log_page(protocol::LogPageId lid, uint64_t offset, uint32_t bytes,
                                                      uint32_t nsid) {
  if (bytes == 0 || bytes % 4 || offset % 4) return make_error("log page reads must be dword sized and aligned", EINVAL);
  std::vector<uint8_t> buf(bytes);
  auto cmd = protocol::make_get_log_page(0, lid, nsid, offset, bytes, protocol::SglDescriptor{});
  auto r = admin(protocol::to_sqe(cmd), buf, DataDirection::controller_to_host);
  if (!r) return tl::unexpected(r.error());
  return buf;
}

Result<DiscoveryLog> Controller::discovery_log(uint32_t chunk_bytes, unsigned max_passes) {
  using protocol::DiscoveryLogEntry;
  using protocol::DiscoveryLogHeader;
  constexpr uint64_t kMaxRecords = 1024;  // 1 MiB of log: far beyond any sane discovery service
  uint32_t chunk = chunk_bytes;
  if (max_transfer_ && chunk > max_transfer_) chunk = max_transfer_;
  chunk &= ~3u;
  if (chunk < 4) chunk = 4;

  auto read_range = [&](uint64_t offset, uint64_t length, uint8_t* dst) -> Result<void> {
    while (length) {
      uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(length, chunk));
      auto part = get_log_page(protocol::LogPageId::discovery, offset, n);
      if (!part) return tl::unexpected(part.error());
      std::memcpy(dst, part->data(), n);
      dst += n;
      offset += n;
      length -= n;
    }
    return {};
  };

  DiscoveryLog log;
  for (unsigned pass = 1; pass <= max_passes; ++pass) {
    log.reads = pass;
    std::array<uint8_t, sizeof(DiscoveryLogHeader)> hbuf{};
    if (auto r = read_range(0, hbuf.size(), hbuf.data()); !r) return tl::unexpected(r.error());
    auto hdr = protocol::load<DiscoveryLogHeader>(hbuf.data());
    uint64_t numrec = hdr.numrec.get();
    if (numrec > kMaxRecords) {
      return make_error(fmt::format("{}: discovery log claims {} records (more than {})", where(), numrec, kMaxRecords),
                        EPROTO);
    }
    log.genctr = hdr.genctr.get();
    log.recfmt = hdr.recfmt.get();
    log.entries.assign(numrec, DiscoveryLogEntry{});
    if (numrec == 0) return log;
    std::vector<uint8_t> ebuf(numrec * sizeof(DiscoveryLogEntry));
    if (auto r = read_range(sizeof(DiscoveryLogHeader), ebuf.size(), ebuf.data()); !r) return tl::unexpected(r.error());
    for (uint64_t i = 0; i < numrec; ++i) {
      log.entries[i] = protocol::load<DiscoveryLogEntry>(ebuf.data() + i * sizeof(DiscoveryLogEntry));
    }
    // The log may have changed while we read it in pieces: the header again decides.
    if (auto r = read_range(0, hbuf.size(), hbuf.data()); !r) return tl::unexpected(r.error());
    auto again = protocol::load<DiscoveryLogHeader>(hbuf.data());
    if (again.genctr.get() == log.genctr && again.numrec.get() == numrec) return log;
  }
  return make_error(fmt::format("{}: discovery log kept changing (generation counter) over {} reads", where(),
                                max_passes),
                    EAGAIN);
}

const NamespaceInfo* Controller::find_namespace(uint32_t nsid) const noexcept {
  for (const auto& ns : namespaces_) {
    if (ns.nsid == nsid) return &ns;
  }
  return nullptr;
}

uint32_t Controller::io_in_capsule_bytes() const noexcept {
  uint32_t ioccsz = id_.ioccsz.get();
  return ioccsz > 4 ? (ioccsz - 4) * 16 : 0;
}

Result<std::vector<uint8_t>> Controller::read_ana_log() {
  const uint32_t nsids = id_.mnan.get() != 0 ? id_.mnan.get() : id_.nn.get();
  uint64_t bytes = protocol::ana_log_max_size(std::min<uint32_t>(id_.nanagrpid.get(), 1024), std::min<uint32_t>(nsids, 1024));
  if (max_transfer_ != 0) bytes = std::min<uint64_t>(bytes, max_transfer_);
  bytes = std::max<uint64_t>(bytes, sizeof(protocol::AnaLogHeader)) & ~uint64_t{3};
  return get_log_page(protocol::LogPageId::ana, 0, static_cast<uint32_t>(bytes));
}

}  // namespace rdmablk::initiator

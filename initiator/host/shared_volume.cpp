#include "initiator/host/shared_volume.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace rdmablk::initiator {

namespace p = rdmablk::protocol;
using transport::DataDirection;

Result<std::vector<uint8_t>> encode_copy_ranges(std::span<const CopyRange> ranges) {
  if (ranges.empty() || ranges.size() > 256) {
    return make_error(fmt::format("a Copy takes 1 to 256 source ranges, not {}", ranges.size()), EINVAL);
  }
  std::vector<uint8_t> out(ranges.size() * sizeof(p::CopySourceRange));
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].blocks == 0 || ranges[i].blocks > 65536) {
      return make_error(fmt::format("Copy source range {}: {} blocks (1 to 65536)", i, ranges[i].blocks), EINVAL);
    }
    p::CopySourceRange e{};
    e.slba.set(ranges[i].slba);
    e.nlb.set(static_cast<uint16_t>(ranges[i].blocks - 1));
    p::store(out.data() + i * sizeof(e), e);
  }
  return out;
}

p::Sqe make_copy(uint32_t nsid, uint64_t sdlba, uint32_t ranges, bool fua) noexcept {
  p::CopyCommand c{};
  c.hdr = p::make_header(static_cast<uint8_t>(p::IoOpcode::copy), 0, nsid);
  c.set(sdlba, ranges, fua);  // descriptor format 0
  return p::to_sqe(c);
}

Result<void> compare_blocks(IoQueue& q, uint32_t nsid, uint64_t slba, uint32_t blocks, std::span<uint8_t> data) {
  auto r = q.execute(p::to_sqe(p::make_compare(0, nsid, slba, blocks, p::SglDescriptor{})), data,
                     DataDirection::host_to_controller);
  if (!r) return tl::unexpected(r.error());
  return {};
}

Result<void> copy_blocks(IoQueue& q, uint32_t nsid, uint64_t sdlba, std::span<const CopyRange> ranges, bool fua) {
  auto list = encode_copy_ranges(ranges);
  if (!list) return tl::unexpected(list.error());
  auto r = q.execute(make_copy(nsid, sdlba, static_cast<uint32_t>(ranges.size()), fua), *list,
                     DataDirection::host_to_controller);
  if (!r) return tl::unexpected(r.error());
  return {};
}

// ---------------------------------------------------------------------------------------------------------
// Reservation commands
// ---------------------------------------------------------------------------------------------------------

namespace {

template <typename Command>
Command with_header(p::IoOpcode op, uint32_t nsid) noexcept {
  Command c{};
  c.hdr = p::make_header(static_cast<uint8_t>(op), 0, nsid);
  return c;
}

// A command whose data goes to the controller (the keys), run to completion.
template <typename Data>
Result<void> send_keys(IoQueue& q, const p::Sqe& sqe, const Data& keys) {
  std::array<uint8_t, sizeof(Data)> buf{};
  p::store(buf.data(), keys);
  auto r = q.execute(sqe, buf, DataDirection::host_to_controller);
  if (!r) return tl::unexpected(r.error());
  return {};
}

}  // namespace

p::Sqe make_reservation_register(uint32_t nsid, p::RegisterAction action, bool iekey, p::ChangePtpl cptpl) noexcept {
  auto c = with_header<p::ReservationRegisterCommand>(p::IoOpcode::reservation_register, nsid);
  c.set(action, iekey, cptpl);
  return p::to_sqe(c);
}

p::Sqe make_reservation_acquire(uint32_t nsid, p::AcquireAction action, bool iekey, p::ReservationType rtype) noexcept {
  auto c = with_header<p::ReservationAcquireCommand>(p::IoOpcode::reservation_acquire, nsid);
  c.set(action, rtype, iekey);
  return p::to_sqe(c);
}

p::Sqe make_reservation_release(uint32_t nsid, p::ReleaseAction action, bool iekey, p::ReservationType rtype) noexcept {
  auto c = with_header<p::ReservationReleaseCommand>(p::IoOpcode::reservation_release, nsid);
  c.set(action, rtype, iekey);
  return p::to_sqe(c);
}

p::Sqe make_reservation_report(uint32_t nsid, bool eds, uint32_t bytes) noexcept {
  auto c = with_header<p::ReservationReportCommand>(p::IoOpcode::reservation_report, nsid);
  c.set(bytes, eds);
  return p::to_sqe(c);
}

Result<void> reservation_register(IoQueue& q, uint32_t nsid, p::RegisterAction action, bool iekey, p::ChangePtpl cptpl,
                                  uint64_t crkey, uint64_t nrkey) {
  p::ReservationRegisterData d{};
  d.crkey.set(crkey);
  d.nrkey.set(nrkey);
  return send_keys(q, make_reservation_register(nsid, action, iekey, cptpl), d);
}

Result<void> reservation_acquire(IoQueue& q, uint32_t nsid, p::AcquireAction action, bool iekey,
                                 p::ReservationType rtype, uint64_t crkey, uint64_t prkey) {
  p::ReservationAcquireData d{};
  d.crkey.set(crkey);
  d.prkey.set(prkey);
  return send_keys(q, make_reservation_acquire(nsid, action, iekey, rtype), d);
}

Result<void> reservation_release(IoQueue& q, uint32_t nsid, p::ReleaseAction action, bool iekey,
                                 p::ReservationType rtype, uint64_t crkey) {
  p::ReservationReleaseData d{};
  d.crkey.set(crkey);
  return send_keys(q, make_reservation_release(nsid, action, iekey, rtype), d);
}

Result<std::vector<uint8_t>> reservation_report_data(IoQueue& q, uint32_t nsid, bool eds, uint32_t bytes) {
  const std::size_t header = eds ? sizeof(p::ReservationStatusExtHeader) : sizeof(p::ReservationStatusHeader);
  if (bytes % 4 != 0 || bytes < header) {
    return make_error(fmt::format("a Reservation Report reads whole dwords, at least the {}-byte header: not {} bytes",
                                  header, bytes),
                      EINVAL);
  }
  std::vector<uint8_t> buf(bytes);
  auto r = q.execute(make_reservation_report(nsid, eds, bytes), buf, DataDirection::controller_to_host);
  if (!r) return tl::unexpected(r.error());
  return buf;
}

Result<ReservationStatus> reservation_report(IoQueue& q, uint32_t nsid, bool eds, uint32_t bytes) {
  auto data = reservation_report_data(q, nsid, eds, bytes);
  if (!data) return tl::unexpected(data.error());
  return parse_reservation_report(*data, eds);
}

// ---------------------------------------------------------------------------------------------------------
// Reservation Status data structure
// ---------------------------------------------------------------------------------------------------------

uint64_t Registrant::hostid64() const noexcept {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | hostid[static_cast<std::size_t>(i)];
  return v;
}

Result<ReservationStatus> parse_reservation_report(std::span<const uint8_t> data, bool extended) {
  const std::size_t header = extended ? sizeof(p::ReservationStatusExtHeader) : sizeof(p::ReservationStatusHeader);
  const std::size_t entry = extended ? sizeof(p::RegisteredControllerExt) : sizeof(p::RegisteredController);
  if (data.size() < header) {
    return make_error(fmt::format("Reservation Report: {} bytes, shorter than its {}-byte header", data.size(), header),
                      EPROTO);
  }
  const auto h = p::load<p::ReservationStatusHeader>(data.data());
  ReservationStatus s;
  s.generation = h.gen.get();
  s.rtype = h.rtype;
  s.regctl = static_cast<uint16_t>(h.regctl[0] | h.regctl[1] << 8);
  s.ptpls = h.ptpls;
  s.extended = extended;
  const std::size_t fit = (data.size() - header) / entry;
  const std::size_t n = std::min<std::size_t>(s.regctl, fit);
  s.registrants.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* at = data.data() + header + i * entry;
    Registrant r;
    if (extended) {
      const auto e = p::load<p::RegisteredControllerExt>(at);
      r.cntlid = e.cntlid.get();
      r.rcsts = e.rcsts;
      r.rkey = e.rkey.get();
      r.hostid = e.hostid;
    } else {
      const auto e = p::load<p::RegisteredController>(at);
      r.cntlid = e.cntlid.get();
      r.rcsts = e.rcsts;
      r.rkey = e.rkey.get();
      std::memcpy(r.hostid.data(), at + offsetof(p::RegisteredController, hostid), 8);
    }
    s.registrants.push_back(r);
  }
  return s;
}

}  // namespace rdmablk::initiator

#include "initiator/ublk/geometry.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>

namespace rdmablk::initiator::ublk {

namespace {
constexpr uint16_t kOncsDsm = 1u << 2;
constexpr uint16_t kOncsWriteZeroes = 1u << 3;
constexpr uint8_t kNsattrWriteProtected = 1u << 0;
constexpr uint32_t kSector = 512;
}  // namespace

Result<Geometry> geometry_for(const protocol::IdentifyController& ctrl, const NamespaceInfo& ns,
                              uint32_t max_transfer_bytes) {
  Geometry g;
  // The block layer takes logical blocks of 512 bytes up to a page, powers of two.
  if (ns.block_size < 512 || ns.block_size > 4096 || !std::has_single_bit(ns.block_size)) {
    return make_error(fmt::format("namespace {}: logical block size {} is not one a Linux block device can have "
                                  "(512..4096, a power of two)",
                                  ns.nsid, ns.block_size));
  }
  if (ns.size_blocks == 0) return make_error(fmt::format("namespace {}: size is 0 blocks", ns.nsid));
  g.block_size = ns.block_size;
  g.size_bytes = ns.size_blocks * ns.block_size;
  uint32_t max_io = kMaxIoBytes;
  if (max_transfer_bytes != 0) max_io = std::min(max_io, max_transfer_bytes);
  // NLB is 16 bits: at most 65536 blocks per command.
  max_io = static_cast<uint32_t>(std::min<uint64_t>(max_io, uint64_t{65536} * ns.block_size));
  const auto page = static_cast<uint32_t>(::sysconf(_SC_PAGESIZE));
  max_io -= max_io % page;  // whole pages: the driver's buffer size is page-aligned
  if (max_io < ns.block_size) {
    return make_error(fmt::format("the controller's transfer limit ({} bytes) is below one block ({} bytes)",
                                  max_transfer_bytes, ns.block_size));
  }
  g.max_io_bytes = max_io;
  g.volatile_cache = (ctrl.vwc & 1) != 0;
  const uint16_t oncs = ctrl.oncs.get();
  g.discard = (oncs & kOncsDsm) != 0;
  g.write_zeroes = (oncs & kOncsWriteZeroes) != 0;
  g.read_only = (ns.id.nsattr & kNsattrWriteProtected) != 0;
  return g;
}

ublk_params params_for(const Geometry& g) {
  ublk_params p{};
  p.len = sizeof(p);
  p.types = UBLK_PARAM_TYPE_BASIC;
  const uint8_t shift = static_cast<uint8_t>(std::countr_zero(g.block_size));
  p.basic.logical_bs_shift = shift;
  p.basic.physical_bs_shift = shift;
  p.basic.io_min_shift = shift;
  p.basic.io_opt_shift = shift;
  p.basic.max_sectors = g.max_io_bytes / kSector;
  p.basic.dev_sectors = g.size_bytes / kSector;
  if (g.volatile_cache) p.basic.attrs |= UBLK_ATTR_VOLATILE_CACHE | UBLK_ATTR_FUA;
  if (g.read_only) p.basic.attrs |= UBLK_ATTR_READ_ONLY;
  if (g.discard || g.write_zeroes) {
    p.types |= UBLK_PARAM_TYPE_DISCARD;
    p.discard.discard_granularity = g.block_size;
    // One range per request (the driver passes a single start/length per request); Write Zeroes and a
    // DSM range are capped by NLB (16 bits) and the 32-bit range length respectively.
    if (g.discard) {
      const uint32_t sectors_per_block = g.block_size / kSector;
      p.discard.max_discard_sectors = UINT32_MAX / sectors_per_block * sectors_per_block;
      p.discard.max_discard_segments = 1;
    }
    if (g.write_zeroes) p.discard.max_write_zeroes_sectors = 65536u * (g.block_size / kSector);
  }
  return p;
}

int errno_for_status(protocol::Status s) noexcept {
  namespace st = protocol::status;
  if (s.ok()) return 0;
  // Compare code type and code only: DNR and More vary on the wire.
  auto is = [s](protocol::Status want) { return s.sct() == want.sct() && s.sc() == want.sc(); };
  if (is(st::capacity_exceeded)) return -ENOSPC;
  if (is(st::invalid_opcode)) return -EOPNOTSUPP;
  return -EIO;
}

}  // namespace rdmablk::initiator::ublk

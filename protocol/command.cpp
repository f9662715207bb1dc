#include "protocol/command.h"

namespace rdmablk::protocol {

namespace {
// The header of a command whose data DPTR describes.
SqeHeader data_header(uint8_t opcode, uint16_t cid, uint32_t nsid, const SglDescriptor& dptr) noexcept {
  SqeHeader h = make_header(opcode, cid, nsid);
  h.dptr = dptr;
  return h;
}

ReadWriteCommand make_rw(IoOpcode op, uint16_t cid, uint32_t nsid, uint64_t slba, uint32_t blocks,
                         const SglDescriptor& dptr, bool fua) noexcept {
  ReadWriteCommand c{};
  c.hdr = data_header(static_cast<uint8_t>(op), cid, nsid, dptr);
  c.set_start_lba(slba);
  c.set_block_count(blocks);
  c.set_fua(fua);
  return c;
}
}  // namespace

ReadWriteCommand make_read(uint16_t cid, uint32_t nsid, uint64_t slba, uint32_t blocks, const SglDescriptor& dptr,
                           bool fua) noexcept {
  return make_rw(IoOpcode::read, cid, nsid, slba, blocks, dptr, fua);
}

ReadWriteCommand make_write(uint16_t cid, uint32_t nsid, uint64_t slba, uint32_t blocks, const SglDescriptor& dptr,
                            bool fua) noexcept {
  return make_rw(IoOpcode::write, cid, nsid, slba, blocks, dptr, fua);
}

ReadWriteCommand make_compare(uint16_t cid, uint32_t nsid, uint64_t slba, uint32_t blocks,
                              const SglDescriptor& dptr) noexcept {
  return make_rw(IoOpcode::compare, cid, nsid, slba, blocks, dptr, false);
}

Sqe make_flush(uint16_t cid, uint32_t nsid) noexcept {
  Sqe s{};
  s.hdr = make_header(static_cast<uint8_t>(IoOpcode::flush), cid, nsid);
  return s;
}

WriteZeroesCommand make_write_zeroes(uint16_t cid, uint32_t nsid, uint64_t slba, uint32_t blocks, bool deallocate,
                                     bool fua) noexcept {
  WriteZeroesCommand c{};
  c.hdr = make_header(static_cast<uint8_t>(IoOpcode::write_zeroes), cid, nsid);
  c.set_start_lba(slba);
  c.set_block_count(blocks);
  c.set_deallocate(deallocate);
  c.set_fua(fua);
  return c;
}

DsmCommand make_dsm(uint16_t cid, uint32_t nsid, uint32_t ranges, uint32_t attributes,
                    const SglDescriptor& dptr) noexcept {
  DsmCommand c{};
  c.hdr = data_header(static_cast<uint8_t>(IoOpcode::dataset_management), cid, nsid, dptr);
  c.set_range_count(ranges);
  c.set_attributes(attributes);
  return c;
}

IdentifyCommand make_identify(uint16_t cid, Cns cns, uint32_t nsid, const SglDescriptor& dptr, uint16_t cntid,
                              Csi csi) noexcept {
  IdentifyCommand c{};
  c.hdr = data_header(static_cast<uint8_t>(AdminOpcode::identify), cid, nsid, dptr);
  c.set_cns(cns);
  c.set_cntid(cntid);
  c.set_csi(csi);
  return c;
}

GetLogPageCommand make_get_log_page(uint16_t cid, LogPageId lid, uint32_t nsid, uint64_t offset, uint64_t bytes,
                                    const SglDescriptor& dptr, bool rae) noexcept {
  GetLogPageCommand c{};
  c.hdr = data_header(static_cast<uint8_t>(AdminOpcode::get_log_page), cid, nsid, dptr);
  c.set_lid(lid);
  c.set_rae(rae);
  c.set_length_bytes(bytes);
  c.set_offset(offset);
  return c;
}

FeaturesCommand make_set_features(uint16_t cid, FeatureId fid, uint32_t value, bool save) noexcept {
  FeaturesCommand c{};
  c.hdr = make_header(static_cast<uint8_t>(AdminOpcode::set_features), cid);
  c.set_fid(fid);
  c.set_save(save);
  c.set_value(value);
  return c;
}

FeaturesCommand make_get_features(uint16_t cid, FeatureId fid, FeatureSelect sel) noexcept {
  FeaturesCommand c{};
  c.hdr = make_header(static_cast<uint8_t>(AdminOpcode::get_features), cid);
  c.set_fid(fid);
  c.set_sel(sel);
  return c;
}

Sqe make_keep_alive(uint16_t cid) noexcept {
  Sqe s{};
  s.hdr = make_header(static_cast<uint8_t>(AdminOpcode::keep_alive), cid);
  return s;
}

Sqe make_async_event_request(uint16_t cid) noexcept {
  Sqe s{};
  s.hdr = make_header(static_cast<uint8_t>(AdminOpcode::async_event_request), cid);
  return s;
}

AbortCommand make_abort(uint16_t cid, uint16_t sqid, uint16_t target_cid) noexcept {
  AbortCommand c{};
  c.hdr = make_header(static_cast<uint8_t>(AdminOpcode::abort), cid);
  c.set_target(sqid, target_cid);
  return c;
}

}  // namespace rdmablk::protocol

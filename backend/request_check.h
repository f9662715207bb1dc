// Validation shared by every backend: the checks that refuse a request at submit time.
#pragma once

#include <bit>
#include <cstdint>

#include "backend/backend.h"

namespace rdmablk::backend::detail {

// The request's status before any I/O: success, or why it can never succeed. Overflow-safe: slba + nlb
// is never computed. `num_blocks` is the backend's size now (Backend::num_blocks()).
inline Status check_request(const Request& req, const Geometry& geo, uint64_t num_blocks) noexcept {
  namespace st = protocol::status;
  switch (req.op) {
    case Op::flush:
      return st::success;  // the range is ignored; a flush on a read-only namespace has nothing to do
    case Op::read:
    case Op::write:
    case Op::write_zeroes:
    case Op::deallocate:
      break;
    case Op::compare_and_write:
      if (geo.caps.compare_and_write_blocks == 0) return st::invalid_opcode;
      if (req.cmp_buf == nullptr || req.nlb > geo.caps.compare_and_write_blocks) return st::invalid_field;
      break;
    default:
      return st::invalid_opcode;
  }
  if (req.op != Op::read && geo.caps.read_only) return st::namespace_write_protected;
  if (req.nlb == 0) return st::invalid_field;
  if (req.slba >= num_blocks || req.nlb > num_blocks - req.slba) return st::lba_out_of_range;
  if ((req.op == Op::read || req.op == Op::write || req.op == Op::compare_and_write) && req.buf == nullptr)
    return st::invalid_field;
  return st::success;
}

inline bool valid_block_size(uint64_t bs) noexcept {
  return bs >= 512 && bs <= 65536 && std::has_single_bit(bs);
}

}  // namespace rdmablk::backend::detail

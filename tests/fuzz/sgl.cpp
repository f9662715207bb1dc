// The data SGL of a fabrics command (protocol/sgl.*) and the transport's plan for it
// (transport/target_queue.cpp plan_data_transfer: what every target transport runs on each capsule).
//
// Input: 14 bytes of binding limits, then the 64-byte SQE (zero-padded when shorter).
//   [0] SglAccept mask (bits 0-2), bit 3 capsule_declares_data (NVMe/TCP); [1..4] bytes of in-capsule data
//   that came with the command; [5..8] the queue's in-capsule limit; [9..12] its MDTS in bytes; [13] unused.
// Invariants: a decoded descriptor is of a kind the transport accepts and re-encodes (make_*_sgl) to a
// descriptor that decodes the same (bit for bit for keyed blocks); a planned transfer moves data in the
// opcode's direction, 1..MDTS bytes, in-capsule data only host to controller and inside the capsule's data
// and the queue's limit; a command that moves no data was planned so.
#include <algorithm>
#include <array>
#include <cstring>

#include "fuzz_util.h"
#include "protocol/command.h"
#include "protocol/endian.h"
#include "protocol/sgl.h"
#include "transport/target_queue.h"
#include "transport/target_queue_base.h"

namespace {
namespace p = rdmablk::protocol;
namespace tr = rdmablk::transport;

uint32_t u32(const uint8_t* b) { return static_cast<uint32_t>(b[0] | b[1] << 8 | b[2] << 16 | uint32_t{b[3]} << 24); }

bool same(const p::SglDescriptorView& a, const p::SglDescriptorView& b) {
  return a.kind == b.kind && a.addr == b.addr && a.length == b.length && a.key == b.key && a.invalidate == b.invalidate;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 14) return 0;
  tr::BindingLimits lim;
  lim.accept = static_cast<p::SglAccept>(data[0] & 7);
  lim.capsule_declares_data = (data[0] & 8) != 0;
  const uint32_t icd_len = u32(data + 1);
  lim.in_capsule = u32(data + 5);
  lim.max_transfer = u32(data + 9);
  std::array<uint8_t, 64> raw{};
  std::memcpy(raw.data(), data + 14, std::min<std::size_t>(size - 14, raw.size()));
  const auto sqe = p::load<p::Sqe>(raw.data());

  // The descriptor alone, from raw bytes (SQE offset 24), with offsets reported within the SQE.
  auto v = p::decode_data_sgl(std::span<const uint8_t>(raw.data() + 24, 16), lim.accept, 24);
  if (v) {
    FUZZ_CHECK((static_cast<unsigned>(lim.accept) >> static_cast<unsigned>(v->kind) & 1u) != 0);
    p::SglDescriptor again{};
    switch (v->kind) {
      case p::SglKind::keyed:
        FUZZ_CHECK(v->length <= p::kSglKeyedMaxLength);
        again = p::make_keyed_sgl(v->addr, v->length, v->key, v->invalidate);
        FUZZ_CHECK(std::memcmp(&again, raw.data() + 24, 16) == 0);  // every bit of a keyed block means something
        break;
      case p::SglKind::in_capsule:
        if (v->addr > UINT32_MAX) return 0;  // the builder takes 32-bit offsets
        again = p::make_in_capsule_sgl(static_cast<uint32_t>(v->addr), v->length);
        break;
      case p::SglKind::transport:
        FUZZ_CHECK(v->addr == 0);
        again = p::make_transport_sgl(v->length);
        break;
    }
    auto v2 = p::decode_data_sgl(again, lim.accept, 24);
    FUZZ_CHECK(v2.has_value() && same(*v, *v2));
    if (v->kind == p::SglKind::in_capsule) {
      FUZZ_CHECK(p::sgl_fits_in_capsule(*v, icd_len) == (v->addr + v->length <= icd_len));
    }
  } else {
    FUZZ_CHECK(v.error().offset == 24 + 15);  // only the identifier is judged here
  }

  tr::DataPlan plan;
  const p::Status st = tr::plan_data_transfer(sqe, icd_len, lim, plan);
  bool bidir = false;
  const tr::DataDirection dir = tr::command_direction(sqe, bidir);
  if (st.ok()) {
    if (plan.moves_data()) {
      FUZZ_CHECK(v.has_value());
      FUZZ_CHECK(plan.direction == dir && !bidir);
      FUZZ_CHECK(plan.length != 0 && plan.length <= lim.max_transfer);
      FUZZ_CHECK(plan.kind == v->kind && plan.length == v->length);
      if (plan.kind == p::SglKind::in_capsule) {
        FUZZ_CHECK(plan.direction == tr::DataDirection::host_to_controller);
        FUZZ_CHECK(icd_len <= lim.in_capsule);
        FUZZ_CHECK(uint64_t{plan.icd_offset} + plan.length <= icd_len);
      } else if (lim.capsule_declares_data) {
        FUZZ_CHECK(icd_len == 0);
      }
      if (plan.kind == p::SglKind::keyed) {
        FUZZ_CHECK(plan.remote_addr == v->addr && plan.rkey == v->key && plan.invalidate == v->invalidate);
      }
    } else {
      FUZZ_CHECK(plan.length == 0);
    }
  } else {
    FUZZ_CHECK(!plan.moves_data());
  }
  if (dir == tr::DataDirection::none) FUZZ_CHECK(!plan.moves_data());
  return 0;
}

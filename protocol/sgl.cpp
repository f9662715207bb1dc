#include "protocol/sgl.h"

namespace rdmablk::protocol {

SglDescriptor make_in_capsule_sgl(uint32_t offset, uint32_t length) noexcept {
  SglDataBlock d{};
  d.address.set(offset);
  d.length.set(length);
  d.identifier = kSglInCapsule;
  return std::bit_cast<SglDescriptor>(d);
}

SglDescriptor make_keyed_sgl(uint64_t address, uint32_t length, uint32_t key, bool invalidate) noexcept {
  SglKeyedDataBlock d{};
  d.address.set(address);
  d.length.set(length & kSglKeyedMaxLength);
  d.key.set(key);
  d.identifier = invalidate ? kSglKeyedInvalidate : kSglKeyed;
  return std::bit_cast<SglDescriptor>(d);
}

SglDescriptor make_transport_sgl(uint32_t length) noexcept {
  SglDataBlock d{};
  d.length.set(length);
  d.identifier = kSglTransport;
  return std::bit_cast<SglDescriptor>(d);
}

namespace {
constexpr bool accepts(SglAccept accept, SglKind kind) noexcept {
  return (static_cast<unsigned>(accept) >> static_cast<unsigned>(kind) & 1u) != 0;
}
}  // namespace

Decoded<SglDescriptorView> decode_data_sgl(const SglDescriptor& desc, SglAccept accept,
                                          uint32_t base_offset) noexcept {
  const uint32_t id_offset = base_offset + static_cast<uint32_t>(offsetof(SglDescriptor, identifier));
  SglDescriptorView v{};
  switch (desc.type()) {
    case SglType::data_block: {
      if (desc.subtype() != static_cast<uint8_t>(SglSubtype::offset))
        return reject(id_offset, "SGL data block subtype not supported (fabrics need offset 0x01)");
      auto d = std::bit_cast<SglDataBlock>(desc);
      v = SglDescriptorView{SglKind::in_capsule, d.address.get(), d.length.get(), 0, false};
      break;
    }
    case SglType::keyed_data_block: {
      const uint8_t sub = desc.subtype();
      if (sub != static_cast<uint8_t>(SglSubtype::address) && sub != static_cast<uint8_t>(SglSubtype::invalidate_key))
        return reject(id_offset, "SGL keyed data block subtype not supported");
      auto d = std::bit_cast<SglKeyedDataBlock>(desc);
      v = SglDescriptorView{SglKind::keyed, d.address.get(), static_cast<uint32_t>(d.length.get()),
                            static_cast<uint32_t>(d.key.get()),
                            sub == static_cast<uint8_t>(SglSubtype::invalidate_key)};
      break;
    }
    case SglType::transport_data_block: {
      if (desc.subtype() != static_cast<uint8_t>(SglSubtype::transport_specific))
        return reject(id_offset, "SGL transport data block subtype not supported");
      auto d = std::bit_cast<SglDataBlock>(desc);
      v = SglDescriptorView{SglKind::transport, 0, d.length.get(), 0, false};
      break;
    }
    case SglType::segment:
    case SglType::last_segment:
      return reject(id_offset, "SGL segment descriptors not supported (MSDBD is 1)");
    case SglType::bit_bucket:
    case SglType::vendor_specific:
    default:
      return reject(id_offset, "SGL descriptor type not supported");
  }
  if (!accepts(accept, v.kind)) return reject(id_offset, "SGL descriptor type not valid on this transport");
  return v;
}

Decoded<SglDescriptorView> decode_data_sgl(std::span<const uint8_t> bytes, SglAccept accept,
                                          uint32_t base_offset) noexcept {
  if (bytes.size() < sizeof(SglDescriptor))
    return reject(base_offset + static_cast<uint32_t>(bytes.size()), "SGL descriptor truncated");
  return decode_data_sgl(load<SglDescriptor>(bytes.data()), accept, base_offset);
}

}  // namespace rdmablk::protocol

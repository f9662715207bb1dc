// Discovery log fields as nvme-cli prints them (libnvme's tables).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rdmablk::initiator {

const char* trtype_str(uint8_t trtype) noexcept;
const char* adrfam_str(uint8_t adrfam) noexcept;
const char* subtype_str(uint8_t subtype) noexcept;
const char* treq_str(uint8_t treq) noexcept;
const char* eflags_str(uint16_t eflags) noexcept;
const char* sectype_str(uint8_t sectype) noexcept;
// A fixed-width, NUL- or space-padded field as a string.
std::string field_string(const char* data, std::size_t size);

}  // namespace rdmablk::initiator

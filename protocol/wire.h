// The prelude of every wire-layout header: fixed-width and little-endian field types, std::array and
// std::span, offsetof, and the check that a layout moves to and from the wire as plain bytes.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "protocol/endian.h"

namespace rdmablk::protocol {

// A struct that is copied (memcpy / bit_cast) between memory and the wire must be trivially copyable, and
// standard layout for its offsetof checks to mean anything.
template <typename T>
concept WireLayout = std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>;

}  // namespace rdmablk::protocol

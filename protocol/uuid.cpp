#include "protocol/uuid.h"

#include <algorithm>

namespace rdmablk::protocol {

namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool canonical_dash(std::size_t i) noexcept { return i == 8 || i == 13 || i == 18 || i == 23; }

}  // namespace

bool is_canonical_uuid(std::string_view text) noexcept {
  if (text.size() != 36) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (canonical_dash(i) != (text[i] == '-')) return false;
  }
  return true;
}

std::optional<Id128> parse_hex_id(std::string_view text) noexcept {
  Id128 out{};
  unsigned digits = 0;
  for (char c : text) {
    if (c == '-') continue;
    const int v = hex_value(c);
    if (v < 0 || digits >= 32) return std::nullopt;
    out[digits / 2] = static_cast<uint8_t>(out[digits / 2] | (v << (digits % 2 ? 0 : 4)));
    ++digits;
  }
  if (digits != 32) return std::nullopt;
  return out;
}

std::optional<Id128> parse_uuid(std::string_view text) noexcept {
  return is_canonical_uuid(text) ? parse_hex_id(text) : std::nullopt;
}

std::optional<Id128> parse_uuid_or_hex(std::string_view text) noexcept {
  if (text.size() == 32) return parse_hex_id(text);  // 32 characters and 32 digits: no '-'
  return parse_uuid(text);
}

std::string format_hex_id(const Id128& id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (uint8_t b : id) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string format_uuid(const Id128& id) {
  const std::string hex = format_hex_id(id);
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20);
}

bool all_zero(const Id128& id) noexcept {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace rdmablk::protocol

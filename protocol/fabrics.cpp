#include "protocol/fabrics.h"

#include <cstring>

#include "protocol/command.h"

namespace rdmablk::protocol {

namespace {
template <typename T>
T fabrics_header(FabricsType type, uint16_t cid) noexcept {
  T c{};
  c.opcode = kFabricsOpcode;
  c.flags = static_cast<uint8_t>(static_cast<unsigned>(Psdt::sgl_mptr_contiguous) << kSqePsdtShift);
  c.cid.set(cid);
  c.fctype = static_cast<uint8_t>(type);
  return c;
}

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
constexpr bool is_hex(char c) noexcept { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
constexpr bool is_label_char(char c) noexcept {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}
constexpr uint32_t u32(std::size_t v) noexcept { return static_cast<uint32_t>(v); }

Decoded<NqnForm> decode_uuid_suffix(std::string_view nqn) noexcept {
  constexpr std::size_t kUuidLen = 36;
  const std::size_t base = kUuidNqnPrefix.size();
  for (std::size_t i = 0; i < kUuidLen; ++i) {
    const std::size_t pos = base + i;
    if (pos >= nqn.size()) return reject(u32(nqn.size()), "NQN UUID truncated");
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? nqn[pos] != '-' : !is_hex(nqn[pos])) return reject(u32(pos), "NQN UUID is not 8-4-4-4-12 hex digits");
  }
  if (nqn.size() != base + kUuidLen) return reject(u32(base + kUuidLen), "NQN has bytes after its UUID");
  return NqnForm::uuid;
}
}  // namespace

ConnectCommand make_connect(uint16_t cid, uint16_t qid, uint16_t sqsize0, uint32_t kato_ms, uint8_t cattr,
                            const SglDescriptor& dptr) noexcept {
  auto c = fabrics_header<ConnectCommand>(FabricsType::connect, cid);
  c.dptr = dptr;
  c.recfmt.set(0);
  c.qid.set(qid);
  c.sqsize.set(sqsize0);
  c.cattr = cattr;
  c.kato.set(kato_ms);
  return c;
}

ConnectData make_connect_data(const std::array<uint8_t, 16>& hostid, uint16_t cntlid, std::string_view subnqn,
                              std::string_view hostnqn) noexcept {
  ConnectData d{};
  d.hostid = hostid;
  d.cntlid.set(cntlid);
  // Keep at least one NUL: at most 255 bytes of name.
  set_padded(d.subnqn, subnqn.data(), subnqn.size() < kNqnFieldSize ? subnqn.size() : kNqnFieldSize - 1, '\0');
  set_padded(d.hostnqn, hostnqn.data(), hostnqn.size() < kNqnFieldSize ? hostnqn.size() : kNqnFieldSize - 1, '\0');
  return d;
}

PropertyGetCommand make_property_get(uint16_t cid, uint32_t offset, bool eight_bytes) noexcept {
  auto c = fabrics_header<PropertyGetCommand>(FabricsType::property_get, cid);
  c.attrib = eight_bytes ? 1 : 0;
  c.offset.set(offset);
  return c;
}

PropertySetCommand make_property_set(uint16_t cid, uint32_t offset, uint64_t value, bool eight_bytes) noexcept {
  auto c = fabrics_header<PropertySetCommand>(FabricsType::property_set, cid);
  c.attrib = eight_bytes ? 1 : 0;
  c.offset.set(offset);
  c.value.set(eight_bytes ? value : (value & 0xFFFFFFFFu));
  return c;
}

DisconnectCommand make_disconnect(uint16_t cid) noexcept {
  return fabrics_header<DisconnectCommand>(FabricsType::disconnect, cid);
}

Decoded<NqnForm> decode_nqn(std::string_view nqn) noexcept {
  if (nqn.empty()) return reject(0, "empty NQN");
  if (nqn.size() > kNqnMaxLength) return reject(kNqnMaxLength, "NQN longer than 223 bytes");
  if (nqn == kDiscoveryNqn) return NqnForm::discovery;

  constexpr std::string_view prefix = "nqn.";
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (i >= nqn.size()) return reject(u32(nqn.size()), "NQN truncated before 'nqn.'");
    if (nqn[i] != prefix[i]) return reject(u32(i), "NQN must start with 'nqn.'");
  }
  // yyyy-mm at 4..10
  for (std::size_t i = 4; i < 11; ++i) {
    if (i >= nqn.size()) return reject(u32(nqn.size()), "NQN truncated in its yyyy-mm date");
    if (i == 8 ? nqn[i] != '-' : !is_digit(nqn[i])) return reject(u32(i), "NQN date must be yyyy-mm");
  }
  const int month = (nqn[9] - '0') * 10 + (nqn[10] - '0');
  if (month < 1 || month > 12) return reject(9, "NQN month must be 01-12");
  if (nqn.size() <= 11) return reject(u32(nqn.size()), "NQN has no domain after its date");
  if (nqn[11] != '.') return reject(11, "NQN date must be followed by '.'");

  // Reverse domain name: labels of [A-Za-z0-9-] separated by single dots, up to ':' or the end.
  std::size_t pos = 12;
  std::size_t label_start = pos;
  for (; pos < nqn.size() && nqn[pos] != ':'; ++pos) {
    if (nqn[pos] == '.') {
      if (pos == label_start) return reject(u32(pos), "NQN domain has an empty label");
      label_start = pos + 1;
    } else if (!is_label_char(nqn[pos])) {
      return reject(u32(pos), "NQN domain has an invalid character");
    }
  }
  if (pos == label_start) return reject(u32(pos), "NQN domain has an empty label");
  if (pos == nqn.size()) return NqnForm::domain;

  // pos is at ':'.
  if (nqn.substr(0, kUuidNqnPrefix.size()) == kUuidNqnPrefix) return decode_uuid_suffix(nqn);
  if (pos + 1 == nqn.size()) return reject(u32(pos + 1), "NQN has nothing after ':'");
  for (std::size_t i = pos + 1; i < nqn.size(); ++i) {
    const auto c = static_cast<unsigned char>(nqn[i]);
    if (c < 0x20 || c == 0x7F) return reject(u32(i), "NQN has a control character");
  }
  return NqnForm::domain;
}

Decoded<std::string_view> nqn_field(const std::array<char, kNqnFieldSize>& field, uint32_t base_offset) noexcept {
  const void* nul = std::memchr(field.data(), '\0', field.size());
  if (nul == nullptr) return reject(base_offset, "NQN field is not NUL terminated within 256 bytes");
  return std::string_view(field.data(), static_cast<std::size_t>(static_cast<const char*>(nul) - field.data()));
}

namespace {
Decoded<std::string_view> decode_nqn_at(std::span<const uint8_t> data, uint32_t offset) noexcept {
  const auto* start = data.data() + offset;
  const void* nul = std::memchr(start, 0, kNqnFieldSize);
  if (nul == nullptr) return reject(offset, "NQN field is not NUL terminated within 256 bytes");
  const auto len = static_cast<std::size_t>(static_cast<const uint8_t*>(nul) - start);
  if (len == 0) return reject(offset, "NQN field is empty");
  std::string_view nqn(reinterpret_cast<const char*>(start), len);  // NOLINT: bytes viewed as chars
  if (auto form = decode_nqn(nqn); !form) return reject(offset + form.error().offset, form.error().what);
  return nqn;
}
}  // namespace

Decoded<ConnectDataView> decode_connect_data(std::span<const uint8_t> data) noexcept {
  if (data.size() < kConnectDataSize) return reject(u32(data.size()), "Connect data shorter than 1024 bytes");
  ConnectDataView v{};
  std::memcpy(v.hostid.data(), data.data() + offsetof(ConnectData, hostid), v.hostid.size());
  v.cntlid = load<le16>(data.data() + offsetof(ConnectData, cntlid)).get();
  auto sub = decode_nqn_at(data, offsetof(ConnectData, subnqn));
  if (!sub) return tl::unexpected(sub.error());
  auto host = decode_nqn_at(data, offsetof(ConnectData, hostnqn));
  if (!host) return tl::unexpected(host.error());
  v.subnqn = *sub;
  v.hostnqn = *host;
  return v;
}

}  // namespace rdmablk::protocol

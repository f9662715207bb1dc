// The saved form of a ReservationState (state_format.h).
#include "target/reservations/state_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "protocol/crc32c.h"
#include "protocol/endian.h"

namespace rdmablk::target::reservations {

namespace {

constexpr std::array<uint8_t, 8> kMagic = {'R', 'B', 'L', 'K', 'R', 'E', 'S', 'V'};
constexpr std::size_t kCrcOffset = 16;
constexpr uint8_t kFlagPtpl = 1u << 0;

struct FileHeader {
  std::array<uint8_t, 8> magic;
  protocol::le32 version;
  protocol::le32 length;
  protocol::le32 crc;
  protocol::le32 rsvd20;
};
static_assert(sizeof(FileHeader) == kStateHeaderSize);
static_assert(offsetof(FileHeader, crc) == kCrcOffset);

struct PayloadV1 {
  protocol::le32 generation;
  uint8_t type;
  uint8_t flags;
  protocol::le16 rsvd6;
  std::array<uint8_t, 16> holder;
  protocol::le32 count;
  protocol::le32 rsvd28;
};
static_assert(sizeof(PayloadV1) == kStatePayloadFixedSize);

struct RegistrantV1 {
  std::array<uint8_t, 16> host;
  protocol::le64 key;
};
static_assert(sizeof(RegistrantV1) == kStateRegistrantSize);

struct EventsV2 {
  protocol::le32 count;
  protocol::le32 rsvd4;
};
static_assert(sizeof(EventsV2) == kStateEventsFixedSize);

struct EventV2 {
  protocol::le32 seq;
  uint8_t notice;
  std::array<uint8_t, 3> rsvd5;
  std::array<uint8_t, 16> host;
};
static_assert(sizeof(EventV2) == kStateEventSize);

// CRC32C of `bytes` as if its CRC field were zero.
uint32_t file_crc(std::span<const uint8_t> bytes) noexcept {
  protocol::Crc32c crc;
  constexpr std::array<uint8_t, 4> kZero{};
  crc.update(bytes.data(), kCrcOffset);
  crc.update(kZero.data(), kZero.size());
  crc.update(bytes.subspan(kCrcOffset + kZero.size()));
  return crc.value();
}

tl::unexpected<StateFormatError> fail(StateFormatProblem p, std::string detail) {
  return tl::unexpected(StateFormatError{p, std::move(detail)});
}

// The version 1 part of a payload (all of a version 1 one), its length already checked against the header and
// its bytes by the CRC; `consumed` gets its length.
tl::expected<ReservationState, StateFormatError> parse_state_v1(std::span<const uint8_t> payload,
                                                                std::size_t& consumed) {
  if (payload.size() < sizeof(PayloadV1))
    return fail(StateFormatProblem::corrupt, fmt::format("a {}-byte payload, shorter than 32 bytes", payload.size()));
  const auto fixed = protocol::load<PayloadV1>(payload.data());
  const uint64_t count = fixed.count.get();
  consumed = sizeof(PayloadV1) + count * sizeof(RegistrantV1);
  if (count > kMaxRegistrants || payload.size() < consumed)
    return fail(StateFormatProblem::corrupt,
                fmt::format("{} registrants do not fit a {}-byte payload", count, payload.size()));
  if ((fixed.flags & ~kFlagPtpl) != 0)
    return fail(StateFormatProblem::corrupt, fmt::format("unknown flags {:#x}", fixed.flags));
  ReservationState state;
  state.generation = fixed.generation.get();
  state.type = static_cast<ReservationType>(fixed.type);
  state.ptpl = (fixed.flags & kFlagPtpl) != 0;
  state.holder = fixed.holder;
  state.registrants.reserve(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < count; ++i) {
    const auto r = protocol::load<RegistrantV1>(payload.data() + sizeof(PayloadV1) + i * sizeof(RegistrantV1));
    state.registrants.push_back({r.host, r.key.get()});
  }
  if (auto why = inconsistency(state)) return fail(StateFormatProblem::corrupt, "an impossible state: " + *why);
  return state;
}

// The events block of a version 2 payload: all of `rest`.
tl::expected<std::vector<GroupEvent>, StateFormatError> parse_events_v2(std::span<const uint8_t> rest) {
  if (rest.size() < sizeof(EventsV2))
    return fail(StateFormatProblem::corrupt, fmt::format("a {}-byte events block, shorter than 8 bytes", rest.size()));
  const uint64_t count = protocol::load<EventsV2>(rest.data()).count.get();
  if (count > kMaxGroupEvents || rest.size() != sizeof(EventsV2) + count * sizeof(EventV2))
    return fail(StateFormatProblem::corrupt, fmt::format("{} events do not fill a {}-byte block", count, rest.size()));
  std::vector<GroupEvent> events;
  for (std::size_t i = 0; i < count; ++i) {
    const auto e = protocol::load<EventV2>(rest.data() + sizeof(EventsV2) + i * sizeof(EventV2));
    if (e.notice > static_cast<uint8_t>(ReservationNotice::reservation_preempted))
      return fail(StateFormatProblem::corrupt, fmt::format("event {}: notice type {}", i, e.notice));
    if (!events.empty() && e.seq.get() != events.back().seq + 1)
      return fail(StateFormatProblem::corrupt,
                  fmt::format("event {}: sequence {} after {}", i, e.seq.get(), events.back().seq));
    events.push_back({e.seq.get(), e.host, static_cast<ReservationNotice>(e.notice)});
  }
  return events;
}

void append_events(std::vector<uint8_t>& out, std::span<const GroupEvent> events) {
  if (events.size() > kMaxGroupEvents) events = events.subspan(events.size() - kMaxGroupEvents);
  const std::size_t at = out.size();
  out.resize(at + sizeof(EventsV2) + events.size() * sizeof(EventV2));
  EventsV2 fixed{};
  fixed.count.set(static_cast<uint32_t>(events.size()));
  protocol::store(out.data() + at, fixed);
  uint8_t* p = out.data() + at + sizeof(EventsV2);
  for (const GroupEvent& ev : events) {
    EventV2 e{};
    e.seq.set(ev.seq);
    e.notice = static_cast<uint8_t>(ev.notice);
    e.host = ev.host;
    protocol::store(p, e);
    p += sizeof(e);
  }
}

}  // namespace

std::vector<uint8_t> serialize_state(const ReservationState& state, std::span<const GroupEvent> events) {
  const std::size_t n = state.registrants.size();
  std::vector<uint8_t> out(kStateHeaderSize + sizeof(PayloadV1) + n * sizeof(RegistrantV1));
  PayloadV1 fixed{};
  fixed.generation.set(state.generation);
  fixed.type = static_cast<uint8_t>(state.type);
  fixed.flags = state.ptpl ? kFlagPtpl : 0;
  fixed.holder = state.holder;
  fixed.count.set(static_cast<uint32_t>(n));
  protocol::store(out.data() + kStateHeaderSize, fixed);
  uint8_t* p = out.data() + kStateHeaderSize + sizeof(PayloadV1);
  for (const auto& r : state.registrants) {
    RegistrantV1 e{};
    e.host = r.host;
    e.key.set(r.key);
    protocol::store(p, e);
    p += sizeof(e);
  }
  if (!events.empty()) append_events(out, events);
  FileHeader hdr{};
  hdr.magic = kMagic;
  hdr.version.set(events.empty() ? 1 : 2);
  hdr.length.set(static_cast<uint32_t>(out.size() - kStateHeaderSize));
  protocol::store(out.data(), hdr);
  hdr.crc.set(file_crc(out));
  protocol::store(out.data(), hdr);
  return out;
}

tl::expected<ReservationState, StateFormatError> parse_state(std::span<const uint8_t> bytes,
                                                             std::vector<GroupEvent>* events) {
  if (bytes.size() < kStateHeaderSize)
    return fail(StateFormatProblem::truncated, fmt::format("{} bytes, shorter than the 24-byte header", bytes.size()));
  const auto hdr = protocol::load<FileHeader>(bytes.data());
  if (hdr.magic != kMagic) return fail(StateFormatProblem::corrupt, "not a reservation state (bad magic)");
  const uint64_t length = hdr.length.get();
  const uint64_t have = bytes.size() - kStateHeaderSize;
  if (have < length)
    return fail(StateFormatProblem::truncated, fmt::format("{} payload bytes of the {} its header says", have, length));
  if (have > length)
    return fail(StateFormatProblem::corrupt, fmt::format("{} bytes after a {}-byte payload", have - length, length));
  const uint32_t crc = file_crc(bytes);
  if (crc != hdr.crc.get())
    return fail(StateFormatProblem::corrupt,
                fmt::format("checksum mismatch (stored {:#010x}, computed {:#010x})", hdr.crc.get(), crc));
  const uint32_t version = hdr.version.get();
  if (version == 0 || version > kStateFormatVersion)
    return fail(StateFormatProblem::unsupported_version,
                fmt::format("version {}; this rdmablk reads versions 1 to {}", version, kStateFormatVersion));
  const auto payload = bytes.subspan(kStateHeaderSize);
  std::size_t consumed = 0;
  auto state = parse_state_v1(payload, consumed);
  if (!state) return state;
  if (version == 1) {
    if (consumed != payload.size())
      return fail(StateFormatProblem::corrupt, fmt::format("{} registrants do not fill a {}-byte payload",
                                                           state->registrants.size(), payload.size()));
    if (events != nullptr) events->clear();
    return state;
  }
  auto parsed = parse_events_v2(payload.subspan(consumed));
  if (!parsed) return tl::unexpected(parsed.error());
  if (events != nullptr) *events = std::move(*parsed);
  return state;
}

const char* state_format_problem_name(StateFormatProblem p) noexcept {
  switch (p) {
    case StateFormatProblem::truncated: return "truncated";
    case StateFormatProblem::corrupt: return "corrupt";
    case StateFormatProblem::unsupported_version: return "unsupported version";
  }
  return "unknown";
}

}  // namespace rdmablk::target::reservations

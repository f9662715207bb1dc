// DH-HMAC-CHAP (security/dhchap_session.*, protocol/auth.*): the controller's transaction fed any sequence of
// Authentication Send data and Receive lengths, interleaved with the steps of an honest host (so the input
// reaches every state: a real Negotiate, a real Reply after a real Challenge, ...), whose messages the input
// may corrupt on the way; and the host's transaction fed any controller answers.
//
// Input: byte 0 picks the setup (bidirectional or not, whether the controller knows the host's secret,
// whether the host has the controller's secret right, the DH groups: null only or null + ffdhe2048, the
// larger groups being too slow to fuzz). Then records: an op byte and its operands:
//   op % 4 == 0  on_send(the next N bytes), N = the next byte
//   op % 4 == 1  next_receive(AL), AL = the next two bytes (little endian)
//   op % 4 == 2  one honest host step against the controller; when it sends, byte `k` (the next byte, if
//                non-zero) of its message is xor-ed with the byte after it first
//   op % 4 == 3  the host receives the next N bytes (N = the next byte) as a controller answer
// Invariants: a Receive never returns more than AL bytes; the controller only becomes authenticated for a
// host whose secret it knows, and only in a transaction in which the honest host's own R1 (the response
// in its Reply, bytes 16..16+HL) arrived unmodified: an HMAC that neither the input nor a flipped byte can make; the host never succeeds
// against a controller with the wrong controller secret; nothing crashes, leaks or reads out of bounds.
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "fuzz_util.h"
#include "security/dhchap_key.h"
#include "security/dhchap_session.h"

namespace {

namespace dh = rdmablk::security::dhchap;
using rdmablk::protocol::auth::DhGroupId;
using rdmablk::protocol::auth::HashId;

constexpr const char* kHostNqn = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000f00d";
constexpr const char* kSubNqn = "nqn.2024-11.io.rdmablk:fuzz";

dh::DhchapKey fixed_key(uint8_t fill, dh::KeyTransform transform) {
  std::array<uint8_t, 32> secret{};
  for (std::size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(fill + i * 7);
  auto k = dh::DhchapKey::from_secret(secret, transform);
  if (!k) FUZZ_FAIL("fixed key refused");
  return std::move(*k);
}

struct Keys {
  dh::DhchapKey host = fixed_key(0x11, dh::KeyTransform::sha256);
  dh::DhchapKey ctrl = fixed_key(0x55, dh::KeyTransform::none);
  dh::DhchapKey wrong_ctrl = fixed_key(0x99, dh::KeyTransform::none);
};

const Keys& keys() {
  static const Keys k;
  return k;
}

struct Reader {
  const uint8_t* p;
  std::size_t left;
  bool empty() const { return left == 0; }
  uint8_t byte() {
    if (left == 0) return 0;
    --left;
    return *p++;
  }
  std::vector<uint8_t> bytes(std::size_t n) {
    n = std::min(n, left);
    std::vector<uint8_t> v(p, p + n);
    p += n;
    left -= n;
    return v;
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  (void)keys();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  Reader in{data, size};
  const uint8_t setup = in.byte();
  const bool bidirectional = (setup & 1) != 0;
  const bool ctrl_knows_host = (setup & 2) == 0;
  const bool host_has_right_ctrl_key = (setup & 4) == 0;
  const bool with_dh = (setup & 8) != 0;
  std::vector<DhGroupId> groups{DhGroupId::null};
  if (with_dh) groups.insert(groups.begin(), DhGroupId::ffdhe2048);

  dh::ControllerAuthParams cp;
  cp.host_key = ctrl_knows_host ? &keys().host : nullptr;
  cp.ctrl_key = &keys().ctrl;
  cp.subsys_nqn = kSubNqn;
  cp.host_nqn = kHostNqn;
  cp.dh_groups = groups;
  auto ctrl = dh::ControllerAuthSession::create(cp);
  FUZZ_CHECK(ctrl.has_value());

  dh::HostAuthParams hp;
  hp.host_key = &keys().host;
  hp.ctrl_key = bidirectional ? (host_has_right_ctrl_key ? &keys().ctrl : &keys().wrong_ctrl) : nullptr;
  hp.host_nqn = kHostNqn;
  hp.subsys_nqn = kSubNqn;
  hp.dh_groups = groups;
  hp.t_id = static_cast<uint16_t>(setup >> 4);
  auto host = dh::HostAuthSession::create(hp);
  FUZZ_CHECK(host.has_value());

  // Since the last message that looked like AUTH_Negotiate (any Negotiate restarts or fails the transaction):
  // did the honest host's Reply reach the controller unmodified?
  bool honest_reply = false;
  auto note_sent = [&](const std::vector<uint8_t>& msg, bool honest) {
    if (msg.size() < 2) return;
    if (msg[1] == 0x00) honest_reply = false;        // Negotiate
    if (msg[1] == 0x02) honest_reply = honest;       // Reply
  };
  bool was_succeeded = false;
  for (int ops = 0; !in.empty() && ops < 64; ++ops) {
    const uint8_t op = in.byte();
    switch (op % 4) {
      case 0: {
        const auto msg = in.bytes(in.byte());
        note_sent(msg, false);
        ctrl->on_send(msg);
        break;
      }
      case 1: {
        const uint32_t al = in.byte() | uint32_t{in.byte()} << 8;
        const auto out = ctrl->next_receive(al);
        FUZZ_CHECK(out.size() <= al);
        break;
      }
      case 2: {
        const auto step = host->step();
        const uint8_t k = in.byte();
        const uint8_t x = in.byte();
        if (step.kind == dh::HostStep::Kind::send) {
          std::vector<uint8_t> msg(step.message.begin(), step.message.end());
          const bool corrupt = k != 0 && x != 0 && k < msg.size();
          if (corrupt) msg[k] ^= x;
          // A flip outside R1 (reserved bytes, an unused C2) may leave a valid Reply; one inside R1 never.
          const std::size_t hl = msg.size() > 6 ? msg[6] : 0;
          note_sent(msg, !(corrupt && k >= 16 && k < 16 + hl));
          ctrl->on_send(msg);
          host->sent();
        } else if (step.kind == dh::HostStep::Kind::receive) {
          host->received(ctrl->next_receive(step.receive_length));
        }
        break;
      }
      case 3: {
        const auto msg = in.bytes(in.byte());
        host->received(msg);
        break;
      }
    }
    const bool succeeded = ctrl->state().status == dh::AuthStatus::succeeded;
    if (succeeded && !was_succeeded) {
      FUZZ_CHECK(ctrl_knows_host);
      FUZZ_CHECK(honest_reply);
    }
    was_succeeded = succeeded;
    if (host->step().kind == dh::HostStep::Kind::succeeded && bidirectional) {
      FUZZ_CHECK(host_has_right_ctrl_key);
    }
  }
  return 0;
}

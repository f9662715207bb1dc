// DH-HMAC-CHAP on a queue whose Connect response asked for it (AUTHREQ ATR): the host's side of the
// transaction, each message carried by an Authentication Send or Receive.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "initiator/host/controller.h"
#include "initiator/host/sync_command.h"
#include "security/dhchap_session.h"

namespace rdmablk::initiator {

namespace {

namespace auth = protocol::auth;
namespace dh = security::dhchap;
using detail::run_sync;
using detail::SyncFailure;
using detail::SyncSlot;
using transport::DataDirection;
using transport::HostQueue;

// Negotiate, Reply, Success2/Failure2 sent and Challenge, Success1/Failure1 received: a bound on the
// exchange against a session that would never finish.
constexpr int kMaxAuthRounds = 16;

// What the exchange needs besides the session: where to send, and how to name the queue in errors.
struct AuthChannel {
  HostQueue& queue;
  SyncSlot& slot;
  std::chrono::milliseconds timeout;
  const std::string& what;  // "tcp://... nqn: qid N"
  std::vector<uint8_t> buffer;
  std::optional<auth::MessageId> last_received;  // tells a wrong controller response from other failures
};

tl::unexpected<Error> failure_error(const AuthChannel& ch, const dh::HostAuthSession& session, const dh::AuthFailure& f) {
  if (f.by_peer) {
    return make_error(fmt::format("{}: authentication failed: the controller answered AUTH_Failure1 ({})", ch.what,
                                  auth::to_string(f.explanation)),
                      EACCES);
  }
  if (session.bidirectional() && ch.last_received == auth::MessageId::success1 &&
      f.explanation == auth::FailureExplanation::failed) {
    return make_error(fmt::format("{}: controller authentication failed: {} (AUTH_Failure2 sent)", ch.what, f.what),
                      EACCES);
  }
  return make_error(fmt::format("{}: authentication failed: {} ({})", ch.what, f.what, auth::to_string(f.explanation)),
                    EACCES);
}

Result<void> send_message(AuthChannel& ch, dh::HostAuthSession& session, std::span<const uint8_t> message) {
  // The session's message stays valid until the next call on it; the transport may read it until the
  // command completes, so it goes out from our own copy.
  ch.buffer.assign(message.begin(), message.end());
  const bool failure2 = ch.buffer.size() > 1 && ch.buffer[1] == static_cast<uint8_t>(auth::MessageId::failure2);
  auto cmd = auth::make_authentication_send(0, static_cast<uint32_t>(ch.buffer.size()), protocol::SglDescriptor{});
  auto out = run_sync(ch.queue, ch.slot, protocol::to_sqe(cmd), ch.buffer, DataDirection::host_to_controller, ch.timeout);
  bool ok = out.failure == SyncFailure::none && out.cqe.get_status().ok();
  // Failure2 is a courtesy to the controller: the reason that made us send it is what matters.
  if (ok || failure2) {
    session.sent();
    return {};
  }
  return make_error(fmt::format("{}: Authentication Send {}", ch.what,
                                out.failure != SyncFailure::none ? out.message
                                                                 : "failed: " + describe_status(out.cqe.get_status())),
                    out.failure != SyncFailure::none ? ECONNRESET : EACCES);
}

Result<void> receive_message(AuthChannel& ch, dh::HostAuthSession& session, uint32_t length) {
  ch.buffer.assign(std::min<uint32_t>(length, auth::kMaxTransferLength), 0);
  auto cmd = auth::make_authentication_receive(0, static_cast<uint32_t>(ch.buffer.size()), protocol::SglDescriptor{});
  auto out = run_sync(ch.queue, ch.slot, protocol::to_sqe(cmd), ch.buffer, DataDirection::controller_to_host, ch.timeout);
  if (out.failure != SyncFailure::none) {
    return make_error(fmt::format("{}: Authentication Receive {}", ch.what, out.message), ECONNRESET);
  }
  if (!out.cqe.get_status().ok()) {
    return make_error(fmt::format("{}: Authentication Receive failed: {}", ch.what, describe_status(out.cqe.get_status())),
                      EACCES);
  }
  if (auto h = auth::decode_header(ch.buffer); h) ch.last_received = h->auth_id;
  session.received(ch.buffer);
  return {};
}

}  // namespace

Result<void> Controller::authenticate(HostQueue& queue, SyncSlot& slot, uint16_t qid) {
  const std::string what = fmt::format("{}: qid {}", where(), qid);
  if (!opts_.dhchap.secret) {
    return make_error(what + ": controller requires authentication: pass --dhchap-secret", EACCES);
  }
  dh::HostAuthParams params;
  params.host_key = opts_.dhchap.secret.get();
  params.ctrl_key = opts_.dhchap.ctrl_secret.get();
  params.host_nqn = opts_.host.hostnqn;
  params.subsys_nqn = opts_.subnqn;
  if (!opts_.dhchap.hashes.empty()) params.hashes = opts_.dhchap.hashes;
  if (!opts_.dhchap.dh_groups.empty()) params.dh_groups = opts_.dhchap.dh_groups;
  params.t_id = qid;  // as the kernel host
  auto session = dh::HostAuthSession::create(params);
  if (!session) return make_error(what + ": " + session.error().message, EINVAL);

  AuthChannel ch{queue, slot, opts_.command_timeout, what, {}, std::nullopt};
  for (int round = 0; round < kMaxAuthRounds; ++round) {
    dh::HostStep step = session->step();
    Result<void> r;
    switch (step.kind) {
      case dh::HostStep::Kind::succeeded: return {};
      case dh::HostStep::Kind::failed: return failure_error(ch, *session, step.failure);
      case dh::HostStep::Kind::send: r = send_message(ch, *session, step.message); break;
      case dh::HostStep::Kind::receive: r = receive_message(ch, *session, step.receive_length); break;
    }
    if (!r) return r;
  }
  return make_error(what + ": authentication did not finish", EPROTO);
}

}  // namespace rdmablk::initiator

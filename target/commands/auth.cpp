// DH-HMAC-CHAP in-band authentication (NVMe Base 2.0 8.13, TP 8006): Authentication Send / Receive on the
// admin queue and on every I/O queue, as nvmet does it (drivers/nvme/target/fabrics-cmd-auth.c). The
// transaction itself is security::dhchap::ControllerAuthSession (one per queue, on the queue's reactor);
// this file moves its messages, gates the queue and keeps the per-host failure count that refuses a host
// guessing secrets.
#include <spdlog/spdlog.h>

#include "protocol/auth.h"
#include "target/core/core_internal.h"

namespace rdmablk::target {

namespace auth = protocol::auth;
using security::dhchap::AuthStatus;

namespace {

// A host never sends more: the largest message is a Reply with ffdhe8192 (1168 bytes), and the kernel host
// sends with 4096-byte buffers (CHAP_BUF_SIZE). A Receive's buffer may be larger than the message (the rest
// is zeroed); nvmet sets no bound, 64 KiB keeps a host from asking for a huge zeroed transfer.
constexpr uint32_t kMaxAuthSend = auth::kMaxTransferLength;
constexpr uint32_t kMaxAuthReceive = 64 * 1024;

const char* hash_name(auth::HashId h) noexcept {
  switch (h) {
    case auth::HashId::sha256: return "sha256";
    case auth::HashId::sha384: return "sha384";
    case auth::HashId::sha512: return "sha512";
  }
  return "?";
}

const char* dh_group_name(auth::DhGroupId g) noexcept {
  switch (g) {
    case auth::DhGroupId::null: return "null";
    case auth::DhGroupId::ffdhe2048: return "ffdhe2048";
    case auth::DhGroupId::ffdhe3072: return "ffdhe3072";
    case auth::DhGroupId::ffdhe4096: return "ffdhe4096";
    case auth::DhGroupId::ffdhe6144: return "ffdhe6144";
    case auth::DhGroupId::ffdhe8192: return "ffdhe8192";
  }
  return "?";
}

// What Authentication Send and Receive check alike, in this order: the reserved flags, the length the
// command gives (TL / AL: decoded, at most `max`), and a data transfer of that length in `dir`.
template <typename Length>
Status check_auth_transfer(const TargetRequest& req, const Length& length, uint32_t max,
                           transport::DataDirection dir) noexcept {
  if (Status s = check_common_flags(req.sqe.hdr); !s.ok()) return s;
  if (!length || *length > max) return st::invalid_field;
  return check_data(req, dir, *length);
}

}  // namespace

void TargetCore::auth_send(CoreQueue& q, TargetRequest& req) noexcept {
  const auto cmd = protocol::as<auth::AuthenticationSendCommand>(req.sqe);
  const auto tl = auth::check_authentication_send(cmd);  // SECP, SPSP0/1, TL != 0
  if (Status s = check_auth_transfer(req, tl, kMaxAuthSend, transport::DataDirection::host_to_controller); !s.ok()) {
    finish(req, s);
    return;
  }
  if (data_in_capsule_or_fetch(req, Stage::auth_send)) auth_send_with_data(q, req);
}

template <typename Step>
bool TargetCore::auth_step(CoreQueue& q, TargetRequest& req, Step&& step) noexcept {
  auto* session = auth_session(q);
  if (session == nullptr) {
    finish(req, st::internal_error);
    return false;
  }
  const uint32_t transactions = session->transactions();
  const bool failed = session->state().status == AuthStatus::failed;
  try {
    step(*session);
  } catch (...) {  // allocation failure: the command fails, the queue goes on
    finish(req, st::internal_error);
    return false;
  }
  auth_step_done(q, transactions, failed);
  return true;
}

void TargetCore::auth_send_with_data(CoreQueue& q, TargetRequest& req) noexcept {
  if (auth_step(q, req, [&](auto& session) { session.on_send({req.data, req.data_length}); })) {
    finish(req, st::success);
  }
}

void TargetCore::auth_receive(CoreQueue& q, TargetRequest& req) noexcept {
  const auto cmd = protocol::as<auth::AuthenticationReceiveCommand>(req.sqe);
  const auto al = auth::check_authentication_receive(cmd);  // SECP, SPSP0/1, AL != 0
  if (Status s = check_auth_transfer(req, al, kMaxAuthReceive, transport::DataDirection::controller_to_host); !s.ok()) {
    finish(req, s);
    return;
  }
  std::vector<uint8_t> message;
  if (auth_step(q, req, [&](auto& session) { message = session.next_receive(*al); })) {
    finish_with_data(req, message);  // at most AL bytes, the rest of the buffer zeroed
  }
}

security::dhchap::ControllerAuthSession* TargetCore::auth_session(CoreQueue& q) noexcept {
  if (q.auth_session) return q.auth_session.get();
  if (!q.ctrl) return nullptr;
  try {
    security::dhchap::ControllerAuthParams params;
    const HostAuth* a = q.auth.get();  // null: the host has no secret, any transaction fails (as nvmet's)
    if (a != nullptr) {
      params.host_key = a->key.get();
      params.ctrl_key = a->ctrl_key.get();
      params.hashes = a->hashes;
      params.dh_groups = a->dh_groups;
    }
    params.subsys_nqn = q.ctrl->discovery ? std::string(protocol::kDiscoveryNqn) : q.ctrl->subsys->nqn;
    params.host_nqn = q.ctrl->hostnqn;
    auto session = security::dhchap::ControllerAuthSession::create(params);
    if (!session) {
      spdlog::error("controller {} qid {}: cannot start DH-HMAC-CHAP: {}", q.ctrl->cntlid, q.qid,
                    session.error().message);
      return nullptr;
    }
    q.auth_session = std::make_unique<security::dhchap::ControllerAuthSession>(std::move(*session));
  } catch (...) {
    return nullptr;
  }
  return q.auth_session.get();
}

void TargetCore::auth_step_done(CoreQueue& q, uint32_t transactions_before, bool failed_before) noexcept {
  const auto& session = *q.auth_session;
  const auto state = session.state();
  const bool new_transaction = session.transactions() != transactions_before;
  if (state.status == AuthStatus::succeeded) {
    if (!q.authenticated || new_transaction) {
      const bool first = !q.authenticated;
      q.authenticated = true;
      cancel_connect_timer(q);  // authenticated in time
      // The I/O queues of a host authenticate one by one: only the admin queue's success is worth info.
      const auto level = q.qid == 0 ? spdlog::level::info : spdlog::level::debug;
      spdlog::log(level, "controller {} qid {}: host {} {} ({}, {}{})", q.ctrl->cntlid, q.qid, q.ctrl->hostnqn,
                  first ? "authenticated" : "re-authenticated", hash_name(session.hash()),
                  dh_group_name(session.dh_group()), session.bidirectional() ? ", bidirectional" : "");
    }
    return;
  }
  if (state.status != AuthStatus::failed || (failed_before && !new_transaction)) return;

  // A new failure: the queue is no longer authenticated (the host disconnects), counted against the host.
  q.authenticated = false;
  gate_.record_failure(q.ctrl->hostnqn, [&] {
    spdlog::warn("controller {} qid {}: DH-HMAC-CHAP authentication of host {} from {} failed: {} ({}{})",
                 q.ctrl->cntlid, q.qid, q.ctrl->hostnqn, q.tq != nullptr ? q.tq->peer_name() : std::string("?"),
                 state.failure.what, auth::to_string(state.failure.explanation),
                 state.failure.by_peer ? ", reported by the host" : "");
  });
}

}  // namespace rdmablk::target

#include "security/dhchap_session.h"

#include <algorithm>
#include <utility>

namespace rdmablk::security::dhchap {

namespace auth = protocol::auth;
using auth::AuthType;

namespace {

// A received explanation byte as the enum; anything unknown reads as the generic `failed`.
FailureExplanation explanation_from(uint8_t raw) noexcept {
  if (raw >= static_cast<uint8_t>(FailureExplanation::failed) &&
      raw <= static_cast<uint8_t>(FailureExplanation::incorrect_message)) {
    return static_cast<FailureExplanation>(raw);
  }
  return FailureExplanation::failed;
}

// Transform a secret with its owner's NQN; a missing key gives empty bytes.
Result<SecretBytes> transform(const DhchapKey* key, std::string_view nqn) {
  if (key == nullptr) return SecretBytes{};
  return key->transformed(nqn);
}

// The NQNs and lists checked (`lists` names what the lists are in the error), the secrets transformed.
Result<SessionSecrets> session_secrets(const DhchapKey* host_key, const DhchapKey* ctrl_key, std::string_view host_nqn,
                                       std::string_view subsys_nqn, const std::vector<HashId>& hashes,
                                       const std::vector<DhGroupId>& dh_groups, const char* lists) {
  if (host_nqn.empty() || subsys_nqn.empty()) return make_error("DH-HMAC-CHAP: empty NQN");
  if (hashes.empty() || dh_groups.empty()) {
    return make_error(std::string("DH-HMAC-CHAP: no hash function or no DH group ") + lists);
  }
  SessionSecrets k;
  auto kh = transform(host_key, host_nqn);
  if (!kh) return tl::unexpected(kh.error());
  auto kc = transform(ctrl_key, subsys_nqn);
  if (!kc) return tl::unexpected(kc.error());
  k.host_key = std::move(*kh);
  k.ctrl_key = std::move(*kc);
  k.host_nqn = host_nqn;
  k.subsys_nqn = subsys_nqn;
  k.hashes = hashes;
  k.dh_groups = dh_groups;
  return k;
}

// What a response hashes in this transaction: R1 with the host's transformed secret, R2 with the
// controller's. SC_C is hashed as 00h in both, as the kernel does (see controller_response).
ResponseInput response_input(const SessionSecrets& keys, std::span<const uint8_t> key, HashId hash,
                             std::span<const uint8_t> challenge, std::span<const uint8_t> shared_secret,
                             uint32_t seqnum, uint16_t t_id) noexcept {
  ResponseInput in;
  in.hash = hash;
  in.key = key;
  in.challenge = challenge;
  in.shared_secret = shared_secret;
  in.seqnum = seqnum;
  in.t_id = t_id;
  in.sc_c = 0;
  in.host_nqn = keys.host_nqn;
  in.subsys_nqn = keys.subsys_nqn;
  return in;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// HostAuthSession
// ---------------------------------------------------------------------------------------------------------

Result<HostAuthSession> HostAuthSession::create(const HostAuthParams& params) {
  if (params.host_key == nullptr) return make_error("DH-HMAC-CHAP: the host has no secret");
  auto keys = session_secrets(params.host_key, params.ctrl_key, params.host_nqn, params.subsys_nqn, params.hashes,
                              params.dh_groups, "to offer");
  if (!keys) return tl::unexpected(keys.error());
  HostAuthSession s;
  s.keys_ = std::move(*keys);
  s.t_id_ = params.t_id;
  s.out_.resize(auth::kMaxTransferLength);
  auto n = auth::encode_negotiate(s.out_, s.t_id_, auth::SecureChannel::none, s.keys_.hashes, s.keys_.dh_groups);
  if (!n) return make_error(std::string("DH-HMAC-CHAP: cannot build AUTH_Negotiate: ") + n.error().what);
  s.out_.resize(*n);
  return s;
}

HostStep HostAuthSession::step() const {
  HostStep st;
  switch (state_) {
    case State::send_negotiate:
    case State::send_reply:
    case State::send_success2:
    case State::send_failure2:
      st.kind = HostStep::Kind::send;
      st.message = out_;
      break;
    case State::await_challenge:
    case State::await_success1:
      st.kind = HostStep::Kind::receive;
      st.receive_length = auth::kMaxTransferLength;  // CHAP_BUF_SIZE, as the kernel host
      break;
    case State::succeeded:
      st.kind = HostStep::Kind::succeeded;
      break;
    case State::failed:
      st.kind = HostStep::Kind::failed;
      st.failure = failure_;
      break;
  }
  return st;
}

void HostAuthSession::sent() {
  switch (state_) {
    case State::send_negotiate: state_ = State::await_challenge; break;
    case State::send_reply: state_ = State::await_success1; break;
    case State::send_success2: state_ = State::succeeded; break;
    case State::send_failure2: state_ = State::failed; break;
    default: abort("sent() without a message to send"); return;
  }
  out_.clear();
  if (state_ == State::succeeded || state_ == State::failed) shared_secret_ = SecretBytes{};
}

void HostAuthSession::abort(const char* what) {
  if (state_ == State::failed) return;
  failure_ = AuthFailure{FailureExplanation::failed, what, false};
  state_ = State::failed;
  out_.clear();
  shared_secret_ = SecretBytes{};
}

void HostAuthSession::fail_with_failure2(FailureExplanation explanation, const char* what) {
  failure_ = AuthFailure{explanation, what, false};
  shared_secret_ = SecretBytes{};
  out_.assign(auth::kMaxTransferLength, 0);
  auto n = auth::encode_failure(out_, MessageId::failure2, t_id_, explanation);
  if (!n) {  // cannot happen with this buffer; end without telling the controller
    state_ = State::failed;
    out_.clear();
    return;
  }
  out_.resize(*n);
  state_ = State::send_failure2;
}

void HostAuthSession::received(std::span<const uint8_t> data) {
  if (state_ != State::await_challenge && state_ != State::await_success1) {
    abort("received() while no message was expected");
    return;
  }
  auto header = auth::decode_header(data);
  if (!header) {
    fail_with_failure2(header.error().explanation, header.error().what);
    return;
  }
  if (header->auth_type == AuthType::common && header->auth_id == MessageId::failure1) {
    auto f = auth::decode_failure(data);
    if (!f) {
      fail_with_failure2(f.error().explanation, f.error().what);
      return;
    }
    failure_ = AuthFailure{explanation_from(f->explanation), "the controller sent AUTH_Failure1", true};
    state_ = State::failed;
    shared_secret_ = SecretBytes{};
    return;
  }
  const MessageId expected = state_ == State::await_challenge ? MessageId::challenge : MessageId::success1;
  if (header->auth_type != AuthType::dhchap || header->auth_id != expected) {
    fail_with_failure2(FailureExplanation::incorrect_message, "unexpected message from the controller");
    return;
  }
  if (header->t_id != t_id_) {
    fail_with_failure2(FailureExplanation::incorrect_payload, "T_ID is not this transaction's");
    return;
  }
  if (state_ == State::await_challenge) {
    on_challenge(data);
  } else {
    on_success1(data);
  }
}

void HostAuthSession::on_challenge(std::span<const uint8_t> data) {
  auto ch = auth::decode_challenge(data);
  if (!ch) {
    fail_with_failure2(ch.error().explanation, ch.error().what);
    return;
  }
  if (std::find(keys_.hashes.begin(), keys_.hashes.end(), ch->hash) == keys_.hashes.end()) {
    fail_with_failure2(FailureExplanation::hash_unusable, "the controller chose a hash function not offered");
    return;
  }
  if (std::find(keys_.dh_groups.begin(), keys_.dh_groups.end(), ch->dh_group) == keys_.dh_groups.end()) {
    fail_with_failure2(FailureExplanation::dhgroup_unusable, "the controller chose a DH group not offered");
    return;
  }
  hash_ = ch->hash;
  dh_group_ = ch->dh_group;
  std::optional<DhKeyPair> dh;
  shared_secret_ = SecretBytes{};
  if (dh_group_ != DhGroupId::null) {
    auto pair = DhKeyPair::generate(dh_group_);
    if (!pair) {
      fail_with_failure2(pair.error().explanation, pair.error().what);
      return;
    }
    auto ks = pair->shared_secret(ch->dh_value);
    if (!ks) {
      fail_with_failure2(ks.error().explanation, ks.error().what);
      return;
    }
    shared_secret_ = std::move(*ks);
    dh.emplace(std::move(*pair));
  }
  auto r1 = host_response(
      response_input(keys_, keys_.host_key.view(), hash_, ch->challenge, shared_secret_.view(), ch->seqnum, t_id_));
  if (!r1) {
    fail_with_failure2(r1.error().explanation, r1.error().what);
    return;
  }
  const bool cvalid = bidirectional();
  if (cvalid) {
    auto c2 = random_challenge(hash_);
    if (!c2) {
      fail_with_failure2(c2.error().explanation, c2.error().what);
      return;
    }
    c2_ = *c2;
    s2_ = next_sequence_number();
  } else {
    s2_ = 0;
  }
  std::span<const uint8_t> dh_value;
  if (dh) dh_value = dh->public_value();
  std::vector<uint8_t> out(auth::kMaxTransferLength);
  auto n = auth::encode_reply(out, t_id_, r1->view(), cvalid, s2_, cvalid ? c2_.view() : std::span<const uint8_t>{},
                              dh_value);
  if (!n) {
    fail_with_failure2(n.error().explanation, n.error().what);
    return;
  }
  out.resize(*n);
  out_ = std::move(out);
  state_ = State::send_reply;
}

void HostAuthSession::on_success1(std::span<const uint8_t> data) {
  auto s1 = auth::decode_success1(data);
  if (!s1) {
    fail_with_failure2(s1.error().explanation, s1.error().what);
    return;
  }
  if (s1->hl != auth::hash_length(hash_)) {
    fail_with_failure2(FailureExplanation::incorrect_payload, "Success1 HL is not the chosen hash's length");
    return;
  }
  if (!bidirectional()) {
    state_ = State::succeeded;
    shared_secret_ = SecretBytes{};
    return;
  }
  if (!s1->rvalid) {
    fail_with_failure2(FailureExplanation::failed, "the controller sent no response R2");
    return;
  }
  auto expected = controller_response(
      response_input(keys_, keys_.ctrl_key.view(), hash_, c2_.view(), shared_secret_.view(), s2_, t_id_));
  if (!expected) {
    fail_with_failure2(expected.error().explanation, expected.error().what);
    return;
  }
  if (!constant_time_equal(expected->view(), s1->response)) {
    fail_with_failure2(FailureExplanation::failed, "controller response mismatch (wrong controller secret)");
    return;
  }
  out_.assign(auth::kMaxTransferLength, 0);
  auto n = auth::encode_success2(out_, t_id_);
  if (!n) {
    fail_with_failure2(n.error().explanation, n.error().what);
    return;
  }
  out_.resize(*n);
  state_ = State::send_success2;
}

// ---------------------------------------------------------------------------------------------------------
// ControllerAuthSession
// ---------------------------------------------------------------------------------------------------------

Result<ControllerAuthSession> ControllerAuthSession::create(const ControllerAuthParams& params) {
  auto keys = session_secrets(params.host_key, params.ctrl_key, params.host_nqn, params.subsys_nqn, params.hashes,
                              params.dh_groups, "allowed");
  if (!keys) return tl::unexpected(keys.error());
  ControllerAuthSession s;
  s.keys_ = std::move(*keys);
  return s;
}

ControllerAuthState ControllerAuthSession::state() const {
  ControllerAuthState st;
  switch (step_) {
    case Step::done: st.status = AuthStatus::succeeded; break;
    case Step::failure1:
      st.status = AuthStatus::failed;
      st.failure = failure_;
      break;
    default: st.status = AuthStatus::in_progress; break;
  }
  return st;
}

void ControllerAuthSession::fail(FailureExplanation explanation, const char* what, bool by_peer) {
  failure_ = AuthFailure{explanation, what, by_peer};
  step_ = Step::failure1;
  // Nothing of the transaction outlives it.
  dh_.reset();
  c1_ = Digest{};
  r2_ = Digest{};
}

void ControllerAuthSession::on_send(std::span<const uint8_t> data) {
  auto header = auth::decode_header(data);
  if (!header) {
    if (step_ != Step::failure1) fail(header.error().explanation, header.error().what);
    return;
  }
  if (header->auth_type == AuthType::common && header->auth_id == MessageId::negotiate) {
    t_id_ = header->t_id;  // Failure1 carries it even when the Negotiate is refused
    on_negotiate(data);    // a new transaction, whatever the state (re-authentication)
    return;
  }
  if (step_ == Step::failure1) return;  // already failed: keep the first reason
  if (header->auth_id == MessageId::failure2) {
    // AUTH_TYPE 01h accepted too (older kernel hosts).
    auto f = auth::decode_failure(data);
    if (!f) {
      fail(f.error().explanation, f.error().what);
      return;
    }
    fail(explanation_from(f->explanation), "the host sent AUTH_Failure2", true);
    return;
  }
  const bool expecting_reply = step_ == Step::reply;
  const bool expecting_success2 = step_ == Step::success2;
  if (header->auth_type != AuthType::dhchap ||
      !((expecting_reply && header->auth_id == MessageId::reply) ||
        (expecting_success2 && header->auth_id == MessageId::success2))) {
    fail(FailureExplanation::incorrect_message, "message out of order");
    return;
  }
  if (header->t_id != t_id_) {
    fail(FailureExplanation::incorrect_payload, "T_ID is not this transaction's");
    return;
  }
  if (expecting_reply) {
    on_reply(data);
    return;
  }
  auto s2 = auth::decode_success2(data);
  if (!s2) {
    fail(s2.error().explanation, s2.error().what);
    return;
  }
  step_ = Step::done;
  r2_ = Digest{};
}

void ControllerAuthSession::on_negotiate(std::span<const uint8_t> data) {
  ++transactions_;
  dh_.reset();
  c1_ = Digest{};
  r2_ = Digest{};
  cvalid_ = false;
  failure_ = AuthFailure{};
  step_ = Step::negotiate;
  auto neg = auth::decode_negotiate(data);
  if (!neg) {
    fail(neg.error().explanation, neg.error().what);
    return;
  }
  if (neg->sc_c != auth::SecureChannel::none) {
    fail(FailureExplanation::concat_mismatch, "secure channel concatenation is not offered");
    return;
  }
  auto hash = auth::select_hash(*neg, keys_.hashes);
  if (!hash) {
    fail(hash.error().explanation, hash.error().what);
    return;
  }
  auto group = auth::select_dh_group(*neg, keys_.dh_groups);
  if (!group) {
    fail(group.error().explanation, group.error().what);
    return;
  }
  hash_ = *hash;
  dh_group_ = *group;
  auto c1 = random_challenge(hash_);
  if (!c1) {
    fail(c1.error().explanation, c1.error().what);
    return;
  }
  c1_ = *c1;
  s1_ = next_sequence_number();
  if (dh_group_ != DhGroupId::null) {
    auto pair = DhKeyPair::generate(dh_group_);
    if (!pair) {
      fail(pair.error().explanation, pair.error().what);
      return;
    }
    dh_.emplace(std::move(*pair));
  }
  step_ = Step::challenge;
}

void ControllerAuthSession::on_reply(std::span<const uint8_t> data) {
  auto rep = auth::decode_reply(data);
  if (!rep) {
    fail(rep.error().explanation, rep.error().what);
    return;
  }
  if (rep->hl != auth::hash_length(hash_)) {
    fail(FailureExplanation::incorrect_payload, "Reply HL is not the chosen hash's length");
    return;
  }
  if (rep->dh_value.size() != auth::dh_value_length(dh_group_)) {
    fail(FailureExplanation::incorrect_payload, "Reply DHVLEN is not the chosen DH group's size");
    return;
  }
  if (keys_.host_key.empty()) {
    fail(FailureExplanation::failed, "no DH-HMAC-CHAP secret is configured for this host");
    return;
  }
  SecretBytes shared;
  if (dh_) {
    auto ks = dh_->shared_secret(rep->dh_value);
    if (!ks) {
      fail(ks.error().explanation, ks.error().what);
      return;
    }
    shared = std::move(*ks);
  }
  auto expected =
      host_response(response_input(keys_, keys_.host_key.view(), hash_, c1_.view(), shared.view(), s1_, t_id_));
  if (!expected) {
    fail(expected.error().explanation, expected.error().what);
    return;
  }
  if (!constant_time_equal(expected->view(), rep->response)) {
    fail(FailureExplanation::failed, "host response mismatch (wrong host secret)");
    return;
  }
  cvalid_ = rep->cvalid;
  if (cvalid_) {
    if (keys_.ctrl_key.empty()) {
      fail(FailureExplanation::failed, "the host asks for bidirectional authentication: no controller secret");
      return;
    }
    auto r2 = controller_response(
        response_input(keys_, keys_.ctrl_key.view(), hash_, rep->challenge, shared.view(), rep->seqnum, t_id_));
    if (!r2) {
      fail(r2.error().explanation, r2.error().what);
      return;
    }
    r2_ = *r2;
  }
  // The exchange's secrets are no longer needed.
  dh_.reset();
  c1_ = Digest{};
  step_ = Step::success1;
}

std::vector<uint8_t> ControllerAuthSession::failure1(uint32_t allocation_length) {
  std::vector<uint8_t> out(sizeof(auth::FailureMessage));
  auto n = auth::encode_failure(out, MessageId::failure1, t_id_, failure_.explanation);
  if (!n) return {};
  out.resize(std::min<std::size_t>(*n, allocation_length));
  return out;
}

std::vector<uint8_t> ControllerAuthSession::next_receive(uint32_t allocation_length) {
  std::vector<uint8_t> out;
  switch (step_) {
    case Step::challenge: {
      const std::size_t hl = auth::hash_length(hash_);
      const std::size_t dhvlen = auth::dh_value_length(dh_group_);
      if (allocation_length < auth::challenge_size(hl, dhvlen)) {
        fail(FailureExplanation::incorrect_payload, "Authentication Receive AL too small for the Challenge");
        return failure1(allocation_length);
      }
      out.resize(auth::challenge_size(hl, dhvlen));
      auto n = auth::encode_challenge(out, t_id_, hash_, dh_group_, s1_, c1_.view(),
                                      dh_ ? dh_->public_value() : std::span<const uint8_t>{});
      if (!n) {
        fail(FailureExplanation::failed, n.error().what);
        return failure1(allocation_length);
      }
      out.resize(*n);
      step_ = Step::reply;
      return out;
    }
    case Step::success1: {
      const std::size_t hl = auth::hash_length(hash_);
      if (allocation_length < auth::success1_size(hl)) {
        fail(FailureExplanation::incorrect_payload, "Authentication Receive AL too small for Success1");
        return failure1(allocation_length);
      }
      out.resize(auth::success1_size(hl));
      auto n = auth::encode_success1(out, t_id_, static_cast<uint8_t>(hl),
                                     cvalid_ ? r2_.view() : std::span<const uint8_t>{});
      if (!n) {
        fail(FailureExplanation::failed, n.error().what);
        return failure1(allocation_length);
      }
      out.resize(*n);
      r2_ = Digest{};
      step_ = cvalid_ ? Step::success2 : Step::done;
      return out;
    }
    case Step::failure1:
      return failure1(allocation_length);
    default:
      fail(FailureExplanation::incorrect_message, "Authentication Receive with no message due");
      return failure1(allocation_length);
  }
}

}  // namespace rdmablk::security::dhchap

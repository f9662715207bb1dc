// DH-HMAC-CHAP transactions as pure state machines (NVMe Base 2.0 8.13.5, TP 8006): bytes in, bytes out, no
// I/O, no threads, no clocks. The target core feeds ControllerAuthSession from Authentication Send /
// Receive on each queue; the initiator drives HostAuthSession over the same commands. The message formats
// are protocol/auth.h, the computations security/dhchap.h; the order of checks and the Failure
// explanations follow nvmet (drivers/nvme/target/fabrics-cmd-auth.c) and the kernel host
// (drivers/nvme/host/auth.c), so that either side interoperates with the kernel.
//
//   host                                   controller
//   send AUTH_Negotiate           ->       on_send: pick hash + DH group (the controller's order), make C1
//   receive                       <-       next_receive: DH-HMAC-CHAP_Challenge
//   send DH-HMAC-CHAP_Reply       ->       on_send: check R1 (constant time); C2 when CVALID
//   receive                       <-       next_receive: DH-HMAC-CHAP_Success1 (R2 when asked)
//   [send Success2 or Failure2]   ->       on_send (bidirectional only)
//
// Anything malformed or out of order fails the transaction with the spec's Failure explanation; the
// controller then answers the next Authentication Receive with AUTH_Failure1, the host sends
// AUTH_Failure2 when it has to tell the controller. A new AUTH_Negotiate restarts a transaction at any
// time (re-authentication).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/auth.h"
#include "protocol/result.h"
#include "security/dhchap.h"
#include "security/dhchap_key.h"

namespace rdmablk::security::dhchap {

using protocol::auth::MessageId;

// Every hash / DH group, in the order the kernel host offers them (nvme_auth_set_dhchap_negotiate_data).
inline constexpr HashId kAllHashes[] = {HashId::sha256, HashId::sha384, HashId::sha512};
inline constexpr DhGroupId kAllDhGroups[] = {DhGroupId::null,      DhGroupId::ffdhe2048, DhGroupId::ffdhe3072,
                                             DhGroupId::ffdhe4096, DhGroupId::ffdhe6144, DhGroupId::ffdhe8192};

// How a transaction ended badly. `explanation` is what went (or goes) into AUTH_Failure1/2; `what` a
// human reason (a string literal, never a secret); `by_peer` says the other side reported the failure
// (AUTH_Failure1 received by the host / AUTH_Failure2 received by the controller).
struct AuthFailure {
  FailureExplanation explanation = FailureExplanation::failed;
  const char* what = "";
  bool by_peer = false;
};

// ---------------------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------------------

// What both ends of a transaction hold: the two secrets transformed with their owners' NQNs (empty for a
// missing key), the NQNs and the hash functions and DH groups on offer, best first.
struct SessionSecrets {
  SecretBytes host_key;
  SecretBytes ctrl_key;
  std::string host_nqn;
  std::string subsys_nqn;
  std::vector<HashId> hashes;
  std::vector<DhGroupId> dh_groups;
};

struct HostAuthParams {
  const DhchapKey* host_key = nullptr;  // required
  const DhchapKey* ctrl_key = nullptr;  // set: bidirectional (the controller must prove itself)
  std::string host_nqn;
  std::string subsys_nqn;
  std::vector<HashId> hashes{std::begin(kAllHashes), std::end(kAllHashes)};
  std::vector<DhGroupId> dh_groups{std::begin(kAllDhGroups), std::end(kAllDhGroups)};
  uint16_t t_id = 0;  // the kernel host uses the queue id
};

// What the host does next.
struct HostStep {
  enum class Kind {
    send,       // Authentication Send with `message` (TL = message.size()), then call sent()
    receive,    // Authentication Receive with AL = receive_length, then call received(data)
    succeeded,  // authenticated (and the controller too when bidirectional)
    failed,     // see `failure`
  };
  Kind kind = Kind::failed;
  std::span<const uint8_t> message;  // send: valid until the next call on the session
  uint32_t receive_length = 0;       // receive
  AuthFailure failure;               // failed
};

class HostAuthSession {
 public:
  // Transforms the secrets once (host key with the host NQN, controller key with the subsystem NQN).
  // Refuses a missing host key, empty lists or NQNs.
  static Result<HostAuthSession> create(const HostAuthParams& params);

  // The current step; the first one sends AUTH_Negotiate.
  HostStep step() const;
  // The Authentication Send of step().message completed successfully.
  void sent();
  // The data an Authentication Receive returned (the valid part of the buffer).
  void received(std::span<const uint8_t> data);
  // A command of the exchange failed (NVMe status, transport): the transaction is over.
  void abort(const char* what);

  HashId hash() const noexcept { return hash_; }
  DhGroupId dh_group() const noexcept { return dh_group_; }
  bool bidirectional() const noexcept { return !keys_.ctrl_key.empty(); }

 private:
  enum class State { send_negotiate, await_challenge, send_reply, await_success1, send_success2,
                     send_failure2, succeeded, failed };
  HostAuthSession() = default;
  void fail_with_failure2(FailureExplanation explanation, const char* what);
  void on_challenge(std::span<const uint8_t> data);
  void on_success1(std::span<const uint8_t> data);

  SessionSecrets keys_;  // ctrl_key empty when unidirectional
  uint16_t t_id_ = 0;

  State state_ = State::send_negotiate;
  std::vector<uint8_t> out_;  // the message to send
  HashId hash_ = HashId::sha256;
  DhGroupId dh_group_ = DhGroupId::null;
  SecretBytes shared_secret_;
  Digest c2_;
  uint32_t s2_ = 0;
  AuthFailure failure_;
};

// ---------------------------------------------------------------------------------------------------------
// Controller side
// ---------------------------------------------------------------------------------------------------------

struct ControllerAuthParams {
  const DhchapKey* host_key = nullptr;  // the host's secret; nullptr when the host has none (always fails)
  const DhchapKey* ctrl_key = nullptr;  // the controller's secret; nullptr: bidirectional requests fail
  std::string subsys_nqn;
  std::string host_nqn;
  // Allowed, best first (the config's order).
  std::vector<HashId> hashes{std::begin(kAllHashes), std::end(kAllHashes)};
  std::vector<DhGroupId> dh_groups{std::begin(kAllDhGroups), std::end(kAllDhGroups)};
};

enum class AuthStatus { in_progress, succeeded, failed };

struct ControllerAuthState {
  AuthStatus status = AuthStatus::in_progress;
  AuthFailure failure;  // failed
};

class ControllerAuthSession {
 public:
  static Result<ControllerAuthSession> create(const ControllerAuthParams& params);

  // What the host sent with Authentication Send (TL bytes).
  void on_send(std::span<const uint8_t> data);
  // What Authentication Receive returns: at most `allocation_length` bytes (AL). A Receive when no message
  // is due, or an AL too small for the message, fails the transaction and returns AUTH_Failure1 (cut to
  // AL).
  std::vector<uint8_t> next_receive(uint32_t allocation_length);

  ControllerAuthState state() const;
  // Transactions started (AUTH_Negotiate received) so far: the core tells a re-authentication from the
  // first one.
  uint32_t transactions() const noexcept { return transactions_; }
  HashId hash() const noexcept { return hash_; }
  DhGroupId dh_group() const noexcept { return dh_group_; }
  bool bidirectional() const noexcept { return cvalid_; }

 private:
  enum class Step {
    negotiate,  // waiting for AUTH_Negotiate
    challenge,  // Challenge due on the next Receive
    reply,      // waiting for the Reply
    success1,   // Success1 due on the next Receive
    success2,   // waiting for Success2 (bidirectional)
    done,       // succeeded
    failure1,   // failed: Failure1 due (and repeated) on Receive
  };
  ControllerAuthSession() = default;
  void fail(FailureExplanation explanation, const char* what, bool by_peer = false);
  void on_negotiate(std::span<const uint8_t> data);
  void on_reply(std::span<const uint8_t> data);
  std::vector<uint8_t> failure1(uint32_t allocation_length);

  SessionSecrets keys_;  // host_key empty when the host has no secret; ctrl_key without a controller secret

  Step step_ = Step::negotiate;
  uint32_t transactions_ = 0;
  uint16_t t_id_ = 0;
  HashId hash_ = HashId::sha256;
  DhGroupId dh_group_ = DhGroupId::null;
  std::optional<DhKeyPair> dh_;
  Digest c1_;
  uint32_t s1_ = 0;
  bool cvalid_ = false;
  Digest r2_;
  AuthFailure failure_;
};

}  // namespace rdmablk::security::dhchap

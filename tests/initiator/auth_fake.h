// An authenticating fake controller for initiator tests: a transport::HostQueue in front of FakeTarget that
// sets AUTHREQ ATR in the Connect response and runs security::dhchap::ControllerAuthSession (the target's
// own state machine) on Authentication Send / Receive, per queue, refusing every other command with
// Authentication Required until the queue has authenticated - as nvmet does. It can also answer garbage.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "initiator/fake_target.h"
#include "protocol/auth.h"
#include "security/dhchap_session.h"

namespace rdmablk::testing {

namespace dh = security::dhchap;
namespace pa = protocol::auth;

struct AuthFake {
  // The controller's configuration for our host (set before connecting).
  FakeTarget* target = nullptr;
  std::optional<dh::DhchapKey> host_key;  // set: authentication required (ATR on every Connect)
  std::optional<dh::DhchapKey> ctrl_key;  // set: the controller can prove itself (bidirectional)
  std::vector<pa::HashId> hashes{std::begin(dh::kAllHashes), std::end(dh::kAllHashes)};
  std::vector<pa::DhGroupId> dh_groups{std::begin(dh::kAllDhGroups), std::end(dh::kAllDhGroups)};
  uint32_t extra_connect_dw0 = 0;  // more AUTHREQ bits (ASCR)
  enum class Garbage {
    none,
    random_bytes,    // every Authentication Receive returns pseudo-random bytes
    success1_first,  // the first Receive returns a Success1 instead of the Challenge
    receive_status,  // Authentication Receive completes with Invalid Field
  } garbage = Garbage::none;
  uint16_t garbage_from_qid = 0;  // garbage only on queues with this qid or above

  // What happened on each queue (by qid).
  struct QueueRecord {
    std::vector<std::vector<uint8_t>> sent;  // Authentication Send payloads
    unsigned receives = 0;
    unsigned refused = 0;  // commands answered with Authentication Required
    std::optional<dh::ControllerAuthSession> session;
  };
  std::mutex mu;
  std::map<uint16_t, QueueRecord> queues;

  dh::AuthStatus status(uint16_t qid) {
    std::lock_guard lock(mu);
    auto it = queues.find(qid);
    if (it == queues.end() || !it->second.session) return dh::AuthStatus::in_progress;
    return it->second.session->state().status;
  }
  QueueRecord* record(uint16_t qid) {
    auto it = queues.find(qid);
    return it == queues.end() ? nullptr : &it->second;
  }
};

class AuthFakeQueue final : public transport::HostQueue {
 public:
  AuthFakeQueue(AuthFake& f, transport::HostQueueOptions o) : fake_(f), opts_(std::move(o)) {}
  p::Status submit(HostCommand& cmd) noexcept override {
    if (closed_) return p::status::transient_transport_error;
    if (pending_.size() >= opts_.entries) return p::status::transient_transport_error;
    cmd.sqe.hdr.cid.set(next_cid_++);
    pending_.push_back(&cmd);
    return p::status::success;
  }
  int poll(unsigned, std::chrono::milliseconds) noexcept override {
    if (closed_) return -ENOTCONN;
    int done = 0;
    while (!pending_.empty()) {
      HostCommand* cmd = pending_.front();
      pending_.erase(pending_.begin());
      p::Cqe cqe = handle(*cmd);
      cqe.cid = cmd->sqe.hdr.cid;
      cmd->on_complete(*cmd, cqe);
      ++done;
    }
    return done;
  }
  unsigned outstanding() const noexcept override { return static_cast<unsigned>(pending_.size()); }
  uint16_t entries() const noexcept override { return opts_.entries; }
  uint32_t max_transfer() const noexcept override { return 0; }
  void set_in_capsule_limit(uint32_t bytes) noexcept override { opts_.in_capsule_limit = bytes; }
  const transport::TransportAddress& address() const noexcept override { return opts_.address; }
  void close() noexcept override {
    closed_ = true;
    pending_.clear();
  }

 private:
  p::Cqe handle(HostCommand& cmd) {
    const uint16_t qid = opts_.qid;
    auto status = [&](p::Status s) { return p::make_cqe(0, qid, 0, s); };
    const bool fabrics = cmd.sqe.hdr.opcode == p::kFabricsOpcode;
    const auto type = p::as<p::FabricsCommand>(cmd.sqe).type();
    if (fabrics && type == p::FabricsType::connect) {
      p::Cqe cqe = fake_.target->handle(qid, cntlid_, cmd);
      if (!cqe.get_status().ok() || !fake_.host_key) return cqe;
      std::lock_guard lock(fake_.mu);
      auto& rec = fake_.queues[qid];
      dh::ControllerAuthParams params;
      params.host_key = &*fake_.host_key;
      params.ctrl_key = fake_.ctrl_key ? &*fake_.ctrl_key : nullptr;
      auto data = p::decode_connect_data(cmd.data);  // the NQNs the responses are computed over
      if (!data) return status(p::status::internal_error);
      params.subsys_nqn = std::string(data->subnqn);
      params.host_nqn = std::string(data->hostnqn);
      params.hashes = fake_.hashes;
      params.dh_groups = fake_.dh_groups;
      auto s = dh::ControllerAuthSession::create(params);
      if (!s) return status(p::status::internal_error);
      rec.session.emplace(std::move(*s));
      cqe.dw0.set(cqe.dw0.get() | (1u << 17) | fake_.extra_connect_dw0);  // AUTHREQ ATR (nvme.h)
      return cqe;
    }
    std::unique_lock lock(fake_.mu);
    AuthFake::QueueRecord* rec = fake_.record(qid);
    if (fabrics && type == p::FabricsType::authentication_send) {
      if (!rec || !rec->session) return status(p::status::command_sequence_error);
      auto c = p::as<pa::AuthenticationSendCommand>(cmd.sqe);
      auto tl = pa::check_authentication_send(c);
      if (!tl || *tl != cmd.data.size()) return status(p::status::invalid_field);
      rec->sent.emplace_back(cmd.data.begin(), cmd.data.end());
      rec->session->on_send(cmd.data);
      return status(p::status::success);
    }
    if (fabrics && type == p::FabricsType::authentication_receive) {
      if (!rec || !rec->session) return status(p::status::command_sequence_error);
      auto c = p::as<pa::AuthenticationReceiveCommand>(cmd.sqe);
      auto al = pa::check_authentication_receive(c);
      if (!al || *al != cmd.data.size()) return status(p::status::invalid_field);
      ++rec->receives;
      std::vector<uint8_t> reply = rec->session->next_receive(*al);
      switch (qid >= fake_.garbage_from_qid ? fake_.garbage : AuthFake::Garbage::none) {
        case AuthFake::Garbage::none: break;
        case AuthFake::Garbage::random_bytes: {
          std::mt19937 rng(42 + rec->receives);
          for (auto& b : reply) b = static_cast<uint8_t>(rng());
          break;
        }
        case AuthFake::Garbage::success1_first:
          if (rec->receives == 1) {
            reply.assign(64, 0);
            auto n = pa::encode_success1(reply, qid, 32, {});
            if (n) reply.resize(*n);
          }
          break;
        case AuthFake::Garbage::receive_status: return status(p::status::invalid_field);
      }
      std::fill(cmd.data.begin(), cmd.data.end(), 0);
      std::copy_n(reply.begin(), std::min(reply.size(), cmd.data.size()), cmd.data.begin());
      return status(p::status::success);
    }
    // nvmet: anything else on a queue that has not authenticated is refused.
    if (rec && rec->session && rec->session->state().status != dh::AuthStatus::succeeded) {
      ++rec->refused;
      return status(p::status::authentication_required);
    }
    lock.unlock();
    return fake_.target->handle(qid, cntlid_, cmd);
  }

  AuthFake& fake_;
  transport::HostQueueOptions opts_;
  std::vector<HostCommand*> pending_;
  uint16_t next_cid_ = 1;
  uint16_t cntlid_ = 0;
  bool closed_ = false;
};

// A connector making AuthFakeQueues (copyable into ControllerOptions::connector).
struct AuthFakeConnector {
  AuthFake* fake;
  Result<std::unique_ptr<transport::HostQueue>> operator()(const transport::HostQueueOptions& o) const {
    return std::unique_ptr<transport::HostQueue>(std::make_unique<AuthFakeQueue>(*fake, o));
  }
};

}  // namespace rdmablk::testing

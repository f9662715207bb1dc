#include "transport/connection_limits.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace rdmablk::transport {

ConnectionTicket::ConnectionTicket(ConnectionTicket&& other) noexcept
    : gate_(std::move(other.gate_)), listener_(other.listener_), host_(std::move(other.host_)) {
  other.gate_.reset();
}

ConnectionTicket& ConnectionTicket::operator=(ConnectionTicket&& other) noexcept {
  if (this != &other) {
    if (gate_) gate_->release(listener_, host_);
    gate_ = std::move(other.gate_);
    other.gate_.reset();
    listener_ = other.listener_;
    host_ = std::move(other.host_);
  }
  return *this;
}

ConnectionTicket::~ConnectionTicket() {
  if (gate_) gate_->release(listener_, host_);
}

std::shared_ptr<ConnectionGate> ConnectionGate::create(const ConnectionLimitOptions& options) {
  return std::shared_ptr<ConnectionGate>(new ConnectionGate(options));
}

unsigned ConnectionGate::add_listener(std::string name) {
  std::lock_guard lock(mu_);
  // A listener removed and added back (the management API) keeps its slot: the connections still open
  // from its earlier life count against the same per-listener limit, and the table does not grow.
  for (std::size_t i = 0; i < listeners_.size(); ++i) {
    if (listeners_[i].first == name) return static_cast<unsigned>(i);
  }
  listeners_.emplace_back(std::move(name), 0);
  return static_cast<unsigned>(listeners_.size() - 1);
}

bool ConnectionGate::admit(unsigned listener, std::string_view host, ConnectionTicket& ticket,
                           std::string& why) noexcept {
  try {
    std::lock_guard lock(mu_);
    if (listener >= listeners_.size()) {
      why = "unknown listener";
      ++refused_;
      return false;
    }
    auto& [name, open] = listeners_[listener];
    if (options_.per_listener != 0 && open >= options_.per_listener) {
      why = std::to_string(open) + " connections are open on " + name + " (limits.connections.per_listener)";
      ++refused_;
      return false;
    }
    auto it = hosts_.try_emplace(std::string(host), 0).first;
    if (options_.per_host != 0 && it->second >= options_.per_host) {
      why = std::to_string(it->second) + " connections from " + it->first + " are open (limits.connections.per_host)";
      ++refused_;
      return false;
    }
    ConnectionTicket t;
    t.host_ = it->first;
    t.listener_ = listener;
    t.gate_ = shared_from_this();
    ++open;
    ++it->second;
    ticket = std::move(t);
    return true;
  } catch (...) {
    why = "out of memory";
    return false;
  }
}

void ConnectionGate::release(unsigned listener, const std::string& host) noexcept {
  std::lock_guard lock(mu_);
  if (listener < listeners_.size() && listeners_[listener].second > 0) --listeners_[listener].second;
  auto it = hosts_.find(host);
  if (it != hosts_.end() && --it->second == 0) hosts_.erase(it);
}

unsigned ConnectionGate::open_on(unsigned listener) const {
  std::lock_guard lock(mu_);
  return listener < listeners_.size() ? listeners_[listener].second : 0;
}

unsigned ConnectionGate::open_from(std::string_view host) const {
  std::lock_guard lock(mu_);
  auto it = hosts_.find(std::string(host));
  return it == hosts_.end() ? 0 : it->second;
}

uint64_t ConnectionGate::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

std::string host_of(const sockaddr* sa) noexcept {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa == nullptr) return {};
  if (sa->sa_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, sa, sizeof(in));
    if (::inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text)) == nullptr) return {};
  } else if (sa->sa_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, sa, sizeof(in6));
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      in_addr v4{};
      std::memcpy(&v4, in6.sin6_addr.s6_addr + 12, sizeof(v4));
      if (::inet_ntop(AF_INET, &v4, text, sizeof(text)) == nullptr) return {};
    } else if (::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text)) == nullptr) {
      return {};
    }
  } else {
    return {};
  }
  try {
    return text;
  } catch (...) {
    return {};
  }
}

}  // namespace rdmablk::transport

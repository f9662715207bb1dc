// Admission of new connections: at most so many open on one listener and from one host address, over every
// listener of the target (what a host that opens connections without end may hold). One ConnectionGate per
// target, shared by its listeners; each admitted connection holds a ConnectionTicket and gives its place back
// when the ticket is destroyed, on whatever thread that happens. Accept and close are control-path events:
// a mutex is fine here, and the data path never touches the gate.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rdmablk::transport {

struct ConnectionLimitOptions {
  uint32_t per_listener = 0;  // open connections on one listener; 0 = no limit
  uint32_t per_host = 0;      // open connections from one host address, all listeners together; 0 = no limit
};

class ConnectionGate;

// One admitted connection's place. Move-only; releasing it (destruction) frees the place.
class ConnectionTicket {
 public:
  ConnectionTicket() = default;
  ConnectionTicket(ConnectionTicket&& other) noexcept;
  ConnectionTicket& operator=(ConnectionTicket&& other) noexcept;
  ConnectionTicket(const ConnectionTicket&) = delete;
  ConnectionTicket& operator=(const ConnectionTicket&) = delete;
  ~ConnectionTicket();

 private:
  friend class ConnectionGate;
  std::shared_ptr<ConnectionGate> gate_;
  unsigned listener_ = 0;
  std::string host_;
};

class ConnectionGate : public std::enable_shared_from_this<ConnectionGate> {
 public:
  static std::shared_ptr<ConnectionGate> create(const ConnectionLimitOptions& options);

  // A listener's slot in the gate; `name` ("127.0.0.1:4420") is used in refusal messages. The same name
  // gets the same slot (one per endpoint).
  unsigned add_listener(std::string name);

  // A place for a connection from `host` (an address without port, see host_of) on `listener`, or false
  // with `why` saying which limit was reached ("1024 connections from 10.0.0.2 are open
  // (limits.connections.per_host)"). Never throws: no memory is a refusal too.
  bool admit(unsigned listener, std::string_view host, ConnectionTicket& ticket, std::string& why) noexcept;

  // Open connections now (tests, status).
  unsigned open_on(unsigned listener) const;
  unsigned open_from(std::string_view host) const;
  uint64_t refused() const;

 private:
  explicit ConnectionGate(const ConnectionLimitOptions& options) : options_(options) {}
  friend class ConnectionTicket;
  void release(unsigned listener, const std::string& host) noexcept;

  const ConnectionLimitOptions options_;
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, unsigned>> listeners_;  // name, open connections
  std::unordered_map<std::string, unsigned> hosts_;          // open connections per host address
  uint64_t refused_ = 0;
};

// The host part of a socket address, as text: "10.0.0.2", "fe80::1"; an IPv4-mapped IPv6 address as its IPv4
// form, so that one host counts once whichever listener it reached. "" for other families.
std::string host_of(const sockaddr* sa) noexcept;

}  // namespace rdmablk::transport

// Host-triggerable errors (malformed PDUs, failed completions, vanished peers) are logged at most a
// burst per second, process wide, so a misbehaving host cannot flood the journal.
#pragma once

namespace rdmablk::transport {

bool peer_error_log_allowed() noexcept;

}  // namespace rdmablk::transport

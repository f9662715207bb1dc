#include "initiator/host/discovery_strings.h"

namespace rdmablk::initiator {

const char* trtype_str(uint8_t trtype) noexcept {
  switch (trtype) {
    case 1: return "rdma";
    case 2: return "fc";
    case 3: return "tcp";
    case 254: return "loop";
    default: return "unrecognized";
  }
}

const char* adrfam_str(uint8_t adrfam) noexcept {
  switch (adrfam) {
    case 0: return "pci";
    case 1: return "ipv4";
    case 2: return "ipv6";
    case 3: return "infiniband";
    case 4: return "fibre-channel";
    default: return "unrecognized";
  }
}

const char* subtype_str(uint8_t subtype) noexcept {
  switch (subtype) {
    case 1: return "discovery subsystem referral";
    case 2: return "nvme subsystem";
    case 3: return "current discovery subsystem";
    default: return "unrecognized";
  }
}

const char* treq_str(uint8_t treq) noexcept {
  switch (treq) {
    case 0: return "not specified";
    case 1: return "required";
    case 2: return "not required";
    case 4: return "not specified, sq flow control disable supported";
    case 5: return "required, sq flow control disable supported";
    case 6: return "not required, sq flow control disable supported";
    default: return "unrecognized";
  }
}

const char* eflags_str(uint16_t eflags) noexcept {
  switch (eflags) {
    case 0: return "none";
    case 1: return "explicit discovery connections";
    case 2: return "duplicate discovery information";
    case 3: return "explicit discovery connections, duplicate discovery information";
    case 4: return "no cdc connectivity";
    default: return "unrecognized";
  }
}

const char* sectype_str(uint8_t sectype) noexcept {
  switch (sectype) {
    case 0: return "none";
    case 1: return "tls";
    case 2: return "tls13";
    default: return "unrecognized";
  }
}

std::string field_string(const char* data, std::size_t size) {
  std::size_t n = 0;
  while (n < size && data[n] != '\0') ++n;
  while (n > 0 && data[n - 1] == ' ') --n;
  return std::string(data, n);
}

}  // namespace rdmablk::initiator

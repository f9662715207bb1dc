#include "initiator/host/namespace_uri.h"

#include <charconv>

namespace rdmablk::initiator {

Result<NamespaceUri> parse_namespace_uri(std::string_view uri) {
  auto scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) {
    return make_error("invalid namespace '" + std::string(uri) + "' (expected tcp://ADDR:PORT/NQN[/NSID])");
  }
  auto path = uri.find('/', scheme_end + 3);
  if (path == std::string_view::npos || path + 1 >= uri.size()) {
    return make_error("missing subsystem NQN in '" + std::string(uri) + "' (expected tcp://ADDR:PORT/NQN[/NSID])");
  }
  auto address = transport::parse_transport_uri(uri.substr(0, path));
  if (!address) return tl::unexpected(address.error());

  NamespaceUri out;
  out.address = *address;
  std::string_view rest = uri.substr(path + 1);
  // An NQN never contains '/', so a trailing "/digits" is the NSID.
  auto slash = rest.rfind('/');
  if (slash != std::string_view::npos) {
    std::string_view nsid = rest.substr(slash + 1);
    uint32_t value = 0;
    auto [end, ec] = std::from_chars(nsid.data(), nsid.data() + nsid.size(), value);
    if (nsid.empty() || ec != std::errc() || end != nsid.data() + nsid.size() || value == 0 || value == 0xFFFFFFFF) {
      return make_error("invalid namespace id '" + std::string(nsid) + "' in '" + std::string(uri) + "'");
    }
    out.nsid = value;
    rest = rest.substr(0, slash);
  }
  if (rest.empty() || rest.find('/') != std::string_view::npos) {
    return make_error("invalid subsystem NQN in '" + std::string(uri) + "'");
  }
  out.subnqn = std::string(rest);
  return out;
}

}  // namespace rdmablk::initiator

// The `rdmablk` command line: discover, identify, bench, compare, copy, resv-*. Flags follow nvme-cli: -t/--transport,
// -a/--traddr, -s/--trsvcid, -n/--nqn, -q/--hostnqn, --hostid, --kato (keep-alive timeout in seconds, as
// nvme-cli's --keep-alive-tmo).
//
// Errors: one line on stderr ("rdmablk: error: ..."), exit status 2 for usage errors, 1 for failures.
#pragma once

#include <ostream>

#include "initiator/host/controller.h"
#include "initiator/host/kernel_fabrics.h"
#include "initiator/host/shared_volume.h"

namespace rdmablk::initiator {

struct CliEnv {
  QueueConnector connector;   // transport::connect_host_queue in the binary
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  bool progress_tty = false;  // stderr is a terminal: show the bench progress line
  HostIdentitySources host_sources;
  KernelFabricsPaths kernel_paths;  // connect/list/disconnect through the kernel host; a fake tree in tests
  std::chrono::milliseconds kernel_ns_timeout{30000};  // connect: wait this long for namespace devices
};

int cli_main(int argc, const char* const* argv, const CliEnv& env);

// The discovery log as `nvme discover` prints it (normal and json output formats).
std::string format_discovery_log(const DiscoveryLog& log);
std::string format_discovery_log_json(const DiscoveryLog& log);
// Controller and namespaces, `nvme id-ctrl` style.
std::string format_identify(const Controller& ctrl);
// Reservation Report as `nvme resv-report` prints it (normal and json output formats).
std::string format_reservation_report(const ReservationStatus& s);
std::string format_reservation_report_json(const ReservationStatus& s);

}  // namespace rdmablk::initiator

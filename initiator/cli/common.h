// Pieces shared by the `rdmablk` subcommands (discover.cpp: discover/identify; bench.cpp: bench; fabrics.cpp:
// connect/connect-all/disconnect/list through the kernel host; attach.cpp: attach/detach through
// ublk; nvm_io.cpp: compare/copy; reservations.cpp: resv-register/-acquire/-release/-report). Each
// subcommand group registers itself on the CLI11 app and returns what runs it when parsed.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "initiator/cli/cli.h"
#include "initiator/host/controller.h"
#include "initiator/host/namespace_uri.h"

namespace rdmablk::initiator::cli {

// The nvme-cli connection flags: -t -a -s -n -q --hostid --kato, and DH-HMAC-CHAP's -S/--dhchap-secret and
// -C/--dhchap-ctrl-secret (nvme-cli's letters; ours -s/-c are other flags, CLI11 tells case apart).
struct ConnFlags {
  std::string transport = "tcp";
  std::string traddr;
  std::string trsvcid;
  std::string nqn;
  std::string hostnqn;
  std::string hostid;
  std::optional<unsigned> kato_s;
  std::string dhchap_secret;       // "DHHC-1:..." text; never printed
  std::string dhchap_ctrl_secret;  // bidirectional authentication; never printed
  // NVMe/TCP TLS 1.3 (nvme-cli's --tls, --tls_key): --tls-key / --tls-key-file imply --tls.
  bool tls = false;
  std::string tls_key;       // "NVMeTLSkey-1:..." text; never printed
  std::string tls_key_file;  // a file holding it (security/secret_file.h policy)
};

void add_connection_flags(CLI::App* app, ConnFlags& f, bool need_addr, bool need_nqn);
// The host's side alone: --hostnqn --hostid --kato --dhchap-secret --dhchap-ctrl-secret --tls --tls-key
// --tls-key-file, with -q -S -C when `short_names`.
void add_host_flags(CLI::App* app, ConnFlags& f, bool short_names);

// The verbs that send NVM commands to one namespace (compare, copy, resv-*): nvme-cli's <device> is a
// namespace URI here (tcp://ADDR:PORT/NQN[/NSID]), -n/--namespace-id overrides its NSID, and the host
// flags are long names only (nvme-cli's letters -t -a -s -c -p ... are the verbs' own options there).
struct NamespaceFlags {
  std::string uri;
  std::optional<uint32_t> nsid;
  ConnFlags conn;  // the host flags; the rest comes from the URI
};
void add_namespace_flags(CLI::App* app, NamespaceFlags& f);

// A controller with one I/O queue, for the namespace the flags name. Closed (queue disconnected, the
// controller shut down) when it goes.
struct NamespaceSession {
  std::unique_ptr<Controller> ctrl;
  std::unique_ptr<IoQueue> io;
  uint32_t nsid = 0;
  const NamespaceInfo* ns = nullptr;  // null when the controller does not list the namespace
  NamespaceSession() = default;
  NamespaceSession(NamespaceSession&&) = default;
  NamespaceSession& operator=(NamespaceSession&&) = default;
  ~NamespaceSession();
};
// Connects, or reports on env.err and returns the exit status. `need_info`: the namespace must be listed
// (its block size is needed).
tl::expected<NamespaceSession, int> open_namespace(NamespaceFlags f, const CliEnv& env, bool need_info);

// Where the queues run: our userspace host (TLS needs the key: there is no keyring) or the kernel's
// (`connect`: --tls is passed on, the kernel and tlshd take the PSK from the .nvme keyring).
enum class HostPath : uint8_t { userspace, kernel };

struct Resolved {
  transport::TransportAddress address;
  HostIdentity host;
  uint32_t kato_ms = 0;
  DhchapSettings dhchap;  // parsed secrets (empty when not given)
  bool tls = false;       // --tls (or a TLS key) was given
  TlsSettings tls_settings;  // the parsed PSK (userspace path)
};

// Flags -> address (default port when -s is absent), host identity, KATO, DH-HMAC-CHAP secrets (checked).
Result<Resolved> resolve(const ConnFlags& f, uint16_t default_port, uint32_t default_kato_ms, const CliEnv& env,
                         HostPath path = HostPath::userspace);
// A TLS key file's first line, read under the key-file policy of security/secret_file.h; never quoted.
Result<std::string> read_tls_key_file(const std::string& path);
ControllerOptions controller_options(const Resolved& r, std::string subnqn, const CliEnv& env);

// What `discover` and `connect-all` read first: the discovery log of the controller the flags name, on
// the discovery port nvme-cli uses for the transport (8009 for TCP, 4420 for RDMA), without keep-alive.
struct Discovered {
  Resolved resolved;
  DiscoveryLog log;
};
// The log, or the exit status of a failure already reported on env.err (2: the flags are wrong).
tl::expected<Discovered, int> read_discovery_log(const ConnFlags& f, const CliEnv& env);

// nvme-cli's connect tuning flags (-i -Q -l -c -k), shared by `connect` (kernel host) and `attach`
// (ublk): unset means the path's own default. -k is --kato under nvme-cli's long name.
struct Tuning {
  std::optional<unsigned> nr_io_queues;
  std::optional<unsigned> queue_size;
  std::optional<int> ctrl_loss_tmo;
  std::optional<unsigned> reconnect_delay;
  std::optional<unsigned> keep_alive_tmo;
};
void add_tuning_flags(CLI::App* app, Tuning& t);

// Decimal units, as `nvme list` prints sizes: "1.07 GB".
std::string human_bytes(uint64_t bytes);

// One registered subcommand: run() is called when `app` was the one parsed; returns the exit status.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// "rdmablk: error: MESSAGE" on env.err; returns `code`.
int report_error(const CliEnv& env, const std::string& message, int code = 1);

// Subcommand groups (flag storage lives in the closures).
void add_discovery_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out);  // discover.cpp
void add_bench_command(CLI::App& app, const CliEnv& env, std::vector<Command>& out);       // bench.cpp
void add_fabrics_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out);    // fabrics.cpp
void add_attach_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out);     // attach.cpp
void add_key_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out);        // keys.cpp
void add_nvm_io_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out);     // nvm_io.cpp
void add_reservation_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out);  // reservations.cpp

}  // namespace rdmablk::initiator::cli

// connect / connect-all / disconnect / list: volumes attached by the kernel's NVMe-oF host (as nvme-cli
// attaches them), plus the userspace (ublk) attachments that `list` and `disconnect` also cover.
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>

#include "initiator/cli/attach_registry.h"
#include "initiator/cli/common.h"
#include "initiator/host/discovery_strings.h"
#include "initiator/host/kernel_fabrics.h"

namespace rdmablk::initiator::cli {

namespace {

using json = nlohmann::ordered_json;

// How long `disconnect` waits for a ublk attachment's process to exit after SIGTERM.
constexpr std::chrono::seconds kStopTimeout{30};

// The connect commands' flags beyond the connection: tuning and the output format.
struct ConnectFlags {
  Tuning tuning;
  std::string format = "normal";
};

void add_connect_flags(CLI::App* app, ConnectFlags& c) {
  add_tuning_flags(app, c.tuning);
  app->add_option("-o,--output-format", c.format, "normal or json")->check(CLI::IsMember({"normal", "json"}));
}

KernelConnectParams connect_params(const ConnFlags& f, const Resolved& r, const Tuning& t, std::string traddr,
                                   std::string trsvcid, std::string nqn) {
  KernelConnectParams p;
  p.transport = transport::transport_name(r.address.type);
  p.traddr = std::move(traddr);
  p.trsvcid = std::move(trsvcid);
  p.nqn = std::move(nqn);
  p.hostnqn = r.host.hostnqn;
  p.hostid = format_uuid(r.host.hostid);
  p.dhchap_secret = f.dhchap_secret;  // checked by resolve()
  p.dhchap_ctrl_secret = f.dhchap_ctrl_secret;
  p.tls = r.tls;
  p.nr_io_queues = t.nr_io_queues;
  p.queue_size = t.queue_size;
  p.ctrl_loss_tmo = t.ctrl_loss_tmo;
  p.reconnect_delay = t.reconnect_delay;
  p.keep_alive_tmo = t.keep_alive_tmo ? t.keep_alive_tmo : f.kato_s;
  return p;
}

std::string namespace_lines(const KernelController& c, std::string_view indent) {
  std::string out;
  for (const auto& n : c.namespaces) {
    out += fmt::format("{}{} nsid {} {}{}\n", indent, n.block_device, n.nsid, human_bytes(n.size_bytes),
                       n.node_present ? "" : " (no device node)");
  }
  return out;
}

std::string format_connected(const KernelController& c, const KernelConnectParams& p) {
  std::string out = fmt::format("connected {}: {} traddr={},trsvcid={} {}{}\n", c.name, p.transport, p.traddr,
                                p.trsvcid, p.nqn, c.cntlid ? fmt::format(" (cntlid {})", *c.cntlid) : "");
  if (c.namespaces.empty()) out += "  (no namespaces appeared)\n";
  return out + namespace_lines(c, "");
}

json controller_json(const KernelController& c) {
  json j{{"name", c.name},   {"transport", c.transport}, {"address", c.address},     {"traddr", c.traddr},
         {"trsvcid", c.trsvcid}, {"state", c.state},     {"subsysnqn", c.subsysnqn}, {"model", c.model},
         {"serial", c.serial}};
  j["cntlid"] = c.cntlid ? json(*c.cntlid) : json(nullptr);
  j["namespaces"] = json::array();
  for (const auto& n : c.namespaces) {
    json ns{{"nsid", n.nsid}, {"device", n.block_device}, {"size_bytes", n.size_bytes}};
    // Native multipath: the hidden path through this controller and the namespace's ANA state on it.
    ns["path"] = n.path.empty() ? json(nullptr) : json(n.path);
    ns["ana_state"] = n.ana_state.empty() ? json(nullptr) : json(n.ana_state);
    ns["ana_grpid"] = n.ana_grpid ? json(*n.ana_grpid) : json(nullptr);
    j["namespaces"].push_back(std::move(ns));
  }
  return j;
}

json multipath_json(const KernelMultipathDevice& d) {
  json j{{"device", d.block_device}, {"name", d.name},           {"nsid", d.nsid},
         {"size_bytes", d.size_bytes}, {"subsysnqn", d.subsysnqn}, {"paths", json::array()}};
  for (const auto& p : d.paths) {
    j["paths"].push_back({{"controller", p.controller},
                          {"path", p.path},
                          {"transport", p.transport},
                          {"address", p.address},
                          {"state", p.state},
                          {"cntlid", p.cntlid ? json(*p.cntlid) : json(nullptr)},
                          {"ana_state", p.ana_state.empty() ? json(nullptr) : json(p.ana_state)},
                          {"ana_grpid", p.ana_grpid ? json(*p.ana_grpid) : json(nullptr)}});
  }
  return j;
}

// A multipath head and its paths, as `nvme list-subsys DEVICE` shows them (controller, transport, address,
// controller state, ANA state), one path a line.
std::string multipath_lines(const KernelMultipathDevice& d) {
  std::string out = fmt::format("{} nsid {} {} {}, {} path{}\n", d.block_device, d.nsid, human_bytes(d.size_bytes),
                                d.subsysnqn, d.paths.size(), d.paths.size() == 1 ? "" : "s");
  for (const auto& p : d.paths) {
    out += fmt::format("  {} {} {} {}{}{}\n", p.controller, p.transport, p.address, p.state,
                       p.ana_state.empty() ? "" : " " + p.ana_state,
                       p.cntlid ? fmt::format(" (cntlid {})", *p.cntlid) : "");
  }
  return out;
}

// With a `paths` array (transport, traddr, trsvcid, state, ana_state, in_use) for a multipath attachment.
json attachment_json(const AttachmentRecord& a) { return attachment_to_json(a); }

// Connects one controller and prints it; returns whether it worked.
bool connect_and_print(const CliEnv& env, const KernelConnectParams& p, const std::string& format) {
  auto c = connect_controller(env.kernel_paths, p, env.kernel_ns_timeout);
  if (!c) {
    report_error(env, c.error().message);
    return false;
  }
  *env.out << (format == "json" ? controller_json(*c).dump(2) + "\n" : format_connected(*c, p));
  return true;
}

int run_connect(const CliEnv& env, const ConnFlags& f, const ConnectFlags& c) {
  auto r = resolve(f, transport::kDefaultIoPort, 0, env, HostPath::kernel);
  if (!r) return report_error(env, r.error().message, 2);
  auto p = connect_params(f, *r, c.tuning, f.traddr, std::to_string(r->address.trsvcid), f.nqn);
  if (auto opts = build_connect_options(p); !opts) return report_error(env, opts.error().message, 2);
  return connect_and_print(env, p, c.format) ? 0 : 1;
}

// Discovery on the default port nvme-cli uses per transport (8009 for TCP, 4420 for RDMA), then every
// NVM subsystem entry of this transport through the kernel, skipping those it is already connected to.
int run_connect_all(const CliEnv& env, const ConnFlags& f, const ConnectFlags& c) {
  auto d = read_discovery_log(f, env);
  if (!d) return d.error();
  const Resolved& r = d->resolved;

  const std::string transport = transport::transport_name(r.address.type);
  auto existing = list_controllers(env.kernel_paths);
  unsigned candidates = 0, failed = 0;
  for (const auto& e : d->log.entries) {
    if (e.subtype != static_cast<uint8_t>(protocol::SubsystemType::nvme) || trtype_str(e.trtype) != transport) continue;
    ++candidates;
    std::string traddr = field_string(e.traddr.data(), e.traddr.size());
    std::string trsvcid = field_string(e.trsvcid.data(), e.trsvcid.size());
    std::string nqn = field_string(e.subnqn.data(), e.subnqn.size());
    auto same = std::find_if(existing.begin(), existing.end(), [&](const KernelController& k) {
      return k.subsysnqn == nqn && k.transport == transport && k.traddr == traddr && k.trsvcid == trsvcid;
    });
    if (same != existing.end()) {
      *env.out << fmt::format("already connected {}: {} traddr={},trsvcid={} {}\n", same->name, transport, traddr,
                              trsvcid, nqn);
      continue;
    }
    if (!connect_and_print(env, connect_params(f, r, c.tuning, traddr, trsvcid, nqn), c.format)) ++failed;
  }
  if (candidates == 0) {
    *env.out << fmt::format("no {} NVM subsystem in the discovery log of {}:{}\n", transport, f.traddr,
                            r.address.trsvcid);
  }
  return failed ? 1 : 0;
}

// Stops the ublk attachments in `records` and says so; returns how many failed.
unsigned stop_attachments(const CliEnv& env, const std::vector<AttachmentRecord>& records) {
  unsigned failed = 0;
  for (const auto& a : records) {
    if (auto s = stop_attachment(a, kStopTimeout); !s) {
      report_error(env, s.error().message);
      ++failed;
    } else {
      *env.out << fmt::format("stopped userspace attachment {} (pid {}, {} nsid {})\n", a.device, a.pid, a.subnqn,
                              a.nsid);
    }
  }
  return failed;
}

int run_disconnect(const CliEnv& env, const std::string& nqn, const std::string& device) {
  if (nqn.empty() == device.empty()) return report_error(env, "disconnect needs exactly one of -n/--nqn or -d/--device", 2);
  if (!device.empty()) {
    static const std::regex ublk{R"((/dev/)?ublkb\d+)"};
    if (std::regex_match(device, ublk)) {
      auto a = find_attachment(device);
      if (!a) return report_error(env, a.error().message);
      return stop_attachments(env, {*a}) ? 1 : 0;
    }
    auto names = disconnect_device(env.kernel_paths, device);
    if (!names) return report_error(env, names.error().message);
    *env.out << fmt::format("disconnected {} controller(s): {}\n", names->size(), fmt::join(*names, " "));
    return 0;
  }
  auto ublk = matching_attachments(nqn);
  auto names = disconnect_nqn(env.kernel_paths, nqn);
  // "Nothing to disconnect" is an error only when neither the kernel nor a ublk attachment had it.
  if (!names && (names.error().errno_value != ENOENT || ublk.empty())) {
    return report_error(env, ublk.empty() ? names.error().message + " and no userspace (ublk) attachment either"
                                          : names.error().message);
  }
  if (names) {
    *env.out << fmt::format("NQN:{} disconnected {} controller(s): {}\n", nqn, names->size(), fmt::join(*names, " "));
  }
  return stop_attachments(env, ublk) ? 1 : 0;
}

int run_list(const CliEnv& env, const std::string& format, bool include_pcie) {
  auto ctrls = list_controllers(env.kernel_paths, include_pcie);
  auto ublk = list_attachments();
  if (format == "json") {
    json j{{"controllers", json::array()}, {"ublk", json::array()}};
    for (const auto& c : ctrls) j["controllers"].push_back(controller_json(c));
    j["multipath"] = json::array();
    for (const auto& d : multipath_devices(ctrls)) j["multipath"].push_back(multipath_json(d));
    for (const auto& a : ublk) j["ublk"].push_back(attachment_json(a));
    *env.out << j.dump(2) << "\n";
    return 0;
  }
  if (ctrls.empty() && ublk.empty()) {
    *env.out << "No NVMe-oF volumes attached\n";
    return 0;
  }
  if (!ctrls.empty()) *env.out << "Kernel NVMe-oF controllers:\n";
  for (const auto& c : ctrls) {
    *env.out << fmt::format("{} {} {} {} {}{}\n", c.name, c.transport, c.address, c.state, c.subsysnqn,
                            c.cntlid ? fmt::format(" (cntlid {})", *c.cntlid) : "");
    *env.out << namespace_lines(c, "  ");
  }
  if (auto heads = multipath_devices(ctrls); !heads.empty()) {
    *env.out << "Kernel NVMe-oF multipath devices:\n";
    for (const auto& d : heads) *env.out << multipath_lines(d);
  }
  if (!ublk.empty()) *env.out << "Userspace (ublk) attachments:\n";
  for (const auto& a : ublk) *env.out << format_attachment(a);
  return 0;
}

// Flag storage shared by the closures, alive as long as the CLI::App.
struct FabricsFlags {
  ConnFlags connect, connect_all;
  ConnectFlags connect_tuning, connect_all_tuning;
  std::string disconnect_nqn, disconnect_device;
  std::string list_format = "normal";
  bool list_pcie = false;
};

}  // namespace

void add_fabrics_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out) {
  auto flags = std::make_shared<FabricsFlags>();

  auto* connect = app.add_subcommand("connect", "attach a subsystem's namespaces through the kernel NVMe-oF host");
  add_connection_flags(connect, flags->connect, true, true);
  add_connect_flags(connect, flags->connect_tuning);
  out.push_back({connect, [&env, flags] { return run_connect(env, flags->connect, flags->connect_tuning); }});

  auto* all = app.add_subcommand("connect-all", "discover, then connect every NVM subsystem through the kernel host");
  add_connection_flags(all, flags->connect_all, true, false);
  add_connect_flags(all, flags->connect_all_tuning);
  out.push_back({all, [&env, flags] { return run_connect_all(env, flags->connect_all, flags->connect_all_tuning); }});

  auto* disc = app.add_subcommand("disconnect", "detach kernel controllers (and ublk attachments) by NQN or device");
  auto* n = disc->add_option("-n,--nqn", flags->disconnect_nqn, "subsystem NQN: every controller connected to it");
  disc->add_option("-d,--device", flags->disconnect_device, "nvme0, /dev/nvme0, /dev/nvme0n1 or /dev/ublkb0")
      ->excludes(n);
  out.push_back({disc, [&env, flags] { return run_disconnect(env, flags->disconnect_nqn, flags->disconnect_device); }});

  auto* list = app.add_subcommand("list", "kernel NVMe-oF controllers and userspace (ublk) attachments");
  list->add_option("-o,--output-format", flags->list_format, "normal or json")->check(CLI::IsMember({"normal", "json"}));
  list->add_flag("--include-pcie", flags->list_pcie, "also list local PCIe NVMe controllers");
  out.push_back({list, [&env, flags] { return run_list(env, flags->list_format, flags->list_pcie); }});
}

}  // namespace rdmablk::initiator::cli

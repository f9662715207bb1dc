#include "target/control/ctl_cli.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <ctime>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "target/manage/config_edits.h"

namespace rdmablk::target {

using nlohmann::json;

namespace {

struct CtlArgs {
  std::string socket = kDefaultControlSocketPath;
  std::string output = "table";
  std::string subsystem;
  std::string ns;  // stats --namespace: NSID or NQN:NSID
  int controller = -1;
  std::string host;
  std::string listener;  // ana set
  uint32_t group = 0;
  std::string state;
  std::vector<std::string> params;  // a management verb's KEY=VALUE arguments
  double timeout_s = 120;  // a reload may open slow backends
};
CtlArgs g_args;

// --- transport -----------------------------------------------------------------------------------------

std::optional<json> ask_daemon(const json& request, std::string& error) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::unique_ptr<int, void (*)(int*)> guard(new int(fd), [](int* p) {
    ::close(*p);
    delete p;
  });
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (g_args.socket.size() >= sizeof(addr.sun_path)) {
    error = "socket path too long: " + g_args.socket;
    return std::nullopt;
  }
  std::memcpy(addr.sun_path, g_args.socket.c_str(), g_args.socket.size() + 1);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    if (e == ENOENT || e == ECONNREFUSED) {
      error = fmt::format("no rdmablk-target answers on {} ({}): is it running? (--socket PATH)", g_args.socket,
                          std::strerror(e));
    } else if (e == EACCES || e == EPERM) {
      error = fmt::format("{}: permission denied: the control socket is for the daemon's user (root)", g_args.socket);
    } else {
      error = fmt::format("{}: {}", g_args.socket, std::strerror(e));
    }
    return std::nullopt;
  }
  std::string line = request.dump() + "\n";
  for (std::size_t off = 0; off < line.size();) {
    ssize_t n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = std::string("send: ") + std::strerror(errno);
      return std::nullopt;
    }
    off += static_cast<std::size_t>(n);
  }
  std::string reply;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(g_args.timeout_s);
  for (;;) {
    if (auto nl = reply.find('\n'); nl != std::string::npos) {
      reply.resize(nl);
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      error = "no reply from the daemon within the timeout";
      return std::nullopt;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      error = std::string("poll: ") + std::strerror(errno);
      return std::nullopt;
    }
    char buf[65536];
    ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) {
      error = "the daemon closed the connection without a reply";
      return std::nullopt;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      error = std::string("recv: ") + std::strerror(errno);
      return std::nullopt;
    }
    reply.append(buf, static_cast<std::size_t>(n));
  }
  try {
    return json::parse(reply);
  } catch (const json::exception& e) {
    error = std::string("malformed reply: ") + e.what();
    return std::nullopt;
  }
}

// --- formatting ------------------------------------------------------------------------------------------

std::string human_bytes(double b) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, units[u]);
}

std::string human_duration(double s) {
  const auto total = static_cast<uint64_t>(s);
  const uint64_t d = total / 86400, h = total / 3600 % 24, m = total / 60 % 60, sec = total % 60;
  if (d > 0) return fmt::format("{}d {}h {:02}m", d, h, m);
  if (h > 0) return fmt::format("{}h {:02}m {:02}s", h, m, sec);
  if (m > 0) return fmt::format("{}m {:02}s", m, sec);
  return fmt::format("{}s", sec);
}

// A table: a header row, rows, columns padded to their widest cell; a dashed line under the header.
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string& c = i < cells.size() ? cells[i] : std::string();
      out += i + 1 < width.size() ? fmt::format("{:<{}}  ", c, width[i]) : c;
    }
    std::puts(out.c_str());
  };
  line(header);
  std::vector<std::string> dashes;
  for (auto w : width) dashes.emplace_back(w, '-');
  line(dashes);
  for (const auto& r : rows) line(r);
}

std::string yes_no(const json& b) { return b.get<bool>() ? "yes" : "no"; }

void print_status(const json& r) {
  std::printf("rdmablk-target %s, pid %d, up %s\n", r["version"].get<std::string>().c_str(), r["pid"].get<int>(),
              human_duration(r["uptime_seconds"].get<double>()).c_str());
  std::printf("config       %s (loaded %s)\n", r["config"]["path"].get<std::string>().c_str(),
              r["config"]["loaded_at"].get<std::string>().c_str());
  std::string listeners;
  for (const auto& l : r["listeners"]) {
    if (!listeners.empty()) listeners += ", ";
    listeners += fmt::format("{} {}:{} ({})", l["transport"].get<std::string>(), l["address"].get<std::string>(),
                             l["port"].get<int>(), l["role"].get<std::string>());
  }
  std::printf("listeners    %s\n", listeners.c_str());
  const auto& t = r["totals"];
  std::printf("exports      %zu subsystems, %zu namespaces\n", t["subsystems"].get<std::size_t>(),
              t["namespaces"].get<std::size_t>());
  std::printf("controllers  %zu connected (%zu I/O, %zu discovery)\n", t["controllers"].get<std::size_t>(),
              t["io_controllers"].get<std::size_t>(),
              t["controllers"].get<std::size_t>() - t["io_controllers"].get<std::size_t>());
  std::printf("I/O          %llu reads (%s), %llu writes (%s), %llu other, %llu errors\n",
              static_cast<unsigned long long>(t["read_commands"].get<uint64_t>()),
              human_bytes(t["read_bytes"].get<double>()).c_str(),
              static_cast<unsigned long long>(t["write_commands"].get<uint64_t>()),
              human_bytes(t["write_bytes"].get<double>()).c_str(),
              static_cast<unsigned long long>(t["other_commands"].get<uint64_t>()),
              static_cast<unsigned long long>(t["errors"].get<uint64_t>()));
  std::puts("");
  std::vector<std::vector<std::string>> rows;
  for (const auto& re : r["reactors"]) {
    const int cpu = re["cpu"].get<int>();
    rows.push_back({std::to_string(re["index"].get<int>()), cpu < 0 ? "any" : std::to_string(cpu),
                    fmt::format("{:.1f}%", re["busy_ratio"].get<double>() * 100),
                    fmt::format("{:.1f}", re["busy_seconds"].get<double>()),
                    fmt::format("{}/{}", re["buffers_in_use"].get<uint64_t>(), re["buffers_total"].get<uint64_t>()),
                    re["responsive"].get<bool>() ? "yes" : "NO"});
  }
  print_table({"Reactor", "CPU", "Busy", "Busy s", "Buffers used", "Responsive"}, rows);
}

std::vector<std::string> namespace_row(const json& n) {
  std::string where = n.contains("path") ? n["path"].get<std::string>() : "-";
  return {n["subsystem"].get<std::string>(),
          std::to_string(n["nsid"].get<uint32_t>()),
          n["backend"].get<std::string>(),
          human_bytes(n["size_bytes"].get<double>()),
          std::to_string(n["block_size"].get<uint32_t>()),
          yes_no(n["read_only"]),
          yes_no(n["volatile_write_cache"]),
          n["uuid"].get<std::string>(),
          where};
}

void print_namespaces(const json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : r) rows.push_back(namespace_row(n));
  print_table({"Subsystem", "NSID", "Backend", "Size", "Block", "RO", "VWC", "UUID", "Path"}, rows);
}

void print_subsystems(const json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : r) {
    std::string hosts;
    if (s["allow_any_host"].get<bool>()) {
      hosts = "any";
    } else {
      for (const auto& h : s["hosts"]) hosts += (hosts.empty() ? "" : ", ") + h.get<std::string>();
    }
    // DH-HMAC-CHAP: where the secrets come from ("set" / "file PATH"), never the secrets.
    if (s.contains("dhchap_hosts")) {
      for (const auto& d : s["dhchap_hosts"]) {
        hosts += "; " + d["nqn"].get<std::string>() + " authenticates (key " + d["dhchap_key"].get<std::string>();
        if (d["dhchap_ctrl_key"].get<std::string>() != "none") {
          hosts += ", controller key " + d["dhchap_ctrl_key"].get<std::string>();
        }
        hosts += ")";
      }
    }
    // TLS: where each host's PSK comes from, never the key.
    if (s.contains("tls_psk_hosts")) {
      for (const auto& d : s["tls_psk_hosts"]) {
        hosts += "; " + d["nqn"].get<std::string>() + " has a TLS PSK (" + d["tls_psk"].get<std::string>() + ")";
      }
    }
    if (s.value("require_authentication", false)) hosts += "; authentication required";
    std::string nsids;
    for (const auto& n : s["namespaces"]) nsids += (nsids.empty() ? "" : ",") + std::to_string(n["nsid"].get<uint32_t>());
    rows.push_back({s["nqn"].get<std::string>(), s["serial"].get<std::string>(), s["model"].get<std::string>(),
                    nsids.empty() ? "-" : nsids, std::to_string(s["controllers"].get<std::size_t>()), hosts});
  }
  print_table({"Subsystem", "Serial", "Model", "Namespaces", "Controllers", "Allowed hosts"}, rows);
}

void print_controllers(const json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : r) {
    rows.push_back({std::to_string(c["cntlid"].get<int>()), c["subsystem"].get<std::string>(),
                    c["hostnqn"].get<std::string>(), c["peer"].get<std::string>(), c["transport"].get<std::string>(),
                    std::to_string(c["io_queues"].get<int>()), std::to_string(c["io_queue_depth"].get<int>()),
                    fmt::format("{}s", c["kato_ms"].get<uint32_t>() / 1000), c["connected_since"].get<std::string>(),
                    std::to_string(c["in_flight"].get<uint64_t>())});
  }
  print_table({"Cntlid", "Subsystem", "Host NQN", "Peer", "Trtype", "I/O queues", "Depth", "KATO", "Connected since",
               "In flight"},
              rows);
}

void stats_rows(const std::string& what, const json& io, std::vector<std::vector<std::string>>& rows,
                std::vector<std::string>& errors) {
  for (const char* op : {"read", "write", "other"}) {
    const auto& o = io[op];
    const auto& l = o["latency_us"];
    rows.push_back({what, op, std::to_string(o["commands"].get<uint64_t>()), human_bytes(o["bytes"].get<double>()),
                    fmt::format("{:.1f}", l["avg"].get<double>()), fmt::format("{:.1f}", l["p50"].get<double>()),
                    fmt::format("{:.1f}", l["p90"].get<double>()), fmt::format("{:.1f}", l["p99"].get<double>()),
                    fmt::format("{:.1f}", l["p99.9"].get<double>())});
  }
  for (const auto& e : io["errors"])
    errors.push_back(fmt::format("  {}: {} x {}", what, e["count"].get<uint64_t>(), e["status"].get<std::string>()));
}

void print_stats(const json& r) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> errors;
  for (const auto& n : r["namespaces"])
    stats_rows(fmt::format("ns {}:{}", n["subsystem"].get<std::string>(), n["nsid"].get<uint32_t>()), n, rows, errors);
  for (const auto& c : r["controllers"])
    stats_rows(fmt::format("ctrl {} ({})", c["cntlid"].get<int>(), c["hostnqn"].get<std::string>()), c, rows, errors);
  print_table({"Object", "Op", "Commands", "Bytes", "Avg us", "p50 us", "p90 us", "p99 us", "p99.9 us"}, rows);
  if (!errors.empty()) {
    std::puts("\nErrors:");
    for (const auto& e : errors) std::puts(e.c_str());
  }
}

void print_managed(const json& r) {
  std::printf("overlay: %s\n", r["overlay"].is_null() ? "(none: no state_dir, changes last until restart)"
                                                       : r["overlay"].get<std::string>().c_str());
  std::vector<std::vector<std::string>> rows;
  std::size_t n = 0;
  for (const auto& e : r["edits"]) {
    rows.push_back({std::to_string(++n), e["at"].get<std::string>(), e["verb"].get<std::string>(), e["params"].dump()});
  }
  print_table({"#", "AT", "VERB", "PARAMS"}, rows);
}

// "12:03:04.567" (UTC) of a Unix time in ms.
std::string utc_time(int64_t unix_ms) {
  const time_t secs = static_cast<time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(unix_ms % 1000));
  return buf;
}

std::string id_list(const json& ids) {
  std::string out;
  for (const auto& g : ids) out += (out.empty() ? "" : ",") + std::to_string(g.get<unsigned>());
  return out.empty() ? "-" : out;
}

void print_group(const json& r) {
  std::printf("group %s in %s: member %s, lease %llds, failback %s\n", r["group"].get<std::string>().c_str(),
              r["where"].get<std::string>().c_str(), r["member"].get<std::string>().c_str(),
              static_cast<long long>(r["lease_seconds"].get<int64_t>()), r["failback"].get<std::string>().c_str());
  std::printf("serving ANA groups %s as optimized; of %s\n", id_list(r["owned"]).c_str(), id_list(r["managed"]).c_str());
  if (!r["last_error"].is_null()) std::printf("last error: %s\n", r["last_error"].get<std::string>().c_str());
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : r["members"]) {
    rows.push_back({m["member"].get<std::string>(), id_list(m["ana_groups"]), m["alive"].get<bool>() ? "yes" : "no",
                    m["lease_holder"].is_null() ? "(free)" : m["lease_holder"].get<std::string>(),
                    m["address"].get<std::string>()});
  }
  print_table({"MEMBER", "HOME GROUPS", "ALIVE", "LEASE HELD BY", "CEPH CLIENT"}, rows);
  if (r["events"].empty()) return;
  std::printf("\nevents (UTC):\n");
  for (const auto& e : r["events"]) {
    std::printf("  %s %s\n", utc_time(e["unix_ms"].get<int64_t>()).c_str(), e["what"].get<std::string>().c_str());
  }
}

}  // namespace

CLI::App* add_ctl_command(CLI::App& app) {
  CLI::App* ctl = app.add_subcommand("ctl", "talk to a running rdmablk-target over its control socket");
  ctl->add_option("--socket", g_args.socket, "the daemon's control socket")->capture_default_str();
  ctl->add_option("-o,--output-format", g_args.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  ctl->add_option("--timeout", g_args.timeout_s, "seconds to wait for the reply")->capture_default_str();
  ctl->require_subcommand(1);
  ctl->add_subcommand("status", "version, uptime, config, listeners, reactors, totals");
  ctl->add_subcommand("subsystems", "exported subsystems, their namespaces and allowed hosts");
  ctl->add_subcommand("namespaces", "every namespace: backend, size, block size, read-only, UUID");
  ctl->add_subcommand("controllers", "connected controllers: host, peer, transport, queues, KATO, in flight");
  CLI::App* st = ctl->add_subcommand("stats", "I/O counters, bytes, errors and latency percentiles");
  st->add_option("--namespace", g_args.ns, "only this namespace: NSID or SUBSYSTEM-NQN:NSID");
  st->add_option("--subsystem", g_args.subsystem, "only this subsystem");
  st->add_option("--controller", g_args.controller, "only this controller (cntlid)");
  CLI::App* dc = ctl->add_subcommand("disconnect", "drop a host's controllers (it may reconnect if still allowed)");
  auto* host = dc->add_option("--host", g_args.host, "every controller of this host NQN");
  auto* cntlid = dc->add_option("--controller", g_args.controller, "this controller (cntlid)");
  host->excludes(cntlid);
  dc->require_option(1);
  ctl->add_subcommand("reload", "reread the configuration (as SIGHUP); prints what changed or the error");
  CLI::App* ana = ctl->add_subcommand("ana", "Asymmetric Namespace Access states");
  CLI::App* ana_set =
      ana->add_subcommand("set", "set a group's ANA state on an io listener (the ana_set verb: kept across restarts)");
  ana_set->add_option("--listener", g_args.listener, "the listener, ADDR:PORT as in the config")->required();
  ana_set->add_option("--group", g_args.group, "the ANA group")->required()->check(CLI::Range(1u, kAnaGroupMax));
  ana_set->add_option("--state", g_args.state, "optimized, non_optimized, inaccessible, persistent_loss or change")
      ->required();
  ana->require_subcommand(1);
  ctl->add_subcommand("managed", "the changes made through the management API (the overlay on the config file)");
  CLI::App* group = ctl->add_subcommand("group", "the gateway group this target is a member of");
  group->add_subcommand("status", "members, their leases and ANA groups, who serves which, the last failovers");
  CLI::App* handback = group->add_subcommand(
      "handback", "stop serving a returned member's groups and release its lease to it (failback: manual)");
  handback->add_option("member", g_args.host, "the member whose groups this target took over")->required();
  group->require_subcommand(1);
  // The management verbs, one subcommand each, named as in the protocol (target/manage/config_edits.h).
  for (const auto& v : manage::edit_verbs()) {
    CLI::App* sub = ctl->add_subcommand(std::string(v.name), std::string(v.summary));
    sub->add_option("params", g_args.params,
                    "KEY=VALUE ... (identified by " + std::string(v.identity) +
                        "); a VALUE that is JSON (3, true, null, [\"a\"], {\"iops\": 5000}) is taken as such")
        ->required();
  }
  return ctl;
}

// KEY=VALUE arguments as a JSON object; VALUE as JSON when it parses as JSON, else as a string.
std::optional<json> params_of(const std::vector<std::string>& args, std::string& error) {
  json params = json::object();
  for (const auto& a : args) {
    const auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0) {
      error = "'" + a + "' is not KEY=VALUE";
      return std::nullopt;
    }
    const std::string value = a.substr(eq + 1);
    json v = json::parse(value, nullptr, false);
    params[a.substr(0, eq)] = v.is_discarded() ? json(value) : std::move(v);
  }
  return params;
}

namespace {

// The `stats` request's filters; nullopt (after a message) when --namespace is not NSID or NQN:NSID.
std::optional<json> stats_request() {
  json request{{"command", "stats"}};
  if (!g_args.ns.empty()) {
    std::string nsid = g_args.ns;
    if (auto colon = g_args.ns.rfind(':'); colon != std::string::npos && g_args.ns.compare(0, 4, "nqn.") == 0) {
      request["subsystem"] = g_args.ns.substr(0, colon);
      nsid = g_args.ns.substr(colon + 1);
    }
    try {
      request["nsid"] = std::stoul(nsid);
    } catch (const std::exception&) {
      std::fprintf(stderr, "rdmablk-target ctl: --namespace %s: expected NSID or NQN:NSID\n", g_args.ns.c_str());
      return std::nullopt;
    }
  }
  if (!g_args.subsystem.empty()) request["subsystem"] = g_args.subsystem;
  if (g_args.controller >= 0) request["cntlid"] = g_args.controller;
  return request;
}

// The request for the chosen subcommand; nullopt (after a message) when its arguments are not usable.
std::optional<json> request_for(CLI::App& verb) {
  const std::string name = verb.get_name();
  if (name == "stats") return stats_request();
  if (name == "group") {
    return verb.get_subcommands().front()->get_name() == "handback"
               ? json{{"command", "group_handback"}, {"member", g_args.host}}
               : json{{"command", "group_status"}};
  }
  if (name == "ana") {
    return json{{"command", "ana_set"}, {"listener", g_args.listener}, {"group", g_args.group}, {"state", g_args.state}};
  }
  if (manage::find_edit_verb(name) != nullptr) {
    std::string bad;
    auto params = params_of(g_args.params, bad);
    if (!params) {
      std::fprintf(stderr, "rdmablk-target ctl %s: %s\n", name.c_str(), bad.c_str());
      return std::nullopt;
    }
    (*params)["command"] = name;
    return params;
  }
  json request{{"command", name}};
  if (name == "disconnect") {
    if (!g_args.host.empty()) {
      request["host"] = g_args.host;
    } else {
      request["cntlid"] = g_args.controller;
    }
  }
  return request;
}

}  // namespace

int run_ctl_command(CLI::App& ctl) {
  CLI::App* verb = ctl.get_subcommands().front();
  const std::string name = verb->get_name();
  auto built = request_for(*verb);
  if (!built) return 2;
  const json request = std::move(*built);
  std::string error;
  auto reply = ask_daemon(request, error);
  if (!reply) {
    std::fprintf(stderr, "rdmablk-target ctl: %s\n", error.c_str());
    return 2;
  }
  if (!reply->value("ok", false)) {
    if (g_args.output == "json") std::puts(reply->dump(2).c_str());
    std::fprintf(stderr, "rdmablk-target ctl %s: %s\n", name.c_str(), reply->value("error", "failed").c_str());
    return 1;
  }
  const json& r = (*reply)["result"];
  if (g_args.output == "json") {
    std::puts(r.dump(2).c_str());
    return 0;
  }
  try {
    if (name == "status") print_status(r);
    else if (name == "subsystems") print_subsystems(r);
    else if (name == "namespaces") print_namespaces(r);
    else if (name == "controllers") print_controllers(r);
    else if (name == "stats") print_stats(r);
    else if (name == "disconnect") std::printf("disconnected %u controller(s)\n", r["disconnected"].get<unsigned>());
    else if (name == "reload") std::printf("reloaded: %s\n", r["summary"].get<std::string>().c_str());
    else if (name == "ana")
      std::printf("ANA group %u on %s: %s (%s)\n", g_args.group, g_args.listener.c_str(), g_args.state.c_str(),
                  r["changed"].get<bool>() ? "changed" : "unchanged");
    else if (name == "managed") print_managed(r);
    else if (name == "group" && r.contains("handed_back"))
      std::printf("handed back the groups of %s\n", r["handed_back"].get<std::string>().c_str());
    else if (name == "group") print_group(r);
    else if (r.contains("changed"))
      std::printf("%s: %s\n", name.c_str(),
                  r["changed"].get<bool>() ? r["summary"].get<std::string>().c_str() : "nothing to change");
  } catch (const json::exception& e) {
    std::fprintf(stderr, "rdmablk-target ctl: unexpected reply (%s): %s\n", e.what(), r.dump().c_str());
    return 1;
  }
  return 0;
}

}  // namespace rdmablk::target

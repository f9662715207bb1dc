// The control socket protocol (target/control_api.*): handle_control_request on any request line, answered
// from a TargetStatus whose strings and counters also come from the input, as the daemon's would: host NQNs
// a peer chose in its Connect data (any NQN decode_nqn accepts), subsystem NQNs and file paths from the
// configuration and the command line, statistics of any shape.
//
// Input: the request line (up to the first '\n': the control server hands over one line at a time), then
// the bytes that fill the status (FuzzedDataProvider).
// The management verbs run the real edit and planner (target/manage/) on a fixed configuration, so any JSON
// params reach the document edits and the config parser.
// Invariants: handle_control_request never throws (its contract: malformed input is an error reply); the
// reply is one line of JSON: plain, an object with "ok": true and a "result", or "ok": false and an "error"
// string; or JSON-RPC 2.0, with "jsonrpc": "2.0", an "id", and a "result" or an "error" with a code and a
// message.
#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "protocol/fabrics.h"
#include "target/control/control_api.h"
#include "target/core/status.h"
#include "target/manage/managed_config.h"

namespace {

namespace tg = rdmablk::target;
namespace st = rdmablk::target::stats;

// A string that passes the Connect data's NQN check (what a host can make the target keep), else `fallback`.
std::string nqn(FuzzedDataProvider& in, const char* fallback) {
  std::string s = in.ConsumeRandomLengthString(240);
  return rdmablk::protocol::valid_nqn(s) ? s : std::string(fallback);
}

// QoS rows as the core reports them: none, the namespace's own, then per-host ones.
std::vector<st::QosStats> qos_stats(FuzzedDataProvider& in) {
  std::vector<st::QosStats> rows(in.ConsumeIntegralInRange<std::size_t>(0, 3));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    st::QosStats& q = rows[i];
    if (i > 0) q.host = nqn(in, "nqn.2014-08.org.nvmexpress:uuid:3fa85f64-5717-4562-b3fc-2c963f66afa6");
    q.iops = in.ConsumeIntegral<uint64_t>();
    q.mbps = in.ConsumeIntegral<uint64_t>();
    q.read_mbps = in.ConsumeIntegral<uint64_t>();
    q.write_mbps = in.ConsumeIntegral<uint64_t>();
    q.throttled_commands = in.ConsumeIntegral<uint64_t>();
    q.throttled_ns = in.ConsumeIntegral<uint64_t>();
  }
  return rows;
}

st::IoStatsSnapshot io_stats(FuzzedDataProvider& in) {
  st::IoStatsSnapshot io;
  for (auto& op : io.ops) {
    op.commands = in.ConsumeIntegral<uint64_t>();
    op.bytes = in.ConsumeIntegral<uint64_t>();
    op.latency.count = in.ConsumeIntegral<uint64_t>();
    op.latency.sum_ns = in.ConsumeIntegral<uint64_t>();
    const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(0, 4);
    for (std::size_t i = 0; i < n && !op.latency.buckets.empty(); ++i) {
      op.latency.buckets[in.ConsumeIntegralInRange<std::size_t>(0, op.latency.buckets.size() - 1)] =
          in.ConsumeIntegral<uint64_t>();
    }
  }
  const std::size_t errors = in.ConsumeIntegralInRange<std::size_t>(0, 3);
  for (std::size_t i = 0; i < errors; ++i) io.errors[in.ConsumeIntegral<uint16_t>()] = in.ConsumeIntegral<uint64_t>();
  return io;
}

tg::TargetStatus make_status(FuzzedDataProvider& in) {
  tg::TargetStatus s;
  s.version = "0.1.0";
  s.pid = 4242;
  s.uptime_s = in.ConsumeFloatingPoint<double>();
  s.config_path = in.ConsumeRandomLengthString(64);  // a path: any bytes but NUL
  s.config_loaded_unix_ms = in.ConsumeIntegral<int64_t>();
  s.listeners.push_back({"tcp", "127.0.0.1", 4420, "io"});
  st::ReactorStats r;
  r.cpu = in.ConsumeIntegral<int>();
  r.busy_ns = in.ConsumeIntegral<uint64_t>();
  r.recent_busy_ratio = in.ConsumeFloatingPoint<double>();
  s.reactors.push_back(r);
  const std::size_t subs = in.ConsumeIntegralInRange<std::size_t>(0, 3);
  for (std::size_t i = 0; i < subs; ++i) {
    tg::SubsystemStatus sub;
    sub.nqn = nqn(in, "nqn.2024-01.io.rdmablk:sub");
    sub.serial = "0123456789abcdef";
    sub.model = "rdmablk";
    sub.hosts.push_back(nqn(in, "nqn.2014-08.org.nvmexpress:uuid:3fa85f64-5717-4562-b3fc-2c963f66afa6"));
    tg::NamespaceStatus ns;
    ns.subsystem = sub.nqn;
    ns.nsid = in.ConsumeIntegral<uint32_t>();
    ns.backend = in.ConsumeBool() ? "file" : "ram";
    ns.path = in.ConsumeRandomLengthString(64);
    ns.size_bytes = in.ConsumeIntegral<uint64_t>();
    ns.block_size = 512;
    sub.namespaces.push_back(ns);
    s.subsystems.push_back(sub);
    s.namespace_stats.push_back({sub.nqn, ns.nsid, io_stats(in), qos_stats(in)});
  }
  const std::size_t ctrls = in.ConsumeIntegralInRange<std::size_t>(0, 3);
  for (std::size_t i = 0; i < ctrls; ++i) {
    tg::ControllerStatus c;
    c.cntlid = in.ConsumeIntegral<uint16_t>();
    c.subsystem = nqn(in, "nqn.2024-01.io.rdmablk:sub");
    c.hostnqn = nqn(in, "nqn.2014-08.org.nvmexpress:uuid:3fa85f64-5717-4562-b3fc-2c963f66afa6");
    c.hostid = "3fa85f64-5717-4562-b3fc-2c963f66afa6";
    c.peer = "127.0.0.1:50000";
    c.transport = "tcp";
    c.connected_since_unix_ms = in.ConsumeIntegral<int64_t>();
    c.in_flight = in.ConsumeIntegral<uint64_t>();
    s.controllers.push_back(c);
    s.controller_stats.push_back({c.cntlid, c.subsystem, c.hostnqn, io_stats(in)});
  }
  return s;
}

}  // namespace

// The configuration the management verbs edit (propose_edit only: nothing is saved).
const tg::manage::ManagedConfig& managed_base() {
  static const tg::manage::ManagedConfig base = [] {
    tg::manage::ManagedConfig m;
    m.base.path = "/fuzz/target.yaml";
    m.base.text =
        "listeners:\n"
        "  - {transport: tcp, address: 127.0.0.1, port: 4420, ana: {1: optimized}}\n"
        "subsystems:\n"
        "  - nqn: nqn.2024-01.io.rdmablk:sub\n"
        "    hosts: [nqn.2014-08.org.nvmexpress:uuid:3fa85f64-5717-4562-b3fc-2c963f66afa6]\n"
        "    namespaces:\n"
        "      - {nsid: 1, backend: ram, size: 1MiB}\n";
    m.base.root = YAML::Load(m.base.text);
    auto config = tg::config_from_document(m.base);
    if (!config) __builtin_trap();  // the fixed text parses
    m.config = *config;
    return m;
  }();
  return base;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmablk::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nl = all.find('\n');
  const std::string line(all.substr(0, nl));
  const std::size_t rest = nl == std::string_view::npos ? size : nl + 1;
  FuzzedDataProvider in(data + rest, size - rest);
  const tg::TargetStatus status = make_status(in);
  const bool reload_ok = in.ConsumeBool();
  const std::string reload_text = in.ConsumeRandomLengthString(64);
  const unsigned disconnected = in.ConsumeIntegralInRange<unsigned>(0, 3);

  tg::ControlHooks hooks;
  hooks.status = [&] { return status; };
  hooks.reload = [&]() -> rdmablk::Result<std::string> {
    if (reload_ok) return reload_text;
    return rdmablk::make_error(reload_text);
  };
  hooks.disconnect_host = [&](const std::string&) { return disconnected; };
  hooks.disconnect_controller = [&](uint16_t) { return disconnected; };
  hooks.manage = [](const std::string& verb, const nlohmann::json& params) -> rdmablk::Result<nlohmann::json> {
    auto p = tg::manage::propose_edit(managed_base(), verb, params);
    if (!p) return tl::unexpected(p.error());
    return nlohmann::json{{"changed", p->changed}};
  };
  hooks.managed = [] { return tg::manage::overlay_json(managed_base()); };

  const std::string reply = tg::handle_control_request(hooks, line);
  FUZZ_CHECK(reply.find('\n') == std::string::npos);
  const auto j = nlohmann::json::parse(reply, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!j.is_discarded());
  FUZZ_CHECK(j.is_object());
  if (j.contains("jsonrpc")) {
    FUZZ_CHECK(j["jsonrpc"] == "2.0" && j.contains("id"));
    FUZZ_CHECK(j.contains("result") != j.contains("error"));
    if (j.contains("error")) {
      FUZZ_CHECK(j["error"]["code"].is_number_integer() && j["error"]["message"].is_string());
    }
    return 0;
  }
  FUZZ_CHECK(j.contains("ok") && j["ok"].is_boolean());
  if (j["ok"].get<bool>()) {
    FUZZ_CHECK(j.contains("result"));
  } else {
    FUZZ_CHECK(j.contains("error") && j["error"].is_string());
  }
  return 0;
}

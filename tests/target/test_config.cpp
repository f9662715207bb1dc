#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "target/config/config.h"
#include "target/config_test_util.h"
#include "target/core/subsystem.h"
#include "support/ports.h"
#include "support/temp_dir.h"

namespace {

using namespace rdmablk::target;
namespace fs = std::filesystem;

// tests/target/test_config.cpp -> the source tree's root.
const fs::path kSourceDir = RDMABLK_SOURCE_DIR;  // tests/CMakeLists.txt (not __FILE__: ccache may make it relative)

using namespace rdmablk::target::testing;

// A minimal valid document: one listener, one subsystem with one ram namespace.
constexpr std::string_view kMinimal = R"(
listeners:
  - address: 127.0.0.1
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:test
    allow_any_host: true
    namespaces:
      - nsid: 1
        backend: ram
        size: 1MiB
)";

using rdmablk::testing::TempDir;

// --- the shipped examples ---------------------------------------------------------------------------

TEST(Config, ShippedExampleParses) {
  auto config = load_config((kSourceDir / "configs/target.yaml").string());
  ASSERT_TRUE(config) << config.error().message;
  ASSERT_EQ(config->listeners.size(), 2u);
  EXPECT_EQ(config->listeners[0].port, 4420);
  EXPECT_EQ(config->listeners[1].port, 8009);
  EXPECT_EQ(config->listeners[1].role, ListenerRole::discovery);
  ASSERT_EQ(config->subsystems.size(), 1u);
  const auto& sub = config->subsystems[0];
  EXPECT_FALSE(sub.allow_any_host);
  EXPECT_EQ(sub.hosts.size(), 2u);
  ASSERT_EQ(sub.namespaces.size(), 2u);
  EXPECT_EQ(sub.namespaces[0].backend, BackendKind::file);
  EXPECT_EQ(sub.namespaces[0].size, 10ull << 30);
  EXPECT_EQ(sub.namespaces[0].block_size, 4096u);
  EXPECT_EQ(sub.namespaces[1].backend, BackendKind::ram);
  EXPECT_TRUE(config->warnings.empty()) << config->warnings.front();
  EXPECT_EQ(config->limits.admin_inline_data, 8192u);
  EXPECT_EQ(config->limits.io_inline_data, 16384u);
  // Its operating settings are the defaults, spelled out: unpinned reactors, the control socket on,
  // metrics off.
  EXPECT_EQ(config->reactors, 0u);
  EXPECT_TRUE(config->reactor_cpus.empty());
  EXPECT_TRUE(config->control.enabled);
  EXPECT_EQ(config->control.socket_path, kDefaultControlSocketPath);
  EXPECT_FALSE(config->metrics.enabled);
  EXPECT_EQ(config->metrics.port, kDefaultMetricsPort);
  EXPECT_TRUE(restart_only_changes(*config, *parse_config("listeners: [{address: 0.0.0.0}, {address: 0.0.0.0, "
                                                          "role: discovery}]\n",
                                                          "t.yaml"))
                  .empty());
}

TEST(Config, QuickstartParsesAndPassesTheFileChecks) {
  auto config = load_config((kSourceDir / "configs/quickstart.yaml").string());
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(namespace_count(*config), 1u);
  const auto& ns = config->subsystems.at(0).namespaces.at(0);
  EXPECT_EQ(config->subsystems[0].nqn, "nqn.2024-11.io.rdmablk:quickstart");
  EXPECT_TRUE(config->subsystems[0].allow_any_host);
  EXPECT_EQ(ns.backend, BackendKind::ram);
  EXPECT_EQ(ns.size, 256ull << 20);
  EXPECT_EQ(config->listeners.at(0).address, "127.0.0.1");
  EXPECT_EQ(config->listeners.at(1).role, ListenerRole::discovery);
}

// --- defaults ---------------------------------------------------------------------------------------

TEST(Config, DefaultsAreApplied) {
  TargetConfig c = parse_ok(R"(
listeners:
  - address: 0.0.0.0
  - address: 0.0.0.0
    role: discovery
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:test
    hosts: [nqn.2024-11.com.example:h1]
    namespaces:
      - nsid: 1
        backend: ram
        size: 1MiB
      - nsid: 2
        backend: file
        path: /srv/disk.img
)");
  ASSERT_EQ(c.listeners.size(), 2u);
  EXPECT_EQ(c.listeners[0].transport, rdmablk::transport::TransportType::tcp);
  EXPECT_EQ(c.listeners[0].port, 4420);
  EXPECT_EQ(c.listeners[0].role, ListenerRole::io);
  EXPECT_EQ(c.listeners[1].port, 8009);
  EXPECT_EQ(c.reactors, 0u);
  EXPECT_EQ(c.busy_poll_us, 200u);
  EXPECT_EQ(c.log_level, spdlog::level::info);
  EXPECT_EQ(c.limits.io_queue_depth, 128u);
  EXPECT_EQ(c.limits.admin_queue_depth, 32u);
  EXPECT_EQ(c.limits.max_io_queues, 64u);
  EXPECT_EQ(c.limits.max_io_size, 1u << 20);
  EXPECT_EQ(c.limits.admin_inline_data, 8192u);
  EXPECT_EQ(c.limits.io_inline_data, 16384u);
  EXPECT_EQ(c.limits.keep_alive.discovery_timeout_ms, 120000u);
  EXPECT_TRUE(c.limits.keep_alive.traffic_based);

  const auto& sub = c.subsystems.at(0);
  EXPECT_FALSE(sub.allow_any_host);
  EXPECT_EQ(sub.model, "rdmablk");
  EXPECT_EQ(sub.serial, derive_serial(sub.nqn));
  EXPECT_EQ(sub.serial.size(), 16u);
  const auto& ram = sub.namespaces.at(0);
  EXPECT_EQ(ram.block_size, 512u);
  EXPECT_FALSE(ram.read_only);
  const auto& file = sub.namespaces.at(1);
  EXPECT_EQ(file.block_size, 0u);  // the backend picks the device's
  EXPECT_EQ(file.size, 0u);        // the existing file's size
  EXPECT_TRUE(file.direct);
  EXPECT_EQ(file_options(file).path, "/srv/disk.img");
  EXPECT_TRUE(file_options(file).direct);
  EXPECT_EQ(memory_options(ram).size, 1u << 20);
  EXPECT_EQ(memory_options(ram).block_size, 512u);
}

// c2h_success: auto by default, always / off when asked; a TCP-only key, restart-only like tls.
TEST(Config, C2hSuccessIsAListenerChoiceForTcpOnly) {
  using rdmablk::transport::tcp::C2hSuccess;
  TargetConfig c = parse_ok(R"(
listeners:
  - address: 127.0.0.1
  - address: 127.0.0.1
    port: 4421
    c2h_success: always
  - address: 127.0.0.1
    port: 4422
    c2h_success: "off"
)");
  EXPECT_EQ(c.listeners.at(0).c2h_success, C2hSuccess::sq_flow_disabled);
  EXPECT_EQ(c.listeners.at(1).c2h_success, C2hSuccess::always);
  EXPECT_EQ(c.listeners.at(2).c2h_success, C2hSuccess::off);
  TargetConfig changed = c;
  changed.listeners.at(0).c2h_success = C2hSuccess::always;
  EXPECT_TRUE(restart_only_changes(c, changed).empty()) << "listeners change live";
  EXPECT_FALSE(same_listener_settings(c.listeners.at(0), changed.listeners.at(0)));
  EXPECT_EQ(parse_error("listeners: [{address: 127.0.0.1, c2h_success: sometimes}]\n"),
            "t.yaml:1:47: listeners[0].c2h_success: unknown c2h_success 'sometimes' (expected auto, always or off)");
  EXPECT_EQ(parse_error("listeners: [{transport: rdma, address: 127.0.0.1, c2h_success: always}]\n"),
            "t.yaml:1:51: listeners[0].c2h_success: c2h_success is for NVMe/TCP listeners only (RDMA sends no "
            "C2HData PDUs)");
}

TEST(Config, DerivedIdentifiersAreStableAndDistinct) {
  TargetConfig a = parse_ok(kMinimal);
  TargetConfig b = parse_ok(kMinimal);
  const auto& ns = a.subsystems.at(0).namespaces.at(0);
  EXPECT_EQ(ns.uuid, b.subsystems.at(0).namespaces.at(0).uuid);
  EXPECT_EQ(ns.uuid, derive_uuid("nqn.2024-11.io.rdmablk:test", 1));
  EXPECT_EQ(ns.nguid, derive_nguid("nqn.2024-11.io.rdmablk:test", 1));
  EXPECT_NE(ns.uuid, derive_uuid("nqn.2024-11.io.rdmablk:test", 2));
  EXPECT_NE(ns.uuid, derive_uuid("nqn.2024-11.io.rdmablk:other", 1));
  EXPECT_EQ(ns.uuid[6] >> 4, 8);       // version 8
  EXPECT_EQ(ns.uuid[8] & 0xC0, 0x80);  // RFC variant
  EXPECT_FALSE(ns.uuid_configured);

  TargetConfig c = parse_ok(R"(
listeners: [{address: "::1"}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:test
    allow_any_host: yes
    namespaces:
      - {nsid: 7, backend: null, size: 4KiB, uuid: 3F2504E0-4F89-11D3-9A0C-0305E82C3301,
         nguid: 0123456789abcdef-0123456789abcdef}
)");
  const auto& explicit_ns = c.subsystems.at(0).namespaces.at(0);
  EXPECT_EQ(format_uuid(explicit_ns.uuid), "3f2504e0-4f89-11d3-9a0c-0305e82c3301");
  EXPECT_EQ(explicit_ns.nguid[0], 0x01);
  EXPECT_EQ(explicit_ns.nguid[15], 0xef);
  EXPECT_EQ(c.listeners.at(0).address, "::1");
}

// --- errors: one line, FILE:LINE:COL: FIELD: problem -----------------------------------------------

TEST(ConfigErrors, YamlSyntaxErrorNamesTheLine) {
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
    port: 4420
   role: io
)"),
            "t.yaml:4:4: invalid YAML: end of sequence not found");
  EXPECT_EQ(parse_error(""), "t.yaml:1:1: the configuration is empty (at least `listeners` is required)");
  EXPECT_EQ(parse_error("- a\n- b\n"), "t.yaml:1:1: expected a mapping of settings at the top level, got a list");
}

TEST(ConfigErrors, UnknownKeysAreRejectedAtEveryLevelWithASuggestion) {
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:test
    allow_any_host: true
    namespaces:
      - nsid: 1
        backend: ram
        size: 1MiB
        blocksize: 4096
)"),
            "t.yaml:10:9: subsystems[0].namespaces[0].blocksize: unknown key (did you mean 'block_size'?)");
  EXPECT_EQ(parse_error(R"(
listener:
  - address: 127.0.0.1
)"),
            "t.yaml:1:1: listener: unknown key (did you mean 'listeners'?)");
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
    colour: blue
)"),
            "t.yaml:3:5: listeners[0].colour: unknown key (expected one of: transport, address, port, role, tls, c2h_success, ana)");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
limits:
  keep_alive:
    timeout: 5
)"),
            "t.yaml:4:5: limits.keep_alive.timeout: unknown key (expected one of: discovery_timeout_ms, "
            "max_timeout_ms, traffic_based)");
}

TEST(ConfigErrors, DuplicateKeyIsAnError) {
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
    port: 4420
    port: 4421
)"),
            "t.yaml:4:5: listeners[0].port: duplicate key (first at line 3)");
}

TEST(ConfigErrors, WrongTypesAndRanges) {
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
    port: http
)"),
            "t.yaml:3:11: listeners[0].port: expected an integer, got 'http'");
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
    port: 70000
)"),
            "t.yaml:3:11: listeners[0].port: 70000 is out of range (expected 1..65535)");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
reactors: -2
)"),
            "t.yaml:2:11: reactors: must not be negative (got '-2')");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
reactors: {count: 2}
)"),
            "t.yaml:2:11: reactors: expected a reactor count or a CPU list such as [2, 3, 6-7], got a mapping");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
busy_poll_us: 2000000
)"),
            "t.yaml:2:15: busy_poll_us: 2000000 is out of range (expected 0..1000000)");
  EXPECT_EQ(parse_error(R"(
listeners:
  address: 127.0.0.1
)"),
            "t.yaml:2:3: listeners: expected a list (- item), got a mapping");
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:test
    allow_any_host: maybe
)"),
            "t.yaml:5:21: subsystems[0].allow_any_host: expected true or false, got 'maybe'");
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: storage.example.com
)"),
            "t.yaml:2:14: listeners[0].address: 'storage.example.com' is not an IPv4 or IPv6 address (host names "
            "are not resolved here; 0.0.0.0 or \"::\" listens on every address)");
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 127.0.0.1
    transport: udp
)"),
            "t.yaml:3:16: listeners[0].transport: unknown transport 'udp' (expected tcp or rdma)");
  EXPECT_EQ(parse_error(R"(
listeners:
  - port: 4420
)"),
            "t.yaml:2:5: listeners[0].address: missing (required: an IPv4 or IPv6 address, 0.0.0.0 or :: for all)");
}

TEST(ConfigErrors, MalformedSubsystemAndHostNqns) {
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: iqn.2024-11.io.rdmablk:test
    allow_any_host: true
)"),
            "t.yaml:3:10: subsystems[0].nqn: invalid NQN 'iqn.2024-11.io.rdmablk:test': NQN must start with 'nqn.' "
            "(at character 1)");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:test
    hosts:
      - nqn.2024-11.com.example:h1
      - nqn.2024-13.com.example:h2
)"),
            "t.yaml:6:9: subsystems[0].hosts[1]: invalid NQN 'nqn.2024-13.com.example:h2': NQN month must be 01-12 "
            "(at character 10)");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2014-08.org.nvmexpress.discovery
)"),
            "t.yaml:3:10: subsystems[0].nqn: this NQN is reserved for the discovery controller");
}

TEST(ConfigErrors, DuplicateSubsystemNqnNamesTheFirst) {
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
)"),
            "t.yaml:5:10: subsystems[1].nqn: duplicate subsystem NQN 'nqn.2024-11.io.rdmablk:a' (first at line 3)");
}

TEST(ConfigErrors, DuplicateNsidPointsAtTheNsidValue) {
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces:
      - nsid: 1
        backend: ram
        size: 1MiB
      - backend: null
        size: 1MiB
        nsid: 1
)"),
            "t.yaml:11:15: subsystems[0].namespaces[1].nsid: duplicate NSID 1 (first at line 6)");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces:
      - {nsid: 0xFFFFFFFF, backend: ram, size: 1MiB}
)"),
            "t.yaml:6:16: subsystems[0].namespaces[0].nsid: 0xFFFFFFFF is out of range (expected 1..4294967294)");
}

TEST(ConfigErrors, DuplicateAndOverlappingListeners) {
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 10.0.0.1
    port: 4420
  - transport: tcp
    address: 10.0.0.1
)"),
            "t.yaml:4:5: listeners[1]: duplicate listener tcp 10.0.0.1:4420 (first at line 2)");
  EXPECT_EQ(parse_error(R"(
listeners:
  - address: 10.0.0.1
  - address: "::"
)"),
            "t.yaml:3:5: listeners[1]: tcp [::]:4420 overlaps tcp 10.0.0.1:4420 at line 2 (a wildcard address "
            "already covers the other)");
  // The same address and port on the other transport is fine (as in nvmet).
  parse_ok(R"(
listeners:
  - address: 10.0.0.1
  - {address: 10.0.0.1, transport: rdma}
  - {address: 10.0.0.1, role: discovery}
)");
}

TEST(ConfigErrors, NoListeners) {
  EXPECT_EQ(parse_error("log_level: info\n"), "t.yaml:1:1: listeners: missing (required: a list of listeners)");
  EXPECT_EQ(parse_error("listeners: []\n"), "t.yaml:1:12: listeners: at least one listener is required");
  EXPECT_EQ(parse_error(R"(
listeners:
  - {address: 127.0.0.1, role: discovery}
subsystems:
  - {nqn: "nqn.2024-11.io.rdmablk:a", allow_any_host: true}
)"),
            "t.yaml:2:3: listeners: no listener has role io: the subsystems would be unreachable");
}

TEST(ConfigErrors, NamespaceBackendRules) {
  const std::string head = yaml(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces:
)");
  auto error = [&](const std::string& ns) {
    auto r = parse_config(head + ns, "t.yaml");
    return r ? std::string("(parsed)") : r.error().message;
  };
  EXPECT_EQ(error("      - nsid: 1\n        backend: file\n        size: 1GiB\n"),
            "t.yaml:6:9: subsystems[0].namespaces[0].path: missing (required: the file or block device that holds "
            "the namespace)");
  EXPECT_EQ(error("      - nsid: 1\n        backend: ram\n"),
            "t.yaml:6:9: subsystems[0].namespaces[0].size: missing (required for backend: ram)");
  EXPECT_EQ(error("      - nsid: 1\n        backend: null\n"),
            "t.yaml:6:9: subsystems[0].namespaces[0].size: missing (required for backend: null)");
  EXPECT_EQ(error("      - nsid: 1\n        backend: ram\n        size: 1MiB\n        path: /tmp/x\n"),
            "t.yaml:9:9: subsystems[0].namespaces[0].path: path applies only to backend: file (a ram namespace "
            "keeps no data on disk)");
  EXPECT_EQ(error("      - nsid: 1\n        backend: disk\n"),
            "t.yaml:7:18: subsystems[0].namespaces[0].backend: unknown backend 'disk' (expected file, ram, null or "
            "rbd)");
  EXPECT_EQ(error("      - nsid: 1\n        backend: ram\n        size: 1MiB\n        block_size: 1000\n"),
            "t.yaml:9:21: subsystems[0].namespaces[0].block_size: block size 1000 is not a power of two in "
            "[512, 65536]");
  EXPECT_EQ(error("      - nsid: 1\n        backend: ram\n        size: 1MiB\n        block_size: 131072\n"),
            "t.yaml:9:21: subsystems[0].namespaces[0].block_size: block size 131072 is not a power of two in "
            "[512, 65536]");
  EXPECT_EQ(error("      - nsid: 1\n        backend: ram\n        size: 6KiB\n        block_size: 4096\n"),
            "t.yaml:8:15: subsystems[0].namespaces[0].size: size 6144 is not a multiple of the block size 4096");
  EXPECT_EQ(error("      - nsid: 1\n        backend: ram\n        size: 10GB\n"),
            "t.yaml:8:15: subsystems[0].namespaces[0].size: invalid size '10GB': ambiguous unit 'GB' (write GiB "
            "for 1024-based units, or a byte count)");
  EXPECT_EQ(error("      - nsid: 1\n        backend: ram\n        size: 1MiB\n        uuid: not-a-uuid\n"),
            "t.yaml:9:15: subsystems[0].namespaces[0].uuid: 'not-a-uuid' is not a UUID (8-4-4-4-12 hex digits)");
}

TEST(ConfigRbd, KeysAndDefaults) {
  TargetConfig c = parse_ok(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: rbd, pool: rbd, image: vol1}
      - nsid: 2
        backend: rbd
        pool: fast
        namespace: tenant-a
        image: vol2
        ceph_conf: /etc/ceph/other.conf
        client: gw1
        keyring: /etc/ceph/ceph.client.gw1.keyring
        block_size: 4096
        read_only: true
)");
  ASSERT_EQ(c.subsystems.size(), 1u);
  const auto& a = c.subsystems[0].namespaces.at(0);
  EXPECT_EQ(a.backend, BackendKind::rbd);
  EXPECT_EQ(a.pool, "rbd");
  EXPECT_EQ(a.image, "vol1");
  EXPECT_EQ(a.rados_namespace, "");
  EXPECT_EQ(a.ceph_conf, "/etc/ceph/ceph.conf");
  EXPECT_EQ(a.client, "admin");
  EXPECT_EQ(a.keyring, "");
  EXPECT_EQ(a.block_size, 512u);
  EXPECT_EQ(rbd_location(a), "rbd rbd/vol1 (client admin)");
  const auto& b = c.subsystems[0].namespaces.at(1);
  EXPECT_EQ(b.pool, "fast");
  EXPECT_EQ(b.rados_namespace, "tenant-a");
  EXPECT_EQ(b.image, "vol2");
  EXPECT_EQ(b.ceph_conf, "/etc/ceph/other.conf");
  EXPECT_EQ(b.client, "gw1");
  EXPECT_EQ(b.keyring, "/etc/ceph/ceph.client.gw1.keyring");
  EXPECT_EQ(b.block_size, 4096u);
  EXPECT_TRUE(b.read_only);
  EXPECT_EQ(rbd_location(b), "rbd fast/tenant-a/vol2 (client gw1)");
  const rdmablk::backend::RbdOptions o = rbd_options(b);
  EXPECT_EQ(o.pool, "fast");
  EXPECT_EQ(o.rados_namespace, "tenant-a");
  EXPECT_EQ(o.image, "vol2");
  EXPECT_EQ(o.client, "gw1");
  EXPECT_EQ(o.keyring, "/etc/ceph/ceph.client.gw1.keyring");
  EXPECT_EQ(o.block_size, 4096u);
  EXPECT_TRUE(o.read_only);
}

TEST(ConfigErrors, RbdNamespaceRules) {
  const std::string head = yaml(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces:
)");
  auto error = [&](const std::string& ns) {
    auto r = parse_config(head + ns, "t.yaml");
    return r ? std::string("(parsed)") : r.error().message;
  };
  EXPECT_EQ(error("      - nsid: 1\n        backend: rbd\n        image: a\n"),
            "t.yaml:6:9: subsystems[0].namespaces[0].pool: missing (required: the Ceph pool that holds the image)");
  EXPECT_EQ(error("      - nsid: 1\n        backend: rbd\n        pool: rbd\n"),
            "t.yaml:6:9: subsystems[0].namespaces[0].image: missing (required: the RBD image that holds the "
            "namespace)");
  EXPECT_EQ(error("      - nsid: 1\n        backend: rbd\n        pool: rbd\n        image: a/b\n"),
            "t.yaml:9:16: subsystems[0].namespaces[0].image: 'a/b' is not a valid name (no '/', '@' or blanks)");
  EXPECT_EQ(error("      - nsid: 1\n        backend: rbd\n        pool: rbd\n        image: a\n        size: 1GiB\n"),
            "t.yaml:10:9: subsystems[0].namespaces[0].size: size does not apply to backend: rbd (the image's size "
            "is used)");
  EXPECT_EQ(error("      - nsid: 1\n        backend: rbd\n        pool: rbd\n        image: a\n        path: /x\n"),
            "t.yaml:10:9: subsystems[0].namespaces[0].path: path applies only to backend: file (a rbd namespace "
            "names its image with pool and image)");
  EXPECT_EQ(
      error("      - nsid: 1\n        backend: rbd\n        pool: rbd\n        image: a\n        block_size: 1024\n"),
      "t.yaml:10:21: subsystems[0].namespaces[0].block_size: block size 1024 is not 512 or 4096 (backend: rbd)");
  EXPECT_EQ(
      error("      - nsid: 1\n        backend: rbd\n        pool: rbd\n        image: a\n        client: client.gw\n"),
      "t.yaml:10:17: subsystems[0].namespaces[0].client: 'client.gw': give the id without 'client.' ('gw')");
  EXPECT_EQ(error("      - nsid: 1\n        backend: rbd\n        pool: rbd\n        image: a\n        keyring: \"\"\n"),
            "t.yaml:10:18: subsystems[0].namespaces[0].keyring: must not be empty");
  EXPECT_EQ(error("      - nsid: 1\n        backend: ram\n        size: 1MiB\n        pool: rbd\n"),
            "t.yaml:9:9: subsystems[0].namespaces[0].pool: pool applies only to backend: rbd");
  EXPECT_EQ(error("      - nsid: 1\n        backend: file\n        path: /x\n        image: a\n"),
            "t.yaml:9:9: subsystems[0].namespaces[0].image: image applies only to backend: rbd");
  // one image, two writable namespaces in one target
  EXPECT_EQ(error("      - {nsid: 1, backend: rbd, pool: rbd, image: a}\n"
                  "      - {nsid: 2, backend: rbd, pool: rbd, image: a}\n"),
            "t.yaml:7:51: subsystems[0].namespaces[1].image: image rbd/a already backs subsystems[0].namespaces[0] "
            "at line 6 (one image is one namespace; other targets may export it under the same NSID)");
  // the same image name in another RADOS namespace or pool is another image
  EXPECT_EQ(error("      - {nsid: 1, backend: rbd, pool: rbd, image: a}\n"
                  "      - {nsid: 2, backend: rbd, pool: rbd, namespace: x, image: a}\n"
                  "      - {nsid: 3, backend: rbd, pool: p2, image: a}\n"),
            "(parsed)");
}

// A reload reopens a namespace only when its configuration changed: every rbd key counts.
TEST(ConfigRbd, SameConfigComparesTheRbdKeys) {
  TargetConfig c = parse_ok(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces: [{nsid: 1, backend: rbd, pool: p, image: i, namespace: n, ceph_conf: /c, client: u, keyring: /k}]
)");
  Namespace ns;
  ns.config = c.subsystems.at(0).namespaces.at(0);
  EXPECT_TRUE(ns.same_config(ns.config));
  for (std::string NamespaceConfig::*field : {&NamespaceConfig::pool, &NamespaceConfig::image,
                                               &NamespaceConfig::rados_namespace, &NamespaceConfig::ceph_conf,
                                               &NamespaceConfig::client, &NamespaceConfig::keyring}) {
    NamespaceConfig changed = ns.config;
    changed.*field += "x";
    EXPECT_FALSE(ns.same_config(changed)) << changed.*field;
  }
}

TEST(ConfigRbd, RelativePathsFollowTheConfigFile) {
  TempDir dir;
  const fs::path file = dir.path() / "t.yaml";
  std::ofstream(file) << yaml(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces: [{nsid: 1, backend: rbd, pool: rbd, image: a, ceph_conf: ceph/ceph.conf, keyring: ceph/k.keyring}]
)");
  auto c = load_config(file.string());
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->subsystems[0].namespaces[0].ceph_conf, (dir.path() / "ceph/ceph.conf").string());
  EXPECT_EQ(c->subsystems[0].namespaces[0].keyring, (dir.path() / "ceph/k.keyring").string());
}

TEST(ConfigErrors, OneWritableFileBacksOneNamespace) {
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: file, path: /srv/a.img}
  - nqn: nqn.2024-11.io.rdmablk:b
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: file, path: /srv/./a.img}
)"),
            "t.yaml:10:40: subsystems[1].namespaces[0].path: '/srv/./a.img' already backs subsystems[0].namespaces[0] "
            "at line 6 (two writable namespaces on one file would corrupt each other)");
}

TEST(ConfigErrors, HostAccessMustBeExplicit) {
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    namespaces: []
)"),
            "t.yaml:3:5: subsystems[0].hosts: no host may connect: list host NQNs under hosts, or set "
            "allow_any_host: true");
  TargetConfig c = parse_ok(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    hosts: [nqn.2024-11.com.example:h1]
    namespaces: [{nsid: 1, backend: ram, size: 1M}]
)");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0], "t.yaml:5:5: subsystems[0].hosts: ignored: allow_any_host is true, so any host may connect");
}

TEST(ConfigErrors, LogLevelAndLimits) {
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
log_level: verbose
)"),
            "t.yaml:2:12: log_level: unknown log level 'verbose' (expected trace, debug, info, warn, error, critical "
            "or off)");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
limits:
  admin_inline_data: 4KiB
)"),
            "t.yaml:3:22: limits.admin_inline_data: 4KiB is out of range (expected 8 KiB..128 KiB)");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
limits:
  io_inline_data: 1000
)"),
            "t.yaml:3:19: limits.io_inline_data: 1000 is not a multiple of 16 (capsule sizes are in 16-byte units)");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
limits:
  max_io_size: 768KiB
)"),
            "t.yaml:3:16: limits.max_io_size: 786432 is not a power of two (MDTS is a power of two of 4 KiB pages)");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
limits:
  io_queue_depth: 4096
)"),
            "t.yaml:3:19: limits.io_queue_depth: 4096 is out of range (expected 2..1024)");
  EXPECT_EQ(parse_error(R"(
listeners: [{address: 127.0.0.1}]
limits:
  keep_alive: {max_timeout_ms: 10000, discovery_timeout_ms: 120000}
)"),
            "t.yaml:3:61: limits.keep_alive.discovery_timeout_ms: 120000 exceeds max_timeout_ms 10000");
}

// --- sizes ------------------------------------------------------------------------------------------

TEST(ConfigSize, ParsesBytesAndBinaryUnits) {
  const std::pair<const char*, uint64_t> good[] = {
      {"0", 0},
      {"4096", 4096},
      {"4096B", 4096},
      {"1K", 1024},
      {"1k", 1024},
      {"1KiB", 1024},
      {"512M", 512ull << 20},
      {"512 MiB", 512ull << 20},
      {"1GiB", 1ull << 30},
      {"1073741824", 1ull << 30},
      {"2T", 2ull << 40},
      {"1pib", 1ull << 50},
      {" 8KiB ", 8192},
      {"16383P", 16383ull << 50},
  };
  for (auto [text, bytes] : good) {
    auto r = parse_size(text);
    ASSERT_TRUE(r) << text << ": " << r.error().message;
    EXPECT_EQ(*r, bytes) << text;
  }
}

TEST(ConfigSize, RejectsWithTheReason) {
  const std::pair<const char*, const char*> bad[] = {
      {"", "invalid size '': empty"},
      {"-1G", "invalid size '-1G': must not be negative"},
      {"1.5GiB", "invalid size '1.5GiB': fractions are not supported (write 1536MiB rather than 1.5GiB)"},
      {"GiB",
       "invalid size 'GiB': expected a number of bytes, optionally followed by a unit (K, M, G, T, P or "
       "KiB...)"},
      {"1GB", "invalid size '1GB': ambiguous unit 'GB' (write GiB for 1024-based units, or a byte count)"},
      {"1mb", "invalid size '1mb': ambiguous unit 'mb' (write MiB for 1024-based units, or a byte count)"},
      {"10X", "invalid size '10X': unknown unit 'X' (expected K, M, G, T, P, KiB, MiB, GiB, TiB or PiB)"},
      {"16384P", "invalid size '16384P': too large"},
      {"99999999999999999999", "invalid size '99999999999999999999': too large"},
  };
  for (auto [text, message] : bad) {
    auto r = parse_size(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().message, message);
  }
}

TEST(ConfigSize, FormatsInTheLargestWholeUnit) {
  EXPECT_EQ(format_size(0), "0 B");
  EXPECT_EQ(format_size(1000), "1000 B");
  EXPECT_EQ(format_size(8192), "8 KiB");
  EXPECT_EQ(format_size(256ull << 20), "256 MiB");
  EXPECT_EQ(format_size(1536ull << 20), "1536 MiB");
  EXPECT_EQ(format_size(10ull << 30), "10 GiB");
}

// --- load_config and validate_environment -----------------------------------------------------------

TEST(ConfigFile, MissingFileIsOneMessageNamingIt) {
  auto r = load_config("/nonexistent/rdmablk/target.yaml");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "/nonexistent/rdmablk/target.yaml: cannot read the configuration: No such file or directory");
}

TEST(ConfigFile, ErrorsNameTheFileAndRelativePathsFollowIt) {
  TempDir dir;
  auto bad = dir.write("bad.yaml", "listeners: [{address: 127.0.0.1}]\nreactor: 2\n");
  auto r = load_config(bad.string());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, bad.string() + ":2:1: reactor: unknown key (did you mean 'reactors'?)");

  auto good = dir.write("good.yaml", yaml(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: state/a.img, size: 1MiB}]
)"));
  auto c = load_config(good.string());
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->subsystems[0].namespaces[0].path, (dir.path() / "state/a.img").string());
}

TEST(ConfigEnvironment, FileNamespaceChecks) {
  TempDir dir;
  auto config_for = [&](const std::string& ns_yaml) {
    auto c = parse_config(yaml(R"(
listeners: [{address: 127.0.0.1, transport: rdma}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces:
)") + ns_yaml,
                          "t.yaml");
    EXPECT_TRUE(c) << c.error().message;
    return *c;
  };
  const std::string missing = (dir.path() / "missing.img").string();

  auto no_size =
      validate_environment(config_for("      - nsid: 1\n        backend: file\n        path: " + missing + "\n"));
  ASSERT_FALSE(no_size);
  EXPECT_EQ(no_size.error().message, "t.yaml:8:15: subsystems[0].namespaces[0].path: " + missing +
                                         " does not exist and no size is given to create it");

  // A missing file with a size is created sparse by the backend: fine if its directory exists.
  EXPECT_TRUE(
      validate_environment(config_for("      - {nsid: 1, backend: file, size: 1MiB, path: " + missing + "}\n")));
  auto no_dir = validate_environment(
      config_for("      - {nsid: 1, backend: file, size: 1MiB, path: " + dir.path().string() + "/nodir/x.img}\n"));
  ASSERT_FALSE(no_dir);
  EXPECT_NE(no_dir.error().message.find("t.yaml:6:52: subsystems[0].namespaces[0].path: cannot create "),
            std::string::npos)
      << no_dir.error().message;

  auto is_dir =
      validate_environment(config_for("      - {nsid: 1, backend: file, path: " + dir.path().string() + "}\n"));
  ASSERT_FALSE(is_dir);
  EXPECT_EQ(is_dir.error().message,
            "t.yaml:6:40: subsystems[0].namespaces[0].path: " + dir.path().string() + " is a directory");

  auto existing = dir.write("disk.img", std::string(8192, 'x'));
  EXPECT_TRUE(validate_environment(config_for("      - {nsid: 1, backend: file, path: " + existing.string() + "}\n")));
  auto ragged = dir.write("ragged.img", std::string(1000, 'x'));
  auto odd = validate_environment(config_for("      - {nsid: 1, backend: file, path: " + ragged.string() + "}\n"));
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message.find("is 1000 bytes, not a multiple of the block size 512"), std::string::npos);
}

using rdmablk::testing::listen_on_loopback;  // tests/support/ports.h

TEST(ConfigEnvironment, PortInUseNamesTheListenersLine) {
  uint16_t port = 0;
  int fd = listen_on_loopback(&port);
  ASSERT_GE(fd, 0);
  auto c = parse_config(yaml(R"(
listeners:
  - address: 127.0.0.1
    transport: rdma
  - address: 127.0.0.1
    port: )" + std::to_string(port) +
                             "\n"),
                        "t.yaml");
  ASSERT_TRUE(c) << c.error().message;
  auto busy = validate_environment(*c);
  ::close(fd);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().message,
            "t.yaml:5:11: listeners[1].port: tcp 127.0.0.1:" + std::to_string(port) + " is already in use");
  EXPECT_EQ(busy.error().errno_value, EADDRINUSE);

  // Released: the same configuration is usable now (the check itself leaves nothing bound).
  EXPECT_TRUE(validate_environment(*c));
  EXPECT_TRUE(validate_environment(*c));

  auto foreign = parse_config("listeners: [{address: 192.0.2.1, port: 4420}]\n", "t.yaml");
  ASSERT_TRUE(foreign);
  auto not_local = validate_environment(*foreign);
  ASSERT_FALSE(not_local);
  EXPECT_EQ(not_local.error().message, "t.yaml:1:23: listeners[0].address: 192.0.2.1 is not an address of this host");
}

TEST(Config, DescribeSummarizes) {
  TargetConfig c = parse_ok(R"(
listeners:
  - address: 0.0.0.0
  - {address: "::1", port: 8009, role: discovery}
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces: [{nsid: 1, backend: ram, size: 1M}, {nsid: 2, backend: null, size: 1G}]
reactors: 2
log_level: debug
)");
  EXPECT_EQ(describe(c),
            "2 listeners (tcp 0.0.0.0:4420, tcp [::1]:8009 discovery), 1 subsystem, 2 namespaces, reactors 2, "
            "log debug, queues 64x128, max I/O 1 MiB, inline 8 KiB/16 KiB, "
            "connections 4096/listener 1024/host, Connect within 10000 ms, queue buffers 32 MiB, control /run/rdmablk/target.sock, "
            "metrics off");
}

}  // namespace

// The steps issue 24 split out of parse(), parse_subsystem() and parse_namespace(), each once:
// their warnings and errors keep their places and fields.
namespace {

TEST(ConfigSplitSteps, SubsystemAndNamespaceListWarnings) {
  TargetConfig none = parse_ok("listeners: [{address: 127.0.0.1}]\n");
  ASSERT_EQ(none.warnings.size(), 1u);
  EXPECT_EQ(none.warnings[0], "t.yaml:1:1: subsystems: no subsystems: only discovery will be served");
  TargetConfig empty = parse_ok(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces: []
)");
  ASSERT_EQ(empty.warnings.size(), 1u);
  EXPECT_EQ(empty.warnings[0], "t.yaml:5:17: subsystems[0].namespaces: no namespaces: hosts will see an empty subsystem");
}

TEST(ConfigSplitSteps, TlsPskWithoutATlsListenerIsWarnedAbout) {
  TargetConfig c = parse_ok(R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    hosts:
      - nqn: nqn.2024-11.com.example:h1
        tls_psk: "NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:"
    namespaces: [{nsid: 1, backend: ram, size: 1M}]
)");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0],
            "t.yaml:6:18: subsystems[0].hosts[0]: a tls_psk, but no listener has tls: optional or required, so it is "
            "never used");
}

TEST(ConfigSplitSteps, UuidAndNguidErrors) {
  const std::string head = R"(
listeners: [{address: 127.0.0.1}]
subsystems:
  - nqn: nqn.2024-11.io.rdmablk:a
    allow_any_host: true
    namespaces:
      - nsid: 1
        backend: ram
        size: 1MiB
)";
  EXPECT_EQ(parse_error(head + "        uuid: 00000000-0000-0000-0000-000000000000\n"),
            "t.yaml:9:15: subsystems[0].namespaces[0].uuid: the nil UUID is not a namespace identifier");
  EXPECT_EQ(parse_error(head + "        nguid: 0123\n"),
            "t.yaml:9:16: subsystems[0].namespaces[0].nguid: '0123' is not an NGUID (32 hex digits, dashes allowed)");
}

}  // namespace

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "initiator/cli/attach_config.h"

namespace {

using namespace rdmablk::initiator;
using rdmablk::transport::TransportType;
namespace fs = std::filesystem;

// tests/initiator/test_attach_config.cpp -> the source tree's root.
const fs::path kSourceDir = RDMABLK_SOURCE_DIR;  // tests/CMakeLists.txt (not __FILE__: ccache may make it relative)

// Test YAML is written from column 1 after a leading newline, so that line 1 is the first line shown.
std::string yaml(std::string_view text) {
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  return std::string(text);
}

AttachConfig parse_ok(std::string_view text) {
  auto config = parse_attach_config(yaml(text), "a.yaml");
  EXPECT_TRUE(config) << config.error().message;
  return config ? *config : AttachConfig{};
}

std::string parse_error(std::string_view text) {
  auto config = parse_attach_config(yaml(text), "a.yaml");
  EXPECT_FALSE(config) << "parsed unexpectedly";
  return config ? std::string() : config.error().message;
}

// The two required keys; error tests append the key under test on line 3.
constexpr std::string_view kRequired = R"(
address: 192.168.100.10
nqn: nqn.2024-11.io.rdmablk:vol1
)";

std::string with(std::string_view extra) { return std::string(kRequired) + std::string(extra); }

// --- valid files -----------------------------------------------------------------------------------

TEST(AttachConfig, EveryKeyIsRead) {
  AttachConfig c = parse_ok(R"(
transport: rdma
address: "[fe80::1]"
port: 4421
nqn: nqn.2024-11.io.rdmablk:vol1
nsid: 7
mode: kernel
hostnqn: nqn.2014-08.org.nvmexpress:uuid:4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c
hostid: 4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c
nr_io_queues: 4
queue_size: 256
ctrl_loss_tmo: -1
reconnect_delay: 2
keep_alive_tmo: 0
)");
  EXPECT_EQ(c.address.type, TransportType::rdma);
  EXPECT_EQ(c.address.traddr, "fe80::1");  // brackets dropped: the transports take the bare literal
  EXPECT_EQ(c.address.trsvcid, 4421);
  EXPECT_EQ(c.subnqn, "nqn.2024-11.io.rdmablk:vol1");
  EXPECT_EQ(c.nsid, 7u);
  EXPECT_EQ(c.mode, AttachConfig::Mode::kernel);
  EXPECT_EQ(c.hostnqn, "nqn.2014-08.org.nvmexpress:uuid:4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c");
  EXPECT_EQ(c.hostid, "4a7e9c3b-1d2f-4e6a-8b5c-7d9e0f1a2b3c");
  EXPECT_EQ(c.nr_io_queues, 4);
  EXPECT_EQ(c.queue_size, 256);
  EXPECT_EQ(c.ctrl_loss_tmo_s, -1);
  EXPECT_EQ(c.reconnect_delay_s, 2u);
  EXPECT_EQ(c.keep_alive_tmo_s, 0u);
  EXPECT_EQ(c.source, "a.yaml");
}

TEST(AttachConfig, DefaultsAreApplied) {
  AttachConfig c = parse_ok(kRequired);
  EXPECT_EQ(c.address.type, TransportType::tcp);
  EXPECT_EQ(c.address.traddr, "192.168.100.10");
  EXPECT_EQ(c.address.trsvcid, 4420);
  EXPECT_EQ(c.nsid, 1u);
  EXPECT_EQ(c.mode, AttachConfig::Mode::userspace);
  EXPECT_FALSE(c.hostnqn);
  EXPECT_FALSE(c.hostid);
  EXPECT_EQ(c.nr_io_queues, 0);
  EXPECT_EQ(c.queue_size, 128);
  EXPECT_EQ(c.ctrl_loss_tmo_s, 600);
  EXPECT_EQ(c.reconnect_delay_s, 10u);
  EXPECT_EQ(c.keep_alive_tmo_s, 5u);
}

TEST(AttachConfig, AddressesAndHostNamesAreAccepted) {
  for (const char* a : {"10.0.0.1", "\"::1\"", "storage-1.example.org", "target", "'[2001:db8::5]'"}) {
    auto c = parse_attach_config("address: " + std::string(a) + "\nnqn: nqn.2024-11.io.rdmablk:vol1\n", "a.yaml");
    EXPECT_TRUE(c) << a << ": " << c.error().message;
  }
}

TEST(AttachConfig, ModeNames) {
  EXPECT_STREQ(attach_mode_name(AttachConfig::Mode::userspace), "userspace");
  EXPECT_STREQ(attach_mode_name(AttachConfig::Mode::kernel), "kernel");
}

TEST(AttachConfig, ShippedExampleParses) {
  fs::path path = kSourceDir / "configs" / "attach.yaml";
  auto c = load_attach_config(path.string());
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->source, path.string());
  // The example shows every default: it must agree with the parser's.
  AttachConfig defaults = parse_ok(R"(
address: 127.0.0.1
nqn: nqn.2024-11.io.rdmablk:quickstart
)");
  EXPECT_EQ(c->address.type, defaults.address.type);
  EXPECT_EQ(c->address.traddr, defaults.address.traddr);
  EXPECT_EQ(c->address.trsvcid, defaults.address.trsvcid);
  EXPECT_EQ(c->subnqn, defaults.subnqn);
  EXPECT_EQ(c->nsid, defaults.nsid);
  EXPECT_EQ(c->mode, defaults.mode);
  EXPECT_EQ(c->hostnqn, defaults.hostnqn);
  EXPECT_EQ(c->hostid, defaults.hostid);
  EXPECT_EQ(c->nr_io_queues, defaults.nr_io_queues);
  EXPECT_EQ(c->queue_size, defaults.queue_size);
  EXPECT_EQ(c->ctrl_loss_tmo_s, defaults.ctrl_loss_tmo_s);
  EXPECT_EQ(c->reconnect_delay_s, defaults.reconnect_delay_s);
  EXPECT_EQ(c->keep_alive_tmo_s, defaults.keep_alive_tmo_s);
}

TEST(AttachConfig, UnreadableFileNamesThePath) {
  auto missing = load_attach_config("/nonexistent/rdmablk/vol.yaml");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "/nonexistent/rdmablk/vol.yaml: cannot read the configuration: No such file or directory");
  EXPECT_EQ(missing.error().errno_value, ENOENT);

  auto directory = load_attach_config(kSourceDir.string());
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.error().errno_value, EISDIR);
}

TEST(AttachConfig, ErrorsFromAFileNameTheFile) {
  fs::path path = fs::temp_directory_path() / ("rdmablk-attach-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "address: 10.0.0.1\nnqn: nqn.2024-11.io.rdmablk:vol1\nqueue_size: 1\n";
  auto c = load_attach_config(path.string());
  fs::remove(path);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, path.string() + ":3:13: queue_size: 1 is out of range (expected 2..1024)");
}

// --- errors: one line, FILE:LINE:COL: field: problem -----------------------------------------------

TEST(AttachConfigErrors, DocumentShape) {
  EXPECT_EQ(parse_error(""), "a.yaml:1:1: the configuration is empty (at least `address` and `nqn` are required)");
  EXPECT_EQ(parse_error("- a\n- b\n"), "a.yaml:1:1: expected a mapping of settings at the top level, got a list");
  EXPECT_EQ(parse_error(R"(
address: 10.0.0.1
 nqn: x
)"),
            "a.yaml:2:5: invalid YAML: illegal map value");
  EXPECT_EQ(parse_error("? [a, b]\n: 1\n"), "a.yaml:1:3: keys must be plain names");
}

TEST(AttachConfigErrors, MissingRequiredKeys) {
  EXPECT_EQ(parse_error(R"(
# a comment first
nqn: nqn.2024-11.io.rdmablk:vol1
)"),
            "a.yaml:2:1: address: missing (required: the target's IPv4 or IPv6 address, or host name; or a `paths` "
            "list)");
  EXPECT_EQ(parse_error("address: 10.0.0.1\n"),
            "a.yaml:1:1: nqn: missing (required: the subsystem's NQN, e.g. nqn.2024-11.io.rdmablk:vol1)");
  EXPECT_EQ(parse_error(R"(
address:
nqn: nqn.2024-11.io.rdmablk:vol1
)"),
            "a.yaml:1:1: address: missing value (expected an address)");
}

TEST(AttachConfigErrors, UnknownKeysWithASuggestion) {
  EXPECT_EQ(parse_error(with("queuesize: 64\n")), "a.yaml:3:1: queuesize: unknown key (did you mean 'queue_size'?)");
  EXPECT_EQ(parse_error(with("ctrl-loss-tmo: 5\n")),
            "a.yaml:3:1: ctrl-loss-tmo: unknown key (did you mean 'ctrl_loss_tmo'?)");
  EXPECT_EQ(parse_error(with("colour: blue\n")),
            "a.yaml:3:1: colour: unknown key (expected one of: transport, address, paths, port, nqn, nsid, mode, hostnqn, "
            "hostid, nr_io_queues, queue_size, ctrl_loss_tmo, reconnect_delay, keep_alive_tmo, dhchap_secret, "
            "dhchap_secret_file, dhchap_ctrl_secret, dhchap_ctrl_secret_file, tls, tls_key, tls_key_file)");
}

TEST(AttachConfigErrors, DuplicateKey) {
  EXPECT_EQ(parse_error(with("port: 4420\nport: 4421\n")), "a.yaml:4:1: port: duplicate key (first at line 3)");
  EXPECT_EQ(parse_error(with("address: 10.0.0.2\n")), "a.yaml:3:1: address: duplicate key (first at line 1)");
}

TEST(AttachConfigErrors, WrongTypes) {
  EXPECT_EQ(parse_error(with("port: http\n")), "a.yaml:3:7: port: expected an integer, got 'http'");
  EXPECT_EQ(parse_error(with("nsid: [1, 2]\n")), "a.yaml:3:7: nsid: expected an integer, got a list");
  EXPECT_EQ(parse_error(with("queue_size: 1.5\n")), "a.yaml:3:13: queue_size: expected an integer, got '1.5'");
  EXPECT_EQ(parse_error(with("hostnqn: {a: b}\n")), "a.yaml:3:10: hostnqn: expected an NQN, got a mapping");
  EXPECT_EQ(parse_error(with("mode:\n")), "a.yaml:3:1: mode: missing value (expected userspace or kernel)");
  EXPECT_EQ(parse_error(with("keep_alive_tmo: ~\n")), "a.yaml:3:1: keep_alive_tmo: missing value (expected an integer)");
}

TEST(AttachConfigErrors, OutOfRange) {
  EXPECT_EQ(parse_error(with("port: 0\n")), "a.yaml:3:7: port: 0 is out of range (expected 1..65535)");
  EXPECT_EQ(parse_error(with("port: 65536\n")), "a.yaml:3:7: port: 65536 is out of range (expected 1..65535)");
  EXPECT_EQ(parse_error(with("nsid: 0\n")), "a.yaml:3:7: nsid: 0 is out of range (expected 1..4294967294)");
  EXPECT_EQ(parse_error(with("nsid: 0xFFFFFFFF\n")),
            "a.yaml:3:7: nsid: 0xFFFFFFFF is out of range (expected 1..4294967294)");
  EXPECT_EQ(parse_error(with("queue_size: 1025\n")), "a.yaml:3:13: queue_size: 1025 is out of range (expected 2..1024)");
  EXPECT_EQ(parse_error(with("nr_io_queues: 5000\n")),
            "a.yaml:3:15: nr_io_queues: 5000 is out of range (expected 0..4096)");
  EXPECT_EQ(parse_error(with("nr_io_queues: -1\n")), "a.yaml:3:15: nr_io_queues: must not be negative (got '-1')");
  EXPECT_EQ(parse_error(with("ctrl_loss_tmo: -2\n")),
            "a.yaml:3:16: ctrl_loss_tmo: -2 is out of range (expected -1..2147483647)");
  EXPECT_EQ(parse_error(with("reconnect_delay: 0\n")),
            "a.yaml:3:18: reconnect_delay: 0 is out of range (expected 1..3600)");
  EXPECT_EQ(parse_error(with("keep_alive_tmo: 99999999999999999999999\n")),
            "a.yaml:3:17: keep_alive_tmo: 99999999999999999999999 is out of range (expected 0..4294967)");
}

TEST(AttachConfigErrors, InvalidValues) {
  EXPECT_EQ(parse_error(with("transport: fc\n")), "a.yaml:3:12: transport: unknown transport 'fc' (expected tcp or rdma)");
  EXPECT_EQ(parse_error(with("mode: ublk\n")),
            "a.yaml:3:7: mode: unknown mode 'ublk' (expected userspace or kernel)");
  EXPECT_EQ(parse_error(with("hostid: 1234\n")),
            "a.yaml:3:9: hostid: invalid host id '1234' (expected a UUID like 3fa85f64-5717-4562-b3fc-2c963f66afa6)");
  EXPECT_EQ(parse_error(with("hostnqn: host1\n")),
            "a.yaml:3:10: hostnqn: invalid NQN 'host1': NQN must start with 'nqn.' (at character 1)");
  EXPECT_EQ(parse_error(R"(
address: 10.0.0.1
nqn: nqn.2024-11.io.rdmablk vol1
)"),
            "a.yaml:2:6: nqn: invalid NQN 'nqn.2024-11.io.rdmablk vol1': NQN domain has an invalid character (at "
            "character 23)");
  EXPECT_EQ(parse_error(R"(
address: 10.0.0.1
nqn: nqn.2014-08.org.nvmexpress.discovery
)"),
            "a.yaml:2:6: nqn: the discovery NQN has no namespaces to attach");
}

TEST(AttachConfigErrors, BadAddresses) {
  auto error_for = [](std::string_view address) {
    return parse_error("nqn: nqn.2024-11.io.rdmablk:vol1\naddress: " + std::string(address) + "\n");
  };
  EXPECT_EQ(error_for("192.168.1.300"), "a.yaml:2:10: address: '192.168.1.300' is not a valid IPv4 address");
  EXPECT_EQ(error_for("\"fe80::1::2\""), "a.yaml:2:10: address: 'fe80::1::2' is not a valid IPv6 address");
  EXPECT_EQ(error_for("bad_host"),
            "a.yaml:2:10: address: 'bad_host' is not a valid host name (expected an IPv4 or IPv6 address, or a host "
            "name)");
  EXPECT_EQ(error_for("-x.example"),
            "a.yaml:2:10: address: '-x.example' is not a valid host name (expected an IPv4 or IPv6 address, or a "
            "host name)");
  EXPECT_EQ(error_for("\"\""), "a.yaml:2:10: address: must not be empty");
}

// --- several paths (userspace multipath) -----------------------------------------------------------

TEST(AttachConfig, OneAddressIsOnePath) {
  AttachConfig c = parse_ok(kRequired);
  ASSERT_EQ(c.paths.size(), 1u);
  EXPECT_TRUE(same_path(c.paths[0], c.address));
}

TEST(AttachConfig, PathsListWithDefaultsFromTheTop) {
  AttachConfig c = parse_ok(R"(
nqn: nqn.2024-11.io.rdmablk:vol1
port: 4430
transport: rdma
paths:
  - address: 10.0.0.1
  - address: "[fe80::2]"
    port: 4421
  - {address: target-b.example.org, transport: tcp}
)");
  ASSERT_EQ(c.paths.size(), 3u);
  EXPECT_EQ(c.paths[0].type, TransportType::rdma);
  EXPECT_EQ(c.paths[0].traddr, "10.0.0.1");
  EXPECT_EQ(c.paths[0].trsvcid, 4430);  // the top-level port is the default
  EXPECT_EQ(c.paths[1].traddr, "fe80::2");
  EXPECT_EQ(c.paths[1].trsvcid, 4421);
  EXPECT_EQ(c.paths[2].type, TransportType::tcp);
  EXPECT_EQ(c.paths[2].traddr, "target-b.example.org");
  EXPECT_EQ(c.paths[2].trsvcid, 4430);
  EXPECT_TRUE(same_path(c.address, c.paths[0]));  // `address` is the first path
}

TEST(AttachConfigErrors, Paths) {
  constexpr std::string_view nqn = "nqn: nqn.2024-11.io.rdmablk:vol1\n";
  auto error_for = [&](std::string_view rest) { return parse_error(std::string(nqn) + std::string(rest)); };
  EXPECT_EQ(error_for("address: 10.0.0.1\npaths:\n  - address: 10.0.0.2\n"),
            "a.yaml:3:1: paths: give address (one path) or paths (several), not both");
  EXPECT_EQ(error_for("paths: []\n"), "a.yaml:2:8: paths: empty list (at least one path: - address: ...)");
  EXPECT_EQ(error_for("paths:\n"), "a.yaml:2:1: paths: missing value (expected a list of paths: - address: ...)");
  EXPECT_EQ(error_for("paths: 10.0.0.1\n"), "a.yaml:2:8: paths: expected a list of paths (- address: ...), got '10.0.0.1'");
  EXPECT_EQ(error_for("paths:\n  - 10.0.0.1\n"), "a.yaml:3:5: paths[0]: expected a mapping (address, port, transport)");
  EXPECT_EQ(error_for("paths:\n  - port: 4420\n"),
            "a.yaml:3:5: paths[0].address: missing (required: the target's IPv4 or IPv6 address, or host name)");
  EXPECT_EQ(error_for("paths:\n  - address: 10.0.0.1\n    prot: 4421\n"),
            "a.yaml:4:5: paths[0].prot: unknown key (did you mean 'port'?)");
  EXPECT_EQ(error_for("paths:\n  - address: 10.0.0.300\n"),
            "a.yaml:3:14: paths[0].address: '10.0.0.300' is not a valid IPv4 address");
  EXPECT_EQ(error_for("paths:\n  - address: 10.0.0.1\n    port: 0\n"),
            "a.yaml:4:11: paths[0].port: 0 is out of range (expected 1..65535)");
  EXPECT_EQ(error_for("paths:\n  - address: 10.0.0.1\n    transport: fc\n"),
            "a.yaml:4:16: paths[0].transport: unknown transport 'fc' (expected tcp or rdma)");
  EXPECT_EQ(error_for("paths:\n  - address: 10.0.0.1\n  - address: 10.0.0.2\n  - {address: 10.0.0.1, port: 4420}\n"),
            "a.yaml:5:5: paths[2]: the same path as paths[0]");
  EXPECT_EQ(error_for("mode: kernel\npaths:\n  - address: 10.0.0.1\n  - address: 10.0.0.2\n"),
            "a.yaml:3:1: paths: mode kernel takes one address (the kernel's native multipath joins controllers "
            "connected one by one)");
}

TEST(AttachPathValue, AddressPortForms) {
  auto ok = [](std::string_view v) {
    auto a = parse_path_value(v, TransportType::tcp, 4500);
    EXPECT_TRUE(a) << v << ": " << a.error().message;
    return a ? *a : rdmablk::transport::TransportAddress{};
  };
  auto a = ok("10.0.0.1");
  EXPECT_EQ(a.traddr, "10.0.0.1");
  EXPECT_EQ(a.trsvcid, 4500);  // the default (-s)
  EXPECT_EQ(a.type, TransportType::tcp);
  a = ok("10.0.0.1:4421");
  EXPECT_EQ(a.traddr, "10.0.0.1");
  EXPECT_EQ(a.trsvcid, 4421);
  a = ok("[fe80::1]:4422");
  EXPECT_EQ(a.traddr, "fe80::1");
  EXPECT_EQ(a.trsvcid, 4422);
  a = ok("[::1]");
  EXPECT_EQ(a.traddr, "::1");
  EXPECT_EQ(a.trsvcid, 4500);
  a = ok("fe80::1");  // two colons: a bare IPv6 address, no port
  EXPECT_EQ(a.traddr, "fe80::1");
  EXPECT_EQ(a.trsvcid, 4500);
  a = ok("target-a.example.org:65535");
  EXPECT_EQ(a.traddr, "target-a.example.org");
  EXPECT_EQ(a.trsvcid, 65535);
  EXPECT_EQ(parse_path_value("10.0.0.1", TransportType::rdma, 4420)->type, TransportType::rdma);
}

TEST(AttachPathValue, Errors) {
  auto error = [](std::string_view v) {
    auto a = parse_path_value(v, TransportType::tcp, 4420);
    EXPECT_FALSE(a) << v;
    return a ? std::string() : a.error().message;
  };
  const std::string forms = " (expected ADDR, ADDR:PORT or [IPv6]:PORT)";
  EXPECT_EQ(error(""), "-a '': empty" + forms);
  EXPECT_EQ(error("10.0.0.1:"), "-a '10.0.0.1:': empty port" + forms);
  EXPECT_EQ(error(":4420"), "-a ':4420': empty address" + forms);
  EXPECT_EQ(error("10.0.0.1:http"), "-a '10.0.0.1:http': port 'http' is not a number in 1..65535" + forms);
  EXPECT_EQ(error("10.0.0.1:65536"), "-a '10.0.0.1:65536': port '65536' is not a number in 1..65535" + forms);
  EXPECT_EQ(error("10.0.0.1:0"), "-a '10.0.0.1:0': port '0' is not a number in 1..65535" + forms);
  EXPECT_EQ(error("[fe80::1"), "-a '[fe80::1': no ']' after the IPv6 address" + forms);
  EXPECT_EQ(error("[fe80::1]4420"), "-a '[fe80::1]4420': expected ':PORT' after ']'" + forms);
  EXPECT_EQ(error("10.0.0.300:4420"), "-a '10.0.0.300:4420': '10.0.0.300' is not a valid IPv4 address" + forms);
  EXPECT_EQ(error("[fe80::1::2]:1"), "-a '[fe80::1::2]:1': 'fe80::1::2' is not a valid IPv6 address" + forms);
}

TEST(AttachConfigErrors, MultiLineValuesStayOnOneLine) {
  std::string e = parse_error(with("mode: |\n  user\n  space\n"));
  EXPECT_EQ(e, "a.yaml:3:7: mode: unknown mode 'user\\nspace\\n' (expected userspace or kernel)");
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

}  // namespace

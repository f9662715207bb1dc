#include "target/config/config.h"
#include "target/config/config_document.h"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "target/config/logging.h"
#include "target/config/parser.h"

namespace rdmablk::target::config_impl {

TargetConfig Parser::parse() {
  YAML::Node root = load_mapping("the configuration is empty (at least `listeners` is required)");
  Mapping top(*this, root, "", location_of(root.Mark()),
              {"listeners", "subsystems", "reactors", "busy_poll_us", "log_level", "limits", "control", "metrics",
               "tls_psk_derivation", "state_dir", "group"});

  TargetConfig config;
  config.source = file();

  const Field& listeners = top.require("listeners", "a list of listeners");
  auto listener_nodes = sequence(listeners);
  if (listener_nodes.empty()) fail(listeners.value_at, listeners.path, "at least one listener is required");
  for (std::size_t i = 0; i < listener_nodes.size(); ++i) {
    config.listeners.push_back(parse_listener(listener_nodes[i], listeners.path + "[" + std::to_string(i) + "]"));
  }

  parse_subsystems(top, config);

  check_listeners(config, listeners);
  check_namespaces_across_subsystems(config);
  warn_unused_psks(config);

  if (const Field* f = top.find("reactors")) parse_reactors(*f, config);
  if (const Field* f = top.find("busy_poll_us")) {
    config.busy_poll_us = static_cast<unsigned>(integer(*f, 0, kMaxBusyPollUs));
  }
  if (const Field* f = top.find("log_level")) {
    auto level = parse_log_level(scalar(*f, "a log level"));
    if (!level) fail(f->value_at, f->path, level.error().message);
    config.log_level = *level;
  }
  if (const Field* f = top.find("limits")) {
    config.limits = parse_limits(*f);
    // The Linux host reads the whole ANA log in one command sized for ANAGRPMAX groups and MNAN NSIDs and
    // turns ANA (multipath) off when that exceeds MDTS.
    std::size_t most = 0;
    for (const auto& sub : config.subsystems) most = std::max(most, sub.namespaces.size());
    const uint64_t ana_log = protocol::ana_log_max_size(kAnaGroupMax, static_cast<uint32_t>(std::max<std::size_t>(1024, most)));
    if (config.limits.max_io_size < ana_log) {
      warn(f->value_at, f->path + ".max_io_size",
           format_size(config.limits.max_io_size) + " is below the ANA log page's " + std::to_string(ana_log) +
               " bytes: Linux hosts will turn ANA multipath off");
    }
  }
  if (const Field* f = top.find("tls_psk_derivation")) {
    config.tls_psk_derivation = one_of<security::PskDerivation>(
        *f, "PSK derivation",
        {{"standard", security::PskDerivation::standard}, {"libnvme_compat", security::PskDerivation::libnvme_compat}});
    config.tls_psk_derivation_at = f->value_at;
  }
  if (const Field* f = top.find("control")) config.control = parse_control(*f);
  if (const Field* f = top.find("metrics")) config.metrics = parse_metrics(*f);
  check_metrics(config);
  if (const Field* f = top.find("state_dir")) {
    std::string dir = scalar(*f, "the absolute path of the directory for reservation state");
    if (dir.empty() || dir.front() != '/') {
      fail(f->value_at, f->path,
           in_quotes(dir) + " is not an absolute path (reservation state must not move with the working directory)");
    }
    config.state_dir = std::move(dir);
    config.state_dir_at = f->value_at;
  }

  if (const Field* f = top.find("group")) {
    config.group = parse_group(*f);
    check_group(config);
  }

  config.warnings = take_warnings();
  return config;
}

}  // namespace rdmablk::target::config_impl

namespace rdmablk::target {

using namespace config_impl;

// --- public API ------------------------------------------------------------------------------------

Result<TargetConfig> parse_config(std::string_view yaml_text, const std::string& name_for_messages) {
  Parser parser(name_for_messages, yaml_text);
  return config::catch_failures<Result<TargetConfig>>(
      name_for_messages, [&] { return parser.parse(); }, [](const std::string& m) { return make_error(m, EINVAL); });
}

Result<ConfigDocument> read_config_document(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int e = errno;
    return make_error(path + ": cannot read the configuration: " + errno_text(e), e);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    int e = errno;
    return make_error(path + ": cannot read the configuration: " + errno_text(e), e);
  }
  ConfigDocument doc{path, text.str(), YAML::Node()};
  try {
    doc.root = YAML::Load(doc.text);
  } catch (const YAML::Exception& e) {
    return make_error(format_message(path, e.mark.line < 0 ? SourceLocation{1, 1} : location_of(e.mark), "",
                                     "invalid YAML: " + e.msg),
                      EINVAL);
  }
  return doc;
}

Result<TargetConfig> load_config(const std::string& path) {
  auto doc = read_config_document(path);
  if (!doc) return tl::unexpected(doc.error());
  return config_from_document(*doc);
}

Result<TargetConfig> config_from_document(const ConfigDocument& doc, const std::string& name_for_messages) {
  const std::string& shown_as = name_for_messages.empty() ? doc.path : name_for_messages;
  Parser parser(shown_as, doc.text);
  parser.use_document(doc.root);
  auto config = config::catch_failures<Result<TargetConfig>>(
      shown_as, [&] { return parser.parse(); }, [](const std::string& m) { return make_error(m, EINVAL); });
  if (!config) return config;
  const std::string& path = doc.path;
  config->source = path;  // the file, also when messages named something else
  std::error_code ec;
  std::filesystem::path base = std::filesystem::absolute(path, ec).parent_path();
  for (std::string* p : {&config->group.ceph_conf, &config->group.keyring}) {
    if (config->group.enabled && !p->empty() && std::filesystem::path(*p).is_relative())
      *p = (base / *p).lexically_normal().string();
  }
  for (std::size_t s = 0; s < config->subsystems.size(); ++s) {
    auto& sub = config->subsystems[s];
    for (auto& ns : sub.namespaces) {
      if (ns.backend == BackendKind::file && std::filesystem::path(ns.path).is_relative()) {
        ns.path = (base / ns.path).lexically_normal().string();
      }
      if (ns.backend == BackendKind::rbd) {
        for (std::string* p : {&ns.ceph_conf, &ns.keyring}) {
          if (!p->empty() && std::filesystem::path(*p).is_relative()) *p = (base / *p).lexically_normal().string();
        }
      }
    }
    for (std::size_t h = 0; h < sub.host_configs.size(); ++h) {
      HostConfig& host = sub.host_configs[h];
      const std::string field = "subsystems[" + std::to_string(s) + "].hosts[" + std::to_string(h) + "].";
      for (auto [secret, name] : {std::pair{&host.dhchap_key, "dhchap_key_file"},
                                  std::pair{&host.dhchap_ctrl_key, "dhchap_ctrl_key_file"}}) {
        if (secret->file.empty()) continue;
        if (std::filesystem::path(secret->file).is_relative()) {
          secret->file = (base / secret->file).lexically_normal().string();
        }
        auto key = read_key_file(secret->file);
        if (!key) {
          return make_error(format_message(config->source, secret->at, field + name, key.error().message),
                            key.error().errno_value);
        }
        secret->key = std::make_shared<const security::dhchap::DhchapKey>(std::move(*key));
      }
      if (!host.tls_psk.file.empty()) {
        if (std::filesystem::path(host.tls_psk.file).is_relative()) {
          host.tls_psk.file = (base / host.tls_psk.file).lexically_normal().string();
        }
        auto key = read_psk_file(host.tls_psk.file);
        if (!key) {
          return make_error(format_message(config->source, host.tls_psk.at, field + "tls_psk_file", key.error().message),
                            key.error().errno_value);
        }
        host.tls_psk.key = std::make_shared<const security::ConfiguredPsk>(std::move(*key));
      }
    }
  }
  return config;
}

}  // namespace rdmablk::target

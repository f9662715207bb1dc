// The configuration file as a YAML document, between reading and parsing: what the live management API
// (target/manage/) edits before the parser turns it into a TargetConfig. load_config() is
// read_config_document() + config_from_document() on the unedited document. Its own header so that
// config.h's users need not include yaml-cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "protocol/result.h"
#include "target/config/config.h"

namespace rdmablk::target {

struct ConfigDocument {
  std::string path;  // the file; relative paths in it are relative to its directory
  std::string text;  // as read: nodes parsed from it keep marks into it (error positions, `null` words)
  YAML::Node root;   // the parsed text, or an edited copy (see clone())

  // A deep copy whose nodes still point into the same text (edits to it leave this one as it is).
  ConfigDocument clone() const { return {path, text, YAML::Clone(root)}; }
};

// Reads and parses the file; a YAML syntax error is "FILE:LINE:COL: invalid YAML: ...".
Result<ConfigDocument> read_config_document(const std::string& path);

// The configuration a document gives, as load_config() finishes it (paths made absolute, key files read).
// `name_for_messages` is the FILE part of error messages (default: the document's path). Nodes added in
// memory have no position: their errors read "NAME: FIELD: problem".
Result<TargetConfig> config_from_document(const ConfigDocument& doc, const std::string& name_for_messages = {});

}  // namespace rdmablk::target

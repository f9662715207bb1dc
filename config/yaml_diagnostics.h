// The diagnostics shared by rdmablk's YAML configuration files: the target daemon's (target/config/config.cpp)
// and an attached volume's (initiator/cli/attach_config.cpp). Every error in either is one line
//
//     FILE:LINE:COL: FIELD: problem
//
// and both files follow the same rules for it: unknown keys (with the closest known key suggested),
// duplicate keys, missing keys and values, wrong node kinds, integers out of range. Those rules live
// here once, so that the two files cannot drift apart.
//
// Why a folder and library of its own (config/, rdmablk_config): the layers are protocol <- transport
// <- {target, initiator}, and initiator must not depend on target, so neither of the two parsers can
// host the shared code. This library depends on yaml-cpp and fmt only, nothing in the tree, so both
// may link it. Why "yaml_diagnostics": what it holds is how a YAML file is read and how its mistakes are
// reported, not any one file's keys or model; those stay with their parsers.
//
// Use: a parser derives from Reader (the file name, its text, and the few points where the two files'
// dialects differ), reads each mapping with Mapping (its keys checked once), and turns the fields into
// values with Reader's scalar(), string_value(), integer() and one_of(). Reader::fail() throws
// ParseFailure, which the parser's entry point catches and turns into its error value.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/source_location.h"

namespace rdmablk::config {

// --- message pieces --------------------------------------------------------------------------------

// yaml-cpp's 0-based mark as 1-based. Its null mark (a node built in memory, such as one the management API
// added to the document) is line 0: no position.
SourceLocation location_of(const YAML::Mark& m);

// Appends `s` with newlines, tabs and other control characters escaped (\n, \t, \xNN): messages are one
// line even when a value from the file spans several.
void append_escaped(std::string& out, std::string_view s);

// "FILE:LINE:COL: FIELD: problem" (no "FIELD: " when `field` is empty, no ":LINE:COL" when `at` is line 0);
// field and problem escaped.
std::string format_message(std::string_view file, SourceLocation at, std::string_view field,
                           std::string_view problem);

// A value from the file as shown in a message: 'quoted', cut to 80 characters plus "..." when longer.
std::string in_quotes(std::string_view s);

// "list", "mapping", "scalar", "null", or "nothing" (undefined) for "expected X, got a ..." messages.
const char* node_kind(const YAML::Node& n);

// ASCII lower case.
std::string lower(std::string_view s);

// Levenshtein distance (insertions, deletions, substitutions).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The problem for an unknown key: "unknown key (did you mean 'k'?)" when a known key is within
// max(2, size/3) edits of `name`, else "unknown key (expected one of: a, b, ...)" in `known`'s order.
std::string unknown_key_problem(std::string_view name, std::span<const std::string_view> known);

// --- reading ---------------------------------------------------------------------------------------

// Thrown by Reader::fail(): the whole one-line message. The parser's entry point catches it.
struct ParseFailure {
  std::string message;
};

// A parser's entry point: returns parse(), or on_error(message) for the ParseFailure it threw or for a
// yaml-cpp exception that escaped it (still one line naming the file). R is the entry point's result
// type (e.g. Result<TargetConfig>), built from either.
template <typename R, typename Parse, typename OnError>
R catch_failures(std::string_view file, Parse&& parse, OnError&& on_error) {
  try {
    return parse();
  } catch (const ParseFailure& failure) {
    return on_error(failure.message);
  } catch (const YAML::Exception& e) {
    return on_error(format_message(file, location_of(e.mark), "", e.msg));
  }
}

// One `key: value` of a mapping (or an item of a list, with an empty name).
struct Field {
  std::string path;  // as shown in messages: "subsystems[0].nqn", or just "nqn" at the top level
  std::string name;  // the key: "nqn"
  YAML::Node value;
  SourceLocation key_at;
  SourceLocation value_at;  // the key's location when the value is missing (yaml-cpp marks the next line)
};

// Where the two configuration files' rules differ; the defaults are the attach file's.
struct Dialect {
  // A plain `null` (or Null, NULL) written as a value is the word "null" rather than no value (the
  // target's `backend: null`); `key:` and `key: ~` stay missing values.
  bool null_is_a_word = false;
  // Unknown keys are lower-cased before looking for the closest known key (`Port` -> 'port').
  bool suggest_ignoring_case = false;
};

class Reader {
 public:
  // `file` is the FILE part of messages; `text` the YAML (kept by reference: it must outlive the Reader).
  Reader(std::string file, std::string_view text, Dialect dialect = {});

  const std::string& file() const { return file_; }
  const Dialect& dialect() const { return dialect_; }

  std::string message(SourceLocation at, std::string_view field, std::string_view problem) const {
    return format_message(file_, at, field, problem);
  }
  [[noreturn]] void fail(SourceLocation at, std::string_view field, std::string_view problem) const;

  // Parses the text; it must be a mapping. YAML syntax errors fail with "invalid YAML: ...", an empty
  // document with `empty_problem` at 1:1, any other top level with "expected a mapping of settings ...".
  YAML::Node load_mapping(std::string_view empty_problem) const;
  // Parse this document instead of the text (load_mapping() returns it after the same checks): a document
  // loaded from the text and then edited in memory. Nodes from the text keep their marks into it.
  void use_document(const YAML::Node& root) { document_ = root; }

  // Null in the file as the word null (only under Dialect::null_is_a_word), see Dialect.
  bool written_null_word(const YAML::Node& n) const;
  // No value: undefined, or null that is not a written null word.
  bool missing(const YAML::Node& n) const;

  // The scalar text; fails when the value is missing ("missing value (expected X)", at the key) or is
  // not a scalar ("expected X, got a list"). Under null_is_a_word a written `null` is "null".
  std::string scalar(const Field& f, std::string_view expected) const;
  // A scalar that must not be empty.
  std::string string_value(const Field& f, std::string_view expected = "a string") const;

  // Decimal or 0x hexadecimal within [min, max]; a leading '-' fails as negative when min >= 0.
  // T is int64_t or uint64_t.
  template <typename T>
  T integer(const Field& f, T min, T max) const;

  // One of `choices`' names; otherwise "unknown WHAT 'x' (expected a, b or c)".
  template <typename T>
  T one_of(const Field& f, std::string_view what, std::initializer_list<std::pair<std::string_view, T>> choices) const {
    std::vector<std::string_view> names;
    for (const auto& c : choices) names.push_back(c.first);
    return std::next(choices.begin(), static_cast<std::ptrdiff_t>(choice(f, what, names)))->second;
  }
  // The index of the name in `names` the value is; fails as one_of() does.
  std::size_t choice(const Field& f, std::string_view what, std::span<const std::string_view> names) const;

 private:
  std::string file_;
  std::string_view text_;
  Dialect dialect_;
  std::optional<YAML::Node> document_;
};

extern template int64_t Reader::integer<int64_t>(const Field&, int64_t, int64_t) const;
extern template uint64_t Reader::integer<uint64_t>(const Field&, uint64_t, uint64_t) const;

// A mapping whose keys were checked against the known ones: each a plain name (a scalar), known (else
// the closest one is suggested), not repeated. A null or undefined node is an empty mapping (all
// defaults); any other non-mapping fails.
class Mapping {
 public:
  // `path` prefixes the fields' paths ("" at the top level); `at` is where "missing" errors point.
  Mapping(const Reader& reader, const YAML::Node& node, std::string path, SourceLocation at,
          std::span<const std::string_view> known);
  Mapping(const Reader& reader, const YAML::Node& node, std::string path, SourceLocation at,
          std::initializer_list<std::string_view> known)
      : Mapping(reader, node, std::move(path), at, std::span<const std::string_view>(known.begin(), known.size())) {}

  const Field* find(std::string_view name) const;
  // The field, or fails at the mapping with "missing (required: WHAT)".
  const Field& require(std::string_view name, std::string_view what) const;

  SourceLocation at() const { return at_; }
  const std::string& path() const { return path_; }
  const std::vector<Field>& fields() const { return fields_; }

 private:
  const Reader& reader_;
  std::string path_;
  SourceLocation at_;
  std::vector<Field> fields_;
};

}  // namespace rdmablk::config

#include "config/yaml_diagnostics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <system_error>
#include <type_traits>

namespace rdmablk::config {

SourceLocation location_of(const YAML::Mark& m) {
  if (m.line < 0 || m.column < 0) return {0, 0};  // yaml-cpp's null mark: a node built in memory
  return {m.line + 1, m.column + 1};
}

void append_escaped(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
}

std::string format_message(std::string_view file, SourceLocation at, std::string_view field,
                           std::string_view problem) {
  std::string out = at.line == 0 ? fmt::format("{}: ", file) : fmt::format("{}:{}:{}: ", file, at.line, at.column);
  if (!field.empty()) {
    append_escaped(out, field);
    out += ": ";
  }
  append_escaped(out, problem);
  return out;
}

std::string in_quotes(std::string_view s) {
  constexpr std::size_t kMax = 80;
  if (s.size() > kMax) return "'" + std::string(s.substr(0, kMax)) + "...'";
  return "'" + std::string(s) + "'";
}

const char* node_kind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence:
      return "list";
    case YAML::NodeType::Map:
      return "mapping";
    case YAML::NodeType::Scalar:
      return "scalar";
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0u : 1u)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string unknown_key_problem(std::string_view name, std::span<const std::string_view> known) {
  std::string_view best;
  std::size_t best_distance = std::string::npos;
  for (std::string_view k : known) {
    std::size_t d = edit_distance(name, k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  if (best_distance <= std::max<std::size_t>(2, name.size() / 3)) {
    return "unknown key (did you mean " + in_quotes(best) + "?)";
  }
  std::string list;
  for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
  return "unknown key (expected one of: " + list + ")";
}

// --- Reader ----------------------------------------------------------------------------------------

Reader::Reader(std::string file, std::string_view text, Dialect dialect)
    : file_(std::move(file)), text_(text), dialect_(dialect) {}

void Reader::fail(SourceLocation at, std::string_view field, std::string_view problem) const {
  throw ParseFailure{message(at, field, problem)};
}

YAML::Node Reader::load_mapping(std::string_view empty_problem) const {
  YAML::Node root;
  if (document_) {
    root = *document_;
  } else {
    try {
      root = YAML::Load(std::string(text_));
    } catch (const YAML::Exception& e) {
      fail(e.mark.line < 0 ? SourceLocation{1, 1} : location_of(e.mark), "", "invalid YAML: " + e.msg);
    }
  }
  if (root.IsNull()) fail({1, 1}, "", empty_problem);
  if (!root.IsMap()) {
    fail(location_of(root.Mark()), "",
         std::string("expected a mapping of settings at the top level, got a ") + node_kind(root));
  }
  return root;
}

// yaml-cpp turns a plain `null` (and `~`) into a null node. Looks at the source text under the node's
// mark to tell `key: null` from `key:` with no value.
bool Reader::written_null_word(const YAML::Node& n) const {
  if (!dialect_.null_is_a_word) return false;
  const YAML::Mark m = n.Mark();
  if (!n.IsNull() || m.pos < 0 || static_cast<std::size_t>(m.pos) >= text_.size()) return false;
  std::string_view at = text_.substr(static_cast<std::size_t>(m.pos));
  for (std::string_view word : {"null", "Null", "NULL"}) {
    if (at.substr(0, 4) != word) continue;
    return at.size() == 4 || std::string_view(" \t\r\n,]}#").find(at[4]) != std::string_view::npos;
  }
  return false;
}

bool Reader::missing(const YAML::Node& n) const { return !n.IsDefined() || (n.IsNull() && !written_null_word(n)); }

std::string Reader::scalar(const Field& f, std::string_view expected) const {
  if (written_null_word(f.value)) return "null";
  if (missing(f.value)) fail(f.key_at, f.path, "missing value (expected " + std::string(expected) + ")");
  if (!f.value.IsScalar()) {
    fail(f.value_at, f.path, "expected " + std::string(expected) + ", got a " + node_kind(f.value));
  }
  return f.value.Scalar();
}

std::string Reader::string_value(const Field& f, std::string_view expected) const {
  std::string s = scalar(f, expected);
  if (s.empty()) fail(f.value_at, f.path, "must not be empty");
  return s;
}

template <typename T>
T Reader::integer(const Field& f, T min, T max) const {
  static_assert(std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>);
  std::string text = scalar(f, "an integer");
  std::string_view digits = text;
  bool min_is_non_negative = true;
  if constexpr (std::is_signed_v<T>) min_is_non_negative = min >= 0;
  if (!digits.empty() && digits.front() == '-' && min_is_non_negative) {
    fail(f.value_at, f.path, "must not be negative (got " + in_quotes(text) + ")");
  }
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
    base = 16;
  }
  T value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
  if (digits.empty() || end != digits.data() + digits.size() || ec == std::errc::invalid_argument) {
    fail(f.value_at, f.path, "expected an integer, got " + in_quotes(text));
  }
  if (ec == std::errc::result_out_of_range || value < min || value > max) {
    fail(f.value_at, f.path,
         (text.size() > 24 ? in_quotes(text) : text) + " is out of range (expected " + std::to_string(min) + ".." +
             std::to_string(max) + ")");
  }
  return value;
}

template int64_t Reader::integer<int64_t>(const Field&, int64_t, int64_t) const;
template uint64_t Reader::integer<uint64_t>(const Field&, uint64_t, uint64_t) const;

std::size_t Reader::choice(const Field& f, std::string_view what, std::span<const std::string_view> names) const {
  std::string expected;  // "a, b or c"
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) expected += i + 1 == names.size() ? " or " : ", ";
    expected += names[i];
  }
  std::string value = scalar(f, expected);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (value == names[i]) return i;
  }
  fail(f.value_at, f.path, "unknown " + std::string(what) + " " + in_quotes(value) + " (expected " + expected + ")");
}

// --- Mapping ---------------------------------------------------------------------------------------

Mapping::Mapping(const Reader& reader, const YAML::Node& node, std::string path, SourceLocation at,
                 std::span<const std::string_view> known)
    : reader_(reader), path_(std::move(path)), at_(at) {
  if (node.IsNull() || !node.IsDefined()) return;  // an empty section: all defaults
  if (!node.IsMap()) {
    reader.fail(at, path_, std::string("expected a mapping (key: value), got a ") + node_kind(node));
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;  // copies: the iterator hands out a temporary pair
    const YAML::Node value = it->second;
    SourceLocation key_at = location_of(key.Mark());
    if (!key.IsScalar()) reader.fail(key_at, path_, "keys must be plain names");
    std::string name = key.Scalar();
    std::string shown_name = name.size() > 40 ? name.substr(0, 40) + "..." : name;
    std::string field = path_.empty() ? shown_name : path_ + "." + shown_name;
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      reader.fail(key_at, field,
                  unknown_key_problem(reader.dialect().suggest_ignoring_case ? lower(name) : name, known));
    }
    if (const Field* seen = find(name)) {
      reader.fail(key_at, field, "duplicate key (first at line " + std::to_string(seen->key_at.line) + ")");
    }
    SourceLocation value_at = reader.missing(value) ? key_at : location_of(value.Mark());
    fields_.push_back(Field{field, name, value, key_at, value_at});
  }
}

const Field* Mapping::find(std::string_view name) const {
  for (const Field& f : fields_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const Field& Mapping::require(std::string_view name, std::string_view what) const {
  if (const Field* f = find(name)) return *f;
  std::string field = path_.empty() ? std::string(name) : path_ + "." + std::string(name);
  reader_.fail(at_, field, "missing (required: " + std::string(what) + ")");
}

}  // namespace rdmablk::config

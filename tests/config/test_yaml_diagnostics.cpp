// The YAML configuration diagnostics shared by the target's and the initiator's config files.
#include "config/yaml_diagnostics.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace rdmablk::config {
namespace {

// --- message pieces --------------------------------------------------------------------------------

// The null mark is a node built in memory (the management API's edits): no position, and messages say so by
// leaving LINE:COL out.
TEST(YamlDiagnostics, LocationIsOneBasedAndTheNullMarkIsNoPosition) {
  YAML::Mark m;
  m.line = 3;
  m.column = 6;
  SourceLocation at = location_of(m);
  EXPECT_EQ(at.line, 4);
  EXPECT_EQ(at.column, 7);
  SourceLocation null_at = location_of(YAML::Mark::null_mark());
  EXPECT_EQ(null_at.line, 0);
  EXPECT_EQ(null_at.column, 0);
  EXPECT_EQ(format_message("request", null_at, "subsystems[0].nqn", "bad"), "request: subsystems[0].nqn: bad");
}

TEST(YamlDiagnostics, DefaultLocationIsNotFromAFile) {
  SourceLocation at;
  EXPECT_EQ(at.line, 0);
  EXPECT_EQ(at.column, 0);
}

TEST(YamlDiagnostics, EscapesControlCharactersOntoOneLine) {
  std::string out = "x";
  append_escaped(out, std::string_view("a\nb\tc\r\x01\x7f\xc3\xa9", 10));
  EXPECT_EQ(out, "xa\\nb\\tc\\x0d\\x01\\x7f\xc3\xa9");  // UTF-8 passes through
}

TEST(YamlDiagnostics, FormatsFileLineColumnFieldProblem) {
  EXPECT_EQ(format_message("t.yaml", {4, 11}, "queue_size", "4096 is out of range"),
            "t.yaml:4:11: queue_size: 4096 is out of range");
  EXPECT_EQ(format_message("t.yaml", {1, 1}, "", "invalid YAML: x"), "t.yaml:1:1: invalid YAML: x");
  EXPECT_EQ(format_message("t.yaml", {2, 3}, "a\nb", "bad\nvalue"), "t.yaml:2:3: a\\nb: bad\\nvalue");
}

TEST(YamlDiagnostics, QuotesAndShortensValues) {
  EXPECT_EQ(in_quotes("abc"), "'abc'");
  EXPECT_EQ(in_quotes(""), "''");
  std::string eighty(80, 'x');
  EXPECT_EQ(in_quotes(eighty), "'" + eighty + "'");
  EXPECT_EQ(in_quotes(eighty + "y"), "'" + eighty + "...'");
}

TEST(YamlDiagnostics, NamesNodeKinds) {
  EXPECT_STREQ(node_kind(YAML::Load("[1, 2]")), "list");
  EXPECT_STREQ(node_kind(YAML::Load("{a: 1}")), "mapping");
  EXPECT_STREQ(node_kind(YAML::Load("word")), "scalar");
  EXPECT_STREQ(node_kind(YAML::Load("~")), "null");
  EXPECT_STREQ(node_kind(YAML::Load("{a: 1}")["b"]), "nothing");
}

TEST(YamlDiagnostics, LowerCasesAscii) { EXPECT_EQ(lower("Port-ÉX"), "port-Éx"); }

TEST(YamlDiagnostics, EditDistance) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("port", "port"), 0u);
  EXPECT_EQ(edit_distance("prot", "port"), 2u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
}

constexpr std::array<std::string_view, 3> kKnown = {"address", "port", "nqn"};

TEST(YamlDiagnostics, SuggestsTheClosestKnownKey) {
  EXPECT_EQ(unknown_key_problem("adress", kKnown), "unknown key (did you mean 'address'?)");
  EXPECT_EQ(unknown_key_problem("prot", kKnown), "unknown key (did you mean 'port'?)");
  EXPECT_EQ(unknown_key_problem("nq", kKnown), "unknown key (did you mean 'nqn'?)");  // within 2 edits
}

TEST(YamlDiagnostics, ListsTheKnownKeysWhenNoneIsClose) {
  EXPECT_EQ(unknown_key_problem("something_else", kKnown), "unknown key (expected one of: address, port, nqn)");
  EXPECT_EQ(unknown_key_problem("NQN", kKnown), "unknown key (expected one of: address, port, nqn)");
}

// --- Reader and Mapping ----------------------------------------------------------------------------

// The message of the ParseFailure `f` throws, or nullopt when it does not throw.
template <typename F>
std::optional<std::string> failure(F&& f) {
  try {
    f();
  } catch (const ParseFailure& e) {
    return e.message;
  }
  return std::nullopt;
}

constexpr Dialect kTargetDialect{.null_is_a_word = true, .suggest_ignoring_case = true};

struct Doc {  // a loaded document and its top-level mapping
  Doc(std::string text, Dialect dialect = {}, std::span<const std::string_view> known = kKnown)
      : text_(std::move(text)),
        reader(std::string("f.yaml"), text_, dialect),
        root(reader.load_mapping("empty")),
        top(reader, root, "", location_of(root.Mark()), known) {}
  std::string text_;
  Reader reader;
  YAML::Node root;
  Mapping top;
};

TEST(YamlReader, LoadsTheTopLevelMapping) {
  auto load = [](std::string text) {
    return failure([&] { Reader("f.yaml", text).load_mapping("the configuration is empty"); });
  };
  EXPECT_EQ(load(""), "f.yaml:1:1: the configuration is empty");
  EXPECT_EQ(load("# only a comment\n"), "f.yaml:1:1: the configuration is empty");
  EXPECT_EQ(load("- a\n- b\n"), "f.yaml:1:1: expected a mapping of settings at the top level, got a list");
  EXPECT_EQ(load("word\n"), "f.yaml:1:1: expected a mapping of settings at the top level, got a scalar");
  auto invalid = load("a: [1, 2\n");
  ASSERT_TRUE(invalid);
  EXPECT_TRUE(invalid->starts_with("f.yaml:")) << *invalid;
  EXPECT_NE(invalid->find(": invalid YAML: "), std::string::npos) << *invalid;
  EXPECT_EQ(invalid->find('\n'), std::string::npos) << *invalid;
  EXPECT_EQ(load("a: 1\n"), std::nullopt);
}

TEST(YamlReader, MappingFindsAndRequiresKeys) {
  Doc d("address: 10.0.0.1\nport: 4420\n");
  ASSERT_NE(d.top.find("port"), nullptr);
  const Field& port = *d.top.find("port");
  EXPECT_EQ(port.path, "port");
  EXPECT_EQ(port.name, "port");
  EXPECT_EQ(port.key_at.line, 2);
  EXPECT_EQ(port.key_at.column, 1);
  EXPECT_EQ(port.value_at.line, 2);
  EXPECT_EQ(port.value_at.column, 7);
  EXPECT_EQ(d.top.find("nqn"), nullptr);
  EXPECT_EQ(d.top.fields().size(), 2u);
  EXPECT_EQ(failure([&] { d.top.require("nqn", "the subsystem's NQN"); }),
            "f.yaml:1:1: nqn: missing (required: the subsystem's NQN)");
}

TEST(YamlReader, MappingRejectsUnknownDuplicateAndNonScalarKeys) {
  EXPECT_EQ(failure([] { Doc d("address: a\nadress: b\n"); }),
            "f.yaml:2:1: adress: unknown key (did you mean 'address'?)");
  EXPECT_EQ(failure([] { Doc d("port: 1\nport: 2\n"); }), "f.yaml:2:1: port: duplicate key (first at line 1)");
  EXPECT_EQ(failure([] { Doc d("[a]: 1\n"); }), "f.yaml:1:1: keys must be plain names");
  std::string long_key(50, 'k');
  EXPECT_EQ(failure([&] { Doc d(long_key + ": 1\n"); }),
            "f.yaml:1:1: " + long_key.substr(0, 40) + "...: unknown key (expected one of: address, port, nqn)");
}

TEST(YamlReader, SuggestionsIgnoreCaseOnlyWhenTheDialectSaysSo) {
  EXPECT_EQ(failure([] { Doc d("NQN: x\n"); }), "f.yaml:1:1: NQN: unknown key (expected one of: address, port, nqn)");
  EXPECT_EQ(failure([] { Doc d("NQN: x\n", kTargetDialect); }), "f.yaml:1:1: NQN: unknown key (did you mean 'nqn'?)");
}

TEST(YamlReader, NestedMappingsPrefixTheirPath) {
  constexpr std::array<std::string_view, 1> kTop = {"limits"};
  Doc d("limits:\n  depth: 4\n  other: 1\n", {}, kTop);
  const Field& limits = d.top.require("limits", "limits");
  EXPECT_EQ(failure([&] { Mapping m(d.reader, limits.value, limits.path, limits.value_at, {"depth"}); }),
            "f.yaml:3:3: limits.other: unknown key (expected one of: depth)");
  Mapping m(d.reader, limits.value, limits.path, limits.value_at, {"depth", "other"});
  EXPECT_EQ(m.find("depth")->path, "limits.depth");
  EXPECT_EQ(failure([&] { m.require("width", "a width"); }), "f.yaml:2:3: limits.width: missing (required: a width)");

  Doc list("limits: [1]\n", {}, kTop);
  const Field& l = list.top.require("limits", "limits");
  EXPECT_EQ(failure([&] { Mapping bad(list.reader, l.value, l.path, l.value_at, {"depth"}); }),
            "f.yaml:1:9: limits: expected a mapping (key: value), got a list");
  Doc empty("limits:\n", {}, kTop);
  const Field& e = empty.top.require("limits", "limits");
  Mapping none(empty.reader, e.value, e.path, e.value_at, {"depth"});
  EXPECT_TRUE(none.fields().empty());
}

TEST(YamlReader, ScalarsAndMissingValues) {
  Doc d("address: ''\nport:\nnqn: [a]\n");
  EXPECT_EQ(failure([&] { d.reader.string_value(*d.top.find("address"), "an address"); }),
            "f.yaml:1:10: address: must not be empty");
  EXPECT_EQ(d.reader.scalar(*d.top.find("address"), "x"), "");
  EXPECT_EQ(failure([&] { d.reader.scalar(*d.top.find("port"), "an integer"); }),
            "f.yaml:2:1: port: missing value (expected an integer)");
  EXPECT_EQ(failure([&] { d.reader.string_value(*d.top.find("nqn")); }),
            "f.yaml:3:6: nqn: expected a string, got a list");
}

TEST(YamlReader, TheNullWordIsAValueOnlyInTheTargetDialect) {
  const std::string text = "address: null\nport: ~\nnqn: NULL # comment\n";
  Doc attach(text);
  EXPECT_FALSE(attach.reader.written_null_word(attach.top.find("address")->value));
  EXPECT_EQ(attach.top.find("address")->value_at.line, 1);
  EXPECT_EQ(attach.top.find("address")->value_at.column, 1);  // a missing value points at its key
  EXPECT_EQ(failure([&] { attach.reader.scalar(*attach.top.find("address"), "an address"); }),
            "f.yaml:1:1: address: missing value (expected an address)");

  Doc target(text, kTargetDialect);
  EXPECT_TRUE(target.reader.written_null_word(target.top.find("address")->value));
  EXPECT_EQ(target.top.find("address")->value_at.column, 10);
  EXPECT_EQ(target.reader.scalar(*target.top.find("address"), "x"), "null");
  EXPECT_EQ(target.reader.scalar(*target.top.find("nqn"), "x"), "null");
  EXPECT_TRUE(target.reader.missing(target.top.find("port")->value));
  EXPECT_EQ(failure([&] { target.reader.scalar(*target.top.find("port"), "an integer"); }),
            "f.yaml:2:1: port: missing value (expected an integer)");
}

// The message integer() fails with for `port: TEXT`, or its value as text.
template <typename T>
std::string integer_result(const std::string& text, T min, T max) {
  Doc d("port: " + text + "\n");
  std::string out;
  auto message = failure([&] { out = std::to_string(d.reader.integer<T>(*d.top.find("port"), min, max)); });
  return message ? *message : out;
}

TEST(YamlReader, UnsignedIntegers) {
  EXPECT_EQ(integer_result<uint64_t>("4420", 1, 65535), "4420");
  EXPECT_EQ(integer_result<uint64_t>("0x10", 0, 100), "16");
  EXPECT_EQ(integer_result<uint64_t>("0X1f", 0, 100), "31");
  EXPECT_EQ(integer_result<uint64_t>("18446744073709551615", 0, UINT64_MAX), "18446744073709551615");
  EXPECT_EQ(integer_result<uint64_t>("-1", 0, 10), "f.yaml:1:7: port: must not be negative (got '-1')");
  EXPECT_EQ(integer_result<uint64_t>("0", 1, 65535), "f.yaml:1:7: port: 0 is out of range (expected 1..65535)");
  EXPECT_EQ(integer_result<uint64_t>("18446744073709551616", 0, 10),
            "f.yaml:1:7: port: 18446744073709551616 is out of range (expected 0..10)");
  EXPECT_EQ(integer_result<uint64_t>("1234567890123456789012345", 0, 10),
            "f.yaml:1:7: port: '1234567890123456789012345' is out of range (expected 0..10)");
  EXPECT_EQ(integer_result<uint64_t>("12ab", 0, 10), "f.yaml:1:7: port: expected an integer, got '12ab'");
  EXPECT_EQ(integer_result<uint64_t>("0x", 0, 10), "f.yaml:1:7: port: expected an integer, got '0x'");
  EXPECT_EQ(integer_result<uint64_t>("1.5", 0, 10), "f.yaml:1:7: port: expected an integer, got '1.5'");
  EXPECT_EQ(integer_result<uint64_t>("[1]", 0, 10), "f.yaml:1:7: port: expected an integer, got a list");
}

TEST(YamlReader, SignedIntegers) {
  EXPECT_EQ(integer_result<int64_t>("-1", -1, 100), "-1");
  EXPECT_EQ(integer_result<int64_t>("-2", -1, 100), "f.yaml:1:7: port: -2 is out of range (expected -1..100)");
  EXPECT_EQ(integer_result<int64_t>("-1", 0, 100), "f.yaml:1:7: port: must not be negative (got '-1')");
  EXPECT_EQ(integer_result<int64_t>("0x7fffffffffffffff", 0, INT64_MAX), "9223372036854775807");
  EXPECT_EQ(integer_result<int64_t>("9223372036854775808", 0, INT64_MAX),
            "f.yaml:1:7: port: 9223372036854775808 is out of range (expected 0..9223372036854775807)");
  EXPECT_EQ(integer_result<int64_t>("-0x1", -10, 10), "f.yaml:1:7: port: expected an integer, got '-0x1'");
}

enum class Color { red, green, blue };

TEST(YamlReader, OneOfNamedChoices) {
  auto pick = [](const std::string& text) {
    Doc d("port: " + text + "\n", kTargetDialect);
    Color c{};
    auto message = failure([&] {
      c = d.reader.one_of<Color>(*d.top.find("port"), "color",
                                 {{"red", Color::red}, {"green", Color::green}, {"blue", Color::blue}});
    });
    return message ? *message : std::to_string(static_cast<int>(c));
  };
  EXPECT_EQ(pick("red"), "0");
  EXPECT_EQ(pick("blue"), "2");
  EXPECT_EQ(pick("Red"), "f.yaml:1:7: port: unknown color 'Red' (expected red, green or blue)");
  EXPECT_EQ(pick("{a: 1}"), "f.yaml:1:7: port: expected red, green or blue, got a mapping");

  Doc two("port:\n");
  std::array<std::string_view, 2> names = {"io", "discovery"};
  EXPECT_EQ(failure([&] { two.reader.choice(*two.top.find("port"), "role", names); }),
            "f.yaml:1:1: port: missing value (expected io or discovery)");
}

TEST(YamlReader, CatchFailuresTurnsExceptionsIntoOneLine) {
  auto run = [](auto parse) {
    return catch_failures<std::string>("f.yaml", parse, [](const std::string& m) { return "error: " + m; });
  };
  EXPECT_EQ(run([] { return std::string("ok"); }), "ok");
  EXPECT_EQ(run([]() -> std::string { Reader("f.yaml", "").fail({2, 5}, "x", "bad"); }), "error: f.yaml:2:5: x: bad");
  EXPECT_EQ(run([]() -> std::string { return YAML::Load("[1]")["key"].as<std::string>(); }).substr(0, 14),
            "error: f.yaml:");  // a yaml-cpp exception that escaped the parser (with no position)
}

TEST(YamlReader, WarningsUseTheSameFormat) {
  Reader r("f.yaml", "");
  EXPECT_EQ(r.message({5, 2}, "x", "ignored"), "f.yaml:5:2: x: ignored");
  EXPECT_EQ(r.file(), "f.yaml");
}

}  // namespace
}  // namespace rdmablk::config

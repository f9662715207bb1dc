#include "initiator/bench/job_reader.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "initiator/bench/job_values.h"

namespace rdmablk::initiator::bench::detail {

namespace {

constexpr int kMaxIncludeDepth = 16;

long mb_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<long>(static_cast<unsigned long long>(pages) * static_cast<unsigned long long>(page) >> 20) : 0;
}

// fio's substitutions: ${VAR} from the environment (fio leaves an unset one empty; we refuse it) and
// the keywords $pagesize, $mb_memory and $ncpus (without fio's arithmetic on them).
Result<std::string> expand(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '$' && i + 1 < s.size() && s[i + 1] == '{') {
      auto close = s.find('}', i + 2);
      if (close != std::string_view::npos && close > i + 2) {
        std::string name(s.substr(i + 2, close - i - 2));
        const char* value = std::getenv(name.c_str());
        if (!value) return make_error(fmt::format("environment variable '{}' is not set", name));
        out += value;
        i = close + 1;
        continue;
      }
    }
    if (s[i] == '$') {
      struct Keyword {
        std::string_view word;
        long value;
      };
      const Keyword keywords[] = {{"$pagesize", ::sysconf(_SC_PAGESIZE)},
                                  {"$mb_memory", mb_memory()},
                                  {"$ncpus", ::sysconf(_SC_NPROCESSORS_CONF)}};
      bool replaced = false;
      for (const auto& k : keywords) {
        if (s.substr(i, k.word.size()) == k.word) {
          out += std::to_string(k.value);
          i += k.word.size();
          replaced = true;
          break;
        }
      }
      if (replaced) continue;
    }
    out += s[i++];
  }
  return out;
}

// fio ends a line at the first ';' or '#' (we keep those inside double quotes, for patterns).
std::string_view strip_comment(std::string_view line) {
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"') quoted = !quoted;
    if (!quoted && (line[i] == ';' || line[i] == '#')) return trim(line.substr(0, i));
  }
  return trim(line);
}

class Reader {
 public:
  std::vector<Section> sections;

  // `nested`: an included file, which adds options to the current section only.
  Result<void> read(std::string_view text, const std::string& file, int depth) {
    const bool nested = depth > 0;
    unsigned line_no = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t nl = text.find('\n', pos);
      std::string_view raw = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
      pos = nl == std::string_view::npos ? text.size() : nl + 1;
      ++line_no;
      std::string_view line = strip_comment(raw);
      if (line.empty()) continue;
      auto where = fmt::format("{}:{}", file, line_no);
      if (line.front() == '[') {
        if (nested) return make_error(where + ": no sections in an included file");
        if (line.back() != ']') return make_error(where + ": unterminated section header '" + std::string(line) + "'");
        std::string name(trim(line.substr(1, line.size() - 2)));
        if (name.empty()) return make_error(where + ": empty section name");
        // fio: any section whose name starts with "global" is a global section.
        sections.push_back(Section{name, name.rfind("global", 0) == 0, where, {}});
        continue;
      }
      if (sections.empty()) return make_error(where + ": option '" + std::string(line) + "' outside of a [section]");
      if (line.size() > 8 && line.substr(0, 7) == "include" && std::isspace(static_cast<unsigned char>(line[7]))) {
        if (auto r = include(std::string(trim(line.substr(8))), file, depth, where); !r) return r;
        continue;
      }
      auto expanded = expand(line);
      if (!expanded) return make_error(fmt::format("{}: {}", where, expanded.error().message));
      std::string_view l = *expanded;
      auto eq = l.find('=');
      RawOption o;
      o.key = lower(trim(l.substr(0, eq)));
      o.value = eq == std::string_view::npos ? std::string() : std::string(trim(l.substr(eq + 1)));
      o.bare = eq == std::string_view::npos;
      o.where = where;
      if (o.key.empty()) return make_error(where + ": missing option name");
      sections.back().options.push_back(std::move(o));
    }
    return {};
  }

 private:
  Result<void> include(std::string path, const std::string& from, int depth, const std::string& where) {
    if (path.empty()) return make_error(where + ": include needs a file name");
    if (depth >= kMaxIncludeDepth) return make_error(where + ": includes nested too deeply");
    // fio: a relative name that does not exist as given is looked up next to the including file.
    if (path.front() != '/' && ::access(path.c_str(), F_OK) != 0) {
      auto slash = from.rfind('/');
      if (slash != std::string::npos) path = from.substr(0, slash + 1) + path;
    }
    auto text = read_whole_file(path);
    if (!text) return make_error(fmt::format("{}: {}", where, text.error().message));
    return read(*text, path, depth + 1);
  }
};

}  // namespace

Result<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("cannot open job file '{}': {}", path, std::strerror(errno)), errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::vector<Section>> read_sections(std::string_view text, const std::string& file) {
  Reader reader;
  if (auto r = reader.read(text, file, 0); !r) return tl::unexpected(r.error());
  return std::move(reader.sections);
}

}  // namespace rdmablk::initiator::bench::detail

#include "initiator/host/first_line.h"

#include <fstream>

namespace rdmablk::initiator {

std::optional<std::string> read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r' || line.back() == '\n')) {
    line.pop_back();
  }
  if (line.empty()) return std::nullopt;
  return line;
}

}  // namespace rdmablk::initiator

// Where a value came from in a configuration file. Its own header, without yaml-cpp, so that the
// models that record locations (target/config/config.h) need not pull yaml-cpp into every file including them.
#pragma once

namespace rdmablk::config {

// 1-based line and column; line 0 = not from a file (a default).
struct SourceLocation {
  int line = 0;
  int column = 0;
};

}  // namespace rdmablk::config

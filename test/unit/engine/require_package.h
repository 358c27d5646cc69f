// The compiled default model for the engine tests that need one: $SWZ_PACKAGE, else
// build/models/smollm2.swz when it exists. REQUIRE_PACKAGE(path) declares `path` and
// skips the test when there is none, or fails it under SWZ_REQUIRE=1 (a missing model
// is then an error, not a pass).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace swz::test {

inline std::string package_path() {
  if (const char* p = std::getenv("SWZ_PACKAGE")) return p;
  const std::string local = std::string(SWZ_SOURCE_DIR) + "/build/models/smollm2.swz";
  return std::filesystem::exists(local + "/manifest.json") ? local : "";
}

}  // namespace swz::test

#define REQUIRE_PACKAGE(path)                                                                              \
  const std::string path = ::swz::test::package_path();                                                    \
  if (path.empty()) {                                                                                      \
    if (const char* r = std::getenv("SWZ_REQUIRE"); r && std::string(r) == "1")                            \
      FAIL() << "SWZ_PACKAGE is not set (SWZ_REQUIRE=1)";                                                  \
    GTEST_SKIP() << "no compiled default model: set SWZ_PACKAGE (scripts/compile-default.sh prints it)";  \
  }

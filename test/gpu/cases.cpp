//===- cases.cpp - allCases: every case group linked into the runner ------===//
//
// The group functions are referenced weakly so that a runner links (and runs the
// groups it has) while a group's cases_*.cpp is not yet in the tree: a weak
// undefined function has address null. The cases*.cpp files are an OBJECT
// library (codegen/CMakeLists.txt), so every group that exists is linked in.
//
//===----------------------------------------------------------------------===//
#include "cases.h"

namespace swz::check {

[[gnu::weak]] std::vector<Case> gemvCases(const std::string &format);
[[gnu::weak]] std::vector<Case> attentionCases(const std::string &format);
[[gnu::weak]] std::vector<Case> gemmCases(const std::string &format);

namespace {

struct Group {
  const char *name;
  std::vector<Case> (*cases)(const std::string &);
};

std::vector<Group> groups() {
  return {{"elementwise", &elementwiseCases},
          {"gemv", &gemvCases},
          {"attention", &attentionCases},
          {"gemm", &gemmCases}};
}

} // namespace

std::vector<Case> allCases(const std::string &format) {
  std::vector<Case> all;
  for (const Group &g : groups()) {
    if (!g.cases)
      continue;
    for (Case &c : g.cases(format))
      all.push_back(std::move(c));
  }
  return all;
}

std::vector<std::string> linkedCaseGroups() {
  std::vector<std::string> names;
  for (const Group &g : groups())
    if (g.cases)
      names.push_back(g.name);
  return names;
}

} // namespace swz::check

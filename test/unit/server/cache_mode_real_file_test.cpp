// apply_cache_mode on a real Go file (go-jsonnet's lexer.go, from the gojsonnet sdist of
// test/unit/frontend_ast/real_sources.txt, downloaded at configure time) inside a JSON tool
// result: exact and approx leave every message as sent; reorder leaves the first sighting
// byte-identical and, after an edit of one function, keeps the JSON's shape and the file's
// bytes up to that function, moving only it (labelled) to the file's end.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cache_mode.h"
#include "frontend_ast/atomize.h"

namespace {

using nlohmann::ordered_json;
namespace fa = swz::frontend_ast;

std::string real_go_file() {
  for (const auto& e : std::filesystem::directory_iterator(SWZ_REAL_SOURCES_DIR))
    if (e.path().filename().string().rfind("gojsonnet-", 0) == 0) {
      std::ifstream f(e.path() / "internal/parser/lexer.go", std::ios::binary);
      std::stringstream s;
      s << f.rdbuf();
      return s.str();
    }
  return {};
}

std::vector<swz::engine::ChatMessage> read_tool_turn(const std::string& file) {
  std::vector<swz::engine::ChatMessage> m;
  m.emplace_back("user", "Why does the lexer reject 1e?");
  swz::engine::ChatMessage call("assistant", "");
  call.tool_calls.push_back({"call_1", "read_file", R"({"file_path": "internal/parser/lexer.go"})"});
  m.push_back(call);
  swz::engine::ChatMessage result("tool", ordered_json{{"path", "internal/parser/lexer.go"}, {"content", file}, {"truncated", false}}.dump());
  result.tool_call_id = "call_1";
  m.push_back(result);
  return m;
}

std::vector<std::string> contents(const std::vector<swz::engine::ChatMessage>& m) {
  std::vector<std::string> out;
  for (const auto& x : m) out.push_back(x.content);
  return out;
}

}  // namespace

TEST(CacheModeRealFile, GoFileInsideAJsonToolResult) {
  const bool dir = std::filesystem::is_directory(SWZ_REAL_SOURCES_DIR);
  const std::string go = dir ? real_go_file() : std::string();
  if (go.empty()) {
    const std::string why = "internal/parser/lexer.go of the gojsonnet sdist is not under " SWZ_REAL_SOURCES_DIR
                            " (the configure step downloads test/unit/frontend_ast/real_sources.txt)";
    const char* r = std::getenv("SWZ_REQUIRE");
    if (r && std::string(r) == "1") FAIL() << why << " (SWZ_REQUIRE=1)";
    GTEST_SKIP() << why;
  }
  swz::server::CacheModePolicy policy;
  const auto sent = read_tool_turn(go);
  for (const fa::CacheMode mode : {fa::CacheMode::Exact, fa::CacheMode::Approx, fa::CacheMode::Reorder}) {
    auto m = sent;
    const fa::ReorderStats s = swz::server::apply_cache_mode(mode, m, policy);
    EXPECT_EQ(contents(m), contents(sent)) << static_cast<int>(mode);  // reorder: first sighting, in source order
    if (mode == fa::CacheMode::Reorder) {
      EXPECT_EQ(s.regions, 1);
      EXPECT_EQ(s.reordered, 1);
      EXPECT_EQ(s.atoms, static_cast<int>(fa::atomize(go, fa::Language::Go)->atoms.size()));
      EXPECT_EQ(s.moved, 0);
    }
  }
  // The agent edits lexNumber and reads the file again.
  std::string edited = go;
  const size_t fn = edited.find("func (l *lexer) lexNumber() error {");
  ASSERT_NE(fn, std::string::npos);
  edited.insert(edited.find('\n', fn) + 1, "\t// reject a bare exponent\n");
  auto m = read_tool_turn(edited);
  const fa::ReorderStats s = swz::server::apply_cache_mode(fa::CacheMode::Reorder, m, policy);
  EXPECT_EQ(s.moved, 1);
  EXPECT_EQ(m[0].content, "Why does the lexer reject 1e?");
  const ordered_json j = ordered_json::parse(m[2].content);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j.begin().key(), "path");  // keys in their order
  EXPECT_EQ(j["truncated"], false);
  const std::string out = j["content"].get<std::string>();
  EXPECT_EQ(out.size(), edited.size() + std::string("// [internal/parser/lexer.go, out of file order]\n").size());
  const size_t doc = go.find("// lexNumber will consume");  // the function's atom starts at its doc comment
  ASSERT_NE(doc, std::string::npos);
  EXPECT_EQ(out.substr(0, doc), go.substr(0, doc));  // everything before it: the cached prefix
  const size_t label = out.find("// [internal/parser/lexer.go, out of file order]\n// lexNumber will consume");
  ASSERT_NE(label, std::string::npos);
  EXPECT_GT(label, out.find("func Lex("));  // after the file's last function
  EXPECT_NE(out.find("\t// reject a bare exponent\n"), std::string::npos);
  // The same edit read again: the same rewritten bytes.
  auto again = read_tool_turn(edited);
  swz::server::apply_cache_mode(fa::CacheMode::Reorder, again, policy);
  EXPECT_EQ(again[2].content, m[2].content);
}

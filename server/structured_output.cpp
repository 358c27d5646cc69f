#include "structured_output.h"

#include <list>
#include <mutex>

#include "grammar/json_schema.h"
#include "api_error.h"

namespace swz::server {
namespace {

using ojson = nlohmann::ordered_json;
using GrammarPtr = std::shared_ptr<const grammar::Grammar>;

// Compiled grammars by what they were compiled from (kind + the schema's text), the 64 most
// recently used: a repeated schema gets the same Grammar object, so its matcher tables
// (grammar/matcher.h) are warm. A failed compilation is not cached.
GrammarPtr cached(const std::string& key, const std::function<grammar::Grammar()>& build) {
  static std::mutex mu;
  static std::list<std::pair<std::string, GrammarPtr>> lru;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = lru.begin(); it != lru.end(); ++it)
      if (it->first == key) {
        lru.splice(lru.begin(), lru, it);
        return it->second;
      }
  }
  GrammarPtr g = std::make_shared<const grammar::Grammar>(build());
  std::lock_guard<std::mutex> lock(mu);
  lru.emplace_front(key, g);
  while (lru.size() > 64) lru.pop_back();
  return g;
}

ApiError schema_error(const grammar::GrammarError& e, const std::string& param) {
  std::string msg = e.what();
  if (msg.find("'" + e.keyword + "'") == std::string::npos) msg += " (keyword '" + e.keyword + "')";
  return ApiError(400, msg, "invalid_request_error", param, "invalid_schema");
}

std::shared_ptr<const grammar::Grammar> diff_format(const ojson& f, const std::string& param) {
  auto it = f.find("original");
  if (it == f.end() || it->is_null()) return cached("unified-diff", [] { return grammar::unified_diff_grammar(); });
  if (!it->is_object() || !it->contains("path") || !it->contains("content") || !(*it)["path"].is_string() ||
      !(*it)["content"].is_string())
    throw ApiError(400, "Invalid '" + param + ".original': expected an object {\"path\": string, \"content\": string}.",
                   "invalid_request_error", param + ".original");
  grammar::DiffOriginal o{(*it)["path"].get<std::string>(), (*it)["content"].get<std::string>()};
  try {
    return cached("unified-diff\n" + o.path + "\n" + o.content, [&] { return grammar::unified_diff_grammar(&o); });
  } catch (const grammar::GrammarError& e) {
    throw ApiError(400, std::string("Invalid '") + param + ".original': " + e.what(), "invalid_request_error",
                   param + ".original");
  }
}

std::shared_ptr<const grammar::Grammar> compile(const ojson& schema, const std::string& param) {
  if (!schema.is_object() && !schema.is_boolean())
    throw ApiError(400, "Invalid '" + param + "': a JSON schema must be an object.", "invalid_request_error", param);
  try {
    return cached("json_schema\n" + schema.dump(-1, ' ', false, ojson::error_handler_t::replace),
                  [&] { return grammar::compile_json_schema(schema); });
  } catch (const grammar::GrammarError& e) {
    throw schema_error(e, param);
  }
}

}  // namespace

std::shared_ptr<const grammar::Grammar> openai_response_format(const ojson& rf, const std::string& param) {
  if (!rf.is_object()) throw ApiError(400, "Invalid type for '" + param + "': expected an object.", "invalid_request_error", param);
  auto t = rf.find("type");
  if (t == rf.end() || !t->is_string())
    throw ApiError(400, "Missing '" + param + ".type'.", "invalid_request_error", param + ".type");
  const std::string type = t->get<std::string>();
  if (type == "text") return nullptr;
  if (type == "json_object") return cached("json_object", [] { return grammar::json_object_grammar(); });
  if (type == "json_schema") {
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object())
      throw ApiError(400, "Missing required parameter: '" + param + ".json_schema'.", "invalid_request_error",
                     param + ".json_schema");
    auto schema = js->find("schema");
    if (schema == js->end() || schema->is_null()) return cached("json_object", [] { return grammar::json_object_grammar(); });
    return compile(*schema, param + ".json_schema.schema");
  }
  if (type == "sarif-2.1.0") return cached(type, [&] { return grammar::builtin_format(type); });
  if (type == "unified-diff") return diff_format(rf, param);
  throw ApiError(400,
                 "Invalid value for '" + param + ".type': '" + type +
                     "'. Supported values are: 'text', 'json_object', 'json_schema', 'sarif-2.1.0' and 'unified-diff'.",
                 "invalid_request_error", param + ".type");
}

std::shared_ptr<const grammar::Grammar> anthropic_output_format(const ojson& of, const std::string& param) {
  // Messages without the param: the Anthropic endpoint prefixes "<param>: " (anthropic_error_body).
  if (!of.is_object()) throw ApiError(400, "Input should be an object.", "invalid_request_error", param);
  auto t = of.find("type");
  if (t == of.end() || !t->is_string()) throw ApiError(400, "Field required.", "invalid_request_error", param + ".type");
  const std::string type = t->get<std::string>();
  if (type == "json_schema") {
    auto s = of.find("schema");
    if (s == of.end() || s->is_null()) throw ApiError(400, "Field required.", "invalid_request_error", param + ".schema");
    return compile(*s, param + ".schema");
  }
  if (type == "text") return nullptr;  // extension: plain text (the security endpoint's opt-out of SARIF)
  if (type == "sarif-2.1.0") return cached(type, [&] { return grammar::builtin_format(type); });
  if (type == "unified-diff") return diff_format(of, param);
  throw ApiError(400, "Input should be 'json_schema', 'text', 'sarif-2.1.0' or 'unified-diff', not '" + type + "'.",
                 "invalid_request_error", param + ".type");
}

std::shared_ptr<const grammar::Grammar> default_output_format(std::string_view path) {
  if (path.rfind("/v1/security/", 0) != 0 && path.rfind("/security/v1/", 0) != 0) return nullptr;
  return cached("sarif-2.1.0", [] { return grammar::builtin_format("sarif-2.1.0"); });
}

std::shared_ptr<const grammar::Grammar> forced_tool_grammar(
    const ojson& tools_json, const std::string& forced, const std::function<const ojson*(const ojson&)>& schema_of,
    const std::function<std::string(size_t)>& param_of, bool parallel) {
  std::vector<grammar::ToolSchema> tools;
  std::string key = std::string(parallel ? "tool_calls\n" : "tool_call\n") + forced;
  for (const ojson& t : tools_json) {
    grammar::ToolSchema ts;
    const ojson* fn = t.contains("function") ? &t["function"] : &t;
    ts.name = fn->value("name", std::string());
    const ojson* s = schema_of(t);
    ts.parameters = s ? *s : ojson{{"type", "object"}};
    key += "\n" + ojson(ts.name).dump() + ts.parameters.dump(-1, ' ', false, ojson::error_handler_t::replace);
    tools.push_back(std::move(ts));
  }
  try {
    return cached(key, [&] { return grammar::forced_tool_call_grammar(tools, forced, parallel); });
  } catch (const grammar::GrammarError& e) {
    // e.path: "tools[i]/pointer..."
    size_t index = 0;
    if (e.path.rfind("tools[", 0) == 0) index = std::stoul(e.path.substr(6));
    throw schema_error(e, param_of(index));
  }
}

}  // namespace swz::server

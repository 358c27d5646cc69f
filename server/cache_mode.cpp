#include "cache_mode.h"

#include <unordered_map>

#include "api_error.h"

namespace swz::server {

using frontend_ast::CacheMode;
using nlohmann::json;

namespace {
CacheMode parse_or_400(const std::string& v, const char* where) {
  std::optional<CacheMode> m = frontend_ast::parse_cache_mode(v);
  if (!m)
    throw ApiError(400, std::string("Invalid ") + where + " '" + v + "': expected 'exact', 'reorder' or 'approx'.",
                   "invalid_request_error", kCacheModeField);
  return *m;
}
}  // namespace

CacheMode resolve_cache_mode(const json* field, const std::string& header, const CacheModePolicy& policy) {
  std::optional<CacheMode> from_field, from_header;
  if (field) {
    if (!field->is_string())
      throw ApiError(400, std::string("Invalid type for '") + kCacheModeField + "': expected a string.", "invalid_request_error",
                     kCacheModeField);
    from_field = parse_or_400(field->get<std::string>(), "value for 'swizzle_cache_mode'");
  }
  if (!header.empty()) from_header = parse_or_400(header, "X-Swizzle-Cache-Mode header");
  if (from_field && from_header && *from_field != *from_header)
    throw ApiError(400, "The 'swizzle_cache_mode' field and the X-Swizzle-Cache-Mode header disagree.", "invalid_request_error",
                   kCacheModeField);
  const CacheMode m = from_field ? *from_field : from_header ? *from_header : policy.default_mode;
  if (m == CacheMode::Approx)
    throw ApiError(400,
                   "Cache mode 'approx' (position-independent KV reuse with RoPE re-rotation) is not implemented by this "
                   "server; use 'exact' or 'reorder'.",
                   "invalid_request_error", kCacheModeField);
  return m;
}

namespace {

/// Reorders the code inside the string values of a JSON tool result (e.g.
/// {"path": "a.py", "content": "..."}): an object's "file_path" / "path" / "filename"
/// string is the path hint of its other strings. Returns whether any string changed.
bool reorder_json_strings(nlohmann::ordered_json& j, const std::string& hint, const CacheModePolicy& policy,
                          frontend_ast::ReorderStats& stats, int& unnamed, int depth) {
  if (depth > 16) return false;
  bool changed = false;
  if (j.is_object()) {
    std::string own = hint;
    for (const char* k : {"file_path", "path", "filename"})
      if (auto it = j.find(k); it != j.end() && it->is_string()) {
        own = it->get<std::string>();
        break;
      }
    for (auto& [k, v] : j.items()) changed |= reorder_json_strings(v, own, policy, stats, unnamed, depth + 1);
  } else if (j.is_array()) {
    for (auto& v : j) changed |= reorder_json_strings(v, hint, policy, stats, unnamed, depth + 1);
  } else if (j.is_string()) {
    const std::string& text = j.get_ref<const std::string&>();
    if (text.find('\n') == std::string::npos) return false;  // one line holds no region of two atoms
    std::string out = frontend_ast::reorder_prompt_text(text, *policy.memory, stats, unnamed, hint, !hint.empty());
    if (out != text) {
      j = std::move(out);
      changed = true;
    }
  }
  return changed;
}

}  // namespace

frontend_ast::ReorderStats apply_cache_mode(CacheMode mode, std::vector<engine::ChatMessage>& messages,
                                            const CacheModePolicy& policy) {
  frontend_ast::ReorderStats stats;
  if (mode != CacheMode::Reorder) return stats;
  std::unordered_map<std::string, std::string> call_paths;  // tool_call id -> file argument
  int unnamed = 0;
  for (engine::ChatMessage& m : messages) {
    for (const engine::ToolCall& c : m.tool_calls) {
      const json args = json::parse(c.arguments, nullptr, false);
      if (!args.is_object()) continue;
      for (const char* k : {"file_path", "path", "filename"})
        if (auto it = args.find(k); it != args.end() && it->is_string()) {
          call_paths[c.id] = it->get<std::string>();
          break;
        }
    }
    std::string hint;
    if (m.role == "tool")
      if (auto it = call_paths.find(m.tool_call_id); it != call_paths.end()) hint = it->second;
    // A JSON tool result (or user message): the code inside its strings. Rewritten (compact,
    // keys in their order) only when some string changed, else left byte-identical.
    const size_t first = m.content.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && (m.content[first] == '{' || m.content[first] == '[')) {
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(m.content, nullptr, false);
      if (!j.is_discarded()) {
        if (reorder_json_strings(j, hint, policy, stats, unnamed, 0))
          m.content = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
        continue;
      }
    }
    m.content = frontend_ast::reorder_prompt_text(m.content, *policy.memory, stats, unnamed, hint, m.role == "tool" && !hint.empty());
  }
  return stats;
}

}  // namespace swz::server

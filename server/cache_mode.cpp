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
    m.content = frontend_ast::reorder_prompt_text(m.content, *policy.memory, stats, unnamed, hint);
  }
  return stats;
}

}  // namespace swz::server

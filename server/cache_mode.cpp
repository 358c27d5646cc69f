#include "cache_mode.h"

#include <algorithm>
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
  return from_field ? *from_field : from_header ? *from_header : policy.default_mode;
}

float resolve_approx_recompute(const json* field, const CacheModePolicy& policy) {
  if (!field) return policy.approx_recompute;
  if (!field->is_number() || field->get<double>() < 0 || field->get<double>() > 1)
    throw ApiError(400, std::string("Invalid value for '") + kApproxRecomputeField + "': expected a number from 0 to 1.",
                   "invalid_request_error", kApproxRecomputeField);
  return field->get<float>();
}

engine::ApproxSelect resolve_approx_select(const json* field, const CacheModePolicy& policy) {
  if (!field) return policy.approx_select;
  const std::optional<engine::ApproxSelect> s =
      field->is_string() ? engine::parse_approx_select(field->get<std::string>()) : std::nullopt;
  if (!s)
    throw ApiError(400, std::string("Invalid value for '") + kApproxSelectField + "': expected \"head\" or \"deviation\".",
                   "invalid_request_error", kApproxSelectField);
  return *s;
}

namespace {

/// Calls f(string node, path hint) for every string inside `j` (16 levels deep at most):
/// an object's "file_path" / "path" / "filename" string is the path hint of its other
/// strings (e.g. a tool result {"path": "a.py", "content": "..."}).
template <class Json, class F>
void for_each_string(Json& j, const std::string& hint, const F& f, int depth = 0) {
  if (depth > 16) return;
  if (j.is_object()) {
    std::string own = hint;
    for (const char* k : {"file_path", "path", "filename"})
      if (auto it = j.find(k); it != j.end() && it->is_string()) {
        own = it->template get<std::string>();
        break;
      }
    for (auto& [k, v] : j.items()) for_each_string(v, own, f, depth + 1);
  } else if (j.is_array()) {
    for (auto& v : j) for_each_string(v, hint, f, depth + 1);
  } else if (j.is_string()) {
    f(j, hint);
  }
}

/// Reorders the code inside the string values of a JSON tool result (for_each_string's
/// path hints). Returns whether any string changed.
bool reorder_json_strings(nlohmann::ordered_json& root, const std::string& hint, const CacheModePolicy& policy,
                          frontend_ast::ReorderStats& stats, int& unnamed) {
  bool changed = false;
  for_each_string(root, hint, [&](nlohmann::ordered_json& j, const std::string& h) {
    const std::string& text = j.get_ref<const std::string&>();
    if (text.find('\n') == std::string::npos) return;  // one line holds no region of two atoms
    std::string out = frontend_ast::reorder_prompt_text(text, *policy.memory, stats, unnamed, h, !h.empty());
    if (out != text) {
      j = std::move(out);
      changed = true;
    }
  });
  return changed;
}

}  // namespace

namespace {

/// The file a message's content is, when it is a tool result answering a call with a
/// "file_path" / "path" / "filename" argument ("" otherwise). Reads the calls of `m` into
/// `call_paths` (tool_call id -> that argument) for the results after it.
std::string path_hint_of(const engine::ChatMessage& m, std::unordered_map<std::string, std::string>& call_paths) {
  for (const engine::ToolCall& c : m.tool_calls) {
    const json args = json::parse(c.arguments, nullptr, false);
    if (!args.is_object()) continue;
    for (const char* k : {"file_path", "path", "filename"})
      if (auto it = args.find(k); it != args.end() && it->is_string()) {
        call_paths[c.id] = it->get<std::string>();
        break;
      }
  }
  if (m.role == "tool")
    if (auto it = call_paths.find(m.tool_call_id); it != call_paths.end()) return it->second;
  return {};
}

/// A content that is a JSON object or array (a structured tool result), parsed; else discarded.
nlohmann::ordered_json json_content(const std::string& content) {
  const size_t first = content.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || (content[first] != '{' && content[first] != '[')) return nlohmann::ordered_json::value_t::discarded;
  return nlohmann::ordered_json::parse(content, nullptr, false);
}

/// The code atoms of the strings inside a JSON tool result (for_each_string's path
/// hints), as the bytes they have in its text: JSON-escaped, as nlohmann writes a string
/// (the form Python's json.dumps with ensure_ascii=False gives too).
void json_atom_texts(const nlohmann::ordered_json& root, const std::string& hint, std::vector<std::string>& out) {
  for_each_string(root, hint, [&](const nlohmann::ordered_json& j, const std::string& h) {
    const std::string& text = j.get_ref<const std::string&>();
    if (text.find('\n') == std::string::npos) return;
    for (const auto& [b, e] : frontend_ast::code_atom_ranges(text, h, !h.empty())) {
      std::string esc = json(text.substr(b, e - b)).dump(-1, ' ', false, json::error_handler_t::replace);
      out.push_back(esc.substr(1, esc.size() - 2));
    }
  });
}

}  // namespace

std::vector<engine::TokenSpan> approx_atom_spans(const std::vector<engine::ChatMessage>& messages,
                                                 const std::vector<int32_t>& prompt, engine::Engine& engine) {
  // The prompt's bytes as its tokens spell them, and where each token starts.
  std::string spelled;
  std::vector<size_t> starts;
  starts.reserve(prompt.size() + 1);
  for (int32_t t : prompt) {
    starts.push_back(spelled.size());
    spelled += engine.token_piece(t);
  }
  starts.push_back(spelled.size());
  std::vector<engine::TokenSpan> spans;
  std::unordered_map<std::string, std::string> call_paths;
  size_t from = 0;  // atoms come in prompt order: each is looked for after the previous one
  for (const engine::ChatMessage& m : messages) {
    const std::string hint = path_hint_of(m, call_paths);
    std::vector<std::string> texts;
    const nlohmann::ordered_json j = json_content(m.content);
    if (!j.is_discarded()) {
      json_atom_texts(j, hint, texts);
    } else {
      for (const auto& [b, e] : frontend_ast::code_atom_ranges(m.content, hint, m.role == "tool" && !hint.empty()))
        texts.push_back(m.content.substr(b, e - b));
    }
    for (const std::string& t : texts) {
      const size_t at = spelled.find(t, from);
      if (at == std::string::npos) continue;  // not spelled as such (a template rewrote it)
      from = at + t.size();
      // The tokens wholly inside the atom's bytes (one merged across its edge is left out).
      const int b = static_cast<int>(std::lower_bound(starts.begin(), starts.end(), at) - starts.begin());
      const int e = static_cast<int>(std::upper_bound(starts.begin(), starts.end(), from) - starts.begin()) - 1;
      if (e - b >= kApproxMinAtomTokens) spans.push_back({b, e});
    }
  }
  return spans;
}

frontend_ast::ReorderStats apply_cache_mode(CacheMode mode, std::vector<engine::ChatMessage>& messages,
                                            const CacheModePolicy& policy) {
  frontend_ast::ReorderStats stats;
  if (mode != CacheMode::Reorder) return stats;
  std::unordered_map<std::string, std::string> call_paths;  // tool_call id -> file argument
  int unnamed = 0;
  for (engine::ChatMessage& m : messages) {
    const std::string hint = path_hint_of(m, call_paths);
    // A JSON tool result (or user message): the code inside its strings. Rewritten (compact,
    // keys in their order) only when some string changed, else left byte-identical.
    nlohmann::ordered_json j = json_content(m.content);
    if (!j.is_discarded()) {
      if (reorder_json_strings(j, hint, policy, stats, unnamed))
        m.content = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      continue;
    }
    m.content = frontend_ast::reorder_prompt_text(m.content, *policy.memory, stats, unnamed, hint, m.role == "tool" && !hint.empty());
  }
  return stats;
}

}  // namespace swz::server

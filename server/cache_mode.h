// Prompt cache modes per request (issue 15 item 2): `exact` (default) leaves the prompt
// untouched; `reorder` rewrites code found in message contents into a canonical order of
// AST atoms (frontend_ast/reorder.h) before templating, so an edit early in a file keeps
// the prefix cache for the atoms after it on later turns; `approx` (RoPE re-rotation of
// cached KV) is not implemented and is refused with 400, never applied silently.
//
// A request selects its mode by the body field "swizzle_cache_mode" (OpenAI chat and
// Anthropic messages) or the header "X-Swizzle-Cache-Mode"; neither: the server's
// default (`swizzle-rt serve --cache-mode`). Every response of those routes carries the
// mode used in the header X-Swizzle-Cache-Mode and in usage.swizzle_cache_mode; the tokens
// reused are the usual cached-token counts (X-Swizzle-Cache-Hit-Tokens,
// usage.prompt_tokens_details.cached_tokens / usage.cache_read_input_tokens).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "frontend_ast/reorder.h"

namespace swz::server {

/// Request field, request header and response header names.
inline constexpr const char* kCacheModeField = "swizzle_cache_mode";
inline constexpr const char* kCacheModeHeader = "X-Swizzle-Cache-Mode";

/// The server-wide side of the modes: the default and the atom orders remembered for
/// `reorder` (shared by all requests, as the prefix cache is).
struct CacheModePolicy {
  frontend_ast::CacheMode default_mode = frontend_ast::CacheMode::Exact;
  std::shared_ptr<frontend_ast::AtomOrderMemory> memory = std::make_shared<frontend_ast::AtomOrderMemory>();
};

/// The mode of one request from its body field (`field`: the value of "swizzle_cache_mode",
/// or nullptr when absent) and its X-Swizzle-Cache-Mode header value ("" when absent).
/// Throws ApiError 400 (param "swizzle_cache_mode") when a value is not a string, not one
/// of "exact" / "reorder" / "approx", when field and header disagree, and for "approx"
/// (not implemented). Neither given: `policy.default_mode`.
frontend_ast::CacheMode resolve_cache_mode(const nlohmann::json* field, const std::string& header,
                                           const CacheModePolicy& policy);

/// Applies `mode` to the messages about to be templated: for Reorder, every message's
/// content goes through frontend_ast::reorder_prompt_text (a tool result's path hint is
/// the "file_path" / "path" / "filename" argument of the assistant tool call it answers);
/// a content that is a JSON object or array has the strings inside it rewritten instead
/// (an object's own "file_path" / "path" / "filename" is the hint of its other strings),
/// and is re-serialised (compact, keys in their order) only when one of them changed. A
/// string with a path hint, or a role "tool" content with one, in which no code region is
/// found is taken as that file's bytes when the path names a known language.
/// For Exact nothing changes. Returns what was done (all zero for Exact).
frontend_ast::ReorderStats apply_cache_mode(frontend_ast::CacheMode mode, std::vector<engine::ChatMessage>& messages,
                                            const CacheModePolicy& policy);

}  // namespace swz::server

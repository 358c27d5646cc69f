// Prompt cache modes per request (issue 15 item 2): `exact` (default) leaves the prompt
// untouched; `reorder` rewrites code found in message contents into a canonical order of
// AST atoms (frontend_ast/reorder.h) before templating, so an edit early in a file keeps
// the prefix cache for the atoms after it on later turns; `approx` (experimental) leaves
// the prompt as it is and reuses each code atom's K/V position-independently, re-rotated
// (RoPE) to where the atom now stands (engine::GenerateRequest::approx_atoms); it is only
// ever applied to a request that asks for it (or to every request when the operator made
// it the server's default), and every response names the mode it ran with.
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
inline constexpr const char* kApproxRecomputeField = "swizzle_approx_recompute";
inline constexpr const char* kApproxSelectField = "swizzle_approx_select";

/// The server-wide side of the modes: the default and the atom orders remembered for
/// `reorder` (shared by all requests, as the prefix cache is).
struct CacheModePolicy {
  frontend_ast::CacheMode default_mode = frontend_ast::CacheMode::Exact;
  std::shared_ptr<frontend_ast::AtomOrderMemory> memory = std::make_shared<frontend_ast::AtomOrderMemory>();
  float approx_recompute = engine::kApproxRecompute;  ///< approx: default recomputed share of each reused atom
  engine::ApproxSelect approx_select = engine::ApproxSelect::Deviation;  ///< approx: which of its tokens, by default
};

/// The mode of one request from its body field (`field`: the value of "swizzle_cache_mode",
/// or nullptr when absent) and its X-Swizzle-Cache-Mode header value ("" when absent).
/// Throws ApiError 400 (param "swizzle_cache_mode") when a value is not a string, not one
/// of "exact" / "reorder" / "approx", and when field and header disagree. Neither given:
/// `policy.default_mode`.
frontend_ast::CacheMode resolve_cache_mode(const nlohmann::json* field, const std::string& header,
                                           const CacheModePolicy& policy);

/// The approx mode's recomputed share of each reused atom (GenerateRequest::approx_recompute)
/// from the request's "swizzle_approx_recompute" (`field`, nullptr when absent), else the
/// policy's default. Throws ApiError 400 (param "swizzle_approx_recompute") for a value that
/// is not a number in [0, 1].
float resolve_approx_recompute(const nlohmann::json* field, const CacheModePolicy& policy);

/// Which tokens of each reused atom the approx mode recomputes (GenerateRequest::
/// approx_select) from the request's "swizzle_approx_select" (`field`, nullptr when absent:
/// "head" or "deviation"), else the policy's default. Throws ApiError 400 (param
/// "swizzle_approx_select") for another value.
engine::ApproxSelect resolve_approx_select(const nlohmann::json* field, const CacheModePolicy& policy);

/// Atoms shorter than this many tokens are not reused by the approx mode (their recomputed
/// head would be most of them).
inline constexpr int kApproxMinAtomTokens = 8;

/// For CacheMode::Approx: the token ranges of `prompt` (the tokens `messages` were templated
/// into) that hold a code atom of a message's content (frontend_ast::code_atom_ranges; in a
/// JSON tool result, of its strings, found in their JSON-escaped form), for
/// GenerateRequest::approx_atoms. An atom is looked for in the prompt's bytes as its tokens
/// spell them (engine.token_piece), after the previous atom; one not found (a template that
/// rewrote the text) is skipped; a token that straddles an atom's edge is left out of it;
/// atoms under kApproxMinAtomTokens tokens are dropped. Sorted, not overlapping.
std::vector<engine::TokenSpan> approx_atom_spans(const std::vector<engine::ChatMessage>& messages,
                                                 const std::vector<int32_t>& prompt, engine::Engine& engine);

/// Applies `mode` to the messages about to be templated: for Reorder, every message's
/// content goes through frontend_ast::reorder_prompt_text (a tool result's path hint is
/// the "file_path" / "path" / "filename" argument of the assistant tool call it answers);
/// a content that is a JSON object or array has the strings inside it rewritten instead
/// (an object's own "file_path" / "path" / "filename" is the hint of its other strings),
/// and is re-serialised (compact, keys in their order) only when one of them changed. A
/// string with a path hint, or a role "tool" content with one, in which no code region is
/// found is taken as that file's bytes when the path names a known language.
/// For Exact and Approx nothing changes. Returns what was done (all zero for them).
frontend_ast::ReorderStats apply_cache_mode(frontend_ast::CacheMode mode, std::vector<engine::ChatMessage>& messages,
                                            const CacheModePolicy& policy);

}  // namespace swz::server

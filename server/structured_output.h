// Structured output: request fields -> a grammar for the engine (runtime/grammar). JSON stays
// here; the engine sees only GenerateRequest::grammar. docs/structured-output.md.
//
// OpenAI (chat and completions) `response_format`:
//   {"type": "text"}                                         unconstrained
//   {"type": "json_object"}                                  any JSON object
//   {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//   {"type": "sarif-2.1.0"}                                  Swizzle extension: a SARIF 2.1.0 log
//   {"type": "unified-diff", "original": {"path", "content"}?}  Swizzle extension
// Anthropic `output_config.format` (its structured outputs; the beta's `output_format` too):
//   {"type": "json_schema", "schema": {...}}, {"type": "sarif-2.1.0"}, {"type": "unified-diff", "original"?}
// Forced tool calls (OpenAI tool_choice "required" / a named function, Anthropic tool_choice
// "any" / "tool"): the rest of the call after the forced prefix, its arguments constrained by
// the tool's parameters / input_schema (grammar::forced_tool_call_grammar).
//
// A schema that cannot be compiled is a 400 in the caller's API schema (ApiError; the
// Anthropic endpoint renders it in its own error format) naming the keyword.
//
// The security endpoint's default (docs/server.md): a request under /v1/security/ or
// /security/v1/ that chooses no output gets the sarif-2.1.0 format (default_output_format).
// A request chooses its output with a format field (even {"type": "text"}: plain text), a
// forced tool call, or tools the model may call (tool_choice auto: a SARIF grammar would
// make a call impossible, so an agent's turn stays unconstrained).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/formats.h"
#include "grammar/grammar.h"

namespace swz::server {

/// OpenAI `response_format` -> grammar; null for {"type": "text"}. `param` is the field's
/// name for errors ("response_format"). Throws ApiError 400 (param naming the field) for a
/// malformed value, an unknown type, or a schema that does not compile (the message names
/// the schema keyword).
std::shared_ptr<const grammar::Grammar> openai_response_format(const nlohmann::ordered_json& rf,
                                                               const std::string& param = "response_format");

/// Anthropic `output_config.format` (or the beta's `output_format`; `param` names which) ->
/// grammar (see the file comment). Throws ApiError 400 with its param under `param` (the
/// Anthropic endpoint prefixes its messages with it).
std::shared_ptr<const grammar::Grammar> anthropic_output_format(const nlohmann::ordered_json& of,
                                                                const std::string& param = "output_config.format");

/// The output format a route gives a request that chose none (see the file comment): the
/// sarif-2.1.0 grammar (one shared object, so its matcher tables stay warm) for paths under
/// the security endpoint's prefixes /v1/security/ and /security/v1/; null (unconstrained
/// text) for every other path. `path` is the request path as received.
std::shared_ptr<const grammar::Grammar> default_output_format(std::string_view path);

/// The grammar of a forced tool call (grammar::forced_tool_call_grammar). `tools_json` is the
/// request's `tools` array as sent (key order kept), `schema_of` picks a tool's schema from
/// one of its elements (null: no schema, i.e. any object); `forced` is the forced name or ""
/// for any tool. Throws ApiError 400 naming the keyword, its param `param_of(i)` for tool i
/// ("tools[1].function.parameters", "tools.1.input_schema"). `parallel`: more calls may
/// follow the first (grammar::forced_tool_call_grammar).
std::shared_ptr<const grammar::Grammar> forced_tool_grammar(
    const nlohmann::ordered_json& tools_json, const std::string& forced,
    const std::function<const nlohmann::ordered_json*(const nlohmann::ordered_json&)>& schema_of,
    const std::function<std::string(size_t)>& param_of, bool parallel = true);

}  // namespace swz::server

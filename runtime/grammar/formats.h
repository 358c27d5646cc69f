// Built-in output formats and the grammar of forced tool calls. docs/structured-output.md
// says how requests select them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace swz::grammar {

/// The JSON Schema behind the `sarif-2.1.0` format: a subset of SARIF 2.1.0 (OASIS
/// sarif-schema-2.1.0.json) whose every instance is a valid SARIF 2.1.0 log: version
/// "2.1.0", one run with tool.driver {name, rules[] {id, shortDescription}}, results[]
/// {ruleId, level, message {text}, locations[] {physicalLocation {artifactLocation {uri},
/// region {startLine >= 1}}}} (at most 16 results, 4 locations each; names and ids of at
/// most 64 characters, URIs 256, message texts 1000, so a weak model cannot run away in one).
/// At most one rule: SARIF requires `rules` to be unique items, which a context-free
/// grammar cannot ensure for two or more (results name their rules by ruleId anyway).
const nlohmann::ordered_json& sarif_schema();

/// A file a unified diff is made against (response_format {type: "unified-diff", original}).
struct DiffOriginal {
  std::string path;     ///< the file's path relative to the repository root (no newline or tab)
  std::string content;  ///< its text; must end with a newline
};

inline constexpr int kMaxHunkLines = 24;        ///< lines per side of a hunk (generic diffs)
inline constexpr int kMaxAnchoredHunkLines = 8;  ///< lines per side of an anchored hunk
inline constexpr int kMaxDiffLineBytes = 160;    ///< bytes of a generated line of text (added lines, hunk titles)
inline constexpr int kMaxAnchoredFileLines = 200;

/// `unified-diff`: "--- PATH\n+++ PATH\n" then hunks "@@ -a,B +c,D @@[ text]\n" whose lines
/// (" ", "-", "+" followed by a line of text of at most kMaxDiffLineBytes bytes) agree with
/// the counts B and D (at most kMaxHunkLines each). With `original`: one hunk against that file, "--- a/PATH" and
/// "+++ b/PATH", its context and removed lines exactly the file's lines from line a on, and
/// a hunk that stops before the file's end ending in a context line (git anchors a hunk
/// without trailing context at the end of the file), so `git apply --check` accepts it (B
/// in 1..kMaxAnchoredHunkLines, D in 1..that; files of at most kMaxAnchoredFileLines lines). Throws GrammarError (keyword "original") for a file
/// over the limit, without a final newline, or a path with a newline or tab.
Grammar unified_diff_grammar(const DiffOriginal* original = nullptr);

inline constexpr int kMaxForcedCalls = 4;  ///< call objects after a forced prefix

/// A tool the model may be forced to call: its name and its parameters' JSON Schema.
struct ToolSchema {
  std::string name;
  nlohmann::ordered_json parameters;
};

/// The rest of a forced call in the Hermes / Qwen2.5 syntax (server/tool_calls.h) after the
/// forced prefix the server puts in the prompt: with `forced` = a tool's name the prefix
/// ends in `"arguments": ` and the grammar is ARGS "}\n</tool_call>"; with `forced` empty
/// (OpenAI "required", Anthropic "any") the prefix ends in `{"name": "` and the grammar is
/// one of NAME `", "arguments": ` ARGS "}" over the tools; then more calls of the allowed
/// tools may follow in the same tag or new tags (Qwen2.5's parallel calls: back to back,
/// after "," or up to 3 spaces / newlines, or `</tool_call>` `<tool_call>` between them; at
/// most kMaxForcedCalls objects), then optionally whitespace and "</tool_call>" (the turn
/// may end right after a call). ARGS:
/// the tool's parameters schema (json_schema.h), whose member list may repeat inside the
/// braces (JsonSchemaCompiler::compile_repeatable). Throws GrammarError with `path`
/// prefixed by the index of the tool ("tools[i]").
/// parallel false (parallel_tool_calls false, disable_parallel_tool_use): exactly one call,
/// no repeated member lists, then "\n</tool_call>" and the grammar is complete.
Grammar forced_tool_call_grammar(const std::vector<ToolSchema>& tools, const std::string& forced, bool parallel = true);

/// A built-in format by name: "sarif-2.1.0" or "unified-diff" (no original). Throws
/// GrammarError(keyword "type") for another name.
Grammar builtin_format(std::string_view name);

}  // namespace swz::grammar

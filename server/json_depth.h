// The nesting limit on JSON the server reads from a request (bodies, JSON carried inside
// strings such as a tool call's `arguments`) and from generated text (tool calls).
//
// nlohmann::json parses iteratively and destroys iteratively, but serializing (dump) and
// copying recurse once per level: a ~500 KB body nesting arrays 80,000 deep overflowed an
// HTTP thread's stack the first time the server dumped or copied it (a tool's
// `parameters`, a `tool_use.input`). Every JSON text is therefore measured before it is
// parsed, and refused when it nests deeper than kMaxJsonDepth; any value the server then
// copies, dumps or hands to the chat-template renderer is a part of something measured,
// so no walk over request data recurses deeper than the limit (plus the few levels the
// server wraps around it). docs/server.md, "Limits on what a request may carry", says why 512.
#pragma once

#include "api_error.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace swz::server {

/// Arrays and objects nested in one JSON text, the outermost counting 1: `[[]]` is 2
/// deep. JSON::XS's default `max_depth` (512); far deeper than any real tool schema.
inline constexpr int kMaxJsonDepth = 512;

/// The byte offset in `text` of the `[` or `{` that opens level `limit` + 1, or npos when
/// the text never nests deeper than `limit`. Brackets inside strings do not count. One
/// pass, no recursion, no allocation. Exact for valid JSON (strings are delimited as the
/// JSON grammar delimits them); on invalid text the answer does not matter, since the
/// parser that runs next refuses it.
size_t json_depth_exceeded_at(std::string_view text, int limit = kMaxJsonDepth);

/// Throws ApiError 400 (invalid_request_error, `param`; empty = the whole body) when
/// `text` nests deeper than kMaxJsonDepth: "<what> nests arrays and objects deeper than
/// the nesting limit of 512 levels (level 513 opens at byte N)."; `what` is e.g. "The
/// request body" or "The JSON in 'messages[1].tool_calls[0].function.arguments'".
void check_json_depth(std::string_view text, const std::string& what, const std::string& param = {});

/// OpenAI's words for a body that is not JSON (parse_request_json's `not_json`).
inline constexpr std::string_view kNotJsonOpenAI = "We could not parse the JSON body of your request: ";

/// The one way a request body becomes JSON, for every endpoint that reads one (chat,
/// completions, messages, count_tokens, tokenize, detokenize, on every base path): the
/// body is measured (check_json_depth, "The request body ...") before the parser sees it,
/// so nothing deeper than kMaxJsonDepth is ever built. Throws ApiError 400
/// (invalid_request_error) for too deep, and `not_json` + the parser's message for text
/// that is not JSON (e.g. "We could not parse the JSON body of your request: ", OpenAI's
/// wording). Any JSON value comes back; the caller checks it is an object.
nlohmann::json parse_request_json(std::string_view body, std::string_view not_json);

}  // namespace swz::server

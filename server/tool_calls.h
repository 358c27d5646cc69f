// Tool calls in generated text: the Hermes / Qwen2.5 syntax
//
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
//
// which Qwen2.5's chat template asks for and which the engine uses for templates without
// tool support (engine.h, tokenize_chat_prompt). Shared by the OpenAI (`tool_calls`) and
// Anthropic (`tool_use`) wire formats; the engine has no JSON, so parsing lives here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace swz::server {

/// One call the model made. `arguments` is a compact JSON object (text).
struct ParsedToolCall {
  std::string name;
  std::string arguments;
};

/// A tool-call JSON body {"name": s, "arguments": object | JSON-object string} (also
/// "parameters" for "arguments", Llama-3's spelling; missing arguments = {}): appends its
/// call to `out`, or several calls of that function when member names repeat in the
/// arguments object (a repeated name starts the next call's arguments:
/// {"city": "Paris", "city": "Tokyo"} is two calls, as Qwen2.5 writes parallel calls of
/// one function when a call is forced; a JSON parser would silently keep only Tokyo).
/// Returns false, appending nothing, when `json_text` is not such an object.
bool parse_tool_call_json(std::string_view json_text, std::vector<ParsedToolCall>& out);

/// The body of one <tool_call>...</tool_call> tag, which may hold several calls: one call
/// object, call objects back to back (separated by nothing, whitespace or commas, as
/// Qwen2.5 writes parallel calls when a call is forced), or a JSON array of call objects;
/// each object may itself be several calls (repeated argument names, parse_tool_call_json).
/// Appends every call to `out` and returns true only when all of them parse
/// (parse_tool_call_json) and there is at least one; else `out` is unchanged (the caller
/// gives the body back as text, never a part of it as calls).
bool parse_tool_calls(std::string_view body, std::vector<ParsedToolCall>& out);

/// Splits decoded completion text into plain text and tool calls, incrementally, so a
/// stream and a whole response see the same split however the text was cut.
///
/// Text that may still become "<tool_call>" is held back; a call's body is held until
/// "</tool_call>" (or the end of generation) and becomes one call per call object in it
/// if it parses (parse_tool_calls: one object, several back to back, or an array), else
/// it is given back verbatim as text (never dropped).
/// Whitespace right before a call and between calls is not text (so no empty text
/// block precedes a tool_use). After a call, the first text that cannot begin another
/// call ends the turn: done() becomes true and that text is not returned (the turn ends
/// in the tool call, as an agent expects; the caller stops generation).
class ToolCallText {
 public:
  struct Event {
    bool is_call = false;
    std::string text;     ///< !is_call: plain text (non-empty)
    ParsedToolCall call;  ///< is_call
  };

  /// enabled=false: everything is plain text (tools not offered or tool_choice none).
  /// `tool_names` non-empty: a turn that *starts* with a bare JSON object (no
  /// <tool_call> tags, as Llama-3 writes calls and small Qwen models often do) is a call
  /// when that object parses as one naming an offered tool; else it is text.
  explicit ToolCallText(bool enabled, std::vector<std::string> tool_names = {})
      : enabled_(enabled), names_(std::move(tool_names)), bare_possible_(enabled && !names_.empty()) {}
  /// Adds decoded text (valid UTF-8); returns the events that are final now.
  std::vector<Event> push(std::string_view text);
  /// Ends the text; returns the rest (an unterminated call that parses is a call).
  std::vector<Event> finish();
  /// A call was completed and text that is not another call followed it.
  bool done() const { return done_; }
  int calls() const { return calls_; }

 private:
  void drain(bool at_end, std::vector<Event>& out);
  void emit_text(std::string s, std::vector<Event>& out);
  /// Appends one call event per parsed call, counting them.
  void emit_calls(std::vector<ParsedToolCall>& calls, std::vector<Event>& out);
  /// Bare-JSON start: returns true while the decision must wait for more text.
  bool bare_json(bool at_end, std::vector<Event>& out);
  bool enabled_;
  std::vector<std::string> names_;
  bool bare_possible_;  ///< nothing but whitespace seen yet, and bare calls are allowed
  bool in_call_ = false;
  bool done_ = false;
  int calls_ = 0;
  std::string pending_;  ///< text not yet classified (or a call body when in_call_)
  std::string space_;    ///< trailing whitespace held back: dropped if a call follows
};

/// prefix + n random alphanumerics (getrandom-seeded), e.g. random_id("toolu_", 24).
std::string random_id(std::string_view prefix, int n = 24);

}  // namespace swz::server

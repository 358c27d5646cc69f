// Chat templates: renders a GGUF's own `tokenizer.chat_template` (a Jinja2 template, as
// written for Hugging Face transformers) into the prompt text, and says which bytes of that
// text came from the caller's data (message contents, names, tool definitions, ...) rather
// than from the template's own literals.
//
// Reference semantics: Python jinja2 3.1 configured exactly as transformers'
// `apply_chat_template` does (transformers/utils/chat_template_utils.py):
//   ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
//                                 extensions=[AssistantTracker, jinja2.ext.loopcontrols])
//   filters["tojson"]  = json.dumps(x, ensure_ascii=False, indent=None, separators=None,
//                                   sort_keys=False)
//   globals["raise_exception"], globals["strftime_now"] (local time, C strftime)
// plus jinja2's defaults: keep_trailing_newline=False (one trailing newline of the source is
// dropped), newlines normalised to "\n", the default (non-strict) Undefined. llama.cpp's own
// Jinja engine (common/jinja) and minja use the same trim/lstrip defaults. The tests compare
// against Python jinja2 byte for byte (test/data/chat/gen_expected.py).
//
// What is supported is a Jinja2 subset sized for real chat templates; anything outside it
// (an unknown tag, filter, test; `{% include %}`, `{% extends %}` ...) is a TemplateError at
// parse() time, so an unsupported template fails at model load, never as silent garbage.
// See runtime/chat/README.md for the feature list and the data-span (taint) rules.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace swz::chat {

/// A template syntax error (from parse) or a render-time error (from render): unknown
/// filter/test/tag, type error, undefined attribute access, or `raise_exception(msg)` called by
/// the template. what() = "chat template <line>:<column>: <detail>" (1-based line and column of
/// the offending construct in the template source); line() and column() are 0 when unknown.
class TemplateError : public std::runtime_error {
 public:
  TemplateError(size_t line, size_t column, const std::string& detail);
  size_t line() const { return line_; }
  size_t column() const { return column_; }
  /// The message without the position prefix; for raise_exception it is the template's own text.
  const std::string& detail() const { return detail_; }
  /// True when the error came from the template calling raise_exception().
  bool raised_by_template() const { return raised_; }
  void set_raised_by_template() { raised_ = true; }

 private:
  size_t line_, column_;
  std::string detail_;
  bool raised_ = false;
};

/// A half-open byte range [begin, end) of the rendered text.
struct Span {
  size_t begin = 0, end = 0;
  bool operator==(const Span&) const = default;
};

/// The rendered prompt. `data_spans` are sorted, non-overlapping, non-adjacent, non-empty byte
/// ranges of `text` whose bytes came from strings of the render context (message contents,
/// roles, names, tool definitions, bos_token ...), not from literals in the template. The
/// tokenizer must not parse control tokens inside them. Taint rules: concatenation (`+`, `~`,
/// join, output, macro results) and byte-exact slicing (trim/strip, split, ASCII-free slices)
/// keep the exact byte ranges; any other transformation (upper, replace, tojson, format ...)
/// marks its whole result as data when any input string carried data. Only strings carry
/// taint: numbers, booleans and none from the context print as literals (they cannot spell a
/// control token). Exception: the top-level context strings bos_token, eos_token, unk_token,
/// pad_token, sep_token, cls_token, mask_token are the model's own special tokens, supplied by
/// the runtime, and count as template literals ("{{ bos_token }}" must become the control token).
struct Rendered {
  std::string text;
  std::vector<Span> data_spans;
};

namespace detail {
struct Program;
}

/// A parsed template; immutable, cheap to copy (shared AST), safe to render from several
/// threads at once.
class ChatTemplate {
 public:
  /// Parses a Jinja2 template source (UTF-8). Throws TemplateError on a syntax error or any
  /// construct outside the supported subset (unknown tag, filter or test name).
  static ChatTemplate parse(std::string_view source);

  /// Renders with `context` as the template's variables, e.g.
  /// {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true,
  ///  "bos_token": "<s>", "eos_token": "</s>", "tools": [...]}. Object key order is kept
  /// (tojson of tool schemas prints keys in the caller's order). Every string of `context` is
  /// data (see Rendered). Throws TemplateError for runtime errors and raise_exception().
  Rendered render(const nlohmann::ordered_json& context) const;
  /// Same, from a plain nlohmann::json (its objects are key-sorted, so tojson prints sorted keys).
  Rendered render(const nlohmann::json& context) const;

  /// The template source as given to parse().
  const std::string& source() const;

 private:
  std::shared_ptr<const detail::Program> prog_;
};

}  // namespace swz::chat

// Public entry points of the chat-template engine (see chat_template.h).
#include "chat/chat_template.h"

#include "chat/jinja_internal.h"

namespace swz::chat {

namespace {
std::string format_error(size_t line, size_t column, const std::string& detail) {
  if (line == 0) return "chat template: " + detail;
  return "chat template " + std::to_string(line) + ":" + std::to_string(column) + ": " + detail;
}
}  // namespace

TemplateError::TemplateError(size_t line, size_t column, const std::string& detail)
    : std::runtime_error(format_error(line, column, detail)), line_(line), column_(column), detail_(detail) {}

ChatTemplate ChatTemplate::parse(std::string_view source) {
  auto prog = std::make_shared<detail::Program>();
  prog->source = std::string(source);
  std::string normalized;
  std::vector<detail::Token> toks = detail::lex(source, &normalized);
  prog->line_starts.push_back(0);
  for (size_t i = 0; i < normalized.size(); ++i)
    if (normalized[i] == '\n') prog->line_starts.push_back(i + 1);
  detail::parse_program(*prog, toks);
  ChatTemplate t;
  t.prog_ = std::move(prog);
  return t;
}

Rendered ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return detail::render_program(*prog_, context);
}

Rendered ChatTemplate::render(const nlohmann::json& context) const {
  return detail::render_program(*prog_, nlohmann::ordered_json(context));
}

const std::string& ChatTemplate::source() const { return prog_->source; }

}  // namespace swz::chat

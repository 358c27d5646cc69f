#include "json_depth.h"

namespace swz::server {

size_t json_depth_exceeded_at(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character (\" included) cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

void check_json_depth(std::string_view text, const std::string& what, const std::string& param) {
  const size_t at = json_depth_exceeded_at(text);
  if (at == std::string_view::npos) return;
  throw ApiError(400, what + " nests arrays and objects deeper than the nesting limit of " + std::to_string(kMaxJsonDepth) +
                          " levels (level " + std::to_string(kMaxJsonDepth + 1) + " opens at byte " + std::to_string(at) + ").",
                 "invalid_request_error", param);
}

nlohmann::json parse_request_json(std::string_view body, std::string_view not_json) {
  check_json_depth(body, "The request body");
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range 406 for 1e999 (no inf in JSON)
    throw ApiError(400, std::string(not_json) + e.what());
  }
}

}  // namespace swz::server

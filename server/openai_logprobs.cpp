#include "openai_logprobs.h"

#include "text_stream.h"

namespace swz::server {

using nlohmann::json;

std::string logprob_token_text(const std::string& piece) {
  Utf8Decoder d;
  std::string s = d.feed(piece);
  return s + d.finish();
}

namespace {

json bytes_json(const std::string& piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(static_cast<int>(c));
  return b;
}

json one(engine::Engine& engine, int32_t token, double logprob) {
  const std::string piece = engine.token_piece(token);
  return {{"token", logprob_token_text(piece)}, {"logprob", logprob}, {"bytes", bytes_json(piece)}};
}

int code_points(const std::string& utf8) {
  int n = 0;
  for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

json chat_logprobs_content(engine::Engine& engine, const std::vector<engine::TokenLogprobs>& entries) {
  json out = json::array();
  for (const engine::TokenLogprobs& e : entries) {
    json j = one(engine, e.token, e.logprob);
    json top = json::array();
    for (const engine::TokenLogprob& t : e.top) top.push_back(one(engine, t.token, t.logprob));
    j["top_logprobs"] = std::move(top);
    out.push_back(std::move(j));
  }
  return out;
}

void LegacyLogprobs::put(int32_t token, json logprob, json top) {
  const std::string text = logprob_token_text(engine_.token_piece(token));
  tokens_.push_back(text);
  logprobs_.push_back(std::move(logprob));
  top_.push_back(std::move(top));
  offsets_.push_back(offset_);
  offset_ += code_points(text);
}

void LegacyLogprobs::add_first(int32_t token) { put(token, nullptr, nullptr); }

void LegacyLogprobs::add(const engine::TokenLogprobs& e) {
  json top = json::object();
  for (const engine::TokenLogprob& t : e.top) {
    const std::string text = logprob_token_text(engine_.token_piece(t.token));
    if (!top.contains(text)) top[text] = t.logprob;  // two ids with one text: the likelier
  }
  const std::string text = logprob_token_text(engine_.token_piece(e.token));
  if (!top.contains(text)) top[text] = e.logprob;
  put(e.token, e.logprob, std::move(top));
}

json LegacyLogprobs::take() {
  json j = {{"tokens", std::move(tokens_)}, {"token_logprobs", std::move(logprobs_)}, {"top_logprobs", std::move(top_)},
            {"text_offset", std::move(offsets_)}};
  tokens_ = json::array();
  logprobs_ = json::array();
  top_ = json::array();
  offsets_ = json::array();
  return j;
}

}  // namespace swz::server

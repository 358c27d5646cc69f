#include "anthropic_messages.h"
#include "structured_output.h"

#include "accounting.h"
#include "json_depth.h"

#include "server.h"
#include "text_stream.h"
#include "tool_calls.h"

#include "http_server.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>

namespace swz::server {

using nlohmann::json;

namespace {

[[noreturn]] void wrong_type(const std::string& param, const char* expected, const json& v) {
  throw bad_param(param, "Input should be " + std::string(expected) + ", but got " + json_type_name(v) + ".");
}


const json& required(const json& obj, const char* name, const std::string& param) {
  const json* v = json_field(obj, name);
  if (!v) throw bad_param(param, "Field required.");
  return *v;
}

std::string get_string(const json& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, "a string", v);
  return v.get<std::string>();
}

double get_number(const json& v, const std::string& param) {
  if (!v.is_number()) wrong_type(param, "a number", v);
  double d = v.get<double>();
  if (!std::isfinite(d)) throw bad_param(param, "Input should be a finite number.");
  return d;
}

int64_t get_integer(const json& v, const std::string& param) {
  if (!v.is_number_integer()) wrong_type(param, "an integer", v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return INT64_MAX;
  return v.get<int64_t>();
}

bool get_bool(const json& v, const std::string& param) {
  if (!v.is_boolean()) wrong_type(param, "a boolean", v);
  return v.get<bool>();
}

std::string fmt_num(double d) { return json(d).dump(); }

void check_cache_control(const json& block, const std::string& param) {
  // Accepted and ignored: the prefix cache is automatic (docs/server.md).
  if (const json* cc = json_field(block, "cache_control")) {
    if (!cc->is_object()) wrong_type(param + ".cache_control", "an object", *cc);
  }
}

/// Block types a text-only model cannot take: a clear 400 rather than a silent drop.
[[noreturn]] void unsupported_block(const std::string& type, const std::string& param) {
  if (type == "image" || type == "document")
    throw bad_param(param, "'" + type + "' content blocks are not supported: this server runs a text-only model.");
  if (type == "thinking" || type == "redacted_thinking")
    throw bad_param(param, "'" + type + "' content blocks are not supported: this server has no extended thinking.");
  throw bad_param(param, "Content block type '" + type + "' is not supported by this server.");
}

std::string block_type(const json& block, const std::string& param) {
  if (!block.is_object()) wrong_type(param, "an object", block);
  return get_string(required(block, "type", param + ".type"), param + ".type");
}

/// A text block's text (validates the block).
std::string text_block(const json& block, const std::string& param) {
  check_cache_control(block, param);
  return get_string(required(block, "text", param + ".text"), param + ".text");
}

/// tool_result content: a string or a list of text blocks (joined with "\n").
std::string tool_result_content(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) wrong_type(param, "a string or a list of content blocks", content);
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string bp = param + "." + std::to_string(i);
    const std::string type = block_type(content[i], bp);
    if (type != "text") unsupported_block(type, bp + ".type");
    if (i) out += '\n';
    out += text_block(content[i], bp);
  }
  return out;
}

constexpr std::string_view kBillingHeader = "x-anthropic-billing-header";

void parse_system(const json& sys, MessagesRequest& r) {
  std::string text;
  if (sys.is_string()) {
    text = sys.get<std::string>();
  } else if (sys.is_array()) {
    bool first = true;
    for (size_t i = 0; i < sys.size(); ++i) {
      const std::string bp = "system." + std::to_string(i);
      const std::string type = block_type(sys[i], bp);
      if (type != "text") throw bad_param(bp + ".type", "System blocks must be of type 'text', not '" + type + "'.");
      std::string t = text_block(sys[i], bp);
      // Claude Code's first system block is a per-request billing header; kept, it
      // would change the prompt's first tokens on every request and defeat the prefix
      // cache. It carries nothing for the model.
      if (t.compare(0, kBillingHeader.size(), kBillingHeader) == 0) {
        ++r.dropped_billing_blocks;
        continue;
      }
      if (!first) text += '\n';
      text += t;
      first = false;
    }
  } else {
    wrong_type("system", "a string or a list of text blocks", sys);
  }
  if (!text.empty()) r.prompt.messages.push_back({"system", text});
}

void parse_messages(const json& msgs, MessagesRequest& r) {
  if (!msgs.is_array()) wrong_type("messages", "a list", msgs);
  if (msgs.empty()) throw bad_param("messages", "At least one message is required.");
  std::map<std::string, std::string> tool_names;  // tool_use id -> name
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string mp = "messages." + std::to_string(i);
    const json& m = msgs[i];
    if (!m.is_object()) wrong_type(mp, "an object", m);
    const std::string role = get_string(required(m, "role", mp + ".role"), mp + ".role");
    if (role != "user" && role != "assistant")
      throw bad_param(mp + ".role", "Input should be 'user' or 'assistant', not '" + role + "'.");
    const json& content = required(m, "content", mp + ".content");
    const bool last = i + 1 == msgs.size();
    if (content.is_string()) {
      r.prompt.messages.push_back({role, content.get<std::string>()});
      if (last && role == "assistant") r.prompt.continue_final_message = true;
      continue;
    }
    if (!content.is_array()) wrong_type(mp + ".content", "a string or a list of content blocks", content);
    engine::ChatMessage cur{role, ""};
    bool has_text = false;
    auto flush_text = [&] {
      if (has_text) r.prompt.messages.push_back(cur);
      cur = {role, ""};
      has_text = false;
    };
    for (size_t j = 0; j < content.size(); ++j) {
      const std::string bp = mp + ".content." + std::to_string(j);
      const std::string type = block_type(content[j], bp);
      const json& b = content[j];
      if (type == "text") {
        if (has_text) cur.content += '\n';
        cur.content += text_block(b, bp);
        has_text = true;
      } else if (type == "tool_use") {
        if (role != "assistant") throw bad_param(bp + ".type", "'tool_use' blocks may only appear in assistant messages.");
        check_cache_control(b, bp);
        engine::ToolCall c;
        c.id = get_string(required(b, "id", bp + ".id"), bp + ".id");
        c.name = get_string(required(b, "name", bp + ".name"), bp + ".name");
        const json& input = required(b, "input", bp + ".input");
        if (!input.is_object()) wrong_type(bp + ".input", "an object", input);
        c.arguments = input.dump(-1, ' ', false, json::error_handler_t::replace);
        tool_names[c.id] = c.name;
        cur.tool_calls.push_back(std::move(c));
        has_text = true;  // the message exists even without text
      } else if (type == "tool_result") {
        if (role != "user") throw bad_param(bp + ".type", "'tool_result' blocks may only appear in user messages.");
        check_cache_control(b, bp);
        flush_text();
        engine::ChatMessage t{"tool", ""};
        t.tool_call_id = get_string(required(b, "tool_use_id", bp + ".tool_use_id"), bp + ".tool_use_id");
        if (const json* c = json_field(b, "content")) t.content = tool_result_content(*c, bp + ".content");
        if (const json* e = json_field(b, "is_error"); e && get_bool(*e, bp + ".is_error")) t.content = "Error: " + t.content;
        auto it = tool_names.find(t.tool_call_id);
        if (it != tool_names.end()) t.name = it->second;
        r.prompt.messages.push_back(std::move(t));
      } else {
        unsupported_block(type, bp + ".type");
      }
    }
    if (content.empty()) has_text = true;  // an empty turn is still a turn
    if (last && role == "assistant") {
      if (!cur.tool_calls.empty())
        throw bad_param(mp + ".content", "The final assistant message ends in tool_use; send its tool_result in a user message.");
      r.prompt.continue_final_message = true;
      has_text = true;
    }
    flush_text();
  }
}

void parse_tools(const json& body, MessagesRequest& r) {
  const json* tools = json_field(body, "tools");
  if (tools) {
    if (!tools->is_array()) wrong_type("tools", "a list", *tools);
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string tp = "tools." + std::to_string(i);
      const json& t = (*tools)[i];
      if (!t.is_object()) wrong_type(tp, "an object", t);
      if (const json* type = json_field(t, "type")) {
        std::string ts = get_string(*type, tp + ".type");
        if (ts != "custom")
          throw bad_param(tp + ".type", "Server tool '" + ts + "' is not supported by this server; define a custom tool "
                                        "(name, description, input_schema).");
      }
      check_cache_control(t, tp);
      engine::ToolDefinition d;
      d.name = get_string(required(t, "name", tp + ".name"), tp + ".name");
      if (d.name.empty()) throw bad_param(tp + ".name", "String should have at least 1 character.");
      if (const json* desc = json_field(t, "description")) d.description = get_string(*desc, tp + ".description");
      const json& schema = required(t, "input_schema", tp + ".input_schema");
      if (!schema.is_object()) wrong_type(tp + ".input_schema", "an object", schema);
      d.parameters = schema.dump(-1, ' ', false, json::error_handler_t::replace);
      r.prompt.tools.push_back(std::move(d));
    }
  }
  std::string choice = "auto";
  std::string forced_name;
  if (const json* tc = json_field(body, "tool_choice")) {
    if (!tc->is_object()) wrong_type("tool_choice", "an object", *tc);
    choice = get_string(required(*tc, "type", "tool_choice.type"), "tool_choice.type");
    if (choice != "auto" && choice != "any" && choice != "tool" && choice != "none")
      throw bad_param("tool_choice.type", "Input should be 'auto', 'any', 'tool' or 'none', not '" + choice + "'.");
    if (const json* d = json_field(*tc, "disable_parallel_tool_use"))
      r.disable_parallel_tool_use = get_bool(*d, "tool_choice.disable_parallel_tool_use");
    if (choice == "tool") {
      forced_name = get_string(required(*tc, "name", "tool_choice.name"), "tool_choice.name");
      bool known = false;
      for (const auto& t : r.prompt.tools) known = known || t.name == forced_name;
      if (!known) throw bad_param("tool_choice.name", "Tool '" + forced_name + "' is not among the request's tools.");
    }
    if ((choice == "any" || choice == "tool") && r.prompt.tools.empty())
      throw bad_param("tool_choice", "tool_choice '" + choice + "' requires 'tools'.");
  }
  if (r.prompt.tools.empty()) return;
  if (choice == "none") {
    // The model is not told about tools, so it cannot call one; earlier tool_use /
    // tool_result turns still render.
    r.prompt.tools.clear();
    return;
  }
  r.parse_tool_calls = true;
  // Forcing a call: the answer starts inside the template's tool-call syntax.
  if (choice == "any") r.forced_prefix = "<tool_call>\n{\"name\": \"";
  if (choice == "tool") r.forced_prefix = "<tool_call>\n{\"name\": " + json(forced_name).dump() + ", \"arguments\": ";
  if (choice == "tool") r.forced_tool = forced_name;
  r.prompt.assistant_prefix = r.forced_prefix;
}

}  // namespace

MessagesRequest parse_messages_request(std::string_view body_text, bool count_tokens) {
  const json body = parse_request_json(body_text, "The request body is not valid JSON: ");
  if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object, not " + json_type_name(body) + ".");
  MessagesRequest r;
  r.model = get_string(required(body, "model", "model"), "model");
  if (const json* sys = json_field(body, "system")) parse_system(*sys, r);
  parse_messages(required(body, "messages", "messages"), r);
  parse_tools(body, r);
  if (const json* v = json_field(body, kCacheModeField)) r.cache_mode = *v;  // extension (cache_mode.h)
  if (const json* v = json_field(body, kApproxRecomputeField)) r.approx_recompute = *v;
  if (const json* v = json_field(body, kApproxSelectField)) r.approx_select = *v;
  if (const json* th = json_field(body, "thinking")) {
    if (!th->is_object()) wrong_type("thinking", "an object", *th);
    std::string type = get_string(required(*th, "type", "thinking.type"), "thinking.type");
    // "adaptive" lets the model decide whether to think; this one never does, which
    // that mode allows. "enabled" asks for thinking blocks we cannot produce.
    if (type != "disabled" && type != "adaptive")
      throw bad_param("thinking", "Extended thinking ('thinking.type': '" + type + "') is not supported by this server.");
  }
  if (const json* cm = json_field(body, "context_management")) {
    if (!cm->is_object()) wrong_type("context_management", "an object", *cm);
    // Clearing thinking blocks is a no-op without thinking; any other edit (e.g.
    // clearing old tool results) would change the prompt and is refused, not ignored.
    if (const json* edits = json_field(*cm, "edits")) {
      if (!edits->is_array()) wrong_type("context_management.edits", "a list", *edits);
      for (size_t i = 0; i < edits->size(); ++i) {
        const std::string ep = "context_management.edits." + std::to_string(i);
        const std::string type = block_type((*edits)[i], ep);
        if (type.rfind("clear_thinking_", 0) != 0)
          throw bad_param(ep + ".type", "Context edit '" + type + "' is not supported by this server.");
      }
    }
  }
  if (const json* oc = json_field(body, "output_config")) {
    if (!oc->is_object()) wrong_type("output_config", "an object", *oc);
    // `effort` is a hint with no meaning for a model without thinking; `format` is
    // structured outputs (below).
  }
  // Structured outputs: `output_config.format` (or the beta's `output_format`), and forced
  // tool calls; schemas are read from the body re-parsed with its key order kept.
  if (!count_tokens) {
    std::optional<nlohmann::ordered_json> ordered;
    auto obody = [&]() -> const nlohmann::ordered_json& {
      if (!ordered) ordered = nlohmann::ordered_json::parse(body_text);
      return *ordered;
    };
    const json* oc = json_field(body, "output_config");
    if (!r.forced_prefix.empty()) {
      r.grammar = forced_tool_grammar(
          obody()["tools"], r.forced_tool,
          [](const nlohmann::ordered_json& t) -> const nlohmann::ordered_json* {
            auto s = t.find("input_schema");
            return s == t.end() || s->is_null() ? nullptr : &*s;
          },
          [](size_t i) { return "tools." + std::to_string(i) + ".input_schema"; }, !r.disable_parallel_tool_use);
    } else if (oc && json_field(*oc, "format")) {
      r.grammar = anthropic_output_format(obody()["output_config"]["format"]);
    } else if (json_field(body, "output_format")) {
      r.grammar = anthropic_output_format(obody()["output_format"], "output_format");
    }
    r.output_chosen = r.parse_tool_calls || (oc && json_field(*oc, "format")) || json_field(body, "output_format");
  }
  if (const json* cc = json_field(body, "cache_control")) {  // top-level: a hint, like per-block ones
    if (!cc->is_object()) wrong_type("cache_control", "an object", *cc);
  }
  if (const json* mcp = json_field(body, "mcp_servers")) {
    if (!mcp->is_array()) wrong_type("mcp_servers", "a list", *mcp);
    if (!mcp->empty()) throw bad_param("mcp_servers", "'mcp_servers' (the MCP connector) is not supported by this server.");
  }
  if (count_tokens) return r;

  const json& mt = required(body, "max_tokens", "max_tokens");
  int64_t n = get_integer(mt, "max_tokens");
  if (n < 1) throw bad_param("max_tokens", "Input should be greater than or equal to 1, got " + std::to_string(n) + ".");
  r.max_tokens = static_cast<int>(std::min<int64_t>(n, INT_MAX));
  if (const json* v = json_field(body, "metadata")) {
    if (!v->is_object()) wrong_type("metadata", "an object", *v);
    if (const json* u = json_field(*v, "user_id")) get_string(*u, "metadata.user_id");
  }
  if (const json* v = json_field(body, "temperature")) {
    double d = get_number(*v, "temperature");
    if (d < 0 || d > 1) throw bad_param("temperature", "Input should be between 0 and 1, got " + fmt_num(d) + ".");
    r.sampling.temperature = static_cast<float>(d);
  }
  if (const json* v = json_field(body, "top_p")) {
    double d = get_number(*v, "top_p");
    if (d <= 0 || d > 1) throw bad_param("top_p", "Input should be in (0, 1], got " + fmt_num(d) + ".");
    r.sampling.top_p = static_cast<float>(d);
  }
  if (const json* v = json_field(body, "top_k")) {
    int64_t k = get_integer(*v, "top_k");
    if (k < 0) throw bad_param("top_k", "Input should be greater than or equal to 0, got " + std::to_string(k) + ".");
    r.sampling.top_k = static_cast<int>(std::min<int64_t>(k, INT_MAX));
  }
  if (const json* v = json_field(body, "stream")) r.stream = get_bool(*v, "stream");
  if (const json* v = json_field(body, "stop_sequences")) {
    if (!v->is_array()) wrong_type("stop_sequences", "a list of strings", *v);
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string sp = "stop_sequences." + std::to_string(i);
      std::string s = get_string((*v)[i], sp);
      if (s.empty()) throw bad_param(sp, "Stop sequences must not be empty.");
      Utf8Decoder d;
      std::string decoded = d.feed(s);
      decoded += d.finish();
      if (decoded != s) throw bad_param(sp, "Stop sequences must be valid UTF-8.");
      r.stop_sequences.push_back(std::move(s));
    }
  }
  return r;
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:  // the server is shutting down (Server::shutdown): try again later, as for 529
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

json anthropic_error_body(const ApiError& e) {
  std::string msg = e.what();
  if (!e.param.empty() && msg.rfind(e.param + ":", 0) != 0) msg = e.param + ": " + msg;
  return {{"type", "error"}, {"error", {{"type", anthropic_error_type(e.status)}, {"message", msg}}}};
}

json anthropic_usage(int prompt_tokens, int cached_tokens, int output_tokens, const char* cache_mode) {
  const int creation = prompt_tokens - cached_tokens;  // evaluated now, and kept by the engine's cache
  json u = {{"input_tokens", prompt_tokens - cached_tokens - creation},
            {"cache_creation_input_tokens", creation},
            {"cache_read_input_tokens", cached_tokens},
            {"output_tokens", output_tokens}};
  if (cache_mode) u["swizzle_cache_mode"] = cache_mode;
  return u;
}

std::string anthropic_sse_event(const json& payload) {
  std::string s = "event: ";
  s += payload.value("type", std::string("message"));
  s += "\ndata: ";
  s += payload.dump(-1, ' ', false, json::error_handler_t::replace);
  s += "\n\n";
  return s;
}

AnthropicMessages::AnthropicMessages(engine::Engine& engine) : engine_(engine) {}

namespace {

std::vector<int32_t> tokenize_prompt(engine::Engine& engine, const engine::ChatPrompt& prompt) {
  try {
    return engine.tokenize_chat_prompt(prompt);
  } catch (const engine::InvalidRequest& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "messages");
  }
}

}  // namespace

AnthropicMessages::Prepared AnthropicMessages::prepare(std::string_view body,
                                                       const std::function<void(engine::GenerateRequest&)>& scope,
                                                       const std::string& mode_header,
                                                       const std::shared_ptr<const grammar::Grammar>& default_format) {
  if (cancelled_) throw shutting_down_error();
  Prepared p;
  p.req = parse_messages_request(body);
  if (!p.req.output_chosen) p.req.grammar = default_format;
  p.cache_mode = resolve_cache_mode(p.req.cache_mode ? &*p.req.cache_mode : nullptr, mode_header, cache_policy_);
  engine::ChatPrompt prompt = p.req.prompt;
  p.reorder = apply_cache_mode(p.cache_mode, prompt.messages, cache_policy_);
  p.gen.prompt = tokenize_prompt(engine_, prompt);
  if (p.cache_mode == frontend_ast::CacheMode::Approx) {
    p.gen.approx_atoms = approx_atom_spans(prompt.messages, p.gen.prompt, engine_);
    p.gen.approx_recompute = resolve_approx_recompute(p.req.approx_recompute ? &*p.req.approx_recompute : nullptr, cache_policy_);
    p.gen.approx_select = resolve_approx_select(p.req.approx_select ? &*p.req.approx_select : nullptr, cache_policy_);
  }
  const int n_ctx = engine_.info().n_ctx;
  const int n_prompt = static_cast<int>(p.gen.prompt.size());
  if (n_prompt + 1 > n_ctx) {
    throw ApiError(400, "prompt is too long: " + std::to_string(n_prompt) + " tokens > " + std::to_string(n_ctx - 1) +
                            " maximum");
  }
  p.gen.max_tokens = p.req.max_tokens;
  p.gen.sampling = p.req.sampling;
  p.gen.grammar = p.req.grammar;
  if (scope) scope(p.gen);
  try {
    p.admission = engine_.admit(p.gen);
  } catch (const engine::InvalidRequest& e) {
    throw ApiError(400, e.what());
  } catch (const engine::Overloaded& e) {
    throw queue_full_error(e.what(), e.retry_after_s);
  }
  p.id = random_id("msg_");
  return p;
}

int AnthropicMessages::count_tokens(std::string_view body) {
  MessagesRequest r = parse_messages_request(body, /*count_tokens=*/true);
  return static_cast<int>(tokenize_prompt(engine_, r.prompt).size());
}

/// Receives the content blocks as they become final.
struct AnthropicMessages::Sink {
  virtual ~Sink() = default;
  virtual bool text(const std::string& t) = 0;  ///< false: the client is gone
  virtual bool call(const ParsedToolCall& c) = 0;
};

AnthropicMessages::Outcome AnthropicMessages::generate(const Prepared& p, Sink& sink) {
  Outcome o;
  o.clock = TokenClock(p.received);
  CompletionText text(p.req.stop_sequences);
  std::vector<std::string> names;
  for (const auto& t : p.req.prompt.tools) names.push_back(t.name);
  ToolCallText tools(p.req.parse_tool_calls, names);
  int calls = 0;  // delivered
  auto deliver = [&](const std::vector<ToolCallText::Event>& evs) {
    for (const auto& ev : evs) {
      // disable_parallel_tool_use: one call, also when one <tool_call> tag holds several.
      if (ev.is_call && p.req.disable_parallel_tool_use && calls > 0) continue;
      if (ev.is_call) ++calls;
      if (ev.is_call ? !sink.call(ev.call) : !sink.text(ev.text)) {
        o.client_gone = true;
        return false;
      }
    }
    return true;
  };
  if (!p.req.forced_prefix.empty()) deliver(tools.push(p.req.forced_prefix));
  auto on_token = [&](const engine::TokenEvent& ev) {
    if (!deliver(tools.push(text.push(ev.piece)))) return false;
    if (p.req.disable_parallel_tool_use && tools.calls() > 0) return false;
    return !text.stopped() && !tools.done() && !cancelled_;
  };
  o.result = engine_.run(*p.admission, timed(o.clock, on_token));  // exceptions: the caller's
  if (o.client_gone) return o;
  // Stopped by the shutdown (at a token, or by the cancel check before one), not by the
  // text itself: incomplete.
  o.cut = o.result.finish == engine::FinishReason::Cancelled && cancelled_ && !text.stopped() && !tools.done() &&
          !(p.req.disable_parallel_tool_use && tools.calls() > 0);
  if (o.cut) return o;
  std::vector<ToolCallText::Event> rest = tools.push(text.finish());
  for (auto& ev : tools.finish()) rest.push_back(std::move(ev));
  deliver(rest);
  o.tool_calls = calls;
  if (o.tool_calls > 0) {
    o.stop_reason = "tool_use";
  } else if (text.stopped()) {
    o.stop_reason = "stop_sequence";
    o.stop_sequence = text.matched_stop();
  } else if (o.result.finish == engine::FinishReason::Length) {
    o.stop_reason = "max_tokens";
  } else {
    o.stop_reason = "end_turn";
  }
  return o;
}

namespace {

json tool_use_block(const ParsedToolCall& c, const std::string& id, bool with_input) {
  return {{"type", "tool_use"},
          {"id", id},
          {"name", c.name},
          {"input", with_input ? json::parse(c.arguments) : json::object()}};
}

}  // namespace

AnthropicMessages::Outcome AnthropicMessages::complete(const Prepared& p, json& body) {
  struct Collect : Sink {
    json content = json::array();
    bool text(const std::string& t) override {
      if (!content.empty() && content.back()["type"] == "text") {
        content.back()["text"] = content.back()["text"].get<std::string>() + t;
      } else {
        content.push_back({{"type", "text"}, {"text", t}});
      }
      return true;
    }
    bool call(const ParsedToolCall& c) override {
      content.push_back(tool_use_block(c, random_id("toolu_"), true));
      return true;
    }
  } sink;
  Outcome o;
  try {
    o = generate(p, sink);
  } catch (const engine::InvalidRequest& e) {
    throw ApiError(400, e.what());
  } catch (const ApiError&) {
    throw;
  } catch (const std::exception& e) {
    throw ApiError(500, std::string("The engine failed: ") + e.what(), "api_error");
  }
  if (o.cut) throw shutdown_cut_error(o.result.completion_tokens);
  const auto& r = o.result;
  body = {{"id", p.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", engine_.info().id},
          {"content", std::move(sink.content)},
          {"stop_reason", o.stop_reason},
          {"stop_sequence", o.stop_sequence.empty() ? json(nullptr) : json(o.stop_sequence)},
          {"usage", anthropic_usage(r.prompt_tokens, r.cached_tokens, r.completion_tokens, frontend_ast::cache_mode_name(p.cache_mode).data())}};
  return o;
}

AnthropicMessages::Outcome AnthropicMessages::stream(const Prepared& p,
                                                     const std::function<bool(std::string_view)>& write) {
  struct Events : Sink {
    const std::function<bool(std::string_view)>& write;
    int index = -1;            // current block
    bool text_open = false;
    bool gone = false;
    explicit Events(const std::function<bool(std::string_view)>& w) : write(w) {}
    bool send(const json& j) {
      if (!gone && !write(anthropic_sse_event(j))) gone = true;
      return !gone;
    }
    bool close_text() {
      if (!text_open) return true;
      text_open = false;
      return send({{"type", "content_block_stop"}, {"index", index}});
    }
    bool text(const std::string& t) override {
      if (!text_open) {
        text_open = true;
        if (!send({{"type", "content_block_start"}, {"index", ++index}, {"content_block", {{"type", "text"}, {"text", ""}}}}))
          return false;
      }
      return send({{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "text_delta"}, {"text", t}}}});
    }
    bool call(const ParsedToolCall& c) override {
      if (!close_text()) return false;
      ++index;
      return send({{"type", "content_block_start"}, {"index", index}, {"content_block", tool_use_block(c, random_id("toolu_"), false)}}) &&
             send({{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "input_json_delta"}, {"partial_json", c.arguments}}}}) &&
             send({{"type", "content_block_stop"}, {"index", index}});
    }
  } ev(write);

  Outcome o;
  const engine::Admission& a = *p.admission;
  json start = {{"type", "message_start"},
                {"message",
                 {{"id", p.id},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", engine_.info().id},
                  {"content", json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage", anthropic_usage(a.prompt_tokens(), a.cached_tokens(), 0, frontend_ast::cache_mode_name(p.cache_mode).data())}}}};
  if (!ev.send(start)) {
    o.client_gone = true;
    return o;
  }
  try {
    o = generate(p, ev);
  } catch (const engine::InvalidRequest& e) {
    ev.send(anthropic_error_body(ApiError(400, e.what())));
    return o;
  } catch (const std::exception& e) {
    ev.send(anthropic_error_body(ApiError(500, std::string("The engine failed: ") + e.what(), "api_error")));
    return o;
  }
  if (o.client_gone) return o;
  if (o.cut) {  // an error, not a message_delta claiming a stop_reason
    if (!ev.send(anthropic_error_body(shutdown_cut_error(o.result.completion_tokens)))) o.client_gone = true;
    return o;
  }
  if (!ev.close_text()) {
    o.client_gone = true;
    return o;
  }
  const auto& r = o.result;
  json delta = {{"type", "message_delta"},
                {"delta", {{"stop_reason", o.stop_reason},
                           {"stop_sequence", o.stop_sequence.empty() ? json(nullptr) : json(o.stop_sequence)}}},
                {"usage", anthropic_usage(r.prompt_tokens, r.cached_tokens, r.completion_tokens, frontend_ast::cache_mode_name(p.cache_mode).data())}};
  if (!ev.send(delta) || !ev.send({{"type", "message_stop"}})) o.client_gone = true;
  return o;
}

bool is_anthropic_path(std::string_view path) {
  // Also the security endpoint's copies: /v1/security/messages..., /security/v1/messages...
  bool under_base = false;
  for (std::string_view base : {"/v1/security", "/security/v1", "/v1"}) {
    if (path.rfind(base, 0) == 0) {
      path.remove_prefix(base.size());
      under_base = true;
      break;
    }
  }
  return under_base && (path == "/messages" || path.rfind("/messages/", 0) == 0);
}

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void set_header(http::Response& res, const std::string& key, const std::string& value) {
  res.headers.erase(key);
  res.headers.emplace(key, value);
}

void send_anthropic_error(http::Response& res, const ApiError& e) {
  res.status = e.status;
  set_error_headers(res, e);
  set_header(res, kCacheHitHeader, "0");
  set_header(res, kUncachedHeader, "0");
  res.set_content(anthropic_error_body(e).dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

/// anthropic-version: a date "YYYY-MM-DD" no earlier than 2023-01-01 (SDKs send newer
/// dates than 2023-06-01; the wire format here is 2023-06-01's, which later versions
/// keep); absent means 2023-06-01. Anything else is refused.
void check_version(const http::Request& req) {
  if (!req.has_header("anthropic-version")) return;
  const std::string v = req.get_header_value("anthropic-version");
  bool ok = v.size() == 10 && v[4] == '-' && v[7] == '-';
  for (size_t i = 0; ok && i < v.size(); ++i) ok = (i == 4 || i == 7) || (v[i] >= '0' && v[i] <= '9');
  if (!ok || v < "2023-01-01")
    throw ApiError(400, "anthropic-version: '" + v + "' is not a supported version (use 2023-06-01).");
}

}  // namespace

void add_anthropic_routes(HttpServer& http, AnthropicMessages& messages,
                          std::function<void(const std::string&)> log, GenerationHooks hooks, const std::string& base) {
  auto log_line = [log](const http::Request& req, int status, const AnthropicMessages::Outcome* o, double ms) {
    if (!log) return;
    char buf[512];
    if (o) {
      const auto& r = o->result;
      std::snprintf(buf, sizeof buf,
                    "%s %s %d prompt=%d cached=%d completion=%d stop=%s%s prefill=%.1fms decode=%.1fms total=%.1fms",
                    req.method.c_str(), req.path.c_str(), status, r.prompt_tokens, r.cached_tokens, r.completion_tokens,
                    o->stop_reason.c_str(), o->client_gone ? " (client disconnected)" : o->cut ? " (cut by shutdown)" : "",
                    r.prefill_ms, r.decode_ms, ms);
    } else {
      std::snprintf(buf, sizeof buf, "%s %s %d %.1fms", req.method.c_str(), req.path.c_str(), status, ms);
    }
    log(buf);
  };

  http.route("POST", base + "/messages", [&messages, log_line, hooks](const http::Request& req, http::Response& res) {
    const auto t0 = std::chrono::steady_clock::now();
    // The receipt facts of this request (route_hooks.h).
    auto receipt_of = [&req](const AnthropicMessages::Prepared& p, const AnthropicMessages::Outcome& o) {
      return receipt_facts(endpoint_label(req.path), req.body, p.req.stream, p.req.sampling, p.req.max_tokens, 1, o.result, o.clock);
    };
    std::shared_ptr<void> running = hooks.enter ? hooks.enter() : std::make_shared<int>(0);
    res.hold = running;  // counted until the answer is written
    std::shared_ptr<AnthropicMessages::Prepared> p;
    try {
      if (!running) throw shutting_down_error();
      check_version(req);
      p = std::make_shared<AnthropicMessages::Prepared>(messages.prepare(
          req.body, [&](engine::GenerateRequest& g) { if (hooks.cache_scope) hooks.cache_scope(req, g); },
          req.get_header_value(kCacheModeHeader), default_output_format(req.path)));
      set_header(res, kCacheModeHeader, std::string(frontend_ast::cache_mode_name(p->cache_mode)));
      if (hooks.admitted) hooks.admitted(req, *p->admission);
      if (!p->req.stream) {
        json body;
        AnthropicMessages::Outcome o = messages.complete(*p, body);
        set_generation_headers(res, o.result, hooks.finished ? hooks.finished(req, "/v1/messages", o.result, o.clock) : "");
        if (hooks.receipts)
          set_header(res, kReceiptHeader, seal_response_body(*hooks.receipts, receipt_of(*p, o), body));
        res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
        log_line(req, 200, &o, ms_since(t0));
        return;
      }
    } catch (const ApiError& e) {
      send_anthropic_error(res, e);
      log_line(req, res.status, nullptr, ms_since(t0));
      return;
    } catch (const std::exception& e) {
      send_anthropic_error(res, ApiError(500, std::string("Internal error: ") + e.what(), "api_error"));
      log_line(req, res.status, nullptr, ms_since(t0));
      return;
    }
    set_header(res, kCacheHitHeader, std::to_string(p->admission->cached_tokens()));
    set_header(res, kUncachedHeader, std::to_string(p->admission->uncached_tokens()));
    if (hooks.quote) set_header(res, kCostHeader, hooks.quote(p->admission->prompt_tokens(), p->admission->cached_tokens()));
    set_header(res, "Cache-Control", "no-cache");
    set_header(res, "X-Accel-Buffering", "no");
    res.set_stream("text/event-stream", [&messages, log_line, hooks, p, t0, &req, running, receipt_of](http::ChunkSink& sink) {
      AnthropicMessages::Outcome o;
      // With receipts, message_stop is held back until it is sealed with one (receipt.h).
      ReceiptStream out(
          ReceiptStream::Wire::Anthropic, [&sink](std::string_view s) { return sink.write(s); },
          hooks.receipts != nullptr);
      try {
        o = messages.stream(*p, [&out](std::string_view s) { return out.write(s); });
      } catch (...) {
        o.client_gone = true;
      }
      // Recorded when the engine ran (an engine failure ran nothing billable), also when
      // the client left mid-stream: the tokens it consumed are billed.
      if (hooks.finished && o.result.prompt_tokens > 0) hooks.finished(req, "/v1/messages", o.result, o.clock);
      if (out.holding() && !o.client_gone && !o.cut && !out.seal(*hooks.receipts, receipt_of(*p, o))) o.client_gone = true;
      log_line(req, 200, &o, ms_since(t0));
      return !o.client_gone;
    });
  });

  http.route("POST", base + "/messages/count_tokens", [&messages, log_line](const http::Request& req, http::Response& res) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      check_version(req);
      int n = messages.count_tokens(req.body);
      set_header(res, kCacheHitHeader, "0");
      set_header(res, kUncachedHeader, "0");
      res.set_content(json{{"input_tokens", n}}.dump(), "application/json");
      log_line(req, 200, nullptr, ms_since(t0));
    } catch (const ApiError& e) {
      send_anthropic_error(res, e);
      log_line(req, res.status, nullptr, ms_since(t0));
    } catch (const std::exception& e) {
      send_anthropic_error(res, ApiError(500, std::string("Internal error: ") + e.what(), "api_error"));
      log_line(req, res.status, nullptr, ms_since(t0));
    }
  });
}

}  // namespace swz::server

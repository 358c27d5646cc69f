#include "openai_chat.h"

#include "json_depth.h"
#include "openai_logprobs.h"
#include "text_stream.h"
#include "structured_output.h"
#include "tool_calls.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <random>

#include <sys/random.h>

namespace swz::server {

using nlohmann::json;

namespace {

[[noreturn]] void wrong_type(const std::string& param, const char* expected, const json& v) {
  throw bad_param(param, "Invalid type for '" + param + "': expected " + expected + ", but got " + json_type_name(v) + ".");
}


double get_number(const json& v, const std::string& param) {
  if (!v.is_number()) wrong_type(param, "a number", v);
  double d = v.get<double>();
  if (!std::isfinite(d)) throw bad_param(param, "Invalid value for '" + param + "': must be a finite number.");
  return d;
}

int64_t get_integer(const json& v, const std::string& param) {
  if (!v.is_number_integer()) wrong_type(param, "an integer", v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return INT64_MAX;
  return v.get<int64_t>();
}

std::string fmt_num(double d) {
  json j = d;
  return j.dump();
}

void check_range(double d, double lo, double hi, bool lo_open, const std::string& param) {
  bool ok = (lo_open ? d > lo : d >= lo) && d <= hi;
  if (!ok) {
    throw bad_param(param, "Invalid value for '" + param + "': " + fmt_num(d) + " is outside " + (lo_open ? "(" : "[") +
                               fmt_num(lo) + ", " + fmt_num(hi) + "].");
  }
}

std::string parse_content(const json& content, const std::string& param, const std::string& role) {
  if (content.is_null()) {
    if (role == "assistant") return {};
    throw bad_param(param, "Missing content for a '" + role + "' message.");
  }
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) wrong_type(param, "a string or an array of content parts", content);
  // Text parts are joined with "\n" (as vLLM does); other part types are not supported.
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    std::string pp = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) wrong_type(pp, "an object", part);
    const json* type = json_field(part, "type");
    if (!type || !type->is_string()) throw bad_param(pp + ".type", "Missing or invalid 'type' in content part.");
    if (type->get<std::string>() != "text") {
      throw bad_param(pp + ".type", "Content part type '" + type->get<std::string>() +
                                        "' is not supported; only 'text' parts are.");
    }
    const json* text = json_field(part, "text");
    if (!text) throw bad_param(pp + ".text", "Missing required parameter: '" + pp + ".text'.");
    if (!text->is_string()) wrong_type(pp + ".text", "a string", *text);
    if (i) out += '\n';
    out += text->get<std::string>();
  }
  return out;
}

/// tools, tool_choice, parallel_tool_calls (OpenAI function calling).
void parse_tools(const json& body, ChatRequest& r) {
  if (const json* t = json_field(body, "tools")) {
    if (!t->is_array()) wrong_type("tools", "an array", *t);
    for (size_t i = 0; i < t->size(); ++i) {
      const std::string tp = "tools[" + std::to_string(i) + "]";
      const json& tool = (*t)[i];
      if (!tool.is_object()) wrong_type(tp, "an object", tool);
      const json* type = json_field(tool, "type");
      if (!type || !type->is_string() || type->get<std::string>() != "function")
        throw bad_param(tp + ".type", "Invalid '" + tp + ".type': only 'function' tools are supported.");
      const json* fn = json_field(tool, "function");
      if (!fn) throw bad_param(tp + ".function", "Missing required parameter: '" + tp + ".function'.");
      if (!fn->is_object()) wrong_type(tp + ".function", "an object", *fn);
      const json* name = json_field(*fn, "name");
      if (!name) throw bad_param(tp + ".function.name", "Missing required parameter: '" + tp + ".function.name'.");
      if (!name->is_string() || name->get<std::string>().empty()) wrong_type(tp + ".function.name", "a non-empty string", *name);
      engine::ToolDefinition d;
      d.name = name->get<std::string>();
      if (const json* desc = json_field(*fn, "description")) {
        if (!desc->is_string()) wrong_type(tp + ".function.description", "a string", *desc);
        d.description = desc->get<std::string>();
      }
      if (const json* params = json_field(*fn, "parameters")) {
        if (!params->is_object()) wrong_type(tp + ".function.parameters", "an object", *params);
        d.parameters = params->dump(-1, ' ', false, json::error_handler_t::replace);
      }
      r.tools.push_back(std::move(d));
    }
  }
  if (const json* p = json_field(body, "parallel_tool_calls")) r.parallel_tool_calls = get_bool(*p, "parallel_tool_calls");
  std::string choice = "auto";
  std::string forced_name;
  if (const json* tc = json_field(body, "tool_choice")) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required")
        throw bad_param("tool_choice", "Invalid value for 'tool_choice': '" + choice +
                                           "'. Supported values are: 'none', 'auto', 'required' or a named function.");
    } else if (tc->is_object()) {
      const json* fn = json_field(*tc, "function");
      const json* name = fn && fn->is_object() ? json_field(*fn, "name") : nullptr;
      if (!name || !name->is_string()) throw bad_param("tool_choice.function.name", "Missing 'tool_choice.function.name'.");
      choice = "function";
      forced_name = name->get<std::string>();
      bool known = false;
      for (const auto& t : r.tools) known = known || t.name == forced_name;
      if (!known) throw bad_param("tool_choice", "Invalid 'tool_choice': function '" + forced_name + "' is not in 'tools'.");
    } else {
      wrong_type("tool_choice", "a string or an object", *tc);
    }
    if (choice != "none" && choice != "auto" && r.tools.empty())
      throw bad_param("tool_choice", "Invalid 'tool_choice': it requires 'tools'.");
  }
  if (r.tools.empty()) return;
  if (choice == "none") {  // the model is not shown the tools, so it cannot call one
    r.tools.clear();
    return;
  }
  r.parse_tool_calls = true;
  if (choice == "required") r.forced_prefix = "<tool_call>\n{\"name\": \"";
  if (choice == "function") r.forced_prefix = "<tool_call>\n{\"name\": " + json(forced_name).dump() + ", \"arguments\": ";
  if (choice == "function") r.forced_tool = forced_name;
}

/// An assistant message's tool_calls[] (OpenAI: arguments is a JSON-encoded string).
std::vector<engine::ToolCall> parse_tool_calls(const json& calls, const std::string& param) {
  if (!calls.is_array()) wrong_type(param, "an array", calls);
  std::vector<engine::ToolCall> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string cp = param + "[" + std::to_string(i) + "]";
    const json& c = calls[i];
    if (!c.is_object()) wrong_type(cp, "an object", c);
    const json* fn = json_field(c, "function");
    if (!fn || !fn->is_object()) throw bad_param(cp + ".function", "Missing required parameter: '" + cp + ".function'.");
    const json* name = json_field(*fn, "name");
    if (!name || !name->is_string()) throw bad_param(cp + ".function.name", "Missing required parameter: '" + cp + ".function.name'.");
    engine::ToolCall tc;
    tc.name = name->get<std::string>();
    if (const json* id = json_field(c, "id")) {
      if (!id->is_string()) wrong_type(cp + ".id", "a string", *id);
      tc.id = id->get<std::string>();
    }
    std::string args = "{}";
    if (const json* a = json_field(*fn, "arguments")) {
      if (a->is_string()) {
        args = a->get<std::string>();
      } else if (a->is_object()) {
        args = a->dump();
      } else {
        wrong_type(cp + ".function.arguments", "a string", *a);
      }
    }
    check_json_depth(args, "The JSON in '" + cp + ".function.arguments'", cp + ".function.arguments");
    json parsed = json::parse(args, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object())
      throw bad_param(cp + ".function.arguments", "Invalid '" + cp + ".function.arguments': not a JSON object.");
    tc.arguments = parsed.dump(-1, ' ', false, json::error_handler_t::replace);
    out.push_back(std::move(tc));
  }
  return out;
}

void reject_unsupported(const json& body) {
  if (const json* f = json_field(body, "functions")) {
    if (!f->is_array()) wrong_type("functions", "an array", *f);
    if (!f->empty()) throw bad_param("functions", "'functions' (function calling) is not supported by this server.");
  }
  if (const json* lb = json_field(body, "logit_bias")) {
    if (!lb->is_object()) wrong_type("logit_bias", "an object", *lb);
    if (!lb->empty()) throw bad_param("logit_bias", "'logit_bias' is not supported yet.");
  }
}

}  // namespace

bool get_bool(const json& v, const std::string& param) {
  if (!v.is_boolean()) wrong_type(param, "a boolean", v);
  return v.get<bool>();
}

ChatRequest parse_chat_request(std::string_view body_text) {
  const json body = parse_request_json(body_text, kNotJsonOpenAI);
  if (!body.is_object()) throw ApiError(400, "The request body must be a JSON object, not " + json_type_name(body) + ".");

  ChatRequest r;
  if (const json* m = json_field(body, "model")) {
    if (!m->is_string()) wrong_type("model", "a string", *m);
    r.model = m->get<std::string>();
  }

  const json* msgs = json_field(body, "messages");
  if (!msgs) throw bad_param("messages", "Missing required parameter: 'messages'.");
  if (!msgs->is_array()) wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) throw bad_param("messages", "Invalid 'messages': empty array. Expected an array with minimum length 1.");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) wrong_type(p, "an object", m);
    const json* role = json_field(m, "role");
    if (!role) throw bad_param(p + ".role", "Missing required parameter: '" + p + ".role'.");
    if (!role->is_string()) wrong_type(p + ".role", "a string", *role);
    std::string rs = role->get<std::string>();
    if (rs == "developer") rs = "system";  // OpenAI's newer name for system instructions
    if (rs == "function") {
      throw bad_param(p + ".role", "Messages with role 'function' (the deprecated function-calling API) are not "
                                   "supported; use 'tool'.");
    }
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "tool") {
      throw bad_param(p + ".role", "Invalid value for '" + p + ".role': '" + rs +
                                       "'. Supported values are: 'system', 'developer', 'user', 'assistant' and 'tool'.");
    }
    engine::ChatMessage msg(rs, "");
    if (const json* tcs = json_field(m, "tool_calls")) {
      if (rs != "assistant") throw bad_param(p + ".tool_calls", "Only assistant messages may carry 'tool_calls'.");
      msg.tool_calls = parse_tool_calls(*tcs, p + ".tool_calls");
    }
    if (rs == "tool") {
      const json* id = json_field(m, "tool_call_id");
      if (!id) throw bad_param(p + ".tool_call_id", "Missing required parameter: '" + p + ".tool_call_id'.");
      if (!id->is_string()) wrong_type(p + ".tool_call_id", "a string", *id);
      msg.tool_call_id = id->get<std::string>();
      for (const auto& prev : r.messages)  // the function's name, for templates that show it
        for (const auto& c : prev.tool_calls)
          if (c.id == msg.tool_call_id) msg.name = c.name;
    }
    auto content_it = m.find("content");
    if (content_it == m.end()) {
      if (rs != "assistant") throw bad_param(p + ".content", "Missing required parameter: '" + p + ".content'.");
    } else {
      msg.content = parse_content(*content_it, p + ".content", rs == "tool" ? "assistant" : rs);
    }
    r.messages.push_back(std::move(msg));
  }
  // A trailing assistant message is a prefix of the answer to continue (vLLM's
  // continue_final_message, Anthropic's prefill), not a finished turn.
  r.continue_final_message = r.messages.back().role == "assistant" && r.messages.back().tool_calls.empty();

  // max_completion_tokens is the current name; max_tokens the deprecated one. When both
  // are sent, max_completion_tokens wins.
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (const json* v = json_field(body, name)) {
      int64_t n = get_integer(*v, name);
      if (n < 1) throw bad_param(name, std::string("Invalid '") + name + "': " + std::to_string(n) + " (minimum 1).");
      r.max_tokens = static_cast<int>(std::min<int64_t>(n, INT_MAX));
    }
  }
  if (const json* v = json_field(body, "temperature")) {
    double d = get_number(*v, "temperature");
    check_range(d, 0, 2, false, "temperature");
    r.sampling.temperature = static_cast<float>(d);
  }
  if (const json* v = json_field(body, "top_p")) {
    double d = get_number(*v, "top_p");
    check_range(d, 0, 1, true, "top_p");
    r.sampling.top_p = static_cast<float>(d);
  }
  if (const json* v = json_field(body, "min_p")) {  // extension (llama.cpp)
    double d = get_number(*v, "min_p");
    check_range(d, 0, 1, false, "min_p");
    r.sampling.min_p = static_cast<float>(d);
  }
  if (const json* v = json_field(body, "top_k")) {  // extension (llama.cpp, vLLM)
    int64_t k = get_integer(*v, "top_k");
    if (k < 0) throw bad_param("top_k", "Invalid 'top_k': " + std::to_string(k) + " (minimum 0; 0 disables it).");
    r.sampling.top_k = static_cast<int>(std::min<int64_t>(k, INT_MAX));
  }
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    if (const json* p = json_field(body, name)) {
      double d = get_number(*p, name);
      check_range(d, -2, 2, false, name);
      (std::string(name) == "presence_penalty" ? r.sampling.presence_penalty : r.sampling.frequency_penalty) =
          static_cast<float>(d);
    }
  }
  if (const json* v = json_field(body, "seed")) {
    if (!v->is_number_integer()) wrong_type("seed", "an integer", *v);
    r.sampling.seed = v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (const json* v = json_field(body, "n")) {
    int64_t n = get_integer(*v, "n");
    if (n < 1) throw bad_param("n", "Invalid 'n': " + std::to_string(n) + " (minimum 1).");
    if (n > kMaxChoices)
      throw bad_param("n", "Invalid 'n': " + std::to_string(n) + " (this server generates at most " +
                               std::to_string(kMaxChoices) + " choices per request).");
    r.n = static_cast<int>(n);
  }
  // logprobs: true returns the chosen tokens' logprobs; top_logprobs (0..20) adds that
  // many alternatives per position and requires logprobs: true (as OpenAI).
  bool logprobs = false;
  if (const json* lp = json_field(body, "logprobs")) logprobs = get_bool(*lp, "logprobs");
  if (const json* tl = json_field(body, "top_logprobs")) {
    const int64_t k = get_integer(*tl, "top_logprobs");
    if (k < 0 || k > engine::kMaxTopLogprobs)
      throw bad_param("top_logprobs", "Invalid 'top_logprobs': " + std::to_string(k) + " (expected an integer in [0, " +
                                          std::to_string(engine::kMaxTopLogprobs) + "]).");
    if (!logprobs) throw bad_param("top_logprobs", "'top_logprobs' requires 'logprobs' to be true.");
    r.logprobs = static_cast<int>(k);
  } else if (logprobs) {
    r.logprobs = 0;
  }
  if (const json* v = json_field(body, "stream")) r.stream = get_bool(*v, "stream");
  if (const json* so = json_field(body, "stream_options")) {
    if (!so->is_object()) wrong_type("stream_options", "an object", *so);
    if (!r.stream) {
      throw bad_param("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
    }
    if (const json* iu = json_field(*so, "include_usage")) r.include_usage = get_bool(*iu, "stream_options.include_usage");
  }
  if (const json* v = json_field(body, "stop")) {
    if (v->is_string()) {
      r.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (size_t i = 0; i < v->size(); ++i) {
        std::string p = "stop[" + std::to_string(i) + "]";
        if (!(*v)[i].is_string()) wrong_type(p, "a string", (*v)[i]);
        r.stop.push_back((*v)[i].get<std::string>());
      }
    } else {
      wrong_type("stop", "a string or an array of strings", *v);
    }
    if (r.stop.size() > 4) throw bad_param("stop", "Invalid 'stop': at most 4 stop sequences are allowed.");
    for (const auto& s : r.stop) {
      if (s.empty()) throw bad_param("stop", "Invalid 'stop': stop sequences must not be empty.");
      // Stop sequences are compared with decoded (valid UTF-8) text.
      Utf8Decoder d;
      std::string decoded = d.feed(s);
      decoded += d.finish();
      if (decoded != s) throw bad_param("stop", "Invalid 'stop': not valid UTF-8.");
    }
  }
  if (const json* v = json_field(body, "speculative")) r.speculative = get_bool(*v, "speculative");  // extension
  if (const json* v = json_field(body, "ignore_eos")) r.ignore_eos = get_bool(*v, "ignore_eos");     // extension
  if (const json* v = json_field(body, kCacheModeField)) r.cache_mode = *v;                           // extension
  if (const json* v = json_field(body, kApproxRecomputeField)) r.approx_recompute = *v;
  if (const json* v = json_field(body, kApproxSelectField)) r.approx_select = *v;
  parse_tools(body, r);
  reject_unsupported(body);
  // Structured output (structured_output.h): schemas are read from the body re-parsed with
  // its key order kept (properties are generated in the schema's order).
  std::optional<nlohmann::ordered_json> ordered;
  auto obody = [&]() -> const nlohmann::ordered_json& {
    if (!ordered) ordered = nlohmann::ordered_json::parse(body_text);
    return *ordered;
  };
  if (!r.forced_prefix.empty()) {
    // A forced call: its syntax and the tool's arguments are constrained (response_format
    // does not apply to a tool call).
    r.grammar = forced_tool_grammar(
        obody()["tools"], r.forced_tool,
        [](const nlohmann::ordered_json& t) -> const nlohmann::ordered_json* {
          auto f = t.find("function");
          if (f == t.end() || !f->is_object()) return nullptr;
          auto p = f->find("parameters");
          return p == f->end() || p->is_null() ? nullptr : &*p;
        },
        [](size_t i) { return "tools[" + std::to_string(i) + "].function.parameters"; }, r.parallel_tool_calls);
  } else if (json_field(body, "response_format")) {
    r.grammar = openai_response_format(obody()["response_format"]);
  }
  r.output_chosen = r.parse_tool_calls || json_field(body, "response_format") != nullptr;
  return r;
}

json usage_json(int prompt_tokens, int completion_tokens, int cached_tokens, int spec_drafted, int spec_accepted,
                const char* cache_mode) {
  json u = {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}},
          {"completion_tokens_details",
           {{"reasoning_tokens", 0},
            {"accepted_prediction_tokens", spec_accepted},
            {"rejected_prediction_tokens", spec_drafted - spec_accepted}}}};
  if (cache_mode) u["swizzle_cache_mode"] = cache_mode;
  return u;
}

const char* finish_reason_name(engine::FinishReason reason, bool stop_sequence_hit) {
  if (stop_sequence_hit) return "stop";
  return reason == engine::FinishReason::Length ? "length" : "stop";
}

std::string sse_event(const json& payload) {
  std::string s = "data: ";
  s += payload.dump(-1, ' ', false, json::error_handler_t::replace);
  s += "\n\n";
  return s;
}

std::string new_completion_id() {
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  // Seeded by getrandom(2), not std::random_device: with -static-libstdc++ the latter
  // pulls in arc4random@GLIBC_2.36, which older hosts' glibc lacks.
  thread_local std::mt19937_64 rng{[] {
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed)) {
      seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    return seed;
  }()};
  std::uniform_int_distribution<int> dist(0, sizeof(kAlnum) - 2);
  std::string id = "chatcmpl-";
  for (int i = 0; i < 24; ++i) id += kAlnum[dist(rng)];
  return id;
}

namespace {

ToolCallText tool_text(const ChatCompletions::Prepared& p) {
  std::vector<std::string> names;
  for (const auto& t : p.req.tools) names.push_back(t.name);
  return ToolCallText(p.req.parse_tool_calls, std::move(names));
}

std::string new_call_id() { return random_id("call_"); }

/// {"id", "type": "function", "function": {"name", "arguments"}} (+ "index" when >= 0, for stream deltas).
json tool_call_json(const ParsedToolCall& c, const std::string& id, int index) {
  json j = {{"id", id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
  if (index >= 0) j["index"] = index;
  return j;
}

}  // namespace

ChatCompletions::ChatCompletions(engine::Engine& engine) : engine_(engine) {}

ChatCompletions::Prepared ChatCompletions::prepare(std::string_view body,
                                                   const std::function<void(engine::GenerateRequest&)>& scope,
                                                   const std::string& mode_header,
                                                   const std::shared_ptr<const grammar::Grammar>& default_format) {
  Prepared p;
  p.received = TokenClock::Clock::now();
  p.req = parse_chat_request(body);
  if (!p.req.output_chosen) p.req.grammar = default_format;
  p.cache_mode = resolve_cache_mode(p.req.cache_mode ? &*p.req.cache_mode : nullptr, mode_header, cache_policy_);
  try {
    engine::ChatPrompt prompt;
    prompt.messages = p.req.messages;
    p.reorder = apply_cache_mode(p.cache_mode, prompt.messages, cache_policy_);
    prompt.tools = p.req.tools;
    prompt.continue_final_message = p.req.continue_final_message;
    prompt.assistant_prefix = p.req.forced_prefix;
    p.gen.prompt = engine_.tokenize_chat_prompt(prompt);
    if (p.cache_mode == frontend_ast::CacheMode::Approx) {
      p.gen.approx_atoms = approx_atom_spans(prompt.messages, p.gen.prompt, engine_);
      p.gen.approx_recompute = resolve_approx_recompute(p.req.approx_recompute ? &*p.req.approx_recompute : nullptr, cache_policy_);
      p.gen.approx_select = resolve_approx_select(p.req.approx_select ? &*p.req.approx_select : nullptr, cache_policy_);
    }
  } catch (const engine::InvalidRequest& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "messages");
  }
  const int n_ctx = engine_.info().n_ctx;
  const int n_prompt = static_cast<int>(p.gen.prompt.size());
  if (n_prompt + 1 > n_ctx) {
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(n_ctx) + " tokens. However, your messages resulted in " +
                       std::to_string(n_prompt) + " tokens, which leaves no room for a completion (prompt tokens + 1 must be <= " +
                       std::to_string(n_ctx) + "). Please shorten your messages.",
                   "invalid_request_error", "messages", "context_length_exceeded");
  }
  p.gen.max_tokens = p.req.max_tokens.value_or(-1);
  p.gen.sampling = p.req.sampling;
  p.gen.speculative = p.req.speculative;
  p.gen.ignore_eos = p.req.ignore_eos;
  p.gen.logprobs = p.req.logprobs;
  p.gen.grammar = p.req.grammar;
  if (scope) scope(p.gen);
  try {
    engine::GenerateRequest g = p.gen;
    g.n = p.req.n;
    p.admission = engine_.admit(g);
  } catch (const engine::InvalidRequest& e) {
    throw ApiError(400, e.what());
  } catch (const engine::Overloaded& e) {
    throw queue_full_error(e.what(), e.retry_after_s);
  }
  p.id = new_completion_id();
  p.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return p;
}

struct ChatCompletions::ChoiceRun {
  engine::GenerateResult result;
  std::string text;
  bool stop_sequence = false;
  int tool_calls = 0;
  bool cut = false;  ///< stopped by cancel_all() before it was complete (ChatCompletions::Outcome::cut)
  std::vector<engine::TokenLogprobs> rest;  ///< logprob entries no delta carried (held-back or cut text)
  const char* finish_reason() const {
    return tool_calls ? "tool_calls" : finish_reason_name(result.finish, stop_sequence);
  }
};

/// One choice's text as its tokens arrive: stop sequences, tool calls, and the logprob
/// entries of tokens whose text no delta carried yet.
struct ChatCompletions::ChoiceState {
  explicit ChoiceState(const Prepared& p) : text(p.req.stop), tools(tool_text(p)) {}
  CompletionText text;
  ToolCallText tools;
  std::vector<engine::TokenLogprobs> pending;
  ChoiceRun run;
};

std::vector<ChatCompletions::ChoiceRun> ChatCompletions::run_all(
    const Prepared& p, TokenClock& clock, const std::function<bool(int, json, std::vector<engine::TokenLogprobs>)>& deliver,
    const std::function<bool(int, const ChoiceRun&)>& done) {
  const int n = p.req.n;
  std::vector<std::unique_ptr<ChoiceState>> st;
  for (int i = 0; i < n; ++i) st.push_back(std::make_unique<ChoiceState>(p));
  bool ok = true;  // false once the client is gone: every choice stops
  auto take = [&](int i, const std::vector<ToolCallText::Event>& evs) {
    ChoiceState& c = *st[static_cast<size_t>(i)];
    for (const auto& ev : evs) {
      // parallel_tool_calls false: one call, also when one <tool_call> tag holds several.
      if (ev.is_call && !p.req.parallel_tool_calls && c.run.tool_calls > 0) continue;
      json d;
      if (ev.is_call) {
        d = {{"tool_calls", json::array({tool_call_json(ev.call, new_call_id(), c.run.tool_calls++)})}};
      } else {
        c.run.text += ev.text;
        d = {{"content", ev.text}};
      }
      std::vector<engine::TokenLogprobs> lp;
      lp.swap(c.pending);
      if (ok && !deliver(i, std::move(d), std::move(lp))) ok = false;
    }
    return ok;
  };
  for (int i = 0; i < n; ++i) take(i, st[static_cast<size_t>(i)]->tools.push(p.req.forced_prefix));
  auto on_token = [&](int i, const engine::TokenEvent& ev) {
    ChoiceState& c = *st[static_cast<size_t>(i)];
    if (ev.logprobs) c.pending.push_back(*ev.logprobs);
    if (!take(i, c.tools.push(c.text.push(ev.piece)))) return false;
    if (!p.req.parallel_tool_calls && c.tools.calls() > 0) return false;
    return !c.text.stopped() && !c.tools.done() && !cancelled_;
  };
  auto on_done = [&](int i, const engine::GenerateResult& r) {
    ChoiceState& c = *st[static_cast<size_t>(i)];
    ChoiceRun& run = c.run;
    run.result = r;
    if (!ok) return;
    // Stopped by the shutdown (at a token, or by the cancel check before one), not by the
    // text itself: incomplete, so no finish_reason may be claimed for it.
    run.cut = r.finish == engine::FinishReason::Cancelled && cancelled_ && !c.text.stopped() && !c.tools.done() &&
              (p.req.parallel_tool_calls || c.tools.calls() == 0);
    if (run.cut) return;
    std::vector<ToolCallText::Event> rest = c.tools.push(c.text.finish());
    for (auto& ev : c.tools.finish()) rest.push_back(std::move(ev));
    run.stop_sequence = c.text.stopped();
    take(i, rest);
    run.rest = std::move(c.pending);
    c.pending.clear();
    if (ok && done && !done(i, run)) ok = false;
  };
  std::vector<engine::GenerateResult> results =
      engine_.run_choices(*p.admission, timed_choices(clock, n, on_token), on_done);
  std::vector<ChoiceRun> runs;
  for (int i = 0; i < n; ++i) {
    runs.push_back(std::move(st[static_cast<size_t>(i)]->run));
    runs.back().result = results[static_cast<size_t>(i)];
  }
  return runs;
}

namespace {

/// Adds choice `run`'s counts to the request's totals (`first`: the choice that reports the prompt).
template <class Run>
void accumulate(engine::GenerateResult& total, const Run& run, bool first) {
  const engine::GenerateResult& r = run.result;
  if (first) {
    total.prompt_tokens = r.prompt_tokens;
    total.cached_tokens = r.cached_tokens;
    total.finish = r.finish;
  }
  total.completion_tokens += r.completion_tokens;
  total.spec_drafted += r.spec_drafted;
  total.spec_accepted += r.spec_accepted;
  if (first) total.prefill_ms = r.prefill_ms;  // one prefill for all choices
  total.decode_ms += r.decode_ms;
}

}  // namespace

ChatCompletions::Outcome ChatCompletions::complete(const Prepared& p, json& body) {
  Outcome o;
  o.clock = TokenClock(p.received);
  const bool want_logprobs = p.req.logprobs >= 0;
  const size_t n = static_cast<size_t>(p.req.n);
  std::vector<json> calls(n, json::array());
  std::vector<std::vector<engine::TokenLogprobs>> entries(n);
  std::vector<ChoiceRun> runs;
  try {
    runs = run_all(p, o.clock, [&](int i, json d, std::vector<engine::TokenLogprobs> lp) {
      const size_t k = static_cast<size_t>(i);
      if (d.contains("tool_calls")) {
        json c = std::move(d["tool_calls"][0]);
        c.erase("index");
        calls[k].push_back(std::move(c));
      }
      entries[k].insert(entries[k].end(), lp.begin(), lp.end());
      return true;
    });
  } catch (const engine::InvalidRequest& e) {
    throw ApiError(400, e.what());
  } catch (const ApiError&) {
    throw;
  } catch (const std::exception& e) {
    throw ApiError(500, std::string("The engine failed: ") + e.what(), "server_error");
  }
  for (size_t i = 0; i < n; ++i) accumulate(o.result, runs[i], i == 0);
  for (const ChoiceRun& run : runs)
    if (run.cut) throw shutdown_cut_error(o.result.completion_tokens);
  json choices = json::array();
  for (size_t i = 0; i < n; ++i) {
    ChoiceRun& run = runs[i];
    entries[i].insert(entries[i].end(), run.rest.begin(), run.rest.end());
    o.tool_calls += run.tool_calls;
    if (i == 0) {
      o.text = run.text;
      o.stop_sequence = run.stop_sequence;
    }
    json message = {{"role", "assistant"}, {"content", run.text}, {"refusal", nullptr}};
    if (!calls[i].empty()) {
      message["tool_calls"] = std::move(calls[i]);
      if (run.text.empty()) message["content"] = nullptr;  // as OpenAI answers a pure call
    }
    json logprobs = nullptr;
    if (want_logprobs) logprobs = {{"content", chat_logprobs_content(engine_, entries[i])}, {"refusal", nullptr}};
    choices.push_back({{"index", i},
                       {"message", std::move(message)},
                       {"logprobs", std::move(logprobs)},
                       {"finish_reason", run.finish_reason()}});
  }
  const auto& r = o.result;
  body = {{"id", p.id},
          {"object", "chat.completion"},
          {"created", p.created},
          {"model", engine_.info().id},
          {"system_fingerprint", nullptr},
          {"choices", std::move(choices)},
          {"usage", usage_json(r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.spec_drafted, r.spec_accepted,
                               frontend_ast::cache_mode_name(p.cache_mode).data())}};
  return o;
}

json ChatCompletions::chunk(const Prepared& p, int index, json delta, const char* finish_reason, json logprobs) const {
  json c = {{"id", p.id},
            {"object", "chat.completion.chunk"},
            {"created", p.created},
            {"model", engine_.info().id},
            {"system_fingerprint", nullptr},
            {"choices", json::array({{{"index", index},
                                      {"delta", std::move(delta)},
                                      {"logprobs", std::move(logprobs)},
                                      {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)}}})}};
  // With include_usage, OpenAI sends "usage": null on every chunk but the last.
  if (p.req.include_usage) c["usage"] = nullptr;
  return c;
}

ChatCompletions::Outcome ChatCompletions::stream(const Prepared& p, const std::function<bool(std::string_view)>& write,
                                                 const std::function<void(const Outcome&)>& before_done) {
  Outcome o;
  o.clock = TokenClock(p.received);
  const bool want_logprobs = p.req.logprobs >= 0;
  auto send = [&](const json& j) {
    if (o.client_gone) return false;
    if (!write(sse_event(j))) o.client_gone = true;
    return !o.client_gone;
  };
  auto logprobs_json = [&](const std::vector<engine::TokenLogprobs>& lp) {
    return json{{"content", chat_logprobs_content(engine_, lp)}, {"refusal", nullptr}};
  };
  for (int i = 0; i < p.req.n; ++i)
    if (!send(chunk(p, i, {{"role", "assistant"}, {"content", ""}}, nullptr))) return o;
  std::vector<ChoiceRun> runs;
  try {
    runs = run_all(
        p, o.clock,
        [&](int i, json d, std::vector<engine::TokenLogprobs> lp) {
          return send(chunk(p, i, std::move(d), nullptr, want_logprobs ? logprobs_json(lp) : json(nullptr)));
        },
        [&](int i, const ChoiceRun& run) {
          if (run.cut) return true;  // reported below, once every choice has ended
          json rest = want_logprobs && !run.rest.empty() ? logprobs_json(run.rest) : json(nullptr);
          return send(chunk(p, i, json::object(), run.finish_reason(), std::move(rest)));
        });
  } catch (const engine::InvalidRequest& e) {
    send(ApiError(400, e.what()).body());
    return o;
  } catch (const std::exception& e) {
    send(ApiError(500, std::string("The engine failed: ") + e.what(), "server_error").body());
    return o;
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    accumulate(o.result, runs[i], i == 0);
    o.tool_calls += runs[i].tool_calls;
  }
  o.text = runs.front().text;
  o.stop_sequence = runs.front().stop_sequence;
  if (o.client_gone) return o;
  if (std::any_of(runs.begin(), runs.end(), [](const ChoiceRun& r) { return r.cut; })) {
    // an error event, not a finish_reason claiming a normal end
    o.cut = true;
    send(shutdown_cut_error(o.result.completion_tokens).body());
    return o;
  }
  if (p.req.include_usage) {
    json u = {{"id", p.id},
              {"object", "chat.completion.chunk"},
              {"created", p.created},
              {"model", engine_.info().id},
              {"system_fingerprint", nullptr},
              {"choices", json::array()},
              {"usage", usage_json(o.result.prompt_tokens, o.result.completion_tokens, o.result.cached_tokens,
                                   o.result.spec_drafted, o.result.spec_accepted,
                                   frontend_ast::cache_mode_name(p.cache_mode).data())}};
    if (!send(u)) return o;
  }
  if (before_done) before_done(o);
  if (!write(kSseDone)) o.client_gone = true;
  return o;
}

}  // namespace swz::server

#include "tool_calls.h"

#include "json_depth.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <random>

#include <sys/random.h>

namespace swz::server {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

bool has_non_space(std::string_view s) {
  for (char c : s)
    if (!is_space(c)) return true;
  return false;
}

/// The end (one past the closing '}' or ']') of the JSON object or array starting at
/// `text[start]`, strings and escapes respected; npos while it is not closed.
size_t json_container_end(std::string_view text, size_t start) {
  int depth = 0;
  bool in_str = false, esc = false;
  for (size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

using ojson = nlohmann::ordered_json;

/// One JSON object's members in their order, a repeated name kept every time (a parsed
/// object keeps only the last value of a name).
using Members = std::vector<std::pair<std::string, ojson>>;

/// Parses `text` (no exceptions: a discarded value when it is not JSON) and records in
/// `members` the members of the top-level object (`under` empty) or of the object that is
/// the value of the top-level member `under` (its last occurrence, as the parsed value
/// keeps). The caller has bounded the depth, so copying a member's value is safe.
ojson parse_recording_members(std::string_view text, std::string_view under, Members& members) {
  using Event = ojson::parse_event_t;
  const int depth_of_members = under.empty() ? 1 : 2;
  bool inside = under.empty();
  members.clear();
  ojson::parser_callback_t record = [&](int depth, Event ev, ojson& v) {
    if (!under.empty() && depth == 1 && ev == Event::key) {
      inside = v.is_string() && v.get_ref<const std::string&>() == under;
      if (inside) members.clear();
    }
    if (inside && depth == depth_of_members) {
      // A member's value ends with a `value` event (scalars) or its container's end event.
      if (ev == Event::key) members.emplace_back(v.get<std::string>(), ojson());
      else if ((ev == Event::value || ev == Event::object_end || ev == Event::array_end) && !members.empty())
        members.back().second = v;
    }
    return true;
  };
  return ojson::parse(text, record, /*allow_exceptions=*/false);
}

/// An arguments object whose member names repeat is the arguments of several calls of the
/// one function written into one object: Qwen2.5-Coder-0.5B, forced to call get_weather
/// for Paris and Tokyo, writes {"city": "Paris", "city": "Tokyo"}. A name already present
/// starts the next object, so every value is kept (a JSON parser would keep only the last
/// and the call for Paris would be lost). No repeated name: one object, as parsed.
std::vector<ojson> split_at_repeated_names(const Members& members) {
  std::vector<ojson> out(1, ojson::object());
  for (const auto& [name, value] : members) {
    if (out.back().contains(name)) out.push_back(ojson::object());
    out.back()[name] = value;
  }
  return out;
}

}  // namespace

bool parse_tool_call_json(std::string_view json_text, std::vector<ParsedToolCall>& out) {
  // Deeper than the request limit: not a call the server would accept back, so text.
  if (json_depth_exceeded_at(json_text) != std::string_view::npos) return false;
  Members inline_args;
  ojson j = parse_recording_members(json_text, "arguments", inline_args);
  if (j.is_discarded() || !j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return false;
  auto args = j.find("arguments");
  if (args == j.end()) {
    args = j.find("parameters");
    if (args != j.end()) parse_recording_members(json_text, "parameters", inline_args);
  }
  std::vector<ojson> objects;  // the arguments of each call
  if (args == j.end() || args->is_null()) {
    objects.push_back(ojson::object());
  } else if (args->is_string()) {
    const std::string& text = args->get_ref<const std::string&>();
    if (json_depth_exceeded_at(text) != std::string_view::npos) return false;
    Members members;
    const ojson a = parse_recording_members(text, {}, members);
    if (a.is_discarded() || !a.is_object()) return false;
    objects = split_at_repeated_names(members);
  } else if (args->is_object()) {
    objects = split_at_repeated_names(inline_args);
  } else {
    return false;
  }
  for (const ojson& a : objects)
    out.push_back({name->get<std::string>(), a.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
  return true;
}

bool parse_tool_calls(std::string_view body, std::vector<ParsedToolCall>& out) {
  auto skip = [&](size_t i, bool commas) {
    while (i < body.size() && (is_space(body[i]) || (commas && body[i] == ','))) ++i;
    return i;
  };
  std::vector<ParsedToolCall> calls;
  const size_t first = skip(0, false);
  if (first < body.size() && body[first] == '[') {
    // [{call}, {call}]: the array is the whole body.
    if (json_depth_exceeded_at(body) != std::string_view::npos) return false;
    const nlohmann::ordered_json a = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (a.is_discarded() || !a.is_array() || a.empty()) return false;
    for (const auto& e : a)
      if (!e.is_object() || !parse_tool_call_json(e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), calls))
        return false;
  } else {
    // {call}{call}, {call}\n{call}, {call}, {call}: one object after another, nothing else.
    for (size_t i = first; i < body.size(); i = skip(i, true)) {
      if (body[i] != '{') return false;
      const size_t end = json_container_end(body, i);
      if (end == std::string_view::npos) return false;
      if (!parse_tool_call_json(body.substr(i, end - i), calls)) return false;
      i = end;
    }
    if (calls.empty()) return false;
  }
  for (auto& c : calls) out.push_back(std::move(c));
  return true;
}

void ToolCallText::emit_calls(std::vector<ParsedToolCall>& calls, std::vector<Event>& out) {
  for (auto& c : calls) {
    Event ev;
    ev.is_call = true;
    ev.call = std::move(c);
    out.push_back(std::move(ev));
    ++calls_;
  }
}

void ToolCallText::emit_text(std::string s, std::vector<Event>& out) {
  if (!enabled_) {
    if (!s.empty()) out.push_back({false, std::move(s), {}});
    return;
  }
  std::string all = space_ + s;
  size_t last = all.size();
  while (last > 0 && is_space(all[last - 1])) --last;
  space_ = all.substr(last);
  if (last > 0) out.push_back({false, all.substr(0, last), {}});
}

bool ToolCallText::bare_json(bool at_end, std::vector<Event>& out) {
  const std::string_view text(pending_);
  auto skip_space = [&](size_t i) {
    while (i < text.size() && is_space(text[i])) ++i;
    return i;
  };
  auto not_a_call = [&] {
    bare_possible_ = false;
    return false;  // the text goes through the normal path
  };
  size_t obj = skip_space(0);
  if (obj == text.size()) return !at_end;  // only whitespace so far
  // Small models often fence the call as Markdown: ```json\n{...}\n```.
  bool fenced = false;
  if (text[obj] == '`') {
    constexpr std::string_view kFences[] = {"```json\n", "```\n"};
    const std::string_view rest = text.substr(obj);
    size_t body = std::string_view::npos;
    for (std::string_view f : kFences) {
      if (!at_end && rest.size() < f.size() && f.substr(0, rest.size()) == rest) return true;  // fence still arriving
      if (rest.substr(0, f.size()) == f) {
        body = obj + f.size();
        break;
      }
    }
    if (body == std::string_view::npos) return not_a_call();
    fenced = true;
    obj = skip_space(body);
    if (obj == text.size()) return !at_end;
  }
  if (text[obj] != '{') return not_a_call();
  const size_t end = json_container_end(text, obj);  // the end of the first JSON object
  if (end == std::string::npos) return at_end ? not_a_call() : true;  // wait for the object to close
  size_t consumed = end;
  if (fenced) {
    const size_t close = skip_space(end);
    const std::string_view rest = text.substr(close);
    if (rest.size() < 3) {
      if (!at_end && std::string_view("```").substr(0, rest.size()) == rest) return true;
      return not_a_call();
    }
    if (rest.substr(0, 3) != "```") return not_a_call();
    consumed = close + 3;
  }
  std::vector<ParsedToolCall> calls;
  if (!parse_tool_call_json(text.substr(obj, end - obj), calls) ||
      std::find(names_.begin(), names_.end(), calls.front().name) == names_.end())
    return not_a_call();
  bare_possible_ = false;
  pending_.erase(0, consumed);
  emit_calls(calls, out);
  return false;
}

void ToolCallText::drain(bool at_end, std::vector<Event>& out) {
  if (bare_possible_ && bare_json(at_end, out)) return;
  while (!done_) {
    if (!enabled_) {
      emit_text(std::move(pending_), out);
      pending_.clear();
      return;
    }
    if (!in_call_) {
      const size_t k = pending_.find(kOpen);
      if (k != std::string::npos) {
        std::string before = pending_.substr(0, k);
        if (calls_ > 0 && has_non_space(before)) break;
        emit_text(std::move(before), out);  // its trailing whitespace waits in space_
        pending_.erase(0, k + kOpen.size());
        in_call_ = true;
        continue;
      }
      // Hold back a suffix that may still grow into "<tool_call>".
      size_t hold = 0;
      if (!at_end) {
        for (size_t n = std::min(kOpen.size() - 1, pending_.size()); n > 0; --n) {
          if (pending_.compare(pending_.size() - n, n, kOpen, 0, n) == 0) {
            hold = n;
            break;
          }
        }
      }
      std::string release = pending_.substr(0, pending_.size() - hold);
      if (calls_ > 0 && has_non_space(release)) break;
      pending_.erase(0, release.size());
      emit_text(std::move(release), out);
      return;
    }
    const size_t k = pending_.find(kClose);
    if (k == std::string::npos && !at_end) return;
    std::string body = pending_.substr(0, k);
    pending_.erase(0, k == std::string::npos ? pending_.size() : k + kClose.size());
    in_call_ = false;
    std::vector<ParsedToolCall> calls;
    if (parse_tool_calls(body, calls)) {
      space_.clear();  // whitespace before a call is not content
      emit_calls(calls, out);
    } else {
      emit_text(std::string(kOpen) + body + (k == std::string::npos ? std::string() : std::string(kClose)), out);
    }
  }
  // Text after a call that is not another call: the turn ends here.
  done_ = true;
  pending_.clear();
}

std::vector<ToolCallText::Event> ToolCallText::push(std::string_view text) {
  std::vector<Event> out;
  if (done_) return out;
  pending_ += text;
  drain(/*at_end=*/false, out);
  return out;
}

std::vector<ToolCallText::Event> ToolCallText::finish() {
  std::vector<Event> out;
  if (!done_) drain(/*at_end=*/true, out);
  // Trailing whitespace is text only in a turn without calls.
  if (calls_ == 0 && !space_.empty()) out.push_back({false, space_, {}});
  space_.clear();
  return out;
}

std::string random_id(std::string_view prefix, int n) {
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{[] {
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed))
      seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return seed;
  }()};
  std::uniform_int_distribution<int> dist(0, sizeof(kAlnum) - 2);
  std::string id(prefix);
  for (int i = 0; i < n; ++i) id += kAlnum[dist(rng)];
  return id;
}

}  // namespace swz::server

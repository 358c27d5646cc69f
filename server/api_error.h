// An error the server answers with, in OpenAI's error schema:
//   {"error": {"message": ..., "type": ..., "param": ... | null, "code": ... | null}}
// (https://platform.openai.com/docs/guides/error-codes; the `openai` Python SDK maps the
// HTTP status to its exception class: 400 BadRequestError, 401 AuthenticationError,
// 404 NotFoundError, 500 InternalServerError.)
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace swz::server {

class ApiError : public std::runtime_error {
 public:
  /// `param`/`code` empty = JSON null.
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = {},
           std::string code = {})
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}

  int status;
  std::string type;
  std::string param;
  std::string code;
  int retry_after_s = 0;  ///< > 0: the response carries "Retry-After: <seconds>" (429)

  /// The response body for this error.
  nlohmann::json body() const {
    nlohmann::json e = {{"message", what()},
                        {"type", type},
                        {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
                        {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}};
    return {{"error", std::move(e)}};
  }
};

/// How a JSON value's type reads in a validation message: "a string", "an integer", ...
inline std::string json_type_name(const nlohmann::json& v) {
  using T = nlohmann::json::value_t;
  switch (v.type()) {
    case T::null: return "null";
    case T::boolean: return "a boolean";
    case T::string: return "a string";
    case T::array: return "an array";
    case T::object: return "an object";
    case T::number_integer:
    case T::number_unsigned: return "an integer";
    case T::number_float: return "a number";
    default: return "an unsupported value";
  }
}

/// The member `name` of `obj`, or nullptr when it is absent or JSON null (both APIs
/// treat an explicit null as "not sent").
inline const nlohmann::json* json_field(const nlohmann::json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

/// 503 for a request that arrives while the server shuts down (Server::shutdown).
/// Anthropic's schema shows it as overloaded_error (anthropic_error_type).
inline ApiError shutting_down_error() {
  return ApiError(503, "The server is shutting down and accepts no new requests; retry on another server or once it is back.",
                  "server_error", "", "server_shutting_down");
}

/// 503 for a generation the server cut when its shutdown grace period ended
/// (Server::shutdown), after `generated` tokens: the response is incomplete, so it is an
/// error, never a normal end.
inline ApiError shutdown_cut_error(int generated) {
  const std::string cut = generated == 0 ? "it was cut before its first token"
                                          : "generation was cut after " + std::to_string(generated) + " token" +
                                                (generated == 1 ? "" : "s");
  return ApiError(503,
                  "The server is shutting down: its grace period ended before this response was complete, and " + cut +
                      ". Retry the request.",
                  "server_error", "", "server_shutting_down");
}

/// 429 for a request refused because the scheduler's queue is full
/// (engine::Overloaded: --parallel requests run and --max-queue wait), with Retry-After.
/// Anthropic's schema shows it as rate_limit_error; OpenAI's SDK retries 429s itself.
inline ApiError queue_full_error(const std::string& message, int retry_after_s) {
  ApiError e(429, message, "server_overloaded", "", "queue_full");
  e.retry_after_s = retry_after_s > 0 ? retry_after_s : 1;
  return e;
}

/// Sets the headers an error carries beyond its body (Retry-After).
template <class Response>
void set_error_headers(Response& res, const ApiError& e) {
  if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
}

/// 400 invalid_request_error naming the offending field.
inline ApiError bad_param(const std::string& param, const std::string& message) {
  return ApiError(400, message, "invalid_request_error", param);
}

}  // namespace swz::server

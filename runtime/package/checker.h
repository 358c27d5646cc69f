// Field accessors of the manifest validator (package.cpp, launches.cpp): each throws
// Error("<where>: <path>: <problem>"). Internal to swz_package.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "package/package.h"

namespace swz::package::detail {

using nlohmann::json;

inline const char* json_type(const json& j) { return j.type_name(); }

/// Field accessors that throw Error("<where>: <path>: <problem>").
class Checker {
 public:
  explicit Checker(std::string where) : where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(where_ + ": " + path + ": " + what);
  }
  const json& field(const json& obj, const std::string& path, const std::string& key) const {
    if (!obj.is_object()) fail(path, std::string("expected an object, got ") + json_type(obj));
    auto it = obj.find(key);
    if (it == obj.end()) fail(join(path, key), "missing");
    return *it;
  }
  const json& object(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = field(obj, path, key);
    if (!v.is_object()) fail(join(path, key), std::string("expected an object, got ") + json_type(v));
    return v;
  }
  const json& array(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = field(obj, path, key);
    if (!v.is_array()) fail(join(path, key), std::string("expected an array, got ") + json_type(v));
    return v;
  }
  std::string string(const json& obj, const std::string& path, const std::string& key, bool non_empty = true) const {
    const json& v = field(obj, path, key);
    if (!v.is_string()) fail(join(path, key), std::string("expected a string, got ") + json_type(v));
    std::string s = v.get<std::string>();
    if (non_empty && s.empty()) fail(join(path, key), "must not be empty");
    return s;
  }
  std::optional<std::string> string_or_null(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = field(obj, path, key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_string()) fail(join(path, key), std::string("expected a string or null, got ") + json_type(v));
    return v.get<std::string>();
  }
  uint64_t uint(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = field(obj, path, key);
    return uint_value(v, join(path, key));
  }
  uint64_t uint_value(const json& v, const std::string& path) const {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    fail(path, std::string("expected a non-negative integer, got ") + (v.is_number() ? v.dump() : json_type(v)));
  }
  bool boolean(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = field(obj, path, key);
    if (!v.is_boolean()) fail(join(path, key), std::string("expected a boolean, got ") + json_type(v));
    return v.get<bool>();
  }
  double number(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = field(obj, path, key);
    if (!v.is_number()) fail(join(path, key), std::string("expected a number, got ") + json_type(v));
    return v.get<double>();
  }
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string idx(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

 private:
  std::string where_;
};

/// The launch records of every graph op of `m` (graph, kernels and weight_plan already
/// read), validated as docs/package-format.md says; throws Error through `c`.
std::vector<OpLaunches> parse_launches(const Checker& c, const Manifest& m);
std::vector<Launch> parse_argmax_launches(const Checker& c, const Manifest& m);
std::vector<Launch> parse_kv_move_launches(const Checker& c, const Manifest& m);

}  // namespace swz::package::detail

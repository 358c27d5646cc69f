#include "ledger.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace swz::server {
namespace {

using nlohmann::json;
constexpr uint64_t kFemtoPerUsd = 1'000'000'000'000'000ull;  // 1e15
constexpr double kFemtoPerTokenPerUsdPerMtok = 1e9;           // 1 USD / 1e6 tokens = 1e9 femto-USD / token
constexpr double kMaxUsdPerMtok = 1e6;

std::string u128_to_string(unsigned __int128 v) {
  if (v == 0) return "0";
  std::string s;
  while (v) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return s;
}

uint64_t parse_price(const json& v, const std::string& where) {
  if (!v.is_number()) throw std::invalid_argument(where + ": expected a number (USD per million tokens), got " + v.dump());
  double d = v.get<double>();
  if (!std::isfinite(d) || d < 0 || d > kMaxUsdPerMtok)
    throw std::invalid_argument(where + ": " + v.dump() + " is out of range [0, 1e6] USD per million tokens");
  return static_cast<uint64_t>(std::llround(d * kFemtoPerTokenPerUsdPerMtok));
}

Price parse_entry(const json& e, const std::string& where) {
  if (!e.is_object()) throw std::invalid_argument(where + ": expected an object {input, output, cached_input}");
  Price p;
  bool has_cached = false;
  for (auto it = e.begin(); it != e.end(); ++it) {
    const std::string w = where + "." + it.key();
    if (it.key() == "input") p.input = parse_price(it.value(), w);
    else if (it.key() == "output") p.output = parse_price(it.value(), w);
    else if (it.key() == "cached_input") p.cached_input = parse_price(it.value(), w), has_cached = true;
    else throw std::invalid_argument(w + ": unknown field (expected input, cached_input, output)");
  }
  if (!e.contains("input") || !e.contains("output"))
    throw std::invalid_argument(where + ": 'input' and 'output' are required");
  if (!has_cached) p.cached_input = (p.input + 5) / 10;  // a tenth of the input price, rounded
  return p;
}

double to_usd_per_mtok(uint64_t femto_per_token) { return static_cast<double>(femto_per_token) / kFemtoPerTokenPerUsdPerMtok; }

json price_json(const Price& p) {
  return {{"input", to_usd_per_mtok(p.input)},
          {"cached_input", to_usd_per_mtok(p.cached_input)},
          {"output", to_usd_per_mtok(p.output)}};
}

}  // namespace

std::string Money::usd() const {
  std::string whole = u128_to_string(femto / kFemtoPerUsd);
  std::string frac = u128_to_string(femto % kFemtoPerUsd);
  frac.insert(frac.begin(), 15 - frac.size(), '0');
  while (frac.size() > 1 && frac.back() == '0') frac.pop_back();
  return whole + "." + frac;
}

double Money::usd_double() const { return std::strtod(usd().c_str(), nullptr); }  // correctly rounded

PriceTable PriceTable::parse(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw std::invalid_argument(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument(source + ": expected a JSON object {\"default\", \"models\"}");
  PriceTable t;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "default") {
      t.default_ = parse_entry(it.value(), source + ": default");
    } else if (it.key() == "models") {
      if (!it.value().is_object()) throw std::invalid_argument(source + ": models: expected an object keyed by model id");
      for (auto m = it.value().begin(); m != it.value().end(); ++m)
        t.models_[m.key()] = parse_entry(m.value(), source + ": models[\"" + m.key() + "\"]");
    } else if (it.key() != "$comment") {
      throw std::invalid_argument(source + ": unknown field '" + it.key() + "' (expected default, models, $comment)");
    }
  }
  return t;
}

PriceTable PriceTable::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read the prices file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

const Price& PriceTable::for_model(const std::string& model) const {
  auto it = models_.find(model);
  return it == models_.end() ? default_ : it->second;
}

Money PriceTable::cost(const Price& p, const TokenCounts& t) {
  using U = unsigned __int128;
  return Money{U(t.input) * p.input + U(t.cached) * p.cached_input + U(t.output) * p.output};
}

json PriceTable::to_json() const {
  json models = json::object();
  for (const auto& [name, p] : models_) models[name] = price_json(p);
  return {{"default", price_json(default_)}, {"models", models}};
}

Money Ledger::quote(const std::string& model, const TokenCounts& t) const {
  return PriceTable::cost(prices_.for_model(model), t);
}

Money Ledger::record(const std::string& key_id, const std::string& model, const TokenCounts& t) {
  Money c = quote(model, t);
  std::lock_guard<std::mutex> lock(mu_);
  LedgerRow& r = rows_[{key_id, model}];
  r.key_id = key_id;
  r.model = model;
  ++r.requests;
  r.tokens.input += t.input;
  r.tokens.cached += t.cached;
  r.tokens.output += t.output;
  r.cost += c;
  return c;
}

std::vector<LedgerRow> Ledger::rows(const std::string& key_id, bool all) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LedgerRow> out;
  for (const auto& [k, r] : rows_)
    if (all || k.first == key_id) out.push_back(r);
  return out;
}

json Ledger::usage_json(const std::string& key_id, bool all) const {
  json data = json::array();
  LedgerRow total;
  for (const LedgerRow& r : rows(key_id, all)) {
    data.push_back({{"key_id", r.key_id},
                    {"model", r.model},
                    {"requests", r.requests},
                    {"input_tokens", r.tokens.input},
                    {"cached_input_tokens", r.tokens.cached},
                    {"output_tokens", r.tokens.output},
                    {"cost_usd", r.cost.usd_double()},
                    {"cost_usd_exact", r.cost.usd()}});
    total.requests += r.requests;
    total.tokens.input += r.tokens.input;
    total.tokens.cached += r.tokens.cached;
    total.tokens.output += r.tokens.output;
    total.cost += r.cost;
  }
  return {{"object", "list"},
          {"key_id", key_id},
          {"scope", all ? "all" : "own"},
          {"data", data},
          {"total",
           {{"requests", total.requests},
            {"input_tokens", total.tokens.input},
            {"cached_input_tokens", total.tokens.cached},
            {"output_tokens", total.tokens.output},
            {"cost_usd", total.cost.usd_double()},
            {"cost_usd_exact", total.cost.usd()}}}};
}

}  // namespace swz::server

// The usage ledger: tokens and cost per (API key, model) since the server started, priced
// from a prices file (`--prices prices.json`). Money is exact: prices are held as integer
// femto-USD (1e-15 USD) per token and costs as 128-bit integer femto-USD, so per-request
// costs add up to the ledger totals to the last digit. Schema and defaults: docs/server.md,
// "Prices file".
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace swz::server {

/// An amount of money in femto-USD (1e-15 USD); exact, never negative.
struct Money {
  unsigned __int128 femto = 0;

  Money& operator+=(Money o) {
    femto += o.femto;
    return *this;
  }
  friend bool operator==(Money a, Money b) { return a.femto == b.femto; }
  /// Exact decimal USD: at least one fractional digit, no trailing zeros ("0.0",
  /// "0.000123", "12.5").
  std::string usd() const;
  /// The nearest double (for JSON numbers).
  double usd_double() const;
};

/// Prices of one model, in femto-USD per token (1 USD per million tokens = 1e9).
struct Price {
  uint64_t input = 0;         ///< per uncached prompt token
  uint64_t cached_input = 0;  ///< per prompt token served from the prefix cache
  uint64_t output = 0;        ///< per generated token
};

/// Token counts of one request or one ledger row.
struct TokenCounts {
  uint64_t input = 0;   ///< uncached prompt tokens (prefill)
  uint64_t cached = 0;  ///< prompt tokens served from the prefix cache
  uint64_t output = 0;  ///< generated tokens
};

/// The prices of every model: explicit entries, else the file's "default" entry, else 0.
///
/// File schema (JSON), prices in USD per million tokens:
///   {"default": {"input": 0.10, "output": 0.40},
///    "models":  {"<served model id>": {"input": 0.15, "cached_input": 0.015, "output": 0.60}}}
/// "cached_input" defaults to a tenth of "input". Prices must be finite, >= 0 and at most
/// 1e6 USD per million tokens; they are exact to 1e-9 USD per million tokens (rounded to
/// the nearest femto-USD per token). Unknown keys are an error (a typo must not silently
/// price a model at 0).
class PriceTable {
 public:
  PriceTable() = default;
  /// Throws std::invalid_argument naming `source` and the offending JSON path.
  static PriceTable parse(const std::string& json_text, const std::string& source);
  /// Reads and parses a file; throws std::invalid_argument (unreadable file or bad content).
  static PriceTable load(const std::string& path);

  const Price& for_model(const std::string& model) const;
  /// The cost of `t` at `p`.
  static Money cost(const Price& p, const TokenCounts& t);
  /// {"default": {...}, "models": {...}} with prices in USD per million tokens.
  nlohmann::json to_json() const;

 private:
  Price default_;
  std::map<std::string, Price> models_;
};

/// One row of the ledger.
struct LedgerRow {
  std::string key_id;
  std::string model;
  uint64_t requests = 0;
  TokenCounts tokens;
  Money cost;
};

/// Thread-safe usage ledger, in memory (it starts empty with the process).
class Ledger {
 public:
  explicit Ledger(PriceTable prices = {}) : prices_(std::move(prices)) {}

  /// The cost `t` would have for `model`, without recording anything.
  Money quote(const std::string& model, const TokenCounts& t) const;
  /// Adds one finished request to the row (key_id, model); returns its cost.
  Money record(const std::string& key_id, const std::string& model, const TokenCounts& t);
  /// Rows sorted by (key_id, model); only `key_id`'s rows unless `all`.
  std::vector<LedgerRow> rows(const std::string& key_id, bool all) const;
  /// The GET /v1/usage body: {"object":"list","data":[{key_id, model, requests,
  /// input_tokens, cached_input_tokens, output_tokens, cost_usd}...],
  /// "total": {requests, ..., cost_usd}}; cost_usd a JSON number, cost_usd_exact its exact decimal string.
  nlohmann::json usage_json(const std::string& key_id, bool all) const;
  const PriceTable& prices() const { return prices_; }

 private:
  PriceTable prices_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, LedgerRow> rows_;
};

}  // namespace swz::server

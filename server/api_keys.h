// API keys and the identity a request is attributed to (the "key id" of the usage
// ledger). Secrets are kept only as SHA-256 digests; the clear text never leaves the
// function that reads it. Keys come from `--api-key` (repeatable), `--api-keys-file` and
// `--admin-key` (see docs/server.md, "API keys and the usage ledger").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace swz::server {

/// Who sent a request, as far as accounting is concerned.
struct Caller {
  std::string key_id;  ///< configured name, "sha256:<16 hex>" of the key sent, or "anonymous"
  bool admin = false;  ///< authenticated with the admin key: may read every ledger row
};

/// A configured key: `name` is what the ledger shows (empty: "sha256:<16 hex>" of the key).
struct ApiKey {
  std::string name;
  std::string secret;
};

/// "sha256:" + the first 16 hex digits of SHA-256(`secret`): a stable, non-reversible
/// label for a key (64 bits: collisions are negligible for attribution).
std::string key_fingerprint(std::string_view secret);

/// Parses a keys file: one key per line, `NAME KEY` or just `KEY` (then the name is its
/// fingerprint); blank lines and lines starting with '#' are skipped; NAME and KEY hold no
/// whitespace. Throws std::invalid_argument naming the file and line for a malformed
/// line (more than two fields) or an unreadable file.
std::vector<ApiKey> read_api_keys_file(const std::string& path);

/// The configured keys and the rule that maps a request's credential to a Caller.
///
/// - No keys and no admin key: every request is accepted and attributed to the
///   fingerprint of the key the client sent, or to "anonymous" when it sent none.
/// - Keys configured (`required()`): the credential must equal one of them (compared as
///   SHA-256 digests in constant time, over every key), else the request is rejected (401).
/// - The admin key is always accepted; its Caller is {"admin", admin=true}. An admin key
///   alone does not close the server: others are attributed as in the first case.
class ApiKeys {
 public:
  ApiKeys() = default;
  /// Throws std::invalid_argument for an empty secret, a secret configured twice, a name
  /// used twice or a reserved name ("admin", "anonymous"), and an admin key equal to an API key.
  ApiKeys(std::vector<ApiKey> keys, std::string admin_secret);

  /// True when requests to /v1/* must carry one of the configured keys.
  bool required() const { return !keys_.empty(); }
  bool has_admin() const { return admin_.has_value(); }

  /// `credential`: the token from "Authorization: Bearer <token>" or "x-api-key: <token>",
  /// empty when the request carried none. nullopt = rejected (only when required()).
  std::optional<Caller> resolve(std::string_view credential) const;

 private:
  using Digest = std::array<uint8_t, 32>;
  struct Entry {
    std::string name;
    Digest digest;
  };
  std::vector<Entry> keys_;
  std::optional<Digest> admin_;
};

/// The credential of a request: the token of "Authorization: Bearer <token>" (OpenAI's
/// scheme) when that header is present, else the value of "x-api-key" (Anthropic's),
/// else empty.
std::string request_credential(std::string_view authorization, std::string_view x_api_key);

}  // namespace swz::server

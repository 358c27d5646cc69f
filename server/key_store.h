// Per-organisation API keys with scopes (`swizzle-rt keys add|revoke|list`,
// `swizzle-rt serve --key-store FILE`; docs/server.md "Organisations, scopes and the
// security endpoint"). A key belongs to one organisation and carries scopes: `general`
// (the /v1/* generation endpoints) and `security` (the same endpoints under
// /v1/security/). An organisation must have accepted the acceptable-use terms before a
// `security` key is issued to it; the acceptance (terms version, who, when) is recorded
// in the store. Secrets are shown once, when issued, and stored only as SHA-256 digests:
// they are 256-bit random strings, so a fast hash is enough (nothing to brute-force).
// The server re-reads the store when the file changes: keys added or revoked take effect
// on the next request, without a restart.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace swz::server {

inline constexpr const char* kScopeGeneral = "general";
inline constexpr const char* kScopeSecurity = "security";

/// An organisation's acceptance of the acceptable-use terms.
struct TermsAcceptance {
  std::string version;      ///< the terms' version or document id, as given to `keys add --accept-terms`
  std::string accepted_by;  ///< who accepted for the organisation
  std::string accepted_at;  ///< UTC, RFC 3339
};

/// One issued key as stored (never its secret).
struct StoredKey {
  std::string id;                   ///< "key_" + 12 hex digits, public (logs, ledger, revoke)
  std::string org;                  ///< organisation name
  std::vector<std::string> scopes;  ///< subset of {general, security}, sorted
  std::string sha256;               ///< SHA-256 of the secret, 64 hex digits
  std::string created;              ///< UTC, RFC 3339
  std::string revoked;              ///< "" = active, else when it was revoked
  bool has(std::string_view scope) const;
};

/// The key store file's content: {"format": "swizzle-keys/1", "organisations": {ORG:
/// {"terms": {version, accepted_by, accepted_at}, "security_disk_cache": bool}}, "keys":
/// [{id, org, scopes, sha256, created, revoked}]} (both organisation fields optional).
struct KeyStoreData {
  std::map<std::string, TermsAcceptance> terms;  ///< by organisation
  /// Organisations whose security-scope keys may use the prefix cache's disk tier
  /// (`swizzle-rt keys set --org ORG --security-disk-cache on`); off for every other
  /// organisation's security keys (zero data retention, docs/server.md).
  std::set<std::string> security_disk_cache;
  std::vector<StoredKey> keys;

  /// Reads `path`; a file that does not exist is an empty store. Throws
  /// std::invalid_argument naming the file and the problem.
  static KeyStoreData load(const std::string& path);
  /// Writes atomically (a temporary file renamed over `path`), mode 0600.
  void save(const std::string& path) const;
  nlohmann::json to_json() const;
  static KeyStoreData from_json(const nlohmann::json& j, const std::string& source);

  /// A new key: returns {id, secret}; the secret ("sk-swz-" + 43 base64url characters)
  /// exists only in the return value. `scopes` non-empty, each general or security;
  /// `org` 1..64 of [A-Za-z0-9._-]. `terms`, if set, is recorded as the organisation's
  /// acceptance (now). A security key needs an accepted organisation (now or before).
  /// Throws std::invalid_argument.
  std::pair<std::string, std::string> add(const std::string& org, std::vector<std::string> scopes,
                                          const std::optional<TermsAcceptance>& terms = std::nullopt);
  /// Marks key `id` revoked (now). Throws std::invalid_argument for an unknown or
  /// already revoked id.
  void revoke(const std::string& id);
  /// Turns the disk tier on or off for `org`'s security-scope keys (org as in add()).
  /// Throws std::invalid_argument for a malformed organisation name.
  void set_security_disk_cache(const std::string& org, bool on);
};

/// What an authenticated store key may do.
struct KeyIdentity {
  std::string id;   ///< the key's id
  std::string org;  ///< its organisation
  bool general = false;
  bool security = false;
  /// The prefix cache's disk tier may hold this key's requests: always for a key without
  /// the security scope; for a security key only when its organisation enabled it
  /// (KeyStoreData::security_disk_cache).
  bool disk_cache = true;
};

/// The server's view of a key store file: resolves credentials and re-reads the file when
/// its modification time, size or inode change (checked at most every `recheck_ms`). A
/// file that fails to parse keeps the previous keys (reported through `note`).
/// Thread-safe.
class KeyStore {
 public:
  KeyStore(std::string path, int recheck_ms = 0);
  /// The active (not revoked) key whose secret is `credential`, compared as SHA-256
  /// digests in constant time; nullopt otherwise.
  std::optional<KeyIdentity> resolve(std::string_view credential);
  /// Called with a line when a reload fails or succeeds (may be empty).
  std::function<void(const std::string&)> note;
  const std::string& path() const { return path_; }

 private:
  void refresh();
  std::string path_;
  int recheck_ms_;
  std::mutex mu_;
  std::shared_ptr<const KeyStoreData> data_;
  std::string stamp_;  ///< mtime/size/inode of the file data_ came from
  int64_t checked_ms_ = -1;
};

}  // namespace swz::server

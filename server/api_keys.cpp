#include "api_keys.h"

#include <openssl/evp.h>

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace swz::server {
namespace {

std::array<uint8_t, 32> sha256(std::string_view data) {
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 || len != out.size())
    throw std::runtime_error("SHA-256 failed (OpenSSL EVP_Digest)");
  return out;
}

/// Equality without an early exit, so timing does not reveal how much of a digest matched.
bool same_digest(const std::array<uint8_t, 32>& a, const std::array<uint8_t, 32>& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

std::string hex(const uint8_t* p, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kHex[p[i] >> 4];
    s += kHex[p[i] & 15];
  }
  return s;
}

}  // namespace

std::string key_fingerprint(std::string_view secret) {
  auto d = sha256(secret);
  return "sha256:" + hex(d.data(), 8);
}

std::vector<ApiKey> read_api_keys_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read the API keys file " + path);
  std::vector<ApiKey> keys;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty() || f[0][0] == '#') continue;
    if (f.size() > 2)
      throw std::invalid_argument(path + ":" + std::to_string(lineno) + ": expected 'NAME KEY' or 'KEY', got " +
                                  std::to_string(f.size()) + " fields");
    keys.push_back(f.size() == 2 ? ApiKey{f[0], f[1]} : ApiKey{"", f[0]});
  }
  return keys;
}

ApiKeys::ApiKeys(std::vector<ApiKey> keys, std::string admin_secret) {
  std::set<std::string> names;
  for (ApiKey& k : keys) {
    if (k.secret.empty()) throw std::invalid_argument("an API key must not be empty");
    Entry e{k.name.empty() ? key_fingerprint(k.secret) : k.name, sha256(k.secret)};
    for (const Entry& o : keys_)
      if (same_digest(o.digest, e.digest)) throw std::invalid_argument("API key '" + e.name + "' is configured twice");
    if (e.name == "admin" || e.name == "anonymous")
      throw std::invalid_argument("the API key name '" + e.name + "' is reserved");
    if (!names.insert(e.name).second) throw std::invalid_argument("API key name '" + e.name + "' is used twice");
    keys_.push_back(std::move(e));
  }
  if (!admin_secret.empty()) {
    admin_ = sha256(admin_secret);
    for (const Entry& o : keys_)
      if (same_digest(o.digest, *admin_))
        throw std::invalid_argument("the admin key must differ from every API key ('" + o.name + "')");
  }
}

std::optional<Caller> ApiKeys::resolve(std::string_view credential) const {
  if (credential.empty()) {
    if (required()) return std::nullopt;
    return Caller{"anonymous", false};
  }
  const Digest d = sha256(credential);
  if (admin_ && same_digest(d, *admin_)) return Caller{"admin", true};
  const Entry* found = nullptr;
  for (const Entry& e : keys_)  // no early exit: every key is compared
    if (same_digest(d, e.digest)) found = &e;
  if (found) return Caller{found->name, false};
  if (required()) return std::nullopt;
  return Caller{"sha256:" + hex(d.data(), 8), false};
}

std::string request_credential(std::string_view authorization, std::string_view x_api_key) {
  constexpr std::string_view kBearer = "Bearer ";
  if (!authorization.empty()) {
    if (authorization.substr(0, kBearer.size()) == kBearer) return std::string(authorization.substr(kBearer.size()));
    return {};  // another scheme: no usable credential
  }
  return std::string(x_api_key);
}

}  // namespace swz::server

#include "key_store.h"

#include <sodium.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace swz::server {

using nlohmann::json;

namespace {

void sodium_ready() {
  static const int rc = sodium_init();
  if (rc < 0) throw std::runtime_error("libsodium could not be initialised");
}

std::string hex(const unsigned char* p, size_t n) {
  std::string s(2 * n + 1, '\0');
  sodium_bin2hex(s.data(), s.size(), p, n);
  s.pop_back();
  return s;
}

std::string sha256_hex(std::string_view s) {
  unsigned char d[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(d, reinterpret_cast<const unsigned char*>(s.data()), s.size());
  return hex(d, sizeof d);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool valid_org(const std::string& org) {
  if (org.empty() || org.size() > 64) return false;
  return std::all_of(org.begin(), org.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

std::string str(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) throw std::invalid_argument(where + "." + key + ": expected a string");
  return it->get<std::string>();
}

}  // namespace

bool StoredKey::has(std::string_view scope) const {
  return std::find(scopes.begin(), scopes.end(), scope) != scopes.end();
}

json KeyStoreData::to_json() const {
  json orgs = json::object();
  for (const auto& [org, t] : terms)
    orgs[org]["terms"] = {{"version", t.version}, {"accepted_by", t.accepted_by}, {"accepted_at", t.accepted_at}};
  for (const std::string& org : security_disk_cache) orgs[org]["security_disk_cache"] = true;
  json ks = json::array();
  for (const StoredKey& k : keys)
    ks.push_back({{"id", k.id}, {"org", k.org}, {"scopes", k.scopes}, {"sha256", k.sha256}, {"created", k.created},
                  {"revoked", k.revoked.empty() ? json(nullptr) : json(k.revoked)}});
  return {{"format", "swizzle-keys/1"}, {"organisations", std::move(orgs)}, {"keys", std::move(ks)}};
}

KeyStoreData KeyStoreData::from_json(const json& j, const std::string& source) {
  if (!j.is_object() || j.value("format", "") != "swizzle-keys/1")
    throw std::invalid_argument(source + ": not a key store (expected {\"format\": \"swizzle-keys/1\", ...})");
  KeyStoreData d;
  if (auto o = j.find("organisations"); o != j.end() && o->is_object()) {
    for (auto it = o->begin(); it != o->end(); ++it) {
      const std::string where = source + ": organisations." + it.key();
      if (!it->is_object()) throw std::invalid_argument(where + ": expected an object");
      if (auto t = it->find("terms"); t != it->end()) {
        if (!t->is_object()) throw std::invalid_argument(where + ".terms: expected an object");
        d.terms[it.key()] = {str(*t, "version", where + ".terms"), str(*t, "accepted_by", where + ".terms"),
                             str(*t, "accepted_at", where + ".terms")};
      }
      if (auto c = it->find("security_disk_cache"); c != it->end()) {
        if (!c->is_boolean()) throw std::invalid_argument(where + ".security_disk_cache: expected true or false");
        if (c->get<bool>()) d.security_disk_cache.insert(it.key());
      }
    }
  }
  auto ks = j.find("keys");
  if (ks == j.end() || !ks->is_array()) throw std::invalid_argument(source + ": keys: expected an array");
  for (size_t i = 0; i < ks->size(); ++i) {
    const json& k = (*ks)[i];
    const std::string where = source + ": keys[" + std::to_string(i) + "]";
    if (!k.is_object()) throw std::invalid_argument(where + ": expected an object");
    StoredKey s;
    s.id = str(k, "id", where);
    s.org = str(k, "org", where);
    s.sha256 = str(k, "sha256", where);
    s.created = str(k, "created", where);
    if (s.sha256.size() != 64) throw std::invalid_argument(where + ".sha256: expected 64 hex digits");
    auto sc = k.find("scopes");
    if (sc == k.end() || !sc->is_array()) throw std::invalid_argument(where + ".scopes: expected an array");
    for (const json& x : *sc) {
      if (!x.is_string() || (x != kScopeGeneral && x != kScopeSecurity))
        throw std::invalid_argument(where + ".scopes: unknown scope " + x.dump());
      s.scopes.push_back(x.get<std::string>());
    }
    if (auto r = k.find("revoked"); r != k.end() && r->is_string()) s.revoked = r->get<std::string>();
    d.keys.push_back(std::move(s));
  }
  return d;
}

KeyStoreData KeyStoreData::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return {};
    throw std::invalid_argument(path + ": cannot be read");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) throw std::invalid_argument(path + ": not JSON");
  return from_json(j, path);
}

void KeyStoreData::save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  const std::string text = to_json().dump(2) + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) throw std::runtime_error(tmp + ": cannot be created");
  const bool ok = ::fchmod(fd, 0600) == 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error(path + ": cannot be written");
}

std::pair<std::string, std::string> KeyStoreData::add(const std::string& org, std::vector<std::string> scopes,
                                                      const std::optional<TermsAcceptance>& accept) {
  sodium_ready();
  if (!valid_org(org)) throw std::invalid_argument("organisation '" + org + "': 1 to 64 of A-Z a-z 0-9 . _ -");
  if (scopes.empty()) throw std::invalid_argument("a key needs at least one scope (general, security)");
  for (const std::string& s : scopes)
    if (s != kScopeGeneral && s != kScopeSecurity)
      throw std::invalid_argument("unknown scope '" + s + "' (the scopes are general and security)");
  std::sort(scopes.begin(), scopes.end());
  scopes.erase(std::unique(scopes.begin(), scopes.end()), scopes.end());
  if (accept) {
    if (accept->version.empty() || accept->accepted_by.empty())
      throw std::invalid_argument("accepting the terms needs their version and who accepts them");
    TermsAcceptance t = *accept;
    if (t.accepted_at.empty()) t.accepted_at = utc_now();
    terms[org] = t;
  }
  if (std::find(scopes.begin(), scopes.end(), kScopeSecurity) != scopes.end() && !terms.count(org))
    throw std::invalid_argument("organisation '" + org +
                                "' has not accepted the acceptable-use terms, which a security key requires "
                                "(--accept-terms VERSION --accepted-by NAME)");
  unsigned char raw[32];
  randombytes_buf(raw, sizeof raw);
  std::string secret(sodium_base64_encoded_len(sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING), '\0');
  sodium_bin2base64(secret.data(), secret.size(), raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  secret.resize(std::char_traits<char>::length(secret.c_str()));
  secret = "sk-swz-" + secret;
  sodium_memzero(raw, sizeof raw);
  unsigned char idb[6];
  randombytes_buf(idb, sizeof idb);
  StoredKey k{"key_" + hex(idb, sizeof idb), org, std::move(scopes), sha256_hex(secret), utc_now(), ""};
  keys.push_back(k);
  return {k.id, secret};
}

void KeyStoreData::revoke(const std::string& id) {
  for (StoredKey& k : keys) {
    if (k.id != id) continue;
    if (!k.revoked.empty()) throw std::invalid_argument("key " + id + " was already revoked (" + k.revoked + ")");
    k.revoked = utc_now();
    return;
  }
  throw std::invalid_argument("no key " + id + " in the store");
}

void KeyStoreData::set_security_disk_cache(const std::string& org, bool on) {
  if (!valid_org(org)) throw std::invalid_argument("organisation '" + org + "': 1 to 64 of A-Z a-z 0-9 . _ -");
  if (on) security_disk_cache.insert(org);
  else security_disk_cache.erase(org);
}

KeyStore::KeyStore(std::string path, int recheck_ms) : path_(std::move(path)), recheck_ms_(recheck_ms) {
  sodium_ready();
  data_ = std::make_shared<const KeyStoreData>(KeyStoreData::load(path_));  // a bad file: an error at start
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0)
    stamp_ = std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "/" + std::to_string(st.st_size) +
             "/" + std::to_string(st.st_ino);
}

void KeyStore::refresh() {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  if (checked_ms_ >= 0 && now - checked_ms_ < recheck_ms_) return;
  checked_ms_ = now;
  struct stat st {};
  std::string stamp;
  if (::stat(path_.c_str(), &st) == 0)
    stamp = std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "/" + std::to_string(st.st_size) +
            "/" + std::to_string(st.st_ino);
  if (stamp == stamp_) return;
  try {
    data_ = std::make_shared<const KeyStoreData>(KeyStoreData::load(path_));
    stamp_ = stamp;
    if (note) note("key store " + path_ + " reloaded: " + std::to_string(data_->keys.size()) + " key(s)");
  } catch (const std::exception& e) {
    stamp_ = stamp;  // report a broken file once, keep serving the previous keys
    if (note) note(std::string("key store reload failed, keeping the previous keys: ") + e.what());
  }
}

std::optional<KeyIdentity> KeyStore::resolve(std::string_view credential) {
  std::shared_ptr<const KeyStoreData> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    refresh();
    d = data_;
  }
  if (credential.empty()) return std::nullopt;
  const std::string digest = sha256_hex(credential);
  const StoredKey* found = nullptr;
  for (const StoredKey& k : d->keys)  // no early exit: every key is compared
    if (k.sha256.size() == 64 && sodium_memcmp(k.sha256.data(), digest.data(), 64) == 0) found = &k;
  if (!found || !found->revoked.empty()) return std::nullopt;
  const bool security = found->has(kScopeSecurity);
  return KeyIdentity{found->id, found->org, found->has(kScopeGeneral), security,
                     !security || d->security_disk_cache.count(found->org) > 0};
}

}  // namespace swz::server

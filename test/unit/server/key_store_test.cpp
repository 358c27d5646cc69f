// Per-organisation keys with scopes (server/key_store.h) and the security endpoint: the
// store file (hashed secrets only, terms before a security key, revocation), and over a
// real socket with the FakeEngine: scopes -> 200 / 403 in each API's schema, 401 for
// unknown and revoked keys, keys added and revoked without a restart, the ledger per
// organisation.
#include "fake_engine.h"
#include "running_server.h"
#include "key_store.h"
#include "receipt.h"
#include "server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <sys/stat.h>

namespace {

using nlohmann::json;
using namespace swz::server;
using swz::test::FakeEngine;

std::string sha256_hex(const std::string& s) {
  unsigned char d[32];
  unsigned int n = 0;
  EVP_Digest(s.data(), s.size(), d, &n, EVP_sha256(), nullptr);
  static const char* k = "0123456789abcdef";
  std::string h;
  for (unsigned char c : d) h += std::string{k[c >> 4], k[c & 15]};
  return h;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct TempDir {
  TempDir() {
    static int n = 0;
    path = std::filesystem::temp_directory_path() / ("swz-keys-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::filesystem::path path;
};

TEST(KeyStore, SecurityKeysNeedAcceptedTermsAndOnlyDigestsAreStored) {
  TempDir dir;
  const std::string path = dir.file("keys.json");
  KeyStoreData d = KeyStoreData::load(path);  // absent: empty
  EXPECT_TRUE(d.keys.empty());
  try {
    d.add("acme", {"security"});
    FAIL() << "a security key without accepted terms";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("acceptable-use terms"), std::string::npos) << e.what();
  }
  EXPECT_THROW(d.add("acme", {"admin"}), std::invalid_argument);
  EXPECT_THROW(d.add("a cme", {"general"}), std::invalid_argument);
  EXPECT_THROW(d.add("acme", {}), std::invalid_argument);
  auto [gid, gsecret] = d.add("acme", {"general"});
  auto [sid, ssecret] = d.add("acme", {"security", "general", "security"}, TermsAcceptance{"aup-2026-11", "Ada Lovelace", ""});
  auto [oid, osecret] = d.add("globex", {"general"});
  ASSERT_EQ(d.keys.size(), 3u);
  EXPECT_EQ(d.keys[1].scopes, (std::vector<std::string>{"general", "security"}));
  EXPECT_EQ(gsecret.rfind("sk-swz-", 0), 0u);
  EXPECT_EQ(gsecret.size(), 7u + 43u);
  EXPECT_EQ(d.terms.at("acme").version, "aup-2026-11");
  EXPECT_EQ(d.terms.at("acme").accepted_by, "Ada Lovelace");
  EXPECT_EQ(d.terms.at("acme").accepted_at.size(), 20u);  // 2026-12-01T12:00:00Z
  auto [s2, s2secret] = d.add("acme", {"security"});  // accepted once is enough
  (void)s2secret;
  d.save(path);

  const std::string text = slurp(path);
  for (const std::string& secret : {gsecret, ssecret, osecret}) {
    EXPECT_EQ(text.find(secret), std::string::npos);
    EXPECT_EQ(text.find(secret.substr(7)), std::string::npos);
    EXPECT_NE(text.find(sha256_hex(secret)), std::string::npos);
  }
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  KeyStoreData back = KeyStoreData::load(path);
  EXPECT_EQ(back.to_json(), d.to_json());
  back.revoke(gid);
  EXPECT_FALSE(back.keys[0].revoked.empty());
  EXPECT_THROW(back.revoke(gid), std::invalid_argument);
  EXPECT_THROW(back.revoke("key_000000000000"), std::invalid_argument);
  std::ofstream(dir.file("bad.json")) << R"({"format": "swizzle-keys/1", "keys": [{"id": "k"}]})";
  EXPECT_THROW(KeyStoreData::load(dir.file("bad.json")), std::invalid_argument);
  (void)sid, (void)oid, (void)s2;
}

TEST(KeyStore, ResolvesActiveKeysAndReloadsWhenTheFileChanges) {
  TempDir dir;
  const std::string path = dir.file("keys.json");
  KeyStoreData d;
  auto [gid, g] = d.add("acme", {"general"});
  d.save(path);
  KeyStore store(path, 0);
  std::vector<std::string> notes;
  store.note = [&](const std::string& l) { notes.push_back(l); };
  auto k = store.resolve(g);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->id, gid);
  EXPECT_EQ(k->org, "acme");
  EXPECT_TRUE(k->general);
  EXPECT_FALSE(k->security);
  EXPECT_FALSE(store.resolve(""));
  EXPECT_FALSE(store.resolve(g + "x"));

  auto [sid, s] = d.add("acme", {"security"}, TermsAcceptance{"v1", "Ada", ""});
  d.revoke(gid);
  d.save(path);
  EXPECT_FALSE(store.resolve(g));  // revoked, no restart
  auto ks = store.resolve(s);
  ASSERT_TRUE(ks);
  EXPECT_TRUE(ks->security);
  EXPECT_FALSE(ks->general);
  ASSERT_FALSE(notes.empty());

  std::ofstream(path) << "{ broken";
  EXPECT_TRUE(store.resolve(s));  // a broken file keeps the previous keys
  EXPECT_NE(notes.back().find("keeping the previous keys"), std::string::npos) << notes.back();
}

struct ScopedServer : swz::test::RunningServer {
  explicit ScopedServer(ServerOptions o) {
    engine.pieces = {"a", "b", "c"};
    o.key_store_recheck_ms = 0;
    start(std::move(o));
  }
  httplib::Result post(const std::string& path, const std::string& key, bool anthropic_header = false) const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    httplib::Headers h;
    if (!key.empty()) h.emplace(anthropic_header ? "x-api-key" : "Authorization", anthropic_header ? key : "Bearer " + key);
    json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 3}, {"model", "m"}};
    if (path.find("/completions") != std::string::npos && path.find("chat") == std::string::npos) body = {{"prompt", "hi"}, {"max_tokens", 3}};
    return c.Post(path.c_str(), h, body.dump(), "application/json");
  }
  httplib::Result usage(const std::string& key) const {
    httplib::Client c("127.0.0.1", port);
    return c.Get("/v1/usage", {{"Authorization", "Bearer " + key}});
  }
};

TEST(KeyStore, SecurityKeysStayOffTheDiskTierUnlessTheirOrganisationEnablesIt) {
  TempDir dir;
  const std::string path = dir.file("keys.json");
  KeyStoreData d;
  auto [gid, g] = d.add("acme", {"general"});
  auto [sid, s] = d.add("acme", {"security"}, TermsAcceptance{"v1", "Ada", ""});
  auto [bid, b] = d.add("globex", {"general", "security"}, TermsAcceptance{"v1", "Grace", ""});
  d.save(path);
  KeyStore store(path, 0);
  EXPECT_TRUE(store.resolve(g)->disk_cache);   // no security scope: always
  EXPECT_FALSE(store.resolve(s)->disk_cache);  // security scope: off by default
  EXPECT_FALSE(store.resolve(b)->disk_cache);  // either scope with security: off
  d.set_security_disk_cache("acme", true);
  d.save(path);  // reloaded without a restart
  EXPECT_TRUE(store.resolve(s)->disk_cache);
  EXPECT_FALSE(store.resolve(b)->disk_cache);  // per organisation
  const nlohmann::json j = nlohmann::json::parse(slurp(path));
  EXPECT_EQ(j["organisations"]["acme"]["security_disk_cache"], true);
  EXPECT_FALSE(j["organisations"]["globex"].contains("security_disk_cache"));
  KeyStoreData back = KeyStoreData::load(path);
  EXPECT_EQ(back.security_disk_cache, std::set<std::string>{"acme"});
  EXPECT_EQ(back.terms.size(), 2u);
  d.set_security_disk_cache("acme", false);
  d.save(path);
  EXPECT_FALSE(store.resolve(s)->disk_cache);
  EXPECT_THROW(d.set_security_disk_cache("bad name!", true), std::invalid_argument);
  // An organisation with the setting and no terms yet is a valid store.
  d.set_security_disk_cache("initech", true);
  d.save(path);
  EXPECT_EQ(KeyStoreData::load(path).security_disk_cache.count("initech"), 1u);
  EXPECT_EQ(KeyStoreData::load(path).terms.count("initech"), 0u);
}

TEST(SecurityEndpoint, ScopesDecide200Or403InEachApisSchema) {
  TempDir dir;
  const std::string path = dir.file("keys.json");
  KeyStoreData d;
  auto [gid, general] = d.add("acme", {"general"});
  auto [sid, security] = d.add("acme", {"security"}, TermsAcceptance{"v1", "Ada", ""});
  auto [bid, both] = d.add("globex", {"general", "security"}, TermsAcceptance{"v2", "Grace", ""});
  d.save(path);
  ServerOptions o;
  o.key_store = path;
  o.api_keys = {{"legacy", "sk-legacy"}};
  const ReceiptKey rk = generate_receipt_key();
  o.receipts = std::make_shared<ReceiptSigner>(rk, ModelIdentity{"fake-model", "aa", ""});
  ScopedServer s(std::move(o));

  const std::vector<std::string> general_paths = {"/v1/chat/completions", "/v1/completions", "/v1/messages"};
  const std::vector<std::string> security_paths = {"/v1/security/chat/completions", "/v1/security/completions",
                                                   "/v1/security/messages", "/security/v1/chat/completions",
                                                   "/security/v1/completions", "/security/v1/messages"};
  auto status = [&](const std::string& p, const std::string& key) {
    auto r = s.post(p, key, p.find("messages") != std::string::npos);
    return r ? r->status : -1;
  };
  for (const auto& p : general_paths) {
    EXPECT_EQ(status(p, general), 200) << p;
    EXPECT_EQ(status(p, both), 200) << p;
    EXPECT_EQ(status(p, "sk-legacy"), 200) << p;
    EXPECT_EQ(status(p, security), 403) << p;
    EXPECT_EQ(status(p, ""), 401) << p;
    EXPECT_EQ(status(p, "sk-swz-unknown"), 401) << p;
  }
  for (const auto& p : security_paths) {
    EXPECT_EQ(status(p, security), 200) << p;
    // A receipt names the route as the security endpoint's, whichever spelling was used.
    auto ok = s.post(p, security, p.find("messages") != std::string::npos);
    ASSERT_TRUE(ok);
    const json payload = decode_receipt(digest_response(ok->body).receipt).payload;
    EXPECT_EQ(payload["endpoint"], "/v1/security/" + p.substr(13)) << p;
    EXPECT_EQ(status(p, both), 200) << p;
    EXPECT_EQ(status(p, general), 403) << p;
    EXPECT_EQ(status(p, "sk-legacy"), 403) << p;
    EXPECT_EQ(status(p, ""), 401) << p;
  }
  // The schemas: OpenAI {"error": {type, code}}, Anthropic {"type": "error", "error": {type}}.
  auto r = s.post("/v1/security/chat/completions", general);
  ASSERT_TRUE(r);
  json e = json::parse(r->body);
  EXPECT_EQ(e["error"]["type"], "permission_error");
  EXPECT_EQ(e["error"]["code"], "missing_scope");
  EXPECT_NE(e["error"]["message"].get<std::string>().find(gid), std::string::npos);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("'security' scope"), std::string::npos);
  r = s.post("/v1/security/messages", general, true);
  ASSERT_TRUE(r);
  e = json::parse(r->body);
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "permission_error");
  r = s.post("/security/v1/messages", general, true);
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "permission_error");
  r = s.post("/v1/messages", security, true);
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "permission_error");

  // Per organisation in the ledger: acme's two keys share one row; globex has its own.
  auto u = s.usage(security);
  ASSERT_TRUE(u);
  json rows = json::parse(u->body)["data"];
  ASSERT_EQ(rows.size(), 1u) << u->body;
  EXPECT_EQ(rows[0]["key_id"], "org:acme");
  EXPECT_EQ(rows[0]["requests"], 15);  // 3 general (general key) + 2 x 6 security (security key)
  EXPECT_EQ(rows[0]["output_tokens"], 45);
  u = s.usage(both);
  rows = json::parse(u->body)["data"];
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["key_id"], "org:globex");
  EXPECT_EQ(rows[0]["requests"], 9);
}

TEST(SecurityEndpoint, KeysAddedAndRevokedTakeEffectWithoutARestart) {
  TempDir dir;
  const std::string path = dir.file("keys.json");
  KeyStoreData d;
  auto [sid, security] = d.add("acme", {"security"}, TermsAcceptance{"v1", "Ada", ""});
  d.save(path);
  ServerOptions o;
  o.key_store = path;
  ScopedServer s(std::move(o));
  EXPECT_EQ(s.post("/v1/security/chat/completions", security)->status, 200);
  auto [nid, fresh] = d.add("initech", {"security"}, TermsAcceptance{"v1", "Bob", ""});
  d.revoke(sid);
  d.save(path);
  EXPECT_EQ(s.post("/v1/security/chat/completions", security)->status, 401);
  EXPECT_EQ(s.post("/v1/security/chat/completions", fresh)->status, 200);
  (void)nid;
}

TEST(SecurityEndpoint, WithoutAStoreNoKeyHasTheSecurityScope) {
  ScopedServer s(ServerOptions{});
  auto r = s.post("/v1/security/chat/completions", "");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("--key-store"), std::string::npos) << r->body;
  EXPECT_EQ(s.post("/v1/chat/completions", "")->status, 200);  // an open server stays open
}

}  // namespace

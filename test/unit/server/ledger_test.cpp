// The usage ledger's arithmetic and the API-key rules: exact money, the prices file
// (schema, defaults, errors), per-(key, model) rows, key resolution and the keys file.
#include "api_keys.h"
#include "ledger.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <thread>

namespace {

using namespace swz::server;
using nlohmann::json;

TEST(Money, PrintsExactDecimalUsd) {
  EXPECT_EQ(Money{0}.usd(), "0.0");
  EXPECT_EQ(Money{1}.usd(), "0.000000000000001");
  EXPECT_EQ(Money{1'000'000'000'000'000ull}.usd(), "1.0");
  EXPECT_EQ(Money{2'500'000'000'000'000ull}.usd(), "2.5");
  // Beyond 64 bits: 2^64 femto-USD = 18446.744073709551616 USD.
  Money big{static_cast<unsigned __int128>(1) << 64};
  EXPECT_EQ(big.usd(), "18446.744073709551616");
  EXPECT_DOUBLE_EQ(big.usd_double(), 18446.744073709551616);
}

TEST(PriceTable, ParsesPricesPerMillionTokensAndDefaultsCachedToATenth) {
  PriceTable t = PriceTable::parse(R"({"default": {"input": 1, "output": 2},
      "models": {"m1": {"input": 0.15, "output": 0.6},
                 "m2": {"input": 3, "cached_input": 0.5, "output": 15}}})",
                                   "test");
  const Price& m1 = t.for_model("m1");
  EXPECT_EQ(m1.input, 150'000'000u);  // 0.15 USD / 1e6 tokens = 1.5e-7 USD = 1.5e8 femto-USD per token
  EXPECT_EQ(m1.cached_input, 15'000'000u);
  EXPECT_EQ(m1.output, 600'000'000u);
  EXPECT_EQ(t.for_model("m2").cached_input, 500'000'000u);
  const Price& other = t.for_model("not-listed");
  EXPECT_EQ(other.input, 1'000'000'000u);
  EXPECT_EQ(other.cached_input, 100'000'000u);
  EXPECT_EQ(other.output, 2'000'000'000u);
  // 1000 uncached, 500 cached, 200 output tokens of m1:
  // 1000*0.15e-6 + 500*0.015e-6 + 200*0.6e-6 = 0.00015 + 0.0000075 + 0.00012 = 0.0002775 USD.
  EXPECT_EQ(PriceTable::cost(m1, {1000, 500, 200}).usd(), "0.0002775");
  json j = t.to_json();
  EXPECT_DOUBLE_EQ(j["models"]["m1"]["cached_input"].get<double>(), 0.015);
  EXPECT_DOUBLE_EQ(j["default"]["output"].get<double>(), 2.0);
}

TEST(PriceTable, NoFileMeansEveryPriceIsZero) {
  PriceTable t;
  EXPECT_EQ(PriceTable::cost(t.for_model("x"), {100, 100, 100}).femto, 0u);
}

TEST(PriceTable, BadContentIsAnErrorNamingThePlace) {
  auto err = [](const std::string& text) {
    try {
      PriceTable::parse(text, "p.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err("{").find("p.json: not valid JSON"), std::string::npos);
  EXPECT_NE(err("[]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(err(R"({"defaults": {}})").find("unknown field 'defaults'"), std::string::npos);
  EXPECT_NE(err(R"({"models": {"m": {"input": -1, "output": 1}}})").find(R"(models["m"].input)"), std::string::npos);
  EXPECT_NE(err(R"({"models": {"m": {"input": "1", "output": 1}}})").find("expected a number"), std::string::npos);
  EXPECT_NE(err(R"({"models": {"m": {"input": 1}}})").find("'input' and 'output' are required"), std::string::npos);
  EXPECT_NE(err(R"({"models": {"m": {"input": 1, "output": 1, "cache": 1}}})").find("unknown field"), std::string::npos);
  EXPECT_NE(err(R"({"models": []})").find("models: expected an object"), std::string::npos);
  EXPECT_NE(err(R"({"default": {"input": 2e6, "output": 1}})").find("out of range"), std::string::npos);
  EXPECT_EQ(err(R"({"$comment": "USD per million tokens", "default": {"input": 0, "output": 0}})"), "no error");
}

TEST(PriceTable, LoadReadsAFileAndNamesAMissingOne) {
  std::string path = testing::TempDir() + "/prices_test.json";
  std::ofstream(path) << R"({"models": {"m": {"input": 1, "output": 4}}})";
  EXPECT_EQ(PriceTable::load(path).for_model("m").output, 4'000'000'000u);
  std::remove(path.c_str());
  EXPECT_THROW(PriceTable::load(path), std::invalid_argument);
}

TEST(Ledger, RowsPerKeyAndModelAddUpExactly) {
  Ledger l(PriceTable::parse(R"({"models": {"m": {"input": 0.1, "output": 0.3}}})", "t"));
  Money a1 = l.record("alice", "m", {10, 0, 5});
  Money a2 = l.record("alice", "m", {3, 7, 2});
  Money b1 = l.record("bob", "m", {1, 0, 1});
  l.record("bob", "other", {100, 0, 100});  // unpriced model: free
  Money sum = a1;
  sum += a2;
  EXPECT_EQ(a1.usd(), "0.0000025");      // 10*0.1e-6 + 5*0.3e-6
  EXPECT_EQ(a2.usd(), "0.00000097");     // 3*0.1e-6 + 7*0.01e-6 (cached: a tenth) + 2*0.3e-6
  auto alice = l.rows("alice", false);
  ASSERT_EQ(alice.size(), 1u);
  EXPECT_EQ(alice[0].requests, 2u);
  EXPECT_EQ(alice[0].tokens.input, 13u);
  EXPECT_EQ(alice[0].tokens.cached, 7u);
  EXPECT_EQ(alice[0].tokens.output, 7u);
  EXPECT_TRUE(alice[0].cost == sum);
  EXPECT_EQ(l.rows("bob", false).size(), 2u);
  EXPECT_EQ(l.rows("carol", false).size(), 0u);
  EXPECT_EQ(l.rows("carol", true).size(), 3u);
  json all = l.usage_json("admin", true);
  EXPECT_EQ(all["scope"], "all");
  EXPECT_EQ(all["total"]["requests"], 4);
  EXPECT_EQ(all["total"]["input_tokens"], 114);
  Money total = sum;
  total += b1;
  EXPECT_EQ(all["total"]["cost_usd_exact"], total.usd());
  json own = l.usage_json("bob", false);
  EXPECT_EQ(own["scope"], "own");
  ASSERT_EQ(own["data"].size(), 2u);
  EXPECT_EQ(own["data"][0]["model"], "m");  // sorted by (key, model)
  EXPECT_EQ(own["data"][0]["cost_usd_exact"], b1.usd());
  EXPECT_DOUBLE_EQ(own["data"][0]["cost_usd"].get<double>(), 0.0000004);
}

TEST(Ledger, ConcurrentRecordsAreAllCounted) {
  Ledger l(PriceTable::parse(R"({"default": {"input": 1, "output": 1}})", "t"));
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&] {
      for (int j = 0; j < 1000; ++j) l.record("k", "m", {1, 1, 1});
    });
  for (auto& t : ts) t.join();
  auto r = l.rows("k", false);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].requests, 8000u);
  EXPECT_EQ(r[0].cost.usd(), "0.0168");  // 8000 * (1 + 0.1 + 1) USD per million tokens
}

TEST(ApiKeys, OpenServerAttributesToTheSentKeysFingerprint) {
  ApiKeys k;
  EXPECT_FALSE(k.required());
  EXPECT_EQ(k.resolve("")->key_id, "anonymous");
  auto c = k.resolve("sk-abc");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->key_id, key_fingerprint("sk-abc"));
  EXPECT_EQ(c->key_id.rfind("sha256:", 0), 0u);
  EXPECT_EQ(c->key_id.size(), 7u + 16u);
  EXPECT_EQ(c->key_id.find("abc"), std::string::npos);
  // SHA-256("abc") = ba7816bf8f01cfea 414140de5dae2223 ... (FIPS 180-2 example).
  EXPECT_EQ(key_fingerprint("abc"), "sha256:ba7816bf8f01cfea");
  EXPECT_FALSE(k.resolve("sk-abc")->admin);
}

TEST(ApiKeys, ConfiguredKeysAreRequiredAndNamed) {
  ApiKeys k({{"alice", "ka"}, {"", "kb"}}, "root");
  EXPECT_TRUE(k.required());
  EXPECT_EQ(k.resolve("ka")->key_id, "alice");
  EXPECT_EQ(k.resolve("kb")->key_id, key_fingerprint("kb"));
  EXPECT_FALSE(k.resolve("kc"));
  EXPECT_FALSE(k.resolve(""));
  EXPECT_FALSE(k.resolve("k"));   // prefix of a key
  EXPECT_FALSE(k.resolve("kaa"));  // extension of a key
  auto admin = k.resolve("root");
  ASSERT_TRUE(admin);
  EXPECT_TRUE(admin->admin);
  EXPECT_EQ(admin->key_id, "admin");
}

TEST(ApiKeys, AdminAloneLeavesTheServerOpen) {
  ApiKeys k({}, "root");
  EXPECT_FALSE(k.required());
  EXPECT_TRUE(k.resolve("root")->admin);
  EXPECT_EQ(k.resolve("x")->key_id, key_fingerprint("x"));
}

TEST(ApiKeys, DuplicatesAndReservedNamesAreErrors) {
  EXPECT_THROW(ApiKeys({{"a", "k"}, {"b", "k"}}, ""), std::invalid_argument);
  EXPECT_THROW(ApiKeys({{"a", "k1"}, {"a", "k2"}}, ""), std::invalid_argument);
  EXPECT_THROW(ApiKeys({{"admin", "k1"}}, ""), std::invalid_argument);
  EXPECT_THROW(ApiKeys({{"a", ""}}, ""), std::invalid_argument);
  EXPECT_THROW(ApiKeys({{"a", "k"}}, "k"), std::invalid_argument);
}

TEST(ApiKeys, KeysFileHasNamedAndBareKeysAndComments) {
  std::string path = testing::TempDir() + "/keys_test.txt";
  std::ofstream(path) << "# team keys\n\nalice sk-a\n  sk-bare  \nbob\tsk-b\n";
  auto keys = read_api_keys_file(path);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].name, "alice");
  EXPECT_EQ(keys[0].secret, "sk-a");
  EXPECT_EQ(keys[1].name, "");
  EXPECT_EQ(keys[1].secret, "sk-bare");
  EXPECT_EQ(keys[2].name, "bob");
  std::ofstream(path) << "a b c\n";
  try {
    read_api_keys_file(path);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(":1: expected 'NAME KEY'"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
  EXPECT_THROW(read_api_keys_file(path), std::invalid_argument);
}

TEST(ApiKeys, CredentialComesFromBearerThenXApiKey) {
  EXPECT_EQ(request_credential("Bearer t1", "t2"), "t1");
  EXPECT_EQ(request_credential("", "t2"), "t2");
  EXPECT_EQ(request_credential("Basic abc", "t2"), "");
  EXPECT_EQ(request_credential("", ""), "");
}

}  // namespace

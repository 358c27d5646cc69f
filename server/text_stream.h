// Turning the engine's token pieces (raw bytes, possibly cut inside a UTF-8 character)
// into the text a client sees, identically whether it is streamed or sent whole.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace swz::server {

/// Incremental UTF-8 decoder/validator that never splits a character.
///
/// feed() returns the longest prefix of everything fed so far that is made of complete
/// characters and not yet returned; a trailing, still-incomplete sequence (at most 3
/// bytes) is held back until later bytes complete it. Ill-formed bytes become U+FFFD
/// using the "maximal subpart" practice of the Unicode Standard §3.9 (U+FFFD
/// substitution), which is also the WHATWG Encoding Standard's UTF-8 decoder. Because
/// the state machine sees every byte exactly once, the concatenation of all feed()
/// outputs plus finish() is the same for every way of cutting the input into pieces.
/// The output is always valid UTF-8 (so it can be JSON-encoded without error).
class Utf8Decoder {
 public:
  /// Consumes `bytes`; returns newly completed text (valid UTF-8, possibly empty).
  std::string feed(std::string_view bytes);
  /// Ends the input: a held incomplete sequence becomes one U+FFFD.
  std::string finish();
  /// Number of bytes currently held back (0..3).
  size_t pending() const { return held_.size(); }

 private:
  void put(unsigned char b, std::string& out);
  std::string held_;
  size_t need_ = 0;         ///< total length of the sequence being held
  unsigned char lo_ = 0x80, hi_ = 0xBF;  ///< allowed range of the next continuation byte
};

/// Decodes pieces (Utf8Decoder) and applies OpenAI `stop` sequences.
///
/// Text that could still turn out to be the start of a stop sequence is held back, so
/// that what has been released never has to be taken back: the concatenation of all
/// push() results plus finish() equals the non-streamed completion text, which is the
/// decoded text cut before the earliest-starting occurrence of any stop sequence (the
/// stop sequence itself is not returned, as in OpenAI's API), however the bytes were cut
/// into pieces (overlapping stop sequences included). After a stop sequence is seen,
/// stopped() is true and further pushes return nothing.
class CompletionText {
 public:
  /// `stops`: non-empty UTF-8 strings (validated by the request parser).
  explicit CompletionText(std::vector<std::string> stops = {});
  /// Adds a piece's bytes; returns text that is final now (valid UTF-8).
  std::string push(std::string_view piece_bytes);
  /// Ends generation; returns the rest of the text (held-back bytes and characters).
  std::string finish();
  bool stopped() const { return stopped_; }
  /// The stop sequence that ended the text (empty while !stopped()); when several start
  /// at the same place, the first of them in the constructor's list.
  const std::string& matched_stop() const { return matched_; }

 private:
  std::string release(bool at_end);
  std::vector<std::string> stops_;
  Utf8Decoder decoder_;
  std::string pending_;  ///< decoded text held back because it may start a stop sequence
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace swz::server

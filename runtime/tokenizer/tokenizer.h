// Tokenizer built from GGUF metadata (tokenizer.ggml.*), token-for-token compatible with
// llama.cpp's llama_tokenize / llama_token_to_piece / llama_detokenize.
//
// Supported (tokenizer.ggml.model / tokenizer.ggml.pre):
//   "gpt2" (byte-level BPE) with pre-tokenizers
//     "gpt-2", "phi-2", "mpt", "olmo"                 GPT-2 regex
//     "llama3", "llama-v3", "llama-bpe", "falcon3",
//     "dbrx", "smaug-bpe"                             Llama-3 regex (llama-bpe family: whole
//                                                     pre-token looked up before merging)
//     "qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"   Qwen2 regex (digits one by one)
//     "smollm", "starcoder", "refact", "codeshell",
//     "exaone", "minerva-7b", "command-r"             \p{N} split, then the GPT-2 regex
//   "llama" (SentencePiece BPE with scores, <0xNN> byte fallback, ▁ for spaces).
// Anything else throws Error naming the key and value.
//
// Sources: the GGUF spec (ggml-org/ggml docs/gguf.md) for the keys; llama.cpp
// src/llama-vocab.cpp and src/unicode.cpp (behaviour only, re-implemented here) for the
// pre-tokenizer regexes, merge order, special-token partitioning, end-of-generation set,
// piece rendering and detokenize clean-up; GPT-2's bytes_to_unicode table.
//
// Pre-tokenizer regexes run on PCRE2 (UTF + UCP, JIT). \s is spelled out as llama.cpp's
// whitespace set (Unicode White_Space) and \p{L} / \p{N} are extended with the Unicode 15.x
// letters and numbers, so the classes agree with llama.cpp's Unicode 15.1 tables even on
// PCRE2 10.42 (Unicode 14). Invalid UTF-8 is handled like llama.cpp: each byte that does not
// start a well-formed sequence becomes U+FFFD before pre-tokenization; code points above
// U+10FFFF (lead bytes F4 90.. to F7), on which llama.cpp throws, also become U+FFFD.
// Not modelled: LSTRIP/RSTRIP token attributes (llama.cpp sets them only for phi-3,
// jina-v2 and modern-bert vocabularies).
//
// Thread safety: a Tokenizer is immutable after from_gguf(); all const methods may be called
// concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace swz::tokenizer {

/// Unsupported or malformed tokenizer metadata, or an out-of-range token id.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One piece of a prompt for encode_segments(). `text` must stay alive during the call.
/// allow_special=false marks user data: control-token texts inside it ("<|im_start|>",
/// "</s>", ...) are tokenized as plain text, never as the control token.
struct Segment {
  std::string_view text;
  bool allow_special = false;
};

/// llama.cpp token attributes (llama.h llama_token_attr), as derived from the GGUF
/// token_type array plus llama.cpp's by-name fix-ups (EOG texts become CONTROL, ...).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

class Tokenizer {
 public:
  /// Reads tokenizer.ggml.{model,pre,tokens,token_type,scores,merges,*_token_id,
  /// add_bos_token,add_eos_token,add_space_prefix} from `f`. Copies what it needs: `f`
  /// may be closed afterwards. Throws Error naming the unsupported tokenizer.ggml.model /
  /// tokenizer.ggml.pre value, or the missing / mistyped key.
  static Tokenizer from_gguf(const gguf::File& f);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// = llama.cpp llama_tokenize(text, add_special, parse_special).
  /// add_special: prepend BOS if add_bos(), append EOS if add_eos().
  /// parse_special: match control/unknown token texts in `text`; user-defined tokens
  /// (token_type 4) are matched either way, as in llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  /// Chat prompts. Special-token texts are recognised only inside allow_special segments
  /// (and only within one segment: a special split across two segments is not matched);
  /// in the other segments only user-defined tokens are matched, exactly as encode() does
  /// with parse_special=false. The text between special tokens is pre-tokenized and BPE'd as
  /// one string across segment boundaries, so encode_segments of user-only segments equals
  /// encode(concatenation, add_special, false). add_special as in encode().
  std::vector<int32_t> encode_segments(const std::vector<Segment>& segs, bool add_special) const;

  /// Bytes of one token as llama_token_to_piece(id, lstrip=0, special=true) renders them:
  /// control / user-defined / unknown tokens as their text; byte-level BPE tokens decoded
  /// (Ġ -> ' ', Ċ -> '\n', ...); SentencePiece ▁ -> ' ' and <0xNN> -> that byte; unused /
  /// undefined-type tokens as "". Throws Error for an id outside [0, n_vocab()).
  std::string token_to_piece(int32_t id) const;

  /// = llama_detokenize(ids, remove_special=false, unparse_special=true): concatenated
  /// pieces (BOS/EOS kept and rendered as text), then for SentencePiece vocabularies with
  /// add_space_prefix one leading space of the first piece removed, and for vocabularies
  /// with clean_spaces (gpt-2, llama-bpe, ...; not smollm/qwen2) llama.cpp's clean-up of
  /// " ." " ," " !" " ?" " ' " " 's" " 'm" " 're" " 've". Not always the inverse of encode.
  std::string decode(const std::vector<int32_t>& ids) const;

  int n_vocab() const;
  int32_t bos() const;  ///< -1 when the vocabulary has none
  int32_t eos() const;  ///< -1 when the vocabulary has none
  bool add_bos() const;
  bool add_eos() const;
  /// End-of-generation set as llama.cpp builds it: eos, eot, eom (GGUF ids), FIM pad/repo/sep,
  /// and tokens named <|eot_id|>, <|im_end|>, <|end|>, <|endoftext|>, <end_of_turn>, ...
  bool is_eog(int32_t id) const;
  /// Control, user-defined or unknown token (the set llama.cpp matches as special text).
  bool is_special(int32_t id) const;
  uint32_t token_attr(int32_t id) const;  ///< TokenAttr bits; throws Error when out of range
  std::string_view token_text(int32_t id) const;  ///< raw vocab string; throws when out of range
  /// Token id whose raw vocab string is `text`, or -1.
  int32_t text_to_token(std::string_view text) const;
  const std::string& model() const;  ///< tokenizer.ggml.model
  const std::string& pre() const;    ///< tokenizer.ggml.pre ("" when absent)

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace swz::tokenizer

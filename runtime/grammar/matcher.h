// Token masks from a grammar (grammar.h): which tokens of a vocabulary may come next.
//
// The grammar runs as a pushdown automaton whose configurations (sets of rule stacks) are
// interned and whose byte transitions are memoised as they are first taken: a lazily built
// DFA over configurations (each configuration has a 256-entry next table). A mask is one
// walk of the vocabulary's token trie (Vocabulary, a preorder array) from the current
// configuration, skipping every subtree whose prefix the grammar rejects, each trie edge one
// table lookup once the configurations it reaches are known. Masks are cached per
// configuration, so decoding inside a JSON string (the configuration does not change from
// token to token) costs a cache lookup.
//
// A configuration seen for the first time reuses work too (the idea of XGrammar's
// context-independent tokens, Dong et al. 2024): its top states are walked once over an
// unknown context (a "local" configuration, the same for every string value of a schema,
// every line of a diff...), which decides every token that stays inside those states; only
// the trie subtrees of tokens whose bytes end a rule into the context (a closing quote, a
// newline) are then walked from the real configuration.
//
// Bounded repetitions (a string's maxLength, a diff line's length) are unrolled into copies
// of their item (Builder::repeat), so every position would be a configuration of its own.
// Masks are shared through *relaxed* configurations, whose states in copy c of a repetition
// are replaced by copy T's, T = min(K, copies - 1), K = (longest token's bytes) / (item's
// least bytes) + 1. Copy c allows at most c more items, so over a token of at most c *
// (item's least bytes) bytes copy c and any later copy behave alike: for c >= K every token
// (the relaxed configuration's mask is the mask: every position of a string or line far
// from its bound shares one), and nearer the bound the tokens up to that length (their bits
// come from the relaxed mask; only the subtrees of longer tokens are walked). The local
// configuration of a character rule called by a repetition keeps the repetition's frame, so
// the string's later characters stay context-independent. Exactness is checked against the
// brute-force simulator (test/unit/grammar) with vocabularies of short tokens, where K is
// small.
//
// The tables belong to a (grammar, vocabulary) pair, not to a matcher: every matcher of the
// same Grammar object shares them (under a mutex), and the kSharedTables most recently used
// pairs are kept after their matchers end, so a server that reuses a compiled grammar
// (server/structured_output.cpp caches them by schema) starts warm. Memory is bounded: past
// kMaxConfigs configurations or kMaxMaskBytes of cached masks a pair's tables are cleared
// and rebuilt as needed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace swz::grammar {

/// A model's vocabulary as a byte trie. Immutable after construction; shareable.
class Vocabulary {
 public:
  /// pieces[i]: the bytes token i emits (Tokenizer::token_to_piece); eog[i]: token i ends
  /// generation. End-of-generation tokens are allowed exactly when the grammar may end; a
  /// token with an empty piece is never allowed. Sizes must match (std::invalid_argument).
  Vocabulary(const std::vector<std::string>& pieces, const std::vector<bool>& eog);
  int n_vocab() const { return n_vocab_; }
  /// 64-bit words of a mask: ceil(n_vocab / 64).
  size_t n_words() const { return (static_cast<size_t>(n_vocab_) + 63) / 64; }
  const std::string& piece(int32_t t) const { return pieces_[static_cast<size_t>(t)]; }
  bool is_eog(int32_t t) const { return eog_[static_cast<size_t>(t)]; }
  const std::vector<int32_t>& eog_tokens() const { return eog_list_; }
  size_t n_trie_nodes() const { return nodes_.size(); }

 private:
  friend class Matcher;
  struct Node {
    uint32_t end;        ///< index one past this node's subtree (preorder)
    uint32_t tok_begin;  ///< tokens ending here: toks_[tok_begin, tok_begin + n_toks)
    uint16_t n_toks;
    uint16_t depth;      ///< bytes from the root (root: 0)
    uint16_t sub_max;    ///< the longest token (bytes) ending in this subtree; 0: none
    uint8_t byte;        ///< the byte of the edge into this node
  };
  /// Tokens of at most `bytes` bytes (non-EOG, in the trie): a mask of n_words() words.
  const uint64_t* short_tokens(size_t bytes) const { return len_le_.data() + std::min<size_t>(bytes, max_depth_) * n_words(); }
  int n_vocab_ = 0;
  std::vector<std::string> pieces_;
  std::vector<bool> eog_;
  std::vector<int32_t> eog_list_;
  std::vector<Node> nodes_;  ///< preorder; nodes_[0] is the root
  std::vector<int32_t> toks_;
  uint16_t max_depth_ = 0;
  std::vector<uint64_t> len_le_;  ///< [bytes * n_words() + w]: short_tokens(bytes)
};

/// Counters of one matcher (for benchmarks and tests).
struct MatcherStats {
  uint64_t masks = 0;        ///< mask() calls
  uint64_t mask_hits = 0;    ///< served from the per-configuration cache
  uint64_t configs = 0;      ///< configurations interned (since the last reset)
  uint64_t resets = 0;       ///< table clears for memory
};

/// One sequence's position in a grammar. Not thread-safe; one per generating sequence.
class Matcher {
 public:
  static constexpr size_t kMaxConfigs = 1 << 16;
  static constexpr size_t kMaxMaskBytes = size_t{32} << 20;
  static constexpr size_t kSharedTables = 16;
  /// max_depth: the rule stack's depth limit (nesting deeper than this is not generated).
  Matcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const Vocabulary> v, int max_depth = 128);
  ~Matcher();
  Matcher(const Matcher&) = delete;
  Matcher& operator=(const Matcher&) = delete;

  /// The tokens allowed next: bit t of word t / 64 set = token t allowed. n_words() words
  /// (the matcher's own copy), valid until the next call of a non-const member. All zero once the grammar has ended
  /// (accept() of an end-of-generation token, or must_end()).
  const uint64_t* mask();
  /// Whether token t is allowed next (without computing the whole mask).
  bool allowed(int32_t t);
  /// Advances by token t. Returns false, leaving the state unchanged, when t is not allowed.
  bool accept(int32_t t);
  /// The text so far is a sentence of the grammar (an end-of-generation token is allowed).
  bool can_end() const;
  /// The text so far is a sentence and no byte can follow: generation must stop now.
  bool must_end() const;
  const MatcherStats& stats() const { return stats_; }
  const Vocabulary& vocab() const { return *v_; }
  struct Tables;  ///< the shared lazily built tables (matcher.cpp)

 private:
  /// Re-interns the current configuration after another matcher cleared the shared tables.
  void sync();
  void set_cur(int32_t cfg);
  /// The configuration after byte b from cfg (-1: dead); computes and memoises the
  /// transition the first time (step_slow).
  int32_t step_fast(int32_t cfg, uint8_t b);
  int32_t step_slow(int32_t cfg, uint8_t b);
  int32_t advance(int32_t cfg, const std::string& bytes);
  void maybe_reset();
  /// Marks in `m` the tokens of trie nodes [begin, end) (one subtree, or all) allowed from
  /// configuration c0 at the parent of `begin`, skipping the subtrees whose tokens are all
  /// at most `h` bytes long (h = 0: only those without tokens; a relaxed configuration
  /// passes its room, having decided the shorter tokens already).
  void walk(int32_t c0, size_t begin, size_t end, uint64_t* m, uint32_t h = 0);
  /// The mask of configuration `cfg` itself (cached), from its local configuration's mask
  /// and walks of the context-dependent subtrees.
  const std::vector<uint64_t>& exact_mask(int32_t cfg);
  struct LocalMask;
  /// The context-independent part of the masks of every configuration whose top states are
  /// those of local configuration `loc` (cached).
  const LocalMask& local(int32_t loc);
  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const Vocabulary> v_;
  std::shared_ptr<Tables> t_;
  int32_t cur_ = -1;
  uint64_t gen_ = 0;                ///< t_'s generation cur_ belongs to
  std::vector<int32_t> cur_tops_;   ///< cur_'s stacks (stack node ids survive clears)
  bool cur_acc_ = false;
  std::vector<uint64_t> mask_buf_;
  bool ended_ = false;  ///< an end-of-generation token was accepted
  std::vector<uint64_t> zero_;
  std::vector<int32_t> walk_;  ///< configuration per trie depth during a walk
  std::vector<char> path_;     ///< trie path bytes during a local walk
  MatcherStats stats_;
};

}  // namespace swz::grammar

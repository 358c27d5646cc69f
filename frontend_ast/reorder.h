// Prompt cache modes and the `reorder` rewrite of code in prompt text (issue 15 item 2).
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace swz::frontend_ast {

/// How a request's prompt meets the prefix cache.
enum class CacheMode {
  Exact,    ///< the prompt is untouched; plain prefix caching (the default)
  Reorder,  ///< code atoms in a canonical order (reorder_prompt_text); the rest untouched
  Approx,   ///< prompt untouched; code atoms' K/V reused at new positions, RoPE re-rotated (experimental)
};

/// "exact", "reorder" or "approx".
std::string_view cache_mode_name(CacheMode mode);

/// The mode named by `name` (exact spelling, lower case), or nullopt.
std::optional<CacheMode> parse_cache_mode(std::string_view name);

/// For each code region key (its path, or "<language>#<n>" for the n-th region without
/// a path in one prompt), the XXH3-64 content hashes of every atom rendered under that key,
/// in the order they were first seen (append-only; at most 8192 per key, then restarted
/// from the current rendering). Shared by all requests of a server (so across sessions, like the prefix cache
/// it serves); bounded to `max_keys` keys, least recently used dropped. Thread-safe.
/// Holds hashes only, never prompt text.
class AtomOrderMemory {
 public:
  explicit AtomOrderMemory(size_t max_keys = 4096) : max_keys_(max_keys) {}
  /// The remembered order of `key` (empty if none).
  std::vector<uint64_t> get(const std::string& key);
  /// Remembers `order` for `key`.
  void put(const std::string& key, std::vector<uint64_t> order);

 private:
  size_t max_keys_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::vector<uint64_t>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

/// What reorder_prompt_text did, summed over the texts of one request.
struct ReorderStats {
  int regions = 0;    ///< code regions found
  int reordered = 0;  ///< regions rewritten (parsed without error, at least two atoms)
  int atoms = 0;      ///< atoms in rewritten regions
  int moved = 0;      ///< atoms new or edited since the remembered order (placed last)
};

/// Rewrites one prompt text (a message's content) for CacheMode::Reorder:
/// every code region (find_code_regions) that parses without error into two or more
/// atoms is rendered as its atoms in a canonical order: the atoms seen before under the
/// key, in first-seen order, then the others (new or edited) in source order, which are
/// appended to the key's first-seen list. So the first time a file is seen its atoms keep
/// their order; after an edit the unchanged atoms keep the order (hence the token prefix)
/// they had before while the edited one moves to the end of its file's region; a prompt
/// that goes back to an earlier version of the file (another session, a revert) renders
/// exactly as that version did. (Remembering only the last rendering instead made a second
/// session on the original file reorder it: 53% cached instead of 97% in the bench run of
/// 2026-12-01.) An atom rendered after an atom that follows it in the source is preceded by the
/// label line `<line comment>[<key>, out of file order]` (e.g. "# [src/app.py, out of file
/// order]"); atoms in source order carry no label, so a region never reordered is
/// byte-identical to the input (labelling every atom cost 13% more prompt tokens on the
/// bench sessions, measured 2026-12-01). Numbered regions keep their line-number prefixes (so
/// the original position of every line stays visible to the model). Text outside regions,
/// regions with parse errors, Language::None or a single atom are left byte-identical:
/// a text without code comes back unchanged. `unnamed` counts regions without a path
/// across the texts of one request (for their keys); `path_hint` as in find_code_regions.
/// `whole_text_is_file`: a text in which no region is found is itself the file
/// `path_hint` when that names a known language (a tool result that returns a file's
/// bytes, e.g. {"path": ..., "content": ...}).
std::string reorder_prompt_text(std::string_view text, AtomOrderMemory& memory, ReorderStats& stats, int& unnamed,
                                std::string_view path_hint = "", bool whole_text_is_file = false);

/// The byte ranges [begin, end) in `text` of the AST atoms of every code region
/// (find_code_regions; Language::None regions excluded), in order, for CacheMode::Approx,
/// which leaves the text as it is and reuses each atom's K/V wherever its bytes recur. A
/// numbered region's atoms include their line-number prefixes (the bytes the model sees).
/// `path_hint` and `whole_text_is_file` as in reorder_prompt_text. No code: empty.
std::vector<std::pair<size_t, size_t>> code_atom_ranges(std::string_view text, std::string_view path_hint = "",
                                                        bool whole_text_is_file = false);

}  // namespace swz::frontend_ast

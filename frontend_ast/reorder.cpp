#include "frontend_ast/reorder.h"

#include "frontend_ast/atomize.h"
#include "frontend_ast/code_regions.h"

#include <algorithm>
#include <string>

namespace swz::frontend_ast {

namespace {
constexpr size_t kMaxSeenPerKey = 8192;  // atom hashes remembered per key
}  // namespace

std::string_view cache_mode_name(CacheMode mode) {
  switch (mode) {
    case CacheMode::Exact: return "exact";
    case CacheMode::Reorder: return "reorder";
    case CacheMode::Approx: break;
  }
  return "approx";
}

std::optional<CacheMode> parse_cache_mode(std::string_view name) {
  if (name == "exact") return CacheMode::Exact;
  if (name == "reorder") return CacheMode::Reorder;
  if (name == "approx") return CacheMode::Approx;
  return std::nullopt;
}

std::vector<uint64_t> AtomOrderMemory::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return {};
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void AtomOrderMemory::put(const std::string& key, std::vector<uint64_t> order) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    it->second->second = std::move(order);
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.emplace_front(key, std::move(order));
  index_[key] = lru_.begin();
  while (lru_.size() > max_keys_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

namespace {

/// find_code_regions, or the whole text as file `path_hint` (reorder_prompt_text's rule).
std::vector<CodeRegion> regions_of(std::string_view text, std::string_view path_hint, bool whole_text_is_file) {
  std::vector<CodeRegion> regions = find_code_regions(text, path_hint);
  if (regions.empty() && whole_text_is_file && !text.empty() && language_from_path(path_hint) != Language::None) {
    CodeRegion whole;
    whole.end = text.size();
    whole.path = std::string(path_hint);
    whole.lang = language_from_path(path_hint);
    regions.push_back(std::move(whole));
  }
  return regions;
}

/// Byte offsets of the line starts of `bytes` (atom lines map 1:1 onto a region's lines).
std::vector<size_t> line_starts(std::string_view bytes) {
  std::vector<size_t> starts{0};
  for (size_t i = 0; i + 1 < bytes.size(); ++i)
    if (bytes[i] == '\n') starts.push_back(i + 1);
  return starts;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> code_atom_ranges(std::string_view text, std::string_view path_hint,
                                                        bool whole_text_is_file) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const CodeRegion& r : regions_of(text, path_hint, whole_text_is_file)) {
    if (r.lang == Language::None) continue;
    const std::string_view bytes = text.substr(r.begin, r.end - r.begin);
    std::shared_ptr<const Atomization> az =
        atomize(region_code(bytes, r.numbering), r.lang, r.path.empty() ? std::string_view() : std::string_view(r.path));
    const std::vector<size_t> starts = line_starts(bytes);
    auto line_byte = [&](int line) { return static_cast<size_t>(line) < starts.size() ? starts[static_cast<size_t>(line)] : bytes.size(); };
    for (const Atom& a : az->atoms) {
      const size_t b = line_byte(a.first_line), e = line_byte(a.end_line);
      if (e > b) out.emplace_back(r.begin + b, r.begin + e);
    }
  }
  return out;
}

std::string reorder_prompt_text(std::string_view text, AtomOrderMemory& memory, ReorderStats& stats, int& unnamed,
                                std::string_view path_hint, bool whole_text_is_file) {
  std::vector<CodeRegion> regions = regions_of(text, path_hint, whole_text_is_file);
  stats.regions += static_cast<int>(regions.size());
  if (regions.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + 64 * regions.size());
  size_t done = 0;
  for (const CodeRegion& r : regions) {
    const std::string key = !r.path.empty() ? r.path : std::string(language_name(r.lang)) + "#" + std::to_string(unnamed++);
    const std::string_view bytes = text.substr(r.begin, r.end - r.begin);
    if (r.lang == Language::None) continue;
    const std::string code = region_code(bytes, r.numbering);
    // A region with a path is a version of that file: an edited one re-parses incrementally
    // from the previous version's tree (unnamed regions' keys are positions, not files).
    std::shared_ptr<const Atomization> az = atomize(code, r.lang, r.path.empty() ? std::string_view() : std::string_view(key));
    if (!az->parsed || az->has_error || az->atoms.size() < 2) continue;

    const std::vector<size_t> starts = line_starts(bytes);
    auto line_byte = [&](int line) { return static_cast<size_t>(line) < starts.size() ? starts[static_cast<size_t>(line)] : bytes.size(); };

    // The key's atoms in first-seen order (append-only): atoms seen before take their
    // place in it, the others follow in source order and are appended to it.
    std::vector<uint64_t> seen = memory.get(key);
    std::vector<size_t> order;
    std::vector<bool> used(az->atoms.size(), false);
    for (uint64_t h : seen)
      for (size_t a = 0; a < az->atoms.size(); ++a)
        if (!used[a] && az->atoms[a].hash == h) {
          used[a] = true;
          order.push_back(a);
          break;
        }
    int moved = 0;
    const bool known = !seen.empty();
    for (size_t a = 0; a < az->atoms.size(); ++a)
      if (!used[a]) {
        order.push_back(a);
        seen.push_back(az->atoms[a].hash);
        if (known) ++moved;
      }
    if (seen.size() > kMaxSeenPerKey) {  // start over from this rendering
      seen.clear();
      for (size_t a : order) seen.push_back(az->atoms[a].hash);
    }

    out.append(text.substr(done, r.begin - done));
    // Only atoms placed after an atom that follows them in the source are labelled, so a
    // region in source order (every file the first time) stays byte-identical.
    const std::string label = std::string(line_comment(r.lang)) + "[" + key + ", out of file order]\n";
    size_t max_source = 0;
    bool first = true;
    for (size_t a : order) {
      const Atom& atom = az->atoms[a];
      if (!first && a < max_source) out += label;
      max_source = first ? a : std::max(max_source, a);
      first = false;
      const size_t b = line_byte(atom.first_line), e = line_byte(atom.end_line);
      out.append(bytes.substr(b, e - b));
      if (e > b && bytes[e - 1] != '\n') out += '\n';
    }
    // The region's bytes ended without '\n' (an unclosed fence at the end): so does its rewrite.
    if (!bytes.empty() && bytes.back() != '\n' && !out.empty() && out.back() == '\n') out.pop_back();
    done = r.end;
    memory.put(key, std::move(seen));
    stats.reordered += 1;
    stats.atoms += static_cast<int>(order.size());
    stats.moved += moved;
  }
  out.append(text.substr(done));
  return out;
}

}  // namespace swz::frontend_ast

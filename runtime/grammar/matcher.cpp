#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <unordered_set>

namespace swz::grammar {

Vocabulary::Vocabulary(const std::vector<std::string>& pieces, const std::vector<bool>& eog)
    : n_vocab_(static_cast<int>(pieces.size())), pieces_(pieces), eog_(eog) {
  if (pieces.size() != eog.size()) throw std::invalid_argument("Vocabulary: pieces and eog differ in size");
  // A pointer trie first (children ordered by byte), then flattened in preorder.
  struct T {
    std::map<uint8_t, uint32_t> kids;
    std::vector<int32_t> toks;
  };
  std::vector<T> t(1);
  for (int32_t i = 0; i < n_vocab_; ++i) {
    if (eog[static_cast<size_t>(i)]) {
      eog_list_.push_back(i);
      continue;
    }
    const std::string& p = pieces[static_cast<size_t>(i)];
    if (p.empty() || p.size() > 0xffff) continue;
    uint32_t cur = 0;
    for (char c : p) {
      const auto b = static_cast<uint8_t>(c);
      auto it = t[cur].kids.find(b);
      if (it == t[cur].kids.end()) {
        t.emplace_back();
        it = t[cur].kids.emplace(b, static_cast<uint32_t>(t.size() - 1)).first;
      }
      cur = it->second;
    }
    t[cur].toks.push_back(i);
  }
  nodes_.reserve(t.size());
  struct Item {
    uint32_t id;
    uint16_t depth;
    uint8_t byte;
    size_t at;  // index in nodes_ once emitted
    bool open;
  };
  std::vector<Item> st{{0, 0, 0, 0, false}};
  while (!st.empty()) {
    Item& it = st.back();
    if (it.open) {  // subtree done
      nodes_[it.at].end = static_cast<uint32_t>(nodes_.size());
      st.pop_back();
      continue;
    }
    it.open = true;
    it.at = nodes_.size();
    const T& n = t[it.id];
    nodes_.push_back({0, static_cast<uint32_t>(toks_.size()), static_cast<uint16_t>(n.toks.size()), it.depth, 0, it.byte});
    toks_.insert(toks_.end(), n.toks.begin(), n.toks.end());
    max_depth_ = std::max(max_depth_, it.depth);
    const uint16_t d = static_cast<uint16_t>(it.depth + 1);
    for (auto k = n.kids.rbegin(); k != n.kids.rend(); ++k) st.push_back({k->second, d, k->first, 0, false});
  }
  // Longest token per subtree (children after their parent in preorder: walk backwards).
  for (size_t i = nodes_.size(); i-- > 0;) {
    Node& nd = nodes_[i];
    nd.sub_max = nd.n_toks ? nd.depth : 0;
    for (size_t j = i + 1; j < nd.end; j = nodes_[j].end) nd.sub_max = std::max(nd.sub_max, nodes_[j].sub_max);
  }
  const size_t words = n_words();
  len_le_.assign((static_cast<size_t>(max_depth_) + 1) * words, 0);
  for (const Node& nd : nodes_)
    for (uint32_t k = 0; k < nd.n_toks; ++k) {
      const auto t = static_cast<uint32_t>(toks_[nd.tok_begin + k]);
      len_le_[nd.depth * words + (t >> 6)] |= uint64_t{1} << (t & 63);
    }
  for (size_t b = 1; b <= max_depth_; ++b)
    for (size_t w = 0; w < words; ++w) len_le_[b * words + w] |= len_le_[(b - 1) * words + w];
}

struct Matcher::LocalMask {
  std::vector<uint64_t> mask;  // tokens allowed whatever the context
  // Trie subtrees whose tokens depend on the context: (root node, bytes of the path to its parent).
  std::vector<std::pair<uint32_t, std::string>> cd;
};

/// The lazily built configuration DFA of one matcher.
struct Matcher::Tables {
  std::shared_ptr<const Grammar> keep;
  const Grammar& g;
  int max_depth;
  std::mutex mu;            // matchers of one grammar may run on different threads
  uint64_t generation = 0;  // bumped when the configurations are cleared
  // Stack nodes: (state, parent node or -1), interned; a stack is its top node.
  std::vector<std::pair<uint32_t, int32_t>> nodes;
  std::vector<int32_t> depth;
  std::vector<uint8_t> local;  // the node sits over `bottom`
  std::unordered_map<uint64_t, int32_t> node_ids;
  int32_t bottom = -1;  // the placeholder stack node of local configurations
  static constexpr int kLocalDepth = 16;  // pushes above `bottom` a local walk follows
  // Configurations: sorted top nodes (whose states have byte edges) + whether the root may end.
  std::vector<std::vector<int32_t>> stacks;
  std::vector<uint8_t> accept;
  // Local configurations (stacks over `bottom`, an unknown context): the byte that made this
  // configuration ended a rule into that context (or nested past kLocalDepth).
  std::vector<uint8_t> popped;
  std::vector<int32_t> local_of;  // [cfg]: its local configuration, -2 not known yet
  std::unordered_map<int32_t, LocalMask> locals;
  std::vector<int32_t> next;  // [cfg * 256 + byte]: -2 not known yet, -1 dead (no edge: at interning)
  std::unordered_map<std::string, int32_t> cfg_ids;
  std::unordered_map<int32_t, std::vector<uint64_t>> masks;  // each configuration's own mask
  size_t mask_bytes = 0;
  // Relaxed states (Grammar::repeats): a state of copy c of a repetition maps to the same
  // state of copy T = min(K, copies - 1), K = max token bytes / min item bytes + 1. Copies
  // past K behave like copy K over any token's bytes (exact); a copy c < T behaves like copy
  // T over tokens of at most c * min item bytes bytes (relax_h). Empty: no repetitions.
  std::vector<uint32_t> relax_state;
  std::vector<uint32_t> relax_h;  // [state]: tokens up to this many bytes see no difference
  static constexpr uint32_t kExact = UINT32_MAX;
  // [state]: the state belongs to a copy of a repetition (Grammar::repeats). A top whose
  // parent frame is such a state (a character rule called by a bounded string) keeps that
  // frame in its local configuration, so that the repetition's next items stay local.
  std::vector<uint8_t> in_repeat;
  std::vector<int32_t> relax_node;    // [node]: its relaxed stack, -2 not known yet
  std::vector<uint32_t> relax_node_h;  // [node]: min relax_h over the stack
  std::vector<int32_t> relax_cfg;     // [cfg]: its relaxed configuration, -2 not known yet
  std::vector<uint32_t> relax_cfg_h;  // [cfg]: tokens up to this many bytes: same mask (kExact: all)
  uint32_t token_bytes = 0;
  // scratch
  std::vector<std::pair<uint32_t, int32_t>> work;
  std::unordered_set<uint64_t> seen;
  std::vector<int32_t> out;

  /// token_bytes: the vocabulary's longest token in bytes (the horizon of a mask).
  Tables(std::shared_ptr<const Grammar> gp, int max_depth, uint32_t token_bytes)
      : keep(std::move(gp)), g(*keep), max_depth(max_depth), token_bytes(token_bytes) {
    nodes.emplace_back(UINT32_MAX, -1);
    depth.push_back(0);
    local.push_back(1);
    bottom = 0;
    if (g.repeats.empty()) return;
    in_repeat.assign(g.states.size(), 0);
    relax_state.resize(g.states.size());
    for (uint32_t s = 0; s < relax_state.size(); ++s) relax_state[s] = s;
    relax_h.assign(g.states.size(), kExact);
    for (const Grammar::Repeat& r : g.repeats) {
      std::fill_n(in_repeat.begin() + r.first_state, static_cast<size_t>(r.copies) * r.states_per_copy, 1);
      // Copy c is followed by at most c items; within token_bytes bytes at most
      // token_bytes / min_item_bytes items end, so copies past K are alike, and copy c is
      // like any later copy for tokens of at most c * min_item_bytes bytes.
      const uint64_t k = token_bytes / r.min_item_bytes + 1;
      const uint64_t t = std::min<uint64_t>(k, r.copies - 1);
      for (uint64_t c = 0; c < r.copies; ++c)
        for (uint32_t i = 0; i < r.states_per_copy; ++i) {
          const size_t s = r.first_state + c * r.states_per_copy + i;
          relax_state[s] = static_cast<uint32_t>(r.first_state + t * r.states_per_copy + i);
          if (c < t) relax_h[s] = static_cast<uint32_t>(std::min<uint64_t>(c * r.min_item_bytes, kExact - 1));
        }
    }
  }

  // The stack of node n with relaxed states; `h` gets the least relax_h over it.
  int32_t relaxed_node(int32_t n, uint32_t& h) {
    if (n < 0) return n;
    if (relax_node.size() < nodes.size()) {
      relax_node.resize(nodes.size(), -2);
      relax_node_h.resize(nodes.size(), kExact);
    }
    if (relax_node[static_cast<size_t>(n)] == -2) {
      const auto [s, p] = nodes[static_cast<size_t>(n)];
      uint32_t hp = kExact;
      const int32_t rp = relaxed_node(p, hp);
      const bool has = s < relax_state.size();  // `bottom` has no state
      const uint32_t rs = has ? relax_state[s] : s;
      const uint32_t hn = std::min(hp, has ? relax_h[s] : kExact);
      const int32_t r = rs == s && rp == p ? n : node(rs, rp);
      if (relax_node.size() < nodes.size()) {
        relax_node.resize(nodes.size(), -2);
        relax_node_h.resize(nodes.size(), kExact);
      }
      relax_node[static_cast<size_t>(n)] = r;
      relax_node_h[static_cast<size_t>(n)] = hn;
    }
    h = std::min(h, relax_node_h[static_cast<size_t>(n)]);
    return relax_node[static_cast<size_t>(n)];
  }

  // The configuration whose stacks are cfg's with relaxed states, and the token length up
  // to which both allow the same tokens (kExact: all; then its mask serves cfg). Both have
  // the same acceptance.
  std::pair<int32_t, uint32_t> relaxed(int32_t cfg) {
    if (relax_state.empty()) return {cfg, kExact};
    if (relax_cfg[static_cast<size_t>(cfg)] == -2) {
      std::vector<int32_t> tops;
      uint32_t h = kExact;
      bool same = true;
      for (int32_t n : stacks[static_cast<size_t>(cfg)]) {
        tops.push_back(relaxed_node(n, h));
        same = same && tops.back() == n;
      }
      if (h >= token_bytes) h = kExact;
      int32_t c = cfg;
      if (!same) {
        out = std::move(tops);
        c = intern(accept[static_cast<size_t>(cfg)] != 0, popped[static_cast<size_t>(cfg)] != 0);
      }
      relax_cfg[static_cast<size_t>(cfg)] = c;
      relax_cfg_h[static_cast<size_t>(cfg)] = h;
    }
    return {relax_cfg[static_cast<size_t>(cfg)], relax_cfg_h[static_cast<size_t>(cfg)]};
  }

  int32_t node(uint32_t s, int32_t parent) {
    const uint64_t key = (static_cast<uint64_t>(s) << 32) | static_cast<uint32_t>(parent);
    auto [it, fresh] = node_ids.emplace(key, static_cast<int32_t>(nodes.size()));
    if (fresh) {
      nodes.emplace_back(s, parent);
      depth.push_back(parent < 0 ? 1 : depth[static_cast<size_t>(parent)] + 1);
      local.push_back(parent >= 0 && local[static_cast<size_t>(parent)]);
    }
    return it->second;
  }

  // Adds the closure of stack (s over parent) to `out`; sets `acc` when the root may end,
  // `pop` when a local stack ends a rule into `bottom` or nests past kLocalDepth.
  void closure(uint32_t s0, int32_t p0, bool& acc, bool& pop) {
    work.assign(1, {s0, p0});
    while (!work.empty()) {
      auto [s, p] = work.back();
      work.pop_back();
      const uint64_t key = (static_cast<uint64_t>(s) << 32) | static_cast<uint32_t>(p);
      if (!seen.insert(key).second) continue;
      const Grammar::State& st = g.states[s];
      if (!st.bytes.empty()) out.push_back(node(s, p));
      for (uint32_t e : st.eps) work.emplace_back(e, p);
      if (!st.calls.empty()) {
        const bool loc = p >= 0 && local[static_cast<size_t>(p)];
        if ((p < 0 ? 1 : depth[static_cast<size_t>(p)] + 1) < (loc ? kLocalDepth : max_depth)) {
          for (const Grammar::Call& c : st.calls) work.emplace_back(g.rule_start[c.rule], node(c.ret, p));
        } else if (loc) {
          pop = true;  // the real context decides
        }
      }
      if (st.ends_rule >= 0) {
        if (p < 0) {
          acc = true;
        } else if (p == bottom) {
          pop = true;
        } else {
          const auto [rs, rp] = nodes[static_cast<size_t>(p)];
          work.emplace_back(rs, rp);
        }
      }
    }
  }

  // Interns the configuration in `out` (sorted, deduplicated here); -1 when dead.
  int32_t intern(bool acc, bool pop = false) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    if (out.empty() && !acc && !pop) return -1;
    std::string key(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(int32_t));
    key.push_back(static_cast<char>((acc ? 1 : 0) | (pop ? 2 : 0)));
    auto [it, fresh] = cfg_ids.emplace(std::move(key), static_cast<int32_t>(stacks.size()));
    if (fresh) {
      stacks.push_back(out);
      accept.push_back(acc ? 1 : 0);
      popped.push_back(pop ? 1 : 0);
      local_of.push_back(-2);
      relax_cfg.push_back(-2);
      relax_cfg_h.push_back(kExact);
      // Bytes no top has an edge for are dead from the start (no transition to compute).
      next.resize(next.size() + 256, -1);
      int32_t* row = next.data() + next.size() - 256;
      for (int32_t n : out)
        for (const Grammar::ByteEdge& e : g.states[nodes[static_cast<size_t>(n)].first].bytes)
          std::fill(row + e.lo, row + e.hi + 1, -2);
    }
    return it->second;
  }

  int32_t initial() {
    out.clear();
    seen.clear();
    bool acc = false, pop = false;
    closure(g.rule_start[g.root], -1, acc, pop);
    return intern(acc);
  }

  int32_t transition(int32_t cfg, uint8_t b) {
    out.clear();
    seen.clear();
    bool acc = false, pop = false;
    // Copy: interning may grow `stacks`.
    const std::vector<int32_t> tops = stacks[static_cast<size_t>(cfg)];
    for (int32_t n : tops) {
      const auto [s, p] = nodes[static_cast<size_t>(n)];
      for (const Grammar::ByteEdge& e : g.states[s].bytes)
        if (b >= e.lo && b <= e.hi) closure(e.to, p, acc, pop);
    }
    return intern(acc, pop);
  }

  // The local configuration of `cfg`: its top states over `bottom` (with their parent
  // frame when that is a repetition's, in_repeat); -1 when a top is too deep for a local
  // walk to be exact (then masks walk the real configuration).
  int32_t local_config(int32_t cfg) {
    int32_t& memo = local_of[static_cast<size_t>(cfg)];
    if (memo != -2) return memo;
    out.clear();
    int32_t r = -1;
    bool shallow = true;
    for (int32_t n : stacks[static_cast<size_t>(cfg)]) {
      shallow = shallow && depth[static_cast<size_t>(n)] + kLocalDepth < max_depth;
      const auto [s, p] = nodes[static_cast<size_t>(n)];
      int32_t under = bottom;
      if (p >= 0 && !in_repeat.empty() && nodes[static_cast<size_t>(p)].first < in_repeat.size() &&
          in_repeat[nodes[static_cast<size_t>(p)].first])
        under = node(nodes[static_cast<size_t>(p)].first, bottom);
      out.push_back(node(s, under));
    }
    if (shallow && !out.empty()) r = intern(false);
    local_of[static_cast<size_t>(cfg)] = r;  // `memo` may dangle: local_of grew
    return r;
  }

  void clear_configs() {
    popped.clear();
    local_of.clear();
    relax_cfg.clear();
    relax_cfg_h.clear();
    locals.clear();
    stacks.clear();
    accept.clear();
    next.clear();
    cfg_ids.clear();
    masks.clear();
    mask_bytes = 0;
  }
};

namespace {

// The tables of the most recently used (grammar, vocabulary, depth) triples, most recent first.
std::shared_ptr<Matcher::Tables> shared_tables(const std::shared_ptr<const Grammar>& g, const Vocabulary* v, int max_depth,
                                               const std::function<std::shared_ptr<Matcher::Tables>()>& make) {
  using Key = std::tuple<const Grammar*, const Vocabulary*, int>;
  static std::mutex mu;
  static std::list<std::pair<Key, std::shared_ptr<Matcher::Tables>>> lru;
  const Key key{g.get(), v, max_depth};
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = lru.begin(); it != lru.end(); ++it)
    if (it->first == key) {
      lru.splice(lru.begin(), lru, it);
      return it->second;
    }
  lru.emplace_front(key, make());
  while (lru.size() > Matcher::kSharedTables) lru.pop_back();
  return lru.front().second;
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const Vocabulary> v, int max_depth)
    : g_(std::move(g)), v_(std::move(v)) {
  // The key holds raw pointers: the tables keep the grammar alive, the vocabulary is kept by
  // this matcher (and a vocabulary at a reused address is an engine's, built once).
  t_ = shared_tables(g_, v_.get(), max_depth, [&] { return std::make_shared<Tables>(g_, max_depth, v_->max_depth_); });
  std::lock_guard<std::mutex> lock(t_->mu);
  gen_ = t_->generation;
  set_cur(t_->initial());
  zero_.assign(v_->n_words(), 0);
  walk_.assign(static_cast<size_t>(v_->max_depth_) + 1, -1);
  path_.assign(static_cast<size_t>(v_->max_depth_) + 1, 0);
}

Matcher::~Matcher() = default;

inline int32_t Matcher::step_fast(int32_t cfg, uint8_t b) {
  const int32_t nx = t_->next[static_cast<size_t>(cfg) * 256 + b];
  return nx != -2 ? nx : step_slow(cfg, b);
}

int32_t Matcher::step_slow(int32_t cfg, uint8_t b) {
  const int32_t r = t_->transition(cfg, b);
  t_->next[static_cast<size_t>(cfg) * 256 + b] = r;  // `nx` may dangle: next grew
  ++stats_.configs;
  return r;
}

int32_t Matcher::advance(int32_t cfg, const std::string& bytes) {
  for (char c : bytes) {
    cfg = step_fast(cfg, static_cast<uint8_t>(c));
    if (cfg < 0) return -1;
  }
  return cfg;
}

void Matcher::set_cur(int32_t cfg) {
  cur_ = cfg;
  cur_tops_ = t_->stacks[static_cast<size_t>(cfg)];
  cur_acc_ = t_->accept[static_cast<size_t>(cfg)] != 0;
}

void Matcher::sync() {
  if (gen_ == t_->generation) return;
  t_->out = cur_tops_;
  cur_ = t_->intern(cur_acc_);
  gen_ = t_->generation;
}

void Matcher::maybe_reset() {
  sync();
  if (t_->stacks.size() < kMaxConfigs && t_->mask_bytes < kMaxMaskBytes) return;
  if (t_->stacks.size() < kMaxConfigs) {  // masks only
    t_->masks.clear();
    t_->locals.clear();
    t_->mask_bytes = 0;
    ++stats_.resets;
    return;
  }
  t_->clear_configs();
  ++t_->generation;
  sync();
  ++stats_.resets;
}

bool Matcher::can_end() const { return !ended_ && cur_acc_; }

bool Matcher::must_end() const { return ended_ || (cur_acc_ && cur_tops_.empty()); }

const uint64_t* Matcher::mask() {
  ++stats_.masks;
  if (ended_) return zero_.data();
  std::lock_guard<std::mutex> lock(t_->mu);
  maybe_reset();
  // Configurations inside repetitions share the mask of their relaxed configuration
  // (Tables::relaxed): whole when the relaxation is exact, for tokens up to h bytes else.
  const auto [f, h] = t_->relaxed(cur_);
  const int32_t key = h == Tables::kExact ? f : cur_;
  auto hit = t_->masks.find(key);
  if (hit != t_->masks.end()) {
    ++stats_.mask_hits;
    mask_buf_ = hit->second;
    return mask_buf_.data();
  }
  if (h == Tables::kExact) {
    mask_buf_ = exact_mask(f);
    return mask_buf_.data();
  }
  // Near a repetition's bound: the relaxed configuration's tokens of at most h bytes, and
  // the longer tokens walked from the configuration itself.
  const std::vector<uint64_t>& mf = exact_mask(f);
  const uint64_t* shorts = v_->short_tokens(h);
  std::vector<uint64_t> m(v_->n_words());
  for (size_t w = 0; w < m.size(); ++w) m[w] = mf[w] & shorts[w];
  walk(cur_, 1, v_->nodes_.size(), m.data(), h);
  if (t_->accept[static_cast<size_t>(cur_)])
    for (int32_t t : v_->eog_list_) m[static_cast<uint32_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  t_->mask_bytes += m.size() * sizeof(uint64_t);
  mask_buf_ = m;
  t_->masks.emplace(cur_, std::move(m));
  return mask_buf_.data();
}

const std::vector<uint64_t>& Matcher::exact_mask(int32_t cfg) {
  auto hit = t_->masks.find(cfg);
  if (hit != t_->masks.end()) return hit->second;
  std::vector<uint64_t> m(v_->n_words(), 0);
  if (!t_->stacks[static_cast<size_t>(cfg)].empty()) {
    const int32_t loc = t_->local_config(cfg);
    if (loc < 0) {
      walk(cfg, 1, v_->nodes_.size(), m.data());
    } else {
      // Context-independent tokens from the local configuration's cache, then the trie
      // subtrees whose tokens end a rule into the context, walked from the real one.
      const LocalMask& l = local(loc);
      std::copy(l.mask.begin(), l.mask.end(), m.begin());
      // Siblings come one after another (trie preorder) with the same prefix: advance once.
      const std::string* last = nullptr;
      int32_t c = -1;
      for (const auto& [root, prefix] : l.cd) {
        if (!last || prefix != *last) {
          c = advance(cfg, prefix);
          last = &prefix;
        }
        if (c >= 0) walk(c, root, v_->nodes_[root].end, m.data());
      }
    }
  }
  if (t_->accept[static_cast<size_t>(cfg)])
    for (int32_t t : v_->eog_list_) m[static_cast<uint32_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  t_->mask_bytes += m.size() * sizeof(uint64_t);
  return t_->masks.emplace(cfg, std::move(m)).first->second;
}

void Matcher::walk(int32_t c0, size_t begin, size_t end, uint64_t* m, uint32_t h) {
  const std::vector<Vocabulary::Node>& nodes = v_->nodes_;
  const int32_t* toks = v_->toks_.data();
  walk_[nodes[begin].depth - 1u] = c0;
  size_t i = begin;
  while (i < end) {
    const Vocabulary::Node& nd = nodes[i];
    // No token longer than h bytes ends in this subtree (h = 0: none at all).
    if (nd.sub_max <= h) {
      i = nd.end;
      continue;
    }
    const int32_t c = step_fast(walk_[nd.depth - 1u], nd.byte);
    if (c < 0) {
      i = nd.end;
      continue;
    }
    walk_[nd.depth] = c;
    for (uint32_t k = 0; k < nd.n_toks; ++k) {
      const auto t = static_cast<uint32_t>(toks[nd.tok_begin + k]);
      m[t >> 6] |= uint64_t{1} << (t & 63);
    }
    ++i;
  }
}

const Matcher::LocalMask& Matcher::local(int32_t loc) {
  auto it = t_->locals.find(loc);
  if (it != t_->locals.end()) return it->second;
  LocalMask l;
  l.mask.assign(v_->n_words(), 0);
  const std::vector<Vocabulary::Node>& nodes = v_->nodes_;
  const int32_t* toks = v_->toks_.data();
  walk_[0] = loc;
  const size_t n = nodes.size();
  size_t i = 1;
  while (i < n) {
    const Vocabulary::Node& nd = nodes[i];
    path_[nd.depth] = static_cast<char>(nd.byte);
    const int32_t c = step_fast(walk_[nd.depth - 1u], nd.byte);
    if (c < 0) {
      i = nd.end;
      continue;
    }
    if (t_->popped[static_cast<size_t>(c)]) {  // this byte leaves the local context
      l.cd.emplace_back(static_cast<uint32_t>(i), std::string(path_.data() + 1, nd.depth - 1u));
      i = nd.end;
      continue;
    }
    walk_[nd.depth] = c;
    for (uint32_t k = 0; k < nd.n_toks; ++k) {
      const auto t = static_cast<uint32_t>(toks[nd.tok_begin + k]);
      l.mask[t >> 6] |= uint64_t{1} << (t & 63);
    }
    ++i;
  }
  t_->mask_bytes += l.mask.size() * sizeof(uint64_t);
  return t_->locals.emplace(loc, std::move(l)).first->second;
}

bool Matcher::allowed(int32_t t) {
  if (ended_ || t < 0 || t >= v_->n_vocab()) return false;
  if (v_->is_eog(t)) return can_end();
  const std::string& p = v_->piece(t);
  if (p.empty()) return false;
  std::lock_guard<std::mutex> lock(t_->mu);
  maybe_reset();
  return advance(cur_, p) >= 0;
}

bool Matcher::accept(int32_t t) {
  if (!allowed(t)) return false;
  if (v_->is_eog(t)) {
    ended_ = true;
    return true;
  }
  std::lock_guard<std::mutex> lock(t_->mu);
  maybe_reset();
  set_cur(advance(cur_, v_->piece(t)));
  return true;
}

}  // namespace swz::grammar

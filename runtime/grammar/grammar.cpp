#include "grammar/grammar.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace swz::grammar {

uint32_t Builder::state() {
  g_.states.emplace_back();
  return static_cast<uint32_t>(g_.states.size() - 1);
}

Builder::Frag Builder::empty() {
  const uint32_t s = state();
  return {s, s};
}

Builder::Frag Builder::lit(std::string_view s) {
  const uint32_t in = state();
  uint32_t cur = in;
  for (char c : s) {
    const uint32_t nx = state();
    const auto b = static_cast<uint8_t>(c);
    g_.states[cur].bytes.push_back({b, b, nx});
    cur = nx;
  }
  return {in, cur};
}

Builder::Frag Builder::range(uint8_t lo, uint8_t hi) { return ranges({{lo, hi}}); }

Builder::Frag Builder::ranges(const std::vector<std::pair<uint8_t, uint8_t>>& rs) {
  const uint32_t in = state(), out = state();
  for (auto [lo, hi] : rs) g_.states[in].bytes.push_back({lo, hi, out});
  return {in, out};
}

Builder::Frag Builder::seq(const std::vector<Frag>& parts) {
  if (parts.empty()) return empty();
  for (size_t i = 0; i + 1 < parts.size(); ++i) g_.states[parts[i].out].eps.push_back(parts[i + 1].in);
  return {parts.front().in, parts.back().out};
}

Builder::Frag Builder::alt(const std::vector<Frag>& alts) {
  const uint32_t in = state(), out = state();
  for (const Frag& f : alts) {
    g_.states[in].eps.push_back(f.in);
    g_.states[f.out].eps.push_back(out);
  }
  return {in, out};
}

Builder::Frag Builder::opt(Frag f) {
  const uint32_t in = state(), out = state();
  g_.states[in].eps.push_back(f.in);
  g_.states[in].eps.push_back(out);
  g_.states[f.out].eps.push_back(out);
  return {in, out};
}

Builder::Frag Builder::star(Frag f) {
  const uint32_t in = state(), out = state();
  g_.states[in].eps.push_back(f.in);
  g_.states[in].eps.push_back(out);
  g_.states[f.out].eps.push_back(in);
  return {in, out};
}

Builder::Frag Builder::plus(Frag f) {
  const uint32_t out = state();
  g_.states[f.out].eps.push_back(f.in);
  g_.states[f.out].eps.push_back(out);
  return {f.in, out};
}

Builder::Frag Builder::repeat(const std::function<Frag()>& item, int max, uint32_t min_item_bytes) {
  // Copy i: an entry state with an epsilon to the item and one to the common exit; the item
  // continues in copy i - 1's entry (copy 0's item in the exit). Every copy leaves in one
  // epsilon (a chain of optional fragments would make the closure at copy i walk i states).
  const uint32_t exit = state();
  uint32_t next = exit, first = 0, per = 0;
  bool regular = min_item_bytes > 0;
  for (int i = 0; i < max; ++i) {  // copy i: at most i more items after it
    const auto before = static_cast<uint32_t>(g_.states.size());
    const uint32_t in = state();
    const Frag f = item();
    g_.states[in].eps.push_back(f.in);
    g_.states[in].eps.push_back(exit);
    g_.states[f.out].eps.push_back(next);
    next = in;
    const auto size = static_cast<uint32_t>(g_.states.size()) - before;
    if (i == 0) {
      first = before;
      per = size;
    } else if (before != first + static_cast<uint32_t>(i) * per || size != per) {
      regular = false;
    }
  }
  if (regular && max > 1) g_.repeats.push_back({first, per, static_cast<uint32_t>(max), min_item_bytes});
  return {next, exit};
}

uint32_t Builder::declare_rule() {
  g_.rule_start.push_back(0);
  defined_.push_back(false);
  return static_cast<uint32_t>(g_.rule_start.size() - 1);
}

void Builder::define_rule(uint32_t rule, Frag body) {
  if (defined_.at(rule)) throw std::logic_error("grammar rule defined twice");
  defined_[rule] = true;
  g_.rule_start[rule] = body.in;
  const uint32_t end = state();
  g_.states[body.out].eps.push_back(end);
  g_.states[end].ends_rule = static_cast<int32_t>(rule);
}

Builder::Frag Builder::call(uint32_t rule) {
  const uint32_t in = state(), out = state();
  g_.states[in].calls.push_back({rule, out});
  return {in, out};
}

Grammar Builder::finish(uint32_t root, std::string name) {
  for (size_t r = 0; r < defined_.size(); ++r)
    if (!defined_[r]) throw std::logic_error("grammar rule " + std::to_string(r) + " declared but not defined");
  g_.root = root;
  g_.name = std::move(name);
  Grammar out = std::move(g_);
  g_ = Grammar{};
  defined_.clear();
  return out;
}

namespace {

using Stack = std::vector<uint32_t>;  // return states (bottom first), then the current state last

// Adds to `out` every stack reachable from `st` by epsilon moves, calls and rule ends whose
// top state has byte edges; sets `accept` when the root rule can end.
void closure(const Grammar& g, Stack st, std::set<Stack>& out, std::set<Stack>& seen, bool& accept, int max_depth) {
  if (!seen.insert(st).second) return;
  const Grammar::State& s = g.states[st.back()];
  if (!s.bytes.empty()) out.insert(st);
  for (uint32_t e : s.eps) {
    Stack n = st;
    n.back() = e;
    closure(g, std::move(n), out, seen, accept, max_depth);
  }
  for (const Grammar::Call& c : s.calls) {
    if (static_cast<int>(st.size()) >= max_depth) continue;
    Stack n = st;
    n.back() = c.ret;
    n.push_back(g.rule_start[c.rule]);
    closure(g, std::move(n), out, seen, accept, max_depth);
  }
  if (s.ends_rule >= 0) {
    if (st.size() == 1) {
      accept = true;
    } else {
      Stack n(st.begin(), st.end() - 1);
      closure(g, std::move(n), out, seen, accept, max_depth);
    }
  }
}

}  // namespace

Simulation simulate(const Grammar& g, std::string_view text, int max_depth) {
  std::set<Stack> cur, seen;
  bool accept = false;
  closure(g, Stack{g.rule_start[g.root]}, cur, seen, accept, max_depth);
  for (char c : text) {
    const auto b = static_cast<uint8_t>(c);
    std::set<Stack> next;
    seen.clear();
    accept = false;
    for (const Stack& st : cur)
      for (const Grammar::ByteEdge& e : g.states[st.back()].bytes)
        if (b >= e.lo && b <= e.hi) {
          Stack n = st;
          n.back() = e.to;
          closure(g, std::move(n), next, seen, accept, max_depth);
        }
    cur = std::move(next);
    if (cur.empty() && !accept) return {};
  }
  return {true, accept};
}

bool matches(const Grammar& g, std::string_view text, int max_depth) { return simulate(g, text, max_depth).complete; }

}  // namespace swz::grammar

// The approx cache mode's atom store and K re-rotation (kvcache/atom_store.h):
//  - rerotate_head of a KV head's key roped at position p (f16) by d equals, within f16
//    rounding, the key roped at p + d in float64 (both RoPE pairings, negative offsets,
//    partial n_rot); an offset of 0 and the dims past n_rot leave the values as they are;
//  - the index keeps up to its number of atoms, least recently used dropped first; a key
//    saved again takes the newer location; a stale hit erases its atom.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ggml/fp16.h"
#include "kvcache/atom_store.h"

namespace swz::kvcache {
namespace {

/// RoPE of one head's row at position `pos` in float64 (ggml's rope_f32 pairing).
std::vector<double> rope64(const std::vector<double>& x, const KvGeometry& g, int pos) {
  std::vector<double> y = x;
  const int half = g.n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const double th = pos * std::pow(static_cast<double>(g.rope_theta), -2.0 * i / g.n_rot);
    const int a = g.neox ? i : 2 * i, b = g.neox ? i + half : 2 * i + 1;
    y[a] = x[a] * std::cos(th) - x[b] * std::sin(th);
    y[b] = x[a] * std::sin(th) + x[b] * std::cos(th);
  }
  return y;
}

TEST(AtomStore, RerotateEqualsRopeAtTheNewPosition) {
  std::mt19937 rng(7);
  std::normal_distribution<double> nd(0.0, 4.0);
  for (bool neox : {false, true})
    for (int n_rot : {64, 32}) {
      KvGeometry g;
      g.n_layer = 1;
      g.n_head_kv = 3;
      g.head_dim = 64;
      g.n_rot = n_rot;
      g.rope_theta = neox ? 1000000.f : 100000.f;
      g.neox = neox;
      for (auto [p, d] : {std::pair{5, 300}, std::pair{1000, -977}, std::pair{64, 1}, std::pair{4000, 12345}}) {
        std::vector<std::vector<double>> x(g.n_head_kv, std::vector<double>(g.head_dim));
        std::vector<uint16_t> row(g.kv_width());
        for (int h = 0; h < g.n_head_kv; ++h) {
          for (double& v : x[h]) v = nd(rng);
          const std::vector<double> at_p = rope64(x[h], g, p);
          for (int j = 0; j < g.head_dim; ++j) row[h * g.head_dim + j] = ggml::fp32_to_fp16(static_cast<float>(at_p[j]));
        }
        const RopeDelta rd(g, d);
        for (int h = 0; h < g.n_head_kv; ++h) rerotate_head(row.data() + h * g.head_dim, g, rd);
        for (int h = 0; h < g.n_head_kv; ++h) {
          const std::vector<double> want = rope64(x[h], g, p + d);
          for (int j = 0; j < g.head_dim; ++j) {
            // Two f16 roundings (stored at p, then at p + d) of values of a pair whose norm is r.
            const int half = g.n_rot / 2;
            const int partner = j >= g.n_rot ? j : neox ? (j < half ? j + half : j - half) : (j ^ 1);
            const double r = std::hypot(want[j], want[partner]);
            EXPECT_NEAR(ggml::fp16_to_fp32(row[h * g.head_dim + j]), want[j], r * std::ldexp(1.0, -10) + 1e-6)
                << "neox " << neox << " n_rot " << n_rot << " p " << p << " d " << d << " head " << h << " dim " << j;
          }
        }
      }
    }
}

TEST(AtomStore, ZeroOffsetLeavesTheRowsAsTheyAre) {
  KvGeometry g{1, 1, 8, 8, 10000.f, false};
  std::vector<uint16_t> row(8), copy;
  for (int j = 0; j < 8; ++j) row[j] = ggml::fp32_to_fp16(0.5f * j - 1.f);
  copy = row;
  rerotate_head(row.data(), g, RopeDelta(g, 0));
  EXPECT_EQ(row, copy);
}

TEST(AtomStore, DimsPastNRotStayAsTheyAre) {
  KvGeometry g{1, 1, 8, 6, 10000.f, true};
  std::vector<uint16_t> head(8);
  for (int j = 0; j < 8; ++j) head[j] = ggml::fp32_to_fp16(0.25f * j - 2.f);
  const std::vector<uint16_t> before = head;
  rerotate_head(head.data(), g, RopeDelta(g, -41));
  EXPECT_NE(head[0], before[0]) << "a rotated pair";
  EXPECT_EQ(head[6], before[6]) << "dims past n_rot stay";
  EXPECT_EQ(head[7], before[7]) << "dims past n_rot stay";
}

std::shared_ptr<const AtomRef> atom_of(int n, int32_t block) {
  auto a = std::make_shared<AtomRef>();
  a->n = n;
  a->pieces.push_back({block_key(model_key("blocks"), {}, &block, 1), 0, n});
  return a;
}

TEST(AtomStore, KeepsAtMostItsAtomsLeastRecentlyUsedFirstOut) {
  const BlockKey model = model_key("test");
  auto key = [&](int32_t i) { return block_key(model, {}, &i, 1); };
  AtomStore store(3);
  store.put(key(1), atom_of(4, 1));
  store.put(key(2), atom_of(4, 2));
  store.put(key(3), atom_of(4, 3));
  ASSERT_NE(store.find(key(1)), nullptr);  // 1 is now the most recent: 2 goes first
  store.put(key(4), atom_of(4, 4));
  EXPECT_TRUE(store.contains(key(1)));
  EXPECT_FALSE(store.contains(key(2)));
  EXPECT_TRUE(store.contains(key(3)));
  EXPECT_TRUE(store.contains(key(4)));
  AtomStore::Stats st = store.stats();
  EXPECT_EQ(st.atoms, 3u);
  EXPECT_EQ(st.saved, 4u);
  EXPECT_EQ(st.evicted, 1u);
  EXPECT_EQ(st.hits, 1u);
  // A key saved again takes the newer location.
  auto other = atom_of(4, 9);
  store.put(key(4), other);
  EXPECT_EQ(store.find(key(4)), other);
  EXPECT_EQ(store.find(key(2)), nullptr);
  st = store.stats();
  EXPECT_EQ(st.atoms, 3u);
  EXPECT_EQ(st.saved, 5u);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.hits, 2u);
  // A hit whose blocks are gone counts as stale, and the atom is erased (the next request
  // that computes it saves it again).
  store.stale(key(4));
  st = store.stats();
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.stale, 1u);
  EXPECT_EQ(st.atoms, 2u);
  EXPECT_FALSE(store.contains(key(4)));
  // An index of 0 atoms keeps none.
  AtomStore none(0);
  none.put(key(1), atom_of(4, 1));
  EXPECT_FALSE(none.contains(key(1)));
}

}  // namespace
}  // namespace swz::kvcache

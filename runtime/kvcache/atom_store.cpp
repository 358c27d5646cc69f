#include "kvcache/atom_store.h"

#include <cmath>
#include <vector>

#include "ggml/fp16.h"

namespace swz::kvcache {

RopeDelta::RopeDelta(const KvGeometry& g, int d) : delta(d) {
  const int half = g.n_rot / 2;
  cs.resize(static_cast<size_t>(half));
  sn.resize(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    const double theta = static_cast<double>(d) * std::pow(static_cast<double>(g.rope_theta), -2.0 * i / g.n_rot);
    cs[static_cast<size_t>(i)] = static_cast<float>(std::cos(theta));
    sn[static_cast<size_t>(i)] = static_cast<float>(std::sin(theta));
  }
}

void rerotate_head(uint16_t* x, const KvGeometry& g, const RopeDelta& r) {
  if (r.delta == 0) return;
  const int half = g.n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const int a = g.neox ? i : 2 * i, b = g.neox ? i + half : 2 * i + 1;
    const float x0 = ggml::fp16_to_fp32(x[a]), x1 = ggml::fp16_to_fp32(x[b]);
    const float c = r.cs[static_cast<size_t>(i)], s = r.sn[static_cast<size_t>(i)];
    x[a] = ggml::fp32_to_fp16(x0 * c - x1 * s);
    x[b] = ggml::fp32_to_fp16(x0 * s + x1 * c);
  }
}

std::shared_ptr<const AtomRef> AtomStore::find(const BlockKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

bool AtomStore::contains(const BlockKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.count(key) > 0;
}

void AtomStore::put(const BlockKey& key, std::shared_ptr<const AtomRef> atom) {
  if (!atom || max_atoms_ == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  erase_locked(key);  // the newer location replaces it
  ++stats_.atoms;
  ++stats_.saved;
  lru_.emplace_front(key, std::move(atom));
  index_[key] = lru_.begin();
  while (stats_.atoms > max_atoms_) {
    --stats_.atoms;
    ++stats_.evicted;
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

void AtomStore::erase_locked(const BlockKey& key) {
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.erase(it->second);
    index_.erase(it);
    --stats_.atoms;
  }
}

void AtomStore::stale(const BlockKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  erase_locked(key);
  if (stats_.hits > 0) --stats_.hits;
  ++stats_.stale;
}

AtomStore::Stats AtomStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace swz::kvcache

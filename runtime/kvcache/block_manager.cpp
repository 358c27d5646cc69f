#include "kvcache/block_manager.h"

#include <sodium.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace swz::kvcache {

namespace fs = std::filesystem;

std::string BlockKey::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(hi), static_cast<unsigned long long>(lo));
  return buf;
}

namespace {

BlockKey from_xxh(XXH128_hash_t h) { return BlockKey{h.low64, h.high64}; }

void put_key(uint8_t* dst, const BlockKey& k) {
  std::memcpy(dst, &k.lo, 8);  // little-endian hosts (x86-64, aarch64): bytes as stored
  std::memcpy(dst + 8, &k.hi, 8);
}

// Disk tier file (block_manager.h, "Disk tier encryption"): a plain head, then the
// header and the page bytes, each sealed with XChaCha20-Poly1305 under a random nonce.
constexpr char kMagic[8] = {'S', 'W', 'Z', 'K', 'V', 'E', 'N', 'C'};
constexpr char kHeaderMagic[8] = {'S', 'W', 'Z', 'K', 'V', 'B', 'L', 'K'};
constexpr uint32_t kDiskVersion = 2;
struct PlainHead {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
};
static_assert(sizeof(PlainHead) == 16);
constexpr size_t kNonce = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
constexpr size_t kTag = crypto_aead_xchacha20poly1305_ietf_ABYTES;
struct DiskHeader {  // sealed
  char magic[8];
  uint32_t version;
  uint32_t n_layer;
  uint32_t kv_width;
  uint32_t block_tokens;
  uint64_t model_lo, model_hi;
  uint64_t key_lo, key_hi;
  uint64_t payload_bytes;
};
static_assert(sizeof(DiskHeader) == 64);

}  // namespace

BlockKey model_key(std::string_view identity) { return from_xxh(XXH3_128bits(identity.data(), identity.size())); }

BlockKey block_key(const BlockKey& model, const BlockKey& parent, const int32_t* tokens, int n) {
  uint8_t head[32];
  put_key(head, model);
  put_key(head + 16, parent);
  XXH3_state_t* st = XXH3_createState();
  if (!st) throw std::bad_alloc();
  XXH3_128bits_reset(st);
  XXH3_128bits_update(st, head, sizeof head);
  XXH3_128bits_update(st, tokens, static_cast<size_t>(n) * sizeof(int32_t));
  const BlockKey k = from_xxh(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return k;
}

std::vector<BlockKey> block_keys(const BlockKey& model, const int32_t* tokens, size_t n_tokens, BlockKey parent) {
  std::vector<BlockKey> keys;
  keys.reserve(n_tokens / kBlockTokens);
  for (size_t b = 0; (b + 1) * kBlockTokens <= n_tokens; ++b) {
    parent = block_key(model, parent, tokens + b * kBlockTokens, kBlockTokens);
    keys.push_back(parent);
  }
  return keys;
}

BlockManager::BlockManager(const PageLayout& layout, const BlockKey& model, CacheOptions opts)
    : layout_(layout), model_(model), opts_(std::move(opts)) {
  if (opts_.n_pages < 1) throw std::invalid_argument("KV cache: the page pool needs at least one page");
  if (layout_.n_layer <= 0 || layout_.kv_width <= 0) throw std::invalid_argument("KV cache: empty page layout");
  if (static_cast<bool>(opts_.read_page) != static_cast<bool>(opts_.write_page))
    throw std::invalid_argument("KV cache: read_page and write_page go together");
  if (!opts_.read_page) {
    map_bytes_ = static_cast<size_t>(opts_.n_pages) * layout_.page_bytes();
    void* p = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      throw std::runtime_error("KV cache: cannot map " + std::to_string(map_bytes_ >> 20) + " MiB for " +
                               std::to_string(opts_.n_pages) + " pages");
    base_ = static_cast<uint16_t*>(p);
  }
  refcount_.assign(opts_.n_pages, 0);
  cached_.assign(opts_.n_pages, 0);
  for (int i = opts_.n_pages - 1; i >= 0; --i) free_.push_back(i);

  if (!opts_.prefix_cache || opts_.disk_dir.empty()) return;
  if (opts_.disk_key.size() != crypto_kdf_KEYBYTES || sodium_init() < 0) {
    if (base_) munmap(base_, map_bytes_);
    throw std::invalid_argument("KV cache: the disk tier needs a 32-byte key (CacheOptions::disk_key)");
  }
  disk_model_dir_ = (fs::path(opts_.disk_dir) / model_.hex()).string();
  try {
    std::lock_guard<std::mutex> lock(mu_);
    // Files directly in the model's folder are version-1 blocks (unencrypted, named by
    // block key) or their temporaries: deleted, so an upgrade leaves no plaintext K/V.
    std::error_code ec;
    int removed = 0;
    for (const fs::directory_entry& de : fs::directory_iterator(disk_model_dir_, ec)) {
      std::error_code e2;
      if (!de.is_regular_file(e2)) continue;
      fs::remove(de.path(), e2);
      ++removed;
    }
    if (removed > 0) {
      counters_.disk_rejects += static_cast<uint64_t>(removed);
      log("swizzle-rt: prefix cache: deleted " + std::to_string(removed) + " unencrypted version-1 file(s) in " +
          disk_model_dir_);
    }
    open_tenant("");  // id 0
    enforce_disk_budget();
  } catch (...) {
    if (base_) munmap(base_, map_bytes_);
    throw;
  }
  disk_thread_ = std::thread([this] { disk_worker(); });
}

uint64_t BlockManager::disk_file_bytes() const {
  return sizeof(PlainHead) + kNonce + sizeof(DiskHeader) + kTag + kNonce + layout_.page_bytes() + kTag;
}

int BlockManager::disk_tenant(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (disk_model_dir_.empty()) return -1;
  const int id = open_tenant(name);
  enforce_disk_budget();
  return id;
}

int BlockManager::open_tenant(const std::string& name) {
  if (auto it = tenant_ids_.find(name); it != tenant_ids_.end()) return it->second;
  Tenant t;
  unsigned char tenant_key[32];
  const std::string label = "swizzle-kv-tenant:" + name;
  crypto_generichash(tenant_key, sizeof tenant_key, reinterpret_cast<const unsigned char*>(label.data()), label.size(),
                     reinterpret_cast<const unsigned char*>(opts_.disk_key.data()), opts_.disk_key.size());
  crypto_kdf_derive_from_key(t.enc, sizeof t.enc, 1, "swzkvenc", tenant_key);
  crypto_kdf_derive_from_key(t.names, sizeof t.names, 2, "swzkvenc", tenant_key);
  sodium_memzero(tenant_key, sizeof tenant_key);
  unsigned char dir_id[16];
  crypto_generichash(dir_id, sizeof dir_id, reinterpret_cast<const unsigned char*>("dir"), 3, t.names, sizeof t.names);
  char hex[33];
  sodium_bin2hex(hex, sizeof hex, dir_id, sizeof dir_id);
  t.dir = (fs::path(disk_model_dir_) / (std::string("t") + hex)).string();
  std::error_code ec;
  fs::create_directories(t.dir, ec);
  if (ec) throw std::runtime_error("KV cache: cannot create the disk tier directory " + t.dir + ": " + ec.message());
  const int id = static_cast<int>(tenants_.size());
  tenants_.push_back(t);
  tenant_ids_.emplace(name, id);
  // Index the tenant's files: each header is authenticated with the tenant's key.
  const uint64_t file_bytes = disk_file_bytes();
  std::vector<std::pair<fs::file_time_type, BlockKey>> found;
  for (const fs::directory_entry& de : fs::directory_iterator(t.dir, ec)) {
    const std::string name_on_disk = de.path().filename().string();
    if (name_on_disk.find(".tmp.") != std::string::npos) {
      std::error_code e2;
      fs::remove(de.path(), e2);  // a write cut short by a crash
      continue;
    }
    std::error_code e2;
    const uint64_t size = de.file_size(e2);
    BlockKey k;
    std::string why;
    if (e2 || size != file_bytes) why = "size " + std::to_string(size) + ", expected " + std::to_string(file_bytes);
    else if (read_header(t, de.path().string(), k, why) && disk_path(t, k) != de.path().string())
      why = "block key in the file differs from its name";
    if (!why.empty()) {
      log("swizzle-rt: prefix cache: ignoring " + de.path().string() + " (" + why + ")");
      fs::remove(de.path(), e2);
      ++counters_.disk_rejects;
      continue;
    }
    found.emplace_back(de.last_write_time(e2), k);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto now_t = now();
  for (const auto& [mtime, k] : found) {
    auto [it, fresh] = index_.try_emplace(k);
    Entry& e = it->second;
    if (fresh) {
      e.last_used = now_t;
      e.lru = lru_.insert(lru_.end(), k);
    }
    e.disk.push_back(id);
    disk_used_ += file_bytes;
  }
  return id;
}


BlockManager::~BlockManager() {
  if (disk_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    disk_cv_.notify_all();
    disk_thread_.join();  // pending blocks are written first
  }
  if (base_) munmap(base_, map_bytes_);
}

void BlockManager::disk_worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    disk_cv_.wait(lock, [this] { return stopping_ || !disk_queue_.empty(); });
    if (disk_queue_.empty()) return;  // stopping, nothing left to write
    lock.unlock();
    flush_disk();
    lock.lock();
  }
}

std::chrono::steady_clock::time_point BlockManager::now() const {
  return opts_.clock ? opts_.clock() : std::chrono::steady_clock::now();
}

void BlockManager::log(const std::string& line) const {
  if (opts_.log) opts_.log(line);
  else std::fprintf(stderr, "%s\n", line.c_str());
}

void BlockManager::touch(const BlockKey& key, Entry& e) {
  e.last_used = now();
  lru_.splice(lru_.end(), lru_, e.lru);
  // The clock never goes back, so the most recently used goes last in by_use too.
  for (ScopeSlot& s : e.scopes) {
    s.children->by_use.splice(s.children->by_use.end(), s.children->by_use, s.by_use);
    if (e.page >= 0) {
      std::list<Child>& d = s.children->by_use_device;
      d.splice(d.end(), d, s.by_use_device);
    }
  }
  (void)key;
}

namespace {

// Inserts `c` into `l` (in last_used order, front = least recent) after every entry
// used no later than `used`; from the back, where a block that was just used goes.
template <typename Child, typename TimePoint>
typename std::list<Child>::iterator insert_by_use(std::list<Child>& l, const Child& c, TimePoint used) {
  auto at = l.end();
  while (at != l.begin() && std::prev(at)->entry->last_used > used) --at;
  return l.insert(at, c);
}

}  // namespace

void BlockManager::list_on_device(Entry& e, const BlockKey& key) {
  for (ScopeSlot& s : e.scopes) s.by_use_device = insert_by_use(s.children->by_use_device, Child{&e, key}, e.last_used);
}

// ---- pages -------------------------------------------------------------------------

int BlockManager::alloc_page() {
  std::lock_guard<std::mutex> lock(mu_);
  while (free_.empty()) {
    if (!evict_one_page())
      throw std::length_error("KV cache: all " + std::to_string(opts_.n_pages) +
                              " pages are held by running sequences (raise --kv-pages)");
  }
  const int p = free_.back();
  free_.pop_back();
  refcount_[p] = 1;
  return p;
}

void BlockManager::ref_page(int page) {
  std::lock_guard<std::mutex> lock(mu_);
  if (page < 0 || page >= opts_.n_pages || refcount_[page] <= 0) throw std::logic_error("KV cache: ref of a free page");
  ++refcount_[page];
}

void BlockManager::unref_page(int page) {
  std::lock_guard<std::mutex> lock(mu_);
  release_page_ref(page);
}

void BlockManager::release_entry_page(Entry& e) {
  for (ScopeSlot& s : e.scopes) s.children->by_use_device.erase(s.by_use_device);
  cached_[e.page] = 0;
  release_page_ref(e.page);
  e.page = -1;
}

void BlockManager::release_page_ref(int page) {
  if (page < 0 || page >= opts_.n_pages || refcount_[page] <= 0) throw std::logic_error("KV cache: unref of a free page");
  if (--refcount_[page] == 0) free_.push_back(page);
}

int BlockManager::page_refcount(int page) const {
  std::lock_guard<std::mutex> lock(mu_);
  return page >= 0 && page < opts_.n_pages ? refcount_[page] : 0;
}

// Frees one device page held only by the cache, least recently used first: its block
void BlockManager::read_page(int page, uint16_t* dst) {
  if (opts_.read_page) return opts_.read_page(page, dst);
  std::memcpy(dst, page_data(page), layout_.page_bytes());
}

void BlockManager::write_page(int page, const uint16_t* src) {
  if (opts_.write_page) return opts_.write_page(page, src);
  std::memcpy(page_data(page), src, layout_.page_bytes());
}

// moves to the host tier (always when pinned, else within the host budget) or is dropped.
bool BlockManager::evict_one_page() {
  const size_t bytes = layout_.page_bytes();
  for (auto li = lru_.begin(); li != lru_.end(); ++li) {
    auto it = index_.find(*li);
    Entry& e = it->second;
    if (e.page < 0 || refcount_[e.page] != 1) continue;  // not resident, or in a block table
    bool spill = e.pins > 0;
    if (!spill && opts_.host_bytes >= bytes) {
      make_host_room(bytes);
      spill = host_used_ + bytes <= opts_.host_bytes;
    }
    if (spill) {
      // Copied first, committed after: a device read that throws changes nothing.
      std::vector<uint16_t> copy(layout_.page_elems());
      read_page(e.page, copy.data());
      e.host = std::move(copy);
      host_used_ += bytes;
      ++counters_.spills;
    }
    release_entry_page(e);
    erase_if_empty(it);
    return true;
  }
  return false;
}

void BlockManager::make_host_room(size_t bytes) {
  for (auto li = lru_.begin(); li != lru_.end() && host_used_ + bytes > opts_.host_bytes;) {
    auto it = index_.find(*li++);
    Entry& e = it->second;
    if (e.host.empty() || e.pins > 0) continue;
    host_used_ -= e.host.size() * sizeof(uint16_t);
    std::vector<uint16_t>().swap(e.host);
    erase_if_empty(it);
  }
}

void BlockManager::drop_ram(Map::iterator it) {
  Entry& e = it->second;
  if (e.page >= 0) release_entry_page(e);
  if (!e.host.empty()) {
    host_used_ -= e.host.size() * sizeof(uint16_t);
    std::vector<uint16_t>().swap(e.host);
  }
  erase_if_empty(it);
}

void BlockManager::erase_if_empty(Map::iterator it) {
  Entry& e = it->second;
  if (e.page >= 0 || !e.host.empty() || !e.disk.empty() || e.pins > 0) return;
  for (ScopeSlot& s : e.scopes) {
    s.children->by_tokens.erase(s.by_tokens);
    s.children->by_use.erase(s.by_use);
    if (s.children->by_tokens.empty()) children_.erase(ChildrenKey{e.parent, s.scope});
  }
  lru_.erase(e.lru);
  index_.erase(it);
  ++counters_.evictions;
}

// ---- prefix index ------------------------------------------------------------------

void BlockManager::expire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (opts_.ttl.count() <= 0) return;
  const auto t = now();
  for (auto li = lru_.begin(); li != lru_.end();) {
    auto it = index_.find(*li++);
    Entry& e = it->second;
    if (e.last_used + opts_.ttl > t) break;  // lru_ is in last-use order
    if (e.pins > 0 || (e.page >= 0 && refcount_[e.page] > 1)) continue;
    drop_ram(it);  // a disk copy outlives the TTL (bounded by disk_bytes instead)
  }
}

int BlockManager::match_and_pin(const std::vector<BlockKey>& keys, std::vector<BlockKey>& pinned, int tenant) {
  if (!opts_.prefix_cache) return 0;
  expire();
  std::unique_lock<std::mutex> lock(mu_);
  const size_t first = pinned.size();
  int n = 0;
  for (const BlockKey& k : keys) {
    auto it = index_.find(k);
    if (it == index_.end()) break;
    Entry& e = it->second;
    if (e.page < 0 && e.host.empty()) {
      if (tenant < 0 || tenant >= static_cast<int>(tenants_.size()) ||
          std::find(e.disk.begin(), e.disk.end(), tenant) == e.disk.end())
        break;
      // Disk only: read and authenticate the file without holding the lock (the pin keeps
      // the entry), then keep it in the host tier until the run restores it.
      ++e.pins;
      const Tenant t = tenants_[tenant];
      lock.unlock();
      std::vector<uint16_t> data;
      std::string why;
      const bool ok = read_disk(t, k, data, why);
      lock.lock();
      it = index_.find(k);
      Entry& e2 = it->second;
      if (!ok) {
        --e2.pins;
        log("swizzle-rt: prefix cache: ignoring " + disk_path(t, k) + " (" + why + ")");
        std::error_code ec;
        fs::remove(disk_path(t, k), ec);
        if (auto d = std::find(e2.disk.begin(), e2.disk.end(), tenant); d != e2.disk.end()) {
          e2.disk.erase(d);
          disk_used_ -= disk_file_bytes();
        }
        ++counters_.disk_rejects;
        erase_if_empty(it);
        break;
      }
      ++counters_.disk_reads;
      if (e2.page < 0 && e2.host.empty()) {
        e2.host = std::move(data);
        host_used_ += layout_.page_bytes();
      }
      pinned.push_back(k);
      ++n;
      continue;
    }
    ++e.pins;
    pinned.push_back(k);
    ++n;
  }
  // Deepest block first, so a prefix is always more recently used than its extensions
  // and LRU eviction takes the extensions first.
  for (size_t i = pinned.size(); i > first; --i) touch(pinned[i - 1], index_.at(pinned[i - 1]));
  return n;
}

void BlockManager::unpin(const std::vector<BlockKey>& pinned) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const BlockKey& k : pinned) {
    auto it = index_.find(k);
    if (it == index_.end() || it->second.pins <= 0) throw std::logic_error("KV cache: unpin of a block that is not pinned");
    --it->second.pins;
  }
  if (!opts_.prefix_cache) return;
  // A host copy kept past the budget because it was pinned is trimmed now.
  if (host_used_ > opts_.host_bytes) make_host_room(0);
}

std::vector<int> BlockManager::acquire(const std::vector<BlockKey>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> pages;
  pages.reserve(keys.size());
  try {
    for (const BlockKey& k : keys) {
      auto it = index_.find(k);
      if (it == index_.end() || it->second.pins <= 0) throw std::logic_error("KV cache: acquire of an unpinned block");
      Entry& e = it->second;
      if (e.page < 0) {
        if (e.host.empty()) throw std::logic_error("KV cache: pinned block with no copy");
        while (free_.empty())
          if (!evict_one_page())
            throw std::length_error("KV cache: all " + std::to_string(opts_.n_pages) +
                                    " pages are held by running sequences (raise --kv-pages)");
        // Written first, committed after: a device write that throws changes nothing.
        write_page(free_.back(), e.host.data());
        e.page = free_.back();
        free_.pop_back();
        refcount_[e.page] = 1;
        cached_[e.page] = 1;
        host_used_ -= layout_.page_bytes();
        std::vector<uint16_t>().swap(e.host);
        ++counters_.restores;
        list_on_device(e, k);
      }
      ++refcount_[e.page];
      pages.push_back(e.page);
    }
  } catch (...) {
    for (int p : pages) release_page_ref(p);
    throw;
  }
  return pages;
}

void BlockManager::publish(const BlockKey& key, int page, int tenant) {
  if (!opts_.prefix_cache) return;
  expire();
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (page < 0 || page >= opts_.n_pages || refcount_[page] <= 0) throw std::logic_error("KV cache: publish of a free page");
    if (cached_[page]) {
      // A page another entry holds (a sequence that never wrote the page it took from the
      // cache) is never adopted under a second key: two entries on one page would each
      // keep it from eviction and expiry for ever. Nothing changes then.
      auto f = index_.find(key);
      if (f == index_.end() || (f->second.page < 0 && f->second.host.empty())) return;
    }
    auto [it, fresh] = index_.try_emplace(key);
    Entry& e = it->second;
    if (fresh) e.lru = lru_.insert(lru_.end(), key);
    if (!disk_model_dir_.empty() && tenant >= 0 && tenant < static_cast<int>(tenants_.size()) &&
        std::find(e.disk.begin(), e.disk.end(), tenant) == e.disk.end() &&
        std::find(disk_queue_.begin(), disk_queue_.end(), std::make_pair(key, tenant)) == disk_queue_.end()) {
      disk_queue_.emplace_back(key, tenant);
      queued = true;
    }
    touch(key, e);  // before adopting: by_use_device then takes it in last, where it belongs
    if (e.page < 0 && e.host.empty()) {  // new, or known only on disk: adopt this page
      e.page = page;
      ++refcount_[page];
      cached_[page] = 1;
      list_on_device(e, key);
    }
  }
  if (queued) disk_cv_.notify_one();
}

void BlockManager::publish(const BlockKey& key, int page, int tenant, const BlockKey& parent,
                           std::span<const int32_t> tokens, std::string_view scope) {
  if (tokens.empty() || tokens.size() > static_cast<size_t>(kBlockTokens))
    throw std::invalid_argument("KV cache: a published block holds 1.." + std::to_string(kBlockTokens) + " tokens, not " +
                                std::to_string(tokens.size()));
  if (!opts_.prefix_cache) return;
  // A partial block stays in the RAM tiers: its disk file would carry no tokens.
  publish(key, page, tokens.size() == static_cast<size_t>(kBlockTokens) ? tenant : -1);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return;
  Entry& e = it->second;
  if (e.tokens.empty()) {
    e.parent = parent;
    e.tokens.assign(tokens.begin(), tokens.end());  // never changes again: by_tokens' order reads it
    e.seq = next_seq_++;
  }
  const uint64_t sc = XXH3_64bits(scope.data(), scope.size());
  if (std::none_of(e.scopes.begin(), e.scopes.end(), [sc](const ScopeSlot& s) { return s.scope == sc; })) {
    Children& ch = children_[ChildrenKey{e.parent, sc}];
    const Child child{&e, key};
    // publish() above made it the most recently used, but others may have been used since
    // (the lock was let go in between): its place in by_use follows last_used.
    ScopeSlot slot{sc, &ch, ch.by_tokens.insert(child).first, insert_by_use(ch.by_use, child, e.last_used), {}};
    if (e.page >= 0) slot.by_use_device = insert_by_use(ch.by_use_device, child, e.last_used);
    e.scopes.push_back(slot);
  }
}

bool BlockManager::ChildOrder::operator()(const Child& a, const Child& b) const {
  const std::vector<int32_t>& x = a.entry->tokens;
  const std::vector<int32_t>& y = b.entry->tokens;
  if (std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end())) return true;
  if (std::lexicographical_compare(y.begin(), y.end(), x.begin(), x.end())) return false;
  return a.entry->seq < b.entry->seq;  // equal tokens: two keys only on a hash collision
}

bool BlockManager::ChildOrder::operator()(const Child& a, std::span<const int32_t> b) const {
  const std::vector<int32_t>& x = a.entry->tokens;
  return std::lexicographical_compare(x.begin(), x.end(), b.begin(), b.end());
}

bool BlockManager::ChildOrder::operator()(std::span<const int32_t> a, const Child& b) const {
  const std::vector<int32_t>& y = b.entry->tokens;
  return std::lexicographical_compare(a.begin(), a.end(), y.begin(), y.end());
}

int BlockManager::match_partial(const BlockKey& parent, const int32_t* tokens, int max_tokens,
                                std::vector<BlockKey>& pinned, std::string_view scope) {
  if (!opts_.prefix_cache || max_tokens <= 0) return 0;
  max_tokens = std::min(max_tokens, kBlockTokens);
  expire();
  std::lock_guard<std::mutex> lock(mu_);
  // Another organisation's blocks are never candidates: the index is per (parent, scope).
  auto c = children_.find(ChildrenKey{parent, XXH3_64bits(scope.data(), scope.size())});
  if (c == children_.end()) return 0;
  const Children& ch = c->second;
  const std::span<const int32_t> q(tokens, static_cast<size_t>(max_tokens));
  auto run = [&](const Child& x) {  // tokens x shares with the prompt, at most max_tokens
    const std::vector<int32_t>& t = x.entry->tokens;
    const size_t n = std::min(q.size(), t.size());
    return static_cast<int>(std::mismatch(q.begin(), q.begin() + n, t.begin()).first - q.begin());
  };
  auto in_ram = [](const Entry& e) { return e.page >= 0 || !e.host.empty(); };  // on disk only: no page to copy
  // Between equal runs: a device page, then the most recent use, then the first published.
  // The last rule is the order of the list this index replaced: its scan kept the first
  // of equals.
  auto better = [](const Entry& e, const Entry& b) {
    if ((e.page >= 0) != (b.page >= 0)) return e.page >= 0;
    if (e.last_used != b.last_used) return e.last_used > b.last_used;
    return e.seq < b.seq;
  };

  // 1. The longest run. by_tokens is sorted, so the run a candidate shares with the prompt
  // never grows moving away from the prompt's place in that order, in either direction:
  // walking outwards from there, always on the side with the longer run, visits the
  // candidates longest run first, and the first one in RAM has the run to reuse (m).
  auto up = ch.by_tokens.lower_bound(q);  // candidates at or after the prompt, walked up
  auto down = up;                         // those before it, walked down from std::prev(down)
  int up_m = up != ch.by_tokens.end() ? run(*up) : 0;
  int down_m = down != ch.by_tokens.begin() ? run(*std::prev(down)) : 0;
  auto next_by_tokens = [&](int& m) -> const Child* {  // nullptr once no run is left
    const bool go_up = up_m >= down_m;
    m = go_up ? up_m : down_m;
    if (m == 0) return nullptr;
    const Child* x;
    if (go_up) {
      x = &*up;
      up_m = ++up != ch.by_tokens.end() ? run(*up) : 0;
    } else {
      x = &*--down;
      down_m = down != ch.by_tokens.begin() ? run(*std::prev(down)) : 0;
    }
    return x;
  };
  const Child* best = nullptr;
  int best_m = 0;
  for (int m; const Child* x = next_by_tokens(m);) {
    if (in_ram(*x->entry)) {
      best = x;
      best_m = m;
      break;
    }
  }
  if (best == nullptr) return 0;

  // 2. The tie rule among the candidates in RAM with run m, by two walks that take turns;
  // the first to finish decides (both are exact):
  //  a. on in token order until the run falls below m: as many steps as candidates share
  //     m tokens (few after an edited prompt; all of them when every prompt begins with
  //     the same chat template and this one differs right after it);
  //  b. back from the most recently used, first through those on a device page
  //     (by_use_device), then, if none of them has run m, through all (by_use, where the
  //     first in RAM with run m is then on host): the first with run m wins once past the
  //     others used at the same instant (the lists are in last_used order). As many steps
  //     as candidates used since the winner (one, when all share the template), plus,
  //     when it is on host, those on a device page.
  const Child* best_a = best;
  const Child* best_b = nullptr;
  const std::list<Child>* list_b = &ch.by_use_device;
  auto at_b = list_b->end();  // walk b: std::prev(at_b) is next
  for (;;) {
    int m = 0;
    const Child* x = next_by_tokens(m);
    if (x == nullptr || m < best_m) {
      best = best_a;
      break;
    }
    if (in_ram(*x->entry) && better(*x->entry, *best_a->entry)) best_a = x;
    if (at_b == list_b->begin()) {
      if (best_b == nullptr && list_b == &ch.by_use_device) {
        list_b = &ch.by_use;
        at_b = list_b->end();
        continue;
      }
      best = best_b != nullptr ? best_b : best_a;  // best_b is set: `best` is in by_use
      break;
    }
    const Child& y = *--at_b;
    const Entry& e = *y.entry;
    if (best_b != nullptr && e.last_used < best_b->entry->last_used) {
      best = best_b;
      break;
    }
    if (in_ram(e) && run(y) == best_m && (best_b == nullptr || better(e, *best_b->entry))) best_b = &y;
  }
  auto it = index_.find(best->key);
  ++it->second.pins;
  pinned.push_back(it->first);
  touch(it->first, it->second);
  return best_m;
}

// ---- disk tier ---------------------------------------------------------------------

std::string BlockManager::disk_path(const Tenant& t, const BlockKey& key) const {
  unsigned char in[32], id[16];
  put_key(in, model_);
  put_key(in + 16, key);
  crypto_generichash(id, sizeof id, in, sizeof in, t.names, sizeof t.names);
  char hex[33];
  sodium_bin2hex(hex, sizeof hex, id, sizeof id);
  return (fs::path(t.dir) / (std::string(hex) + ".kv")).string();
}

std::string BlockManager::disk_file(const BlockKey& key, int tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (tenant < 0 || tenant >= static_cast<int>(tenants_.size())) return "";
  return disk_path(tenants_[tenant], key);
}

namespace {

// Opens the sealed header at the start of `buf` (PlainHead, nonce, sealed DiskHeader).
bool open_header(const unsigned char* enc_key, const uint8_t* buf, DiskHeader& h, std::string& why) {
  PlainHead p;
  std::memcpy(&p, buf, sizeof p);
  if (std::memcmp(p.magic, kMagic, 8) != 0 || p.version != kDiskVersion) {
    why = "not a version-2 swizzle KV block file";
    return false;
  }
  const uint8_t* nonce = buf + sizeof p;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(reinterpret_cast<unsigned char*>(&h), nullptr, nullptr,
                                                 nonce + kNonce, sizeof h + kTag, buf, sizeof p, nonce, enc_key) != 0) {
    why = "does not authenticate with this tenant's key";
    return false;
  }
  if (std::memcmp(h.magic, kHeaderMagic, 8) != 0 || h.version != kDiskVersion) {
    why = "not a version-2 swizzle KV block file";
    return false;
  }
  return true;
}

}  // namespace

bool BlockManager::read_header(const Tenant& t, const std::string& path, BlockKey& key, std::string& why) const {
  std::ifstream f(path, std::ios::binary);
  uint8_t buf[sizeof(PlainHead) + kNonce + sizeof(DiskHeader) + kTag];
  if (!f.read(reinterpret_cast<char*>(buf), sizeof buf)) {
    why = "cannot read its header";
    return false;
  }
  DiskHeader h;
  if (!open_header(t.enc, buf, h, why)) return false;
  if (h.model_lo != model_.lo || h.model_hi != model_.hi) {
    why = "written for another model";
    return false;
  }
  key = BlockKey{h.key_lo, h.key_hi};
  return true;
}

bool BlockManager::read_disk(const Tenant& t, const BlockKey& key, std::vector<uint16_t>& out, std::string& why) const {
  const std::string path = disk_path(t, key);
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    why = "cannot open";
    return false;
  }
  const size_t payload = layout_.page_bytes();
  const size_t head = sizeof(PlainHead) + kNonce + sizeof(DiskHeader) + kTag;
  std::vector<uint8_t> buf(disk_file_bytes());
  f.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  if (static_cast<size_t>(f.gcount()) != buf.size()) {
    why = "truncated: " + std::to_string(f.gcount()) + " of " + std::to_string(buf.size()) + " bytes";
    return false;
  }
  if (f.peek() != std::char_traits<char>::eof()) {
    why = "longer than " + std::to_string(buf.size()) + " bytes";
    return false;
  }
  DiskHeader h;
  if (!open_header(t.enc, buf.data(), h, why)) return false;
  if (h.n_layer != static_cast<uint32_t>(layout_.n_layer) || h.kv_width != static_cast<uint32_t>(layout_.kv_width) ||
      h.block_tokens != kBlockTokens || h.payload_bytes != payload) {
    why = "page layout differs from this model's";
    return false;
  }
  if (h.model_lo != model_.lo || h.model_hi != model_.hi) {
    why = "written for another model";
    return false;
  }
  if (h.key_lo != key.lo || h.key_hi != key.hi) {
    why = "block key in the file differs from its name";
    return false;
  }
  // The page is bound to its plain head and header: AD = PlainHead ‖ DiskHeader.
  uint8_t ad[sizeof(PlainHead) + sizeof(DiskHeader)];
  std::memcpy(ad, buf.data(), sizeof(PlainHead));
  std::memcpy(ad + sizeof(PlainHead), &h, sizeof h);
  out.resize(layout_.page_elems());
  const uint8_t* nonce = buf.data() + head;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(reinterpret_cast<unsigned char*>(out.data()), nullptr, nullptr,
                                                 nonce + kNonce, payload + kTag, ad, sizeof ad, nonce, t.enc) != 0) {
    why = "page does not authenticate (corrupt or altered)";
    return false;
  }
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // LRU order across restarts
  return true;
}

void BlockManager::write_disk(const Tenant& t, const BlockKey& key, const std::vector<uint16_t>& data) {
  const size_t payload = layout_.page_bytes();
  std::vector<uint8_t> buf(disk_file_bytes());
  PlainHead p{};
  std::memcpy(p.magic, kMagic, 8);
  p.version = kDiskVersion;
  DiskHeader h{};
  std::memcpy(h.magic, kHeaderMagic, 8);
  h.version = kDiskVersion;
  h.n_layer = static_cast<uint32_t>(layout_.n_layer);
  h.kv_width = static_cast<uint32_t>(layout_.kv_width);
  h.block_tokens = kBlockTokens;
  h.model_lo = model_.lo;
  h.model_hi = model_.hi;
  h.key_lo = key.lo;
  h.key_hi = key.hi;
  h.payload_bytes = payload;
  uint8_t* at = buf.data();
  std::memcpy(at, &p, sizeof p);
  at += sizeof p;
  randombytes_buf(at, kNonce);
  crypto_aead_xchacha20poly1305_ietf_encrypt(at + kNonce, nullptr, reinterpret_cast<const unsigned char*>(&h), sizeof h,
                                             buf.data(), sizeof p, nullptr, at, t.enc);
  at += kNonce + sizeof h + kTag;
  uint8_t ad[sizeof(PlainHead) + sizeof(DiskHeader)];
  std::memcpy(ad, &p, sizeof p);
  std::memcpy(ad + sizeof p, &h, sizeof h);
  randombytes_buf(at, kNonce);
  crypto_aead_xchacha20poly1305_ietf_encrypt(at + kNonce, nullptr, reinterpret_cast<const unsigned char*>(data.data()),
                                             payload, ad, sizeof ad, nullptr, at, t.enc);
  sodium_memzero(&h, sizeof h);
  const std::string path = disk_path(t, key);
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    if (!f.flush()) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw std::runtime_error("cannot write " + tmp);
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot rename " + tmp + ": " + ec.message());
  }
}

void BlockManager::flush_disk() {
  std::unique_lock<std::mutex> lock(mu_);
  if (disk_model_dir_.empty()) return;
  std::vector<std::pair<BlockKey, int>> queue;
  queue.swap(disk_queue_);
  ++flushing_;
  for (const auto& [k, tenant] : queue) {
    auto it = index_.find(k);
    if (it == index_.end() || std::find(it->second.disk.begin(), it->second.disk.end(), tenant) != it->second.disk.end())
      continue;
    Entry& e = it->second;
    const Tenant t = tenants_[tenant];
    const int page = e.page;
    if (page < 0 && e.host.empty()) continue;
    std::vector<uint16_t> data;
    ++e.pins;                          // keep the entry while the file is written,
    if (page >= 0) ++refcount_[page];  // and its page, which an eviction would reuse
    else data = e.host;
    // The page is read without the lock: on a GPU backend read_page waits for the device
    // (a running forward pass), and admissions must not wait for that. A failed read (a
    // lost device) skips the block; the thread and the cache go on.
    lock.unlock();
    bool ok = true;
    try {
      if (page >= 0) {
        data.resize(layout_.page_elems());
        read_page(page, data.data());
      }
      write_disk(t, k, data);
    } catch (const std::exception& ex) {
      ok = false;
      log(std::string("swizzle-rt: prefix cache: disk tier write failed: ") + ex.what());
    }
    lock.lock();
    if (page >= 0) release_page_ref(page);
    it = index_.find(k);
    --it->second.pins;
    if (ok && std::find(it->second.disk.begin(), it->second.disk.end(), tenant) == it->second.disk.end()) {
      it->second.disk.push_back(tenant);
      disk_used_ += disk_file_bytes();
      ++counters_.disk_writes;
    }
    erase_if_empty(it);
  }
  enforce_disk_budget();
  if (--flushing_ == 0) flush_done_cv_.notify_all();
  // Blocks another thread took from the queue before this call are on disk on return too.
  flush_done_cv_.wait(lock, [this] { return flushing_ == 0; });
}

void BlockManager::enforce_disk_budget() {
  for (auto li = lru_.begin(); li != lru_.end() && disk_used_ > opts_.disk_bytes;) {
    auto it = index_.find(*li++);
    Entry& e = it->second;
    if (e.disk.empty() || e.pins > 0) continue;
    for (int tenant : e.disk) {
      std::error_code ec;
      fs::remove(disk_path(tenants_[tenant], it->first), ec);
      disk_used_ -= disk_file_bytes();
    }
    e.disk.clear();
    erase_if_empty(it);
  }
}

BlockStats BlockManager::stats() {
  expire();
  std::lock_guard<std::mutex> lock(mu_);
  BlockStats s = counters_;
  for (const auto& [k, e] : index_) {
    s.blocks_device += e.page >= 0;
    s.blocks_host += !e.host.empty();
    s.blocks_disk += e.disk.size();
  }
  s.pages_free = static_cast<int>(free_.size());
  s.pages_total = opts_.n_pages;
  return s;
}

}  // namespace swz::kvcache

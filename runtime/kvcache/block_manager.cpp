#include "kvcache/block_manager.h"

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

bool parse_hex_key(const std::string& s, BlockKey& k) {
  if (s.size() != 32) return false;
  uint64_t parts[2] = {0, 0};
  for (int i = 0; i < 32; ++i) {
    const char c = s[i];
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else return false;
    parts[i / 16] = parts[i / 16] << 4 | static_cast<uint64_t>(v);
  }
  k.hi = parts[0];
  k.lo = parts[1];
  return true;
}

// Disk tier file: a fixed header, the page bytes, then XXH3-64 of everything before it.
constexpr char kMagic[8] = {'S', 'W', 'Z', 'K', 'V', 'B', 'L', 'K'};
constexpr uint32_t kDiskVersion = 1;
struct DiskHeader {
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
  for (int i = opts_.n_pages - 1; i >= 0; --i) free_.push_back(i);

  if (!opts_.prefix_cache || opts_.disk_dir.empty()) return;
  disk_model_dir_ = (fs::path(opts_.disk_dir) / model_.hex()).string();
  std::error_code ec;
  fs::create_directories(disk_model_dir_, ec);
  if (ec) {
    if (base_) munmap(base_, map_bytes_);
    throw std::runtime_error("KV cache: cannot create the disk tier directory " + disk_model_dir_ + ": " + ec.message());
  }
  const uint64_t file_bytes = sizeof(DiskHeader) + layout_.page_bytes() + 8;
  std::vector<std::pair<fs::file_time_type, BlockKey>> found;
  for (const fs::directory_entry& de : fs::directory_iterator(disk_model_dir_, ec)) {
    const std::string name = de.path().filename().string();
    BlockKey k;
    if (name.size() == 35 && name.substr(32) == ".kv" && parse_hex_key(name.substr(0, 32), k)) {
      std::error_code e2;
      const uint64_t size = de.file_size(e2);
      if (e2 || size != file_bytes) {
        log("swizzle-rt: prefix cache: ignoring " + de.path().string() + " (size " + std::to_string(size) + ", expected " +
            std::to_string(file_bytes) + ")");
        fs::remove(de.path(), e2);
        ++counters_.disk_rejects;
        continue;
      }
      found.emplace_back(de.last_write_time(e2), k);
    } else if (name.find(".tmp.") != std::string::npos) {
      std::error_code e2;
      fs::remove(de.path(), e2);  // a write cut short by a crash
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto t = now();
  for (const auto& [mtime, k] : found) {
    Entry& e = index_[k];
    e.on_disk = true;
    e.last_used = t;
    e.lru = lru_.insert(lru_.end(), k);
    disk_used_ += file_bytes;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    enforce_disk_budget();
  }
  disk_thread_ = std::thread([this] { disk_worker(); });
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
  (void)key;
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
    release_page_ref(e.page);
    e.page = -1;
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
  if (e.page >= 0) {
    release_page_ref(e.page);
    e.page = -1;
  }
  if (!e.host.empty()) {
    host_used_ -= e.host.size() * sizeof(uint16_t);
    std::vector<uint16_t>().swap(e.host);
  }
  erase_if_empty(it);
}

void BlockManager::erase_if_empty(Map::iterator it) {
  Entry& e = it->second;
  if (e.page >= 0 || !e.host.empty() || e.on_disk || e.pins > 0) return;
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

int BlockManager::match_and_pin(const std::vector<BlockKey>& keys, std::vector<BlockKey>& pinned) {
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
      if (!e.on_disk) break;
      // Disk only: read and verify the file without holding the lock (the pin keeps the
      // entry), then keep it in the host tier until the run restores it.
      ++e.pins;
      lock.unlock();
      std::vector<uint16_t> data;
      std::string why;
      const bool ok = read_disk(k, data, why);
      lock.lock();
      it = index_.find(k);
      Entry& e2 = it->second;
      if (!ok) {
        --e2.pins;
        log("swizzle-rt: prefix cache: ignoring " + disk_path(k) + " (" + why + ")");
        std::error_code ec;
        fs::remove(disk_path(k), ec);
        if (e2.on_disk) disk_used_ -= sizeof(DiskHeader) + layout_.page_bytes() + 8;
        e2.on_disk = false;
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
        host_used_ -= layout_.page_bytes();
        std::vector<uint16_t>().swap(e.host);
        ++counters_.restores;
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

void BlockManager::publish(const BlockKey& key, int page) {
  if (!opts_.prefix_cache) return;
  expire();
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (page < 0 || page >= opts_.n_pages || refcount_[page] <= 0) throw std::logic_error("KV cache: publish of a free page");
    auto [it, fresh] = index_.try_emplace(key);
    Entry& e = it->second;
    if (fresh) {
      e.lru = lru_.insert(lru_.end(), key);
      if (!disk_model_dir_.empty()) {
        disk_queue_.push_back(key);
        queued = true;
      }
    }
    if (e.page < 0 && e.host.empty()) {  // new, or known only on disk: adopt this page
      e.page = page;
      ++refcount_[page];
    }
    touch(key, e);
  }
  if (queued) disk_cv_.notify_one();
}

// ---- disk tier ---------------------------------------------------------------------

std::string BlockManager::disk_path(const BlockKey& key) const {
  return (fs::path(disk_model_dir_) / (key.hex() + ".kv")).string();
}

bool BlockManager::read_disk(const BlockKey& key, std::vector<uint16_t>& out, std::string& why) const {
  const std::string path = disk_path(key);
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    why = "cannot open";
    return false;
  }
  const size_t payload = layout_.page_bytes();
  std::vector<uint8_t> buf(sizeof(DiskHeader) + payload + 8);
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
  std::memcpy(&h, buf.data(), sizeof h);
  uint64_t sum;
  std::memcpy(&sum, buf.data() + sizeof h + payload, 8);
  if (std::memcmp(h.magic, kMagic, 8) != 0 || h.version != kDiskVersion) {
    why = "not a version-1 swizzle KV block file";
    return false;
  }
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
  if (XXH3_64bits(buf.data(), sizeof h + payload) != sum) {
    why = "checksum mismatch";
    return false;
  }
  out.resize(layout_.page_elems());
  std::memcpy(out.data(), buf.data() + sizeof h, payload);
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // LRU order across restarts
  return true;
}

void BlockManager::write_disk(const BlockKey& key, const std::vector<uint16_t>& data) {
  const size_t payload = layout_.page_bytes();
  std::vector<uint8_t> buf(sizeof(DiskHeader) + payload + 8);
  DiskHeader h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kDiskVersion;
  h.n_layer = static_cast<uint32_t>(layout_.n_layer);
  h.kv_width = static_cast<uint32_t>(layout_.kv_width);
  h.block_tokens = kBlockTokens;
  h.model_lo = model_.lo;
  h.model_hi = model_.hi;
  h.key_lo = key.lo;
  h.key_hi = key.hi;
  h.payload_bytes = payload;
  std::memcpy(buf.data(), &h, sizeof h);
  std::memcpy(buf.data() + sizeof h, data.data(), payload);
  const uint64_t sum = XXH3_64bits(buf.data(), sizeof h + payload);
  std::memcpy(buf.data() + sizeof h + payload, &sum, 8);
  const std::string path = disk_path(key);
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
  std::vector<BlockKey> queue;
  queue.swap(disk_queue_);
  ++flushing_;
  for (const BlockKey& k : queue) {
    auto it = index_.find(k);
    if (it == index_.end() || it->second.on_disk) continue;
    Entry& e = it->second;
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
      write_disk(k, data);
    } catch (const std::exception& ex) {
      ok = false;
      log(std::string("swizzle-rt: prefix cache: disk tier write failed: ") + ex.what());
    }
    lock.lock();
    if (page >= 0) release_page_ref(page);
    it = index_.find(k);
    --it->second.pins;
    if (ok && !it->second.on_disk) {
      it->second.on_disk = true;
      disk_used_ += sizeof(DiskHeader) + layout_.page_bytes() + 8;
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
    if (!e.on_disk || e.pins > 0) continue;
    std::error_code ec;
    fs::remove(disk_path(it->first), ec);
    e.on_disk = false;
    disk_used_ -= sizeof(DiskHeader) + layout_.page_bytes() + 8;
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
    s.blocks_disk += e.on_disk;
  }
  s.pages_free = static_cast<int>(free_.size());
  s.pages_total = opts_.n_pages;
  return s;
}

}  // namespace swz::kvcache

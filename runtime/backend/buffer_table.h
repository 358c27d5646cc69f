// The handle table behind backend::Buffer that each device backend keeps (runtime/cuda,
// runtime/vulkan): a Buffer id is (generation << 32) | (slot + 1), so an id that was freed,
// reused or never allocated is refused with a clear Error instead of reaching the driver.
// Header-only; no driver types (Handle is the backend's: a CUdeviceptr, a vulkan::Buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace swz::backend {

template <typename Handle>
class BufferTable {
 public:
  struct Slot {
    Handle handle{};
    size_t bytes = 0;  ///< 0: free (backends refuse 0-byte allocations)
    uint32_t gen = 0;
  };

  /// Records a live allocation of `bytes` (> 0) bytes and returns its id.
  Buffer add(Handle handle, size_t bytes) {
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& s = slots_[index];
    s.handle = std::move(handle);
    s.bytes = bytes;
    ++s.gen;
    return Buffer{(static_cast<uint64_t>(s.gen) << 32) | (index + 1), bytes};
  }

  /// The live slot of `b`, or nullptr.
  Slot* find(Buffer b) {
    const uint64_t index = (b.id & 0xffffffffu) - 1;
    if (b.id == 0 || index >= slots_.size()) return nullptr;
    Slot& s = slots_[index];
    return s.bytes && s.gen == static_cast<uint32_t>(b.id >> 32) ? &s : nullptr;
  }

  /// `b`'s slot when bytes [offset, offset + bytes) lie inside it; else Error
  /// "<backend>: <what>: ..." naming the id or the range.
  Slot& range(Buffer b, size_t offset, size_t bytes, const char* backend, const char* what) {
    Slot* s = find(b);
    if (!s)
      throw Error(std::string(backend) + ": " + what + ": buffer id " + std::to_string(b.id) + " is not a live allocation");
    if (offset > s->bytes || bytes > s->bytes - offset)
      throw Error(std::string(backend) + ": " + what + ": bytes [" + std::to_string(offset) + ", " +
                  std::to_string(offset + bytes) + ") exceed the buffer's " + std::to_string(s->bytes));
    return *s;
  }

  /// Marks `s` free; the caller has released its handle's device memory.
  void release(Slot& s) {
    s.handle = Handle{};
    s.bytes = 0;
    free_.push_back(static_cast<uint32_t>(&s - slots_.data()));
  }

  /// Every slot, free ones (bytes 0) included: for releasing all at destruction.
  std::vector<Slot>& slots() { return slots_; }
  void clear() {
    slots_.clear();
    free_.clear();
  }

 private:
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace swz::backend

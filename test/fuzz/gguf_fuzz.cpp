// libFuzzer target for the GGUF reader: any byte string must parse or throw
// swz::gguf::Error, never crash, hang or read out of bounds (ASan checks the latter).
#include <cstddef>
#include <cstdint>

#include "gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    swz::gguf::File f = swz::gguf::File::parse(data, size, "fuzz");
    // Touch what a loader touches.
    for (const auto& key : f.keys()) (void)f.get(key);
    for (const auto& t : f.tensors()) {
      if (t.n_bytes) {
        volatile uint8_t first = t.data[0];
        volatile uint8_t last = t.data[t.n_bytes - 1];
        (void)first;
        (void)last;
      }
    }
  } catch (const swz::gguf::Error&) {
  }
  return 0;
}

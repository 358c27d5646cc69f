// What every backend needs from a manifest kernel entry, parsed once at load_kernels():
// the argument kinds of its signature (memref rank and element size, i32, f32), the
// launch record's function / block / abi, and the per-launch argument check. Shared by
// runtime/cuda and runtime/vulkan so both refuse the same mistakes with the same words.
// Plain C++ (no driver headers, no LLVM/MLIR).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace swz::package {
struct Kernel;
}

namespace swz::backend {

/// One signature argument, from its MLIR type string (manifest kernels[].signature[i].dtype).
struct ArgSpec {
  Arg::Kind kind = Arg::I32;
  int rank = 0;             ///< memref: number of dimensions (1..4)
  uint32_t elem_bytes = 0;  ///< memref: bytes of one element (vector<4xf32> = 16)
};

/// Parses an argument type through package::parse_arg_type (the launch contract's types:
/// "i32", "f32", "memref<?xf32>", "memref<?x?xf16>", "memref<?xvector<4xf32>>", ...).
/// Throws Error for anything else.
ArgSpec parse_arg_type(const std::string& type);

/// The parsed manifest entry of one GPU kernel.
struct KernelRecord {
  std::string entry;                   ///< kernels[].entry, e.g. "sm_90.add_f32"
  std::string function;                ///< launch.function: PTX .entry / SPIR-V entry point
  std::string file;                    ///< kernels[].file, relative to the package
  std::array<uint32_t, 3> block{};     ///< launch.block
  std::vector<ArgSpec> args;           ///< signature, in order
  size_t memrefs = 0;                  ///< memref arguments among args
};

/// Reads kernels[i] of a GPU package: file, launch.function, launch.block (three positive
/// integers), launch.abi (must equal `abi`: "mlir-memref-expanded" or
/// "spirv-storage-buffers") and the signature. Throws Error naming the entry and field.
KernelRecord parse_kernel(const package::Kernel& k, const std::string& abi);

/// "1.1 GiB", "12.0 MiB", "3.5 KiB", "512 bytes": sizes in the backends' messages.
std::string human_bytes(uint64_t bytes);

/// The whole file `dir`/`file` (Error if unreadable or empty).
std::string read_kernel_file(const std::string& dir, const std::string& file);

/// Checks `args` against `rec.args` before a launch: the count, each kind, and for memrefs
/// the rank (1..4 and equal to the signature's), that `offset + bytes` lies inside the
/// buffer (`buffer_bytes(arg)` gives its size; 0 = not a live buffer), that `offset` is a
/// multiple of the element size (16 at most: 128-bit loads of vector<4xf32> need it), and
/// that the view (product of sizes × element size) fits in `bytes` rounded up to 4 (i8 /
/// f16 arrays are read as whole 32-bit words). Throws Error naming the kernel and argument.
/// Allocation-free when the arguments are fine.
template <typename BufferBytes>
void check_args(const KernelRecord& rec, std::span<const Arg> args, BufferBytes&& buffer_bytes);

/// The cold path of check_args: formats and throws the Error.
[[noreturn]] void throw_arg_error(const KernelRecord& rec, size_t index, const std::string& problem);
[[noreturn]] void throw_arg_count(const KernelRecord& rec, size_t given);

template <typename BufferBytes>
void check_args(const KernelRecord& rec, std::span<const Arg> args, BufferBytes&& buffer_bytes) {
  if (args.size() != rec.args.size()) throw_arg_count(rec, args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    const ArgSpec& s = rec.args[i];
    if (a.kind != s.kind)
      throw_arg_error(rec, i, std::string("is ") + (a.kind == Arg::Memref ? "a memref" : a.kind == Arg::I32 ? "an i32" : "an f32") +
                                  "; the signature wants " +
                                  (s.kind == Arg::Memref ? "a memref" : s.kind == Arg::I32 ? "an i32" : "an f32"));
    if (a.kind != Arg::Memref) continue;
    if (a.rank != s.rank)
      throw_arg_error(rec, i, "has rank " + std::to_string(a.rank) + "; the signature's memref has rank " + std::to_string(s.rank));
    const size_t have = buffer_bytes(a);
    if (have == 0) throw_arg_error(rec, i, "names no live buffer (id " + std::to_string(a.buffer.id) + ")");
    if (a.offset > have || a.bytes > have - a.offset)
      throw_arg_error(rec, i, "bytes [" + std::to_string(a.offset) + ", " + std::to_string(a.offset + a.bytes) +
                                  ") exceed its buffer of " + std::to_string(have) + " bytes");
    const uint32_t align = s.elem_bytes < 16 ? s.elem_bytes : 16;
    if (a.offset % align != 0)
      throw_arg_error(rec, i, "byte offset " + std::to_string(a.offset) + " is not a multiple of its element size " +
                                  std::to_string(align));
    uint64_t elems = 1;
    for (int d = 0; d < a.rank; ++d) {
      if (a.sizes[d] < 0) throw_arg_error(rec, i, "has a negative size");
      elems *= uint64_t(a.sizes[d]);
    }
    if (elems * s.elem_bytes > ((uint64_t(a.bytes) + 3) & ~uint64_t(3)))
      throw_arg_error(rec, i, "views " + std::to_string(elems) + " elements of " + std::to_string(s.elem_bytes) +
                                  " bytes in a range of " + std::to_string(a.bytes) + " bytes");
  }
}

}  // namespace swz::backend

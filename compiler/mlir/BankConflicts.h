//===- BankConflicts.h - static shared-memory bank-conflict analysis -------===//
//
// Plain C++ (no MLIR). Computes, for a shared-memory tile layout and a warp-wide
// access pattern, how many serialized wavefronts ("conflict degree") each access
// phase needs on NVIDIA GPUs since Volta.
//
// Hardware model (CUDA C++ Programming Guide, "Shared Memory" for compute
// capability 5.x+, and the PTX ISA for ldmatrix / cp.async):
//  * shared memory has 32 banks, each 4 bytes wide; byte address a lives in bank
//    (a / 4) mod 32;
//  * a warp request of 16 bytes per lane is served in 4 phases of 8 lanes
//    (8 x 16 B = 128 B = one pass over all banks);
//  * within a phase, lanes touching different 4-byte words of the same bank
//    serialize; lanes touching the same word are served by one broadcast.
//  The degree of a phase is the maximum, over banks, of the number of distinct
//  words accessed in that bank; 1 means conflict-free.
//
// Units: layouts are described in ELEMENTS of `elemBytes` bytes; the swizzle is
// CuTe's Swizzle<B,M,S> acting on the linear element offset (so for f16,
// Swizzle<3,3,3> keeps 8-element = 16-byte chunks and XORs the row index mod 8
// into the chunk index of 128-byte rows).
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_COMPILER_MLIR_BANKCONFLICTS_H
#define SWZ_COMPILER_MLIR_BANKCONFLICTS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace swz::bank {

/// CuTe Swizzle<B,M,S> on element offsets: o' = o ^ ((o & (((1<<B)-1) << (M+S))) >> S).
struct Swizzle {
  unsigned bits = 0;  ///< B: number of permuted bits.
  unsigned base = 0;  ///< M: low bits left untouched (2^M contiguous elements).
  unsigned shift = 0; ///< S: distance between the read bits and the XORed bits.

  /// Applies the permutation to a linear element offset (>= 0).
  int64_t apply(int64_t offset) const;
  /// "Swizzle<B,M,S>".
  std::string str() const;
};

/// A 2-D shared-memory tile: element (row, col) lives at element offset
/// swizzle(row * rowPitch + col), i.e. byte address that times elemBytes.
struct SmemLayout {
  int64_t rows = 0;      ///< tile rows.
  int64_t cols = 0;      ///< logical columns (elements) per row.
  int64_t rowPitch = 0;  ///< elements between row starts (>= cols; > cols = padding).
  unsigned elemBytes = 2;
  std::optional<Swizzle> swizzle; ///< none = plain (possibly padded) row-major.

  /// Byte address of element (row, col) relative to the tile base.
  int64_t byteAddress(int64_t row, int64_t col) const;
  /// e.g. "64x64 f16-sized (128-byte rows, Swizzle<3,3,3>)".
  std::string str() const;
};

/// Warp-wide access patterns with 16 bytes per lane.
enum class Access {
  /// ldmatrix.sync.aligned.m8n8.x4.b16 over the whole tile: every 8x8 b16
  /// sub-tile (8 rows x 16 bytes) at row offsets multiple of 8 and column offsets
  /// multiple of 16 bytes is read by one 8-lane phase, lane i giving row i.
  LdmatrixX4,
  /// cp.async.cg.shared.global 16-byte stores filling the tile row by row: lane
  /// t of a warp writes 16-byte chunk t of the row-major chunk order, 8 lanes per
  /// phase, the warp striding over the tile.
  CpAsync16,
};

const char *accessName(Access access);

struct ConflictReport {
  unsigned maxDegree = 0;    ///< worst phase; 1 = conflict-free.
  uint64_t phases = 0;       ///< number of 8-lane phases analysed.
  uint64_t wavefronts = 0;   ///< sum of degrees over phases (ideal = phases).
  bool conflictFree() const { return maxDegree <= 1; }
};

/// Degree of one phase given the byte addresses of its lanes and the bytes each
/// lane accesses (a multiple of 4).
unsigned phaseDegree(const std::vector<int64_t> &laneAddresses, unsigned bytesPerLane);

/// Analyses every phase of `access` over `layout`.
/// Throws std::invalid_argument if the layout cannot be accessed that way: rows
/// or cols not a multiple of the 8x(16/elemBytes) sub-tile, rowPitch < cols, a
/// 16-byte chunk split by padding or by the swizzle (2^M * elemBytes < 16).
ConflictReport analyze(const SmemLayout &layout, Access access);

} // namespace swz::bank

#endif // SWZ_COMPILER_MLIR_BANKCONFLICTS_H

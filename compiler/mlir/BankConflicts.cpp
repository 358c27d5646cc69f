//===- BankConflicts.cpp - static shared-memory bank-conflict analysis ----===//
#include "compiler/mlir/BankConflicts.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace swz::bank {

namespace {
constexpr unsigned kBanks = 32;
constexpr unsigned kBankBytes = 4;
constexpr unsigned kLanesPerPhase = 8;
constexpr unsigned kChunkBytes = 16;
} // namespace

int64_t Swizzle::apply(int64_t offset) const {
  int64_t yyy = ((int64_t(1) << bits) - 1) << (base + shift);
  return offset ^ ((offset & yyy) >> shift);
}

std::string Swizzle::str() const {
  return "Swizzle<" + std::to_string(bits) + "," + std::to_string(base) + "," +
         std::to_string(shift) + ">";
}

int64_t SmemLayout::byteAddress(int64_t row, int64_t col) const {
  int64_t offset = row * rowPitch + col;
  if (swizzle)
    offset = swizzle->apply(offset);
  return offset * elemBytes;
}

std::string SmemLayout::str() const {
  std::string s = std::to_string(rows) + "x" + std::to_string(cols) + " of " +
                  std::to_string(elemBytes) + "-byte elements (" +
                  std::to_string(rowPitch * elemBytes) + "-byte rows, ";
  s += swizzle ? swizzle->str() : std::string("row-major");
  return s + ")";
}

const char *accessName(Access access) {
  switch (access) {
  case Access::LdmatrixX4:
    return "ldmatrix.x4";
  case Access::CpAsync16:
    return "cp.async.16";
  }
  return "?";
}

unsigned phaseDegree(const std::vector<int64_t> &laneAddresses,
                     unsigned bytesPerLane) {
  std::map<int64_t, std::set<int64_t>> wordsPerBank;
  for (int64_t addr : laneAddresses)
    for (unsigned b = 0; b < bytesPerLane; b += kBankBytes) {
      int64_t word = (addr + b) / kBankBytes;
      wordsPerBank[word % kBanks].insert(word);
    }
  unsigned degree = 0;
  for (const auto &[bank, words] : wordsPerBank)
    degree = std::max<unsigned>(degree, words.size());
  return degree;
}

ConflictReport analyze(const SmemLayout &layout, Access access) {
  if (layout.elemBytes == 0 || kChunkBytes % layout.elemBytes != 0)
    throw std::invalid_argument("element size must divide 16 bytes, got " +
                                std::to_string(layout.elemBytes));
  const int64_t chunkElems = kChunkBytes / layout.elemBytes;
  if (layout.rows <= 0 || layout.cols <= 0 || layout.rowPitch < layout.cols)
    throw std::invalid_argument("invalid layout " + layout.str() +
                                ": need rows, cols > 0 and rowPitch >= cols");
  if (layout.cols % chunkElems != 0 || layout.rowPitch % chunkElems != 0)
    throw std::invalid_argument("layout " + layout.str() +
                                ": cols and rowPitch must be multiples of a 16-byte "
                                "chunk (" + std::to_string(chunkElems) + " elements)");
  if (layout.swizzle && layout.swizzle->bits > 0 &&
      (int64_t(1) << layout.swizzle->base) < chunkElems)
    throw std::invalid_argument("layout " + layout.str() + ": " +
                                layout.swizzle->str() +
                                " splits 16-byte chunks (2^M elements < 16 bytes)");

  ConflictReport report;
  auto addPhase = [&](const std::vector<int64_t> &addrs) {
    unsigned d = phaseDegree(addrs, kChunkBytes);
    report.maxDegree = std::max(report.maxDegree, d);
    report.phases += 1;
    report.wavefronts += d;
  };

  const int64_t chunksPerRow = layout.cols / chunkElems;
  switch (access) {
  case Access::LdmatrixX4: {
    if (layout.rows % 8 != 0)
      throw std::invalid_argument("layout " + layout.str() +
                                  ": ldmatrix needs a multiple of 8 rows");
    // Each 8x8 b16 matrix (8 rows x one 16-byte chunk) is one phase; x4 issues
    // four of them, which we enumerate over the whole tile.
    for (int64_t r0 = 0; r0 < layout.rows; r0 += 8)
      for (int64_t c = 0; c < chunksPerRow; ++c) {
        std::vector<int64_t> addrs;
        for (int64_t i = 0; i < 8; ++i)
          addrs.push_back(layout.byteAddress(r0 + i, c * chunkElems));
        addPhase(addrs);
      }
    break;
  }
  case Access::CpAsync16: {
    const int64_t chunks = layout.rows * chunksPerRow;
    for (int64_t first = 0; first < chunks; first += kLanesPerPhase) {
      std::vector<int64_t> addrs;
      for (int64_t t = first; t < std::min(chunks, first + kLanesPerPhase); ++t)
        addrs.push_back(layout.byteAddress(t / chunksPerRow,
                                           (t % chunksPerRow) * chunkElems));
      addPhase(addrs);
    }
    break;
  }
  }
  return report;
}

} // namespace swz::bank

// Table-driven tests of the static bank-conflict analysis (compiler/mlir/BankConflicts.h).
// Expected degrees are derived by hand in the comments from the bank model:
// 32 banks x 4 bytes, 8 lanes x 16 bytes per phase.
#include "compiler/mlir/BankConflicts.h"

#include <gtest/gtest.h>

#include <stdexcept>

using namespace swz::bank;

namespace {

struct Case {
  const char *name;
  SmemLayout layout;
  Access access;
  unsigned expectedDegree;
};

SmemLayout f16(int64_t rows, int64_t cols, int64_t pitch,
               std::optional<Swizzle> sw = std::nullopt) {
  return SmemLayout{rows, cols, pitch, 2, sw};
}

class BankConflictTable : public ::testing::TestWithParam<Case> {};

TEST_P(BankConflictTable, Degree) {
  const Case &c = GetParam();
  ConflictReport r = analyze(c.layout, c.access);
  EXPECT_EQ(r.maxDegree, c.expectedDegree) << c.name << ": " << c.layout.str();
  EXPECT_GE(r.wavefronts, r.phases);
}

const Case kCases[] = {
    // 128-byte rows: the 8 rows of one 8x8 sub-tile all start in bank 0 -> the
    // same 4 banks, 8 distinct words each: 8-way.
    {"ldmatrix_rowmajor_128B", f16(64, 64, 64), Access::LdmatrixX4, 8},
    // Swizzle<3,3,3>: row r reads chunk c^r, 8 distinct chunks cover 32 banks.
    {"ldmatrix_swizzle333_128B", f16(64, 64, 64, Swizzle{3, 3, 3}), Access::LdmatrixX4, 1},
    // 64-byte rows: rows alternate between banks 0-15 and 16-31 -> 4-way.
    {"ldmatrix_rowmajor_64B", f16(64, 32, 32), Access::LdmatrixX4, 4},
    // 64-byte rows with Swizzle<2,3,3>: chunk c ^ (r/2 mod 4), plus the row's half -> 1.
    {"ldmatrix_swizzle233_64B", f16(64, 32, 32, Swizzle{2, 3, 3}), Access::LdmatrixX4, 1},
    // Swizzle<3,3,3> on 64-byte rows XORs (r/2 mod 8) into 4 chunks; rows 0..7 still
    // hit banks {0,16,4,20,8,24,12,28}+0..3 for chunk 0: conflict-free.
    {"ldmatrix_swizzle333_64B", f16(64, 32, 32, Swizzle{3, 3, 3}), Access::LdmatrixX4, 1},
    // Only 4 of 8 chunk permutations with B=2 on 128-byte rows: rows r and r+4 collide.
    {"ldmatrix_swizzle233_128B", f16(64, 64, 64, Swizzle{2, 3, 3}), Access::LdmatrixX4, 2},
    // Padding 8 halves (16 bytes) per row: row r starts at bank 4r mod 32 -> 1.
    {"ldmatrix_padded_144B", f16(64, 64, 72), Access::LdmatrixX4, 1},
    // 256-byte rows (head_dim 128) row-major: still 8-way.
    {"ldmatrix_rowmajor_256B", f16(64, 128, 128), Access::LdmatrixX4, 8},
    // Swizzle<3,3,3> assumes 64-element rows: on 128-element rows bits [6,9) of the
    // offset are (col/64) | (row mod 4) << 1, so rows r and r+4 XOR the same even
    // value into the chunk index: 4 distinct chunks for 8 rows -> 2-way.
    {"ldmatrix_swizzle333_256B", f16(64, 128, 128, Swizzle{3, 3, 3}), Access::LdmatrixX4, 2},
    // Swizzle<3,3,4> reads bits [7,10) = row mod 8 -> conflict-free.
    {"ldmatrix_swizzle334_256B", f16(64, 128, 128, Swizzle{3, 3, 4}), Access::LdmatrixX4, 1},
    // cp.async 16-byte stores, 8 consecutive chunks of a 128-byte row per phase: 1 either way.
    {"cpasync_rowmajor_128B", f16(64, 64, 64), Access::CpAsync16, 1},
    {"cpasync_swizzle333_128B", f16(64, 64, 64, Swizzle{3, 3, 3}), Access::CpAsync16, 1},
    // 64-byte rows: a phase covers two whole rows = 128 contiguous bytes -> 1.
    {"cpasync_rowmajor_64B", f16(64, 32, 32), Access::CpAsync16, 1},
    // 16-byte rows (8 halves, one chunk per row) with 128-byte pitch: every store in bank 0-3 -> 8.
    {"cpasync_narrow_pitch128B", f16(64, 8, 64), Access::CpAsync16, 8},
    // 1-byte elements (int8), 128-byte rows = 128 elements: Swizzle<3,4,3> keeps 16-byte chunks.
    {"ldmatrix_int8_rowmajor", SmemLayout{32, 128, 128, 1, std::nullopt}, Access::LdmatrixX4, 8},
    {"ldmatrix_int8_swizzle343", SmemLayout{32, 128, 128, 1, Swizzle{3, 4, 3}}, Access::LdmatrixX4, 1},
};

INSTANTIATE_TEST_SUITE_P(Layouts, BankConflictTable, ::testing::ValuesIn(kCases),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(Swizzle, MatchesCuteDefinition) {
  // Swizzle<3,3,3>: offset = row*64 + col; bits [6,9) (= row mod 8) XOR into [3,6).
  Swizzle s{3, 3, 3};
  EXPECT_EQ(s.apply(0), 0);
  EXPECT_EQ(s.apply(64 * 1 + 0), 64 + 8);           // row 1, chunk 0 -> chunk 1
  EXPECT_EQ(s.apply(64 * 5 + 8 * 2 + 3), 64 * 5 + 8 * (2 ^ 5) + 3);
  EXPECT_EQ(s.apply(64 * 9 + 8), 64 * 9 + 8 * (1 ^ 1)); // row 9 = 1 mod 8
  // An involution: applying it twice is the identity.
  for (int64_t o = 0; o < 4096; ++o)
    EXPECT_EQ(s.apply(s.apply(o)), o);
  EXPECT_EQ((Swizzle{0, 3, 3}.apply(123)), 123);
  EXPECT_EQ(s.str(), "Swizzle<3,3,3>");
}

TEST(PhaseDegree, BroadcastIsFree) {
  // Eight lanes reading the same 16 bytes: one word per bank -> 1.
  EXPECT_EQ(phaseDegree({0, 0, 0, 0, 0, 0, 0, 0}, 16), 1u);
  // Two lanes 128 bytes apart: same banks, different words -> 2.
  EXPECT_EQ(phaseDegree({0, 128}, 16), 2u);
}

TEST(Analyze, ReportsPhaseCounts) {
  // 64x64 f16: 8 row groups x 8 chunks = 64 ldmatrix phases; 8-way each.
  ConflictReport r = analyze(f16(64, 64, 64), Access::LdmatrixX4);
  EXPECT_EQ(r.phases, 64u);
  EXPECT_EQ(r.wavefronts, 64u * 8u);
}

TEST(Analyze, RejectsBadLayouts) {
  EXPECT_THROW(analyze(f16(64, 60, 60), Access::LdmatrixX4), std::invalid_argument);
  EXPECT_THROW(analyze(f16(12, 64, 64), Access::LdmatrixX4), std::invalid_argument);
  EXPECT_THROW(analyze(f16(64, 64, 32), Access::LdmatrixX4), std::invalid_argument);
  // Swizzle<3,2,3> on f16 moves 4-element (8-byte) pieces: splits 16-byte chunks.
  EXPECT_THROW(analyze(f16(64, 64, 64, Swizzle{3, 2, 3}), Access::LdmatrixX4),
               std::invalid_argument);
}

} // namespace

// Tests of the schedule-file reader (compiler/mlir/Schedule.h) against the real
// files in compiler/schedules/ and against malformed input.
#include "compiler/mlir/Schedule.h"

#include <gtest/gtest.h>
#include <fstream>
#include <map>
#include <iterator>

#include <stdexcept>
#include <string>

using namespace swz::schedule;

namespace {

std::string schedulePath(const char *target) {
  return std::string(SWZ_SOURCE_DIR) + "/compiler/schedules/" + target + ".json";
}

TEST(Schedule, Sm80) {
  TargetSchedule s = loadSchedule(schedulePath("sm_80"));
  EXPECT_EQ(s.target, "sm_80");
  EXPECT_EQ(s.gemm.mma, "mma.sync.m16n8k16");
  EXPECT_EQ(s.gemm.copy, "cp.async.cg.16");
  ASSERT_TRUE(s.gemm.swizzle.has_value());
  EXPECT_EQ(s.gemm.swizzle->str(), "Swizzle<3,3,3>");
  EXPECT_TRUE(s.gemm.conflictFree);
  // The prefill kernel's tile (codegen/kernels/gemm_f16.mlir): 3 stages x (64 + 64)
  // rows x 64 halves x 2 bytes = 48 KiB, the static shared-memory limit.
  EXPECT_EQ(s.gemm.tileM, 64);
  EXPECT_EQ(s.gemm.tileN, 64);
  EXPECT_EQ(gemmSmemBytes(s.gemm, 2), 49152);
  // Attention rows are head_dim long: the shift is derived per tile.
  EXPECT_TRUE(s.attention.swizzleShiftFromRow);
  EXPECT_FALSE(s.gemm.swizzleShiftFromRow);
  EXPECT_LE(gemmSmemBytes(s.gemm, 2), s.maxSmemBytesPerBlock);
}

TEST(Schedule, Sm90) {
  TargetSchedule s = loadSchedule(schedulePath("sm_90"));
  // The prefill GEMM on wgmma (Hopper-specific: PTX for sm_90a), one warpgroup on the
  // 64x64x64 tiles of the cp.async ring (no TMA yet); chosen on the H200 (bench/RESULTS.md,
  // twenty-second session).
  EXPECT_EQ(s.arch, "sm_90a");
  EXPECT_EQ(ptxArch(s, "sm_90"), "sm_90a");  // the PTX target swizzlec lowers sm_90 to
  EXPECT_EQ(ptxArch(loadSchedule(schedulePath("sm_80")), "sm_80"), "sm_80");
  EXPECT_EQ(s.gemm.copy, "cp.async.cg.16");
  EXPECT_EQ(s.gemm.mma, "wgmma.m64n64k16");
  EXPECT_EQ(s.gemm.warps, 4);
  EXPECT_EQ(gemmSmemBytes(s.gemm, 2), 49152);
  EXPECT_FALSE(s.gemm.mmaInFlight.has_value());  // optional: each k tile's wgmma waited for
  // Nor a wgmma attention: the tensor-core flash kernel's 64 x 64 mma.sync tiles.
  EXPECT_EQ(s.attention.mma, "mma.sync.m16n8k16");
  EXPECT_EQ(s.attention.blockQ, 64);
  EXPECT_EQ(s.attention.stages, 1);
  EXPECT_LE(gemmSmemBytes(s.gemm, 2), s.maxSmemBytesPerBlock);
  // F16 matrices of fewer rows decode on the 16-warp tensor-core GEMV (H200: 132 SMs).
  EXPECT_EQ(s.gemv.f16MmaSplitKBelowRows, 8192);
  EXPECT_EQ(loadSchedule(schedulePath("spirv")).gemv.f16MmaSplitKBelowRows, 0);  // optional, 0
  // Q4_K's tensor-core decode GEMV stays off on sm_90 (one token: slower end to end on the
  // H200, bench/RESULTS.md 2026-12-03); its 8-warp split is set for when it is turned on.
  // Optional fields, off where absent (sm_80).
  EXPECT_FALSE(s.gemv.q4kMma);
  EXPECT_EQ(s.gemv.q4kMmaSplitKBelowRows, 4096);
  EXPECT_FALSE(loadSchedule(schedulePath("sm_80")).gemv.q4kMma);
  EXPECT_EQ(loadSchedule(schedulePath("sm_80")).gemv.q4kMmaSplitKBelowRows, 0);
  // Prefill attention's shortest split: 2,048 keys on sm_* (256-key splits cost the H200
  // 7-16% of pp8192 in partials and reductions, bench/RESULTS.md eighteenth session);
  // optional, 256 where absent (spirv).
  EXPECT_EQ(s.attention.prefillSplitMin, 2048);
  EXPECT_EQ(loadSchedule(schedulePath("spirv")).attention.prefillSplitMin, 256);
}

// Ampere consumer (sm_86) and Ada (sm_89): the sm_80 instruction set for these f16
// kernels, 99 KiB of shared memory a block; every target's tiles fit its limit.
TEST(Schedule, Sm86AndSm89) {
  for (const char *t : {"sm_86", "sm_89"}) {
    TargetSchedule s = loadSchedule(schedulePath(t));
    EXPECT_EQ(s.target, t);
    EXPECT_EQ(s.arch, t);
    EXPECT_EQ(s.maxSmemBytesPerBlock, 101376) << t;
    EXPECT_EQ(s.gemm.mma, "mma.sync.m16n8k16") << t;
    EXPECT_EQ(s.gemm.copy, "cp.async.cg.16") << t;
    EXPECT_EQ(s.gemm.swizzle->str(), "Swizzle<3,3,3>") << t;
    EXPECT_TRUE(s.gemm.conflictFree && s.attention.conflictFree) << t;
    EXPECT_LE(gemmSmemBytes(s.gemm, 2), s.maxSmemBytesPerBlock) << t;
  }
  EXPECT_EQ(loadSchedule(schedulePath("sm_86")).ptxVersion, "7.1");
  EXPECT_EQ(loadSchedule(schedulePath("sm_89")).ptxVersion, "7.8");
}

TEST(Schedule, Spirv) {
  TargetSchedule s = loadSchedule(schedulePath("spirv"));
  EXPECT_EQ(s.target, "spirv");
  EXPECT_TRUE(s.ptxVersion.empty());
  EXPECT_FALSE(s.attention.swizzle.has_value());
  EXPECT_FALSE(s.gemm.conflictFree);
}

// Shape classes of the prefill GEMM: the base entry with the class's fields, chosen by the
// weight's N x K, first match wins.
TEST(Schedule, GemmClasses) {
  std::ifstream in(schedulePath("sm_90"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(parseSchedule(text, "t.json").gemmClasses.empty());  // optional
  const size_t at = text.find("\"skinny_max_rows\": 1");
  ASSERT_NE(at, std::string::npos);
  auto withClasses = [&](const std::string &classes) {
    std::string t = text;
    t.replace(at, 20, "\"skinny_max_rows\": 1, \"classes\": " + classes);
    return parseSchedule(t, "t.json");
  };
  TargetSchedule s = withClasses(
      R"([{"name": "narrow", "n_max": 1536, "tile_n": 32, "stages": 4, "mma": "wgmma.m64n32k16"},
          {"name": "gate_up", "n_min": 16384, "k_max": 4096, "tile_m": 128, "warps": 8}])");
  ASSERT_EQ(s.gemmClasses.size(), 2u);
  const GemmClass &narrow = s.gemmClasses[0];
  EXPECT_EQ(narrow.name, "narrow");
  EXPECT_EQ(narrow.nMax, 1536);
  EXPECT_EQ(narrow.nMin, 0);
  EXPECT_EQ(narrow.gemm.tileN, 32);
  EXPECT_EQ(narrow.gemm.tileM, 64);  // the base entry's
  EXPECT_EQ(narrow.gemm.stages, 4);
  EXPECT_EQ(narrow.gemm.mma, "wgmma.m64n32k16");
  ASSERT_TRUE(narrow.gemm.swizzle.has_value());
  EXPECT_EQ(narrow.gemm.swizzle->bits, 3u);
  EXPECT_EQ(s.gemmClasses[1].gemm.tileM, 128);
  EXPECT_EQ(s.gemm.tileN, 64);  // the base entry keeps its own
  EXPECT_EQ(gemmClassFor(s, 576, 4864), &s.gemmClasses[0]);
  EXPECT_EQ(gemmClassFor(s, 1536, 576), &s.gemmClasses[0]);
  EXPECT_EQ(gemmClassFor(s, 18944, 3584), &s.gemmClasses[1]);
  EXPECT_EQ(gemmClassFor(s, 18944, 8192), nullptr);  // k_max
  EXPECT_EQ(gemmClassFor(s, 3584, 3584), nullptr);
  // Overlapping classes: the first that matches wins.
  TargetSchedule o = withClasses(R"([{"name": "small", "n_max": 2048, "tile_n": 32},
                                     {"name": "any_n", "n_min": 0, "tile_m": 128, "warps": 8}])");
  EXPECT_EQ(gemmClassFor(o, 1024, 1024), &o.gemmClasses[0]);
  EXPECT_EQ(gemmClassFor(o, 4096, 1024), &o.gemmClasses[1]);
  auto error = [&](const std::string &classes) {
    try {
      withClasses(classes);
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(R"([{"name": "Narrow", "n_max": 1}])"),
            "t.json: $.gemm.classes[0].name: \"Narrow\" is not [a-z0-9_]+ (it names the kernel gemm_f16_<name>)");
  EXPECT_EQ(error(R"([{"name": "a", "n_max": 1}, {"name": "a", "k_max": 1}])"),
            "t.json: $.gemm.classes[1].name: \"a\" names two classes");
  EXPECT_EQ(error(R"([{"name": "a", "tile_n": 32}])"),
            "t.json: $.gemm.classes[0]: a class needs at least one of n_min, n_max, k_min, k_max");
  EXPECT_EQ(error(R"([{"name": "a", "n_max": 1, "tile_n": "wide"}])"),
            "t.json: $.gemm.classes[0].tile_n: expected an integer, got \"wide\"");
  EXPECT_EQ(error(R"({"name": "a"})"), "t.json: $.gemm.classes: expected an array, got {\"name\":\"a\"}");
  EXPECT_EQ(error(R"([{"name": "a", "n_min": 9, "n_max": 8}])"),
            "t.json: $.gemm.classes[0]: an empty range (n_min > n_max or k_min > k_max): no weight falls in it");
  EXPECT_NE(error(R"([{"name": "a", "n_max": 8, "tile_nn": 32}])")
                .find("t.json: $.gemm.classes[0].tile_nn: not a field a class may set"),
            std::string::npos);
  EXPECT_NE(error(R"([{"name": "a", "n_max": 8, "skinny_max_rows": 4}])")
                .find("$.gemm.classes[0].skinny_max_rows: not a field a class may set"),
            std::string::npos);
}

// The dequantizing (skinny) GEMM's geometry, gemm.skinny: the shipped values, and the
// errors of a bad entry (each naming the field).
TEST(Schedule, GemmSkinny) {
  for (const char *target : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    TargetSchedule s = loadSchedule(schedulePath(target));
    ASSERT_TRUE(s.gemm.skinny.has_value()) << target;
    EXPECT_EQ(s.gemm.skinny->warps, 4) << target;
    EXPECT_EQ(s.gemm.skinny->mTiles, 4) << target;
    const std::map<std::string, int64_t> stages{{"q4_k", 8}, {"q6_k", 6}, {"q8_0", 4}};
    EXPECT_EQ(s.gemm.skinny->stages, stages) << target;
    EXPECT_EQ(s.gemm.skinnyMaxRows, 1) << target;
  }
  EXPECT_FALSE(loadSchedule(schedulePath("spirv")).gemm.skinny.has_value());  // optional
  std::ifstream in(schedulePath("sm_80"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string shipped =
      R"("skinny": { "warps": 4, "m_tiles": 4, "stages": { "q4_k": 8, "q6_k": 6, "q8_0": 4 } })";
  const size_t at = text.find(shipped);
  ASSERT_NE(at, std::string::npos);
  auto error = [&](const std::string &rows, const std::string &skinny) {
    std::string t = text;
    t.replace(at, shipped.size(), skinny);
    const size_t r = t.find("\"skinny_max_rows\": 1");
    t.replace(r, 20, "\"skinny_max_rows\": " + rows);
    try {
      parseSchedule(t, "t.json");
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string stages = R"("stages": {"q4_k": 8, "q6_k": 6, "q8_0": 4})";
  const std::string head = R"("skinny": {"warps": 4, "m_tiles": 4, )";
  EXPECT_EQ(error("64", R"("skinny": {"warps": 4, "m_tiles": 4, )" + stages + "}"), "no error");
  EXPECT_EQ(error("65", R"("skinny": {"warps": 4, "m_tiles": 4, )" + stages + "}"),
            "t.json: $.gemm.skinny_max_rows: 65 is more than the skinny GEMM's 64 rows "
            "($.gemm.skinny.m_tiles 4 of 16)");
  EXPECT_EQ(error("1", R"("no_skinny": 0)"), "t.json: $.gemm.skinny_max_rows: is 1 but there is "
                                              "no $.gemm.skinny (the kernel's geometry)");
  EXPECT_EQ(error("0", R"("no_skinny": 0)"), "no error");
  EXPECT_EQ(error("1", R"("skinny": {"warps": 3, "m_tiles": 4, )" + stages + "}"),
            "t.json: $.gemm.skinny.warps: 3 is not a power of two up to 32");
  EXPECT_EQ(error("1", R"("skinny": {"warps": 4, "m_tiles": 5, )" + stages + "}"),
            "t.json: $.gemm.skinny.m_tiles: 5 is not 1, 2, 4 or 8");
  EXPECT_EQ(error("1", head + R"("stages": {"q4_k": 8, "q6_k": 6}})"),
            "t.json: $.gemm.skinny.stages.q8_0: missing field");
  EXPECT_EQ(error("1", head + R"("stages": {"q4_k": 1, "q6_k": 6, "q8_0": 4}})"),
            "t.json: $.gemm.skinny.stages.q4_k: must be >= 2, got 1");
  EXPECT_EQ(error("1", head + R"("stages": {"q5_k": 2, "q4_k": 8, "q6_k": 6, "q8_0": 4}})"),
            "t.json: $.gemm.skinny.stages.q5_k: not a block format the skinny GEMM reads "
            "(q4_k, q6_k, q8_0)");
  EXPECT_EQ(error("1", head + R"("stages": [8, 6, 4]})"),
            "t.json: $.gemm.skinny.stages: expected an object "
            "{\"q4_k\": n, \"q6_k\": n, \"q8_0\": n}");
}

// attention.decode: the split-K decode attention's geometry (LowerAttentionDecode.cpp).
TEST(Schedule, DecodeAttention) {
  for (const char *target : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    TargetSchedule s = loadSchedule(schedulePath(target));
    ASSERT_TRUE(s.attention.decode.has_value()) << target;
    EXPECT_EQ(s.attention.decode->warps, 8) << target;
    EXPECT_EQ(s.attention.decode->keysInFlight, 4) << target;
    EXPECT_EQ(s.attention.decode->minCtasPerSm, 0) << target;
  }
  EXPECT_FALSE(loadSchedule(schedulePath("spirv")).attention.decode.has_value());  // optional
  std::ifstream in(schedulePath("sm_80"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string shipped =
      R"("decode": { "warps": 8, "keys_in_flight": 4, "min_ctas_per_sm": 0 })";
  const size_t at = text.find(shipped);
  ASSERT_NE(at, std::string::npos);
  auto parse = [&](const std::string &decode) {
    std::string t = text;
    t.replace(at, shipped.size(), decode);
    return parseSchedule(t, "t.json");
  };
  auto error = [&](const std::string &decode) {
    try {
      parse(decode);
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const TargetSchedule alt = parse(R"("decode": {"warps": 4, "keys_in_flight": 2})");
  EXPECT_EQ(alt.attention.decode->warps, 4);
  EXPECT_EQ(alt.attention.decode->keysInFlight, 2);
  EXPECT_EQ(alt.attention.decode->minCtasPerSm, 0);  // optional
  EXPECT_EQ(parse(R"("decode": {"warps": 8, "keys_in_flight": 4, "min_ctas_per_sm": 2})")
                .attention.decode->minCtasPerSm,
            2);
  EXPECT_EQ(error(R"("decode": {"warps": 16, "keys_in_flight": 4})"),
            "t.json: $.attention.decode.warps: 16 is not 4 or 8 (the warps combine the 8 query "
            "rows in groups of 128 threads)");
  EXPECT_EQ(error(R"("decode": {"keys_in_flight": 4})"),
            "t.json: $.attention.decode.warps: missing field");
  EXPECT_EQ(error(R"("decode": {"warps": 8, "keys_in_flight": 0})"),
            "t.json: $.attention.decode.keys_in_flight: must be >= 1, got 0");
  EXPECT_EQ(error(R"("decode": {"warps": 8, "keys_in_flight": 32})"),
            "t.json: $.attention.decode.keys_in_flight: 32 is more than 16");
  EXPECT_EQ(error(R"("decode": {"warps": 8, "keys_in_flight": 4, "min_ctas_per_sm": -1})"),
            "t.json: $.attention.decode.min_ctas_per_sm: must be >= 0, got -1");
  EXPECT_EQ(error(R"("decode": {"warps": 8, "keys_in_flight": 4, "split_unit": 64})"),
            "t.json: $.attention.decode.split_unit: not a decode field (warps, keys_in_flight, "
            "min_ctas_per_sm)");
  EXPECT_EQ(error(R"("decode": 8)"), "t.json: $.attention.decode: expected an object");
}

TEST(Schedule, GemvQ8xAndF32) {
  // The int8 decode GEMVs' geometry per block format, the same in the four sm_* files
  // (what bench/tune_q8x.sh chose on the H200); SPIR-V has no int8 GEMV.
  for (const char *target : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    const TargetSchedule s = loadSchedule(schedulePath(target));
    ASSERT_EQ(s.gemv.q8x.size(), 5u) << target;
    const GemvTypeSchedule &q4k = s.gemv.q8x.at("q4_k"), &q80 = s.gemv.q8x.at("q8_0");
    EXPECT_EQ(q4k.rowsPerWarp, 2) << target;
    EXPECT_EQ(q4k.unitsInFlight, 1) << target;
    EXPECT_EQ(q4k.minCtasPerSm, 6) << target;
    EXPECT_EQ(q80.rowsPerWarp, 1) << target;
    EXPECT_EQ(q80.unitsInFlight, 3) << target;
    EXPECT_EQ(q80.minCtasPerSm, 8) << target;
    EXPECT_EQ(s.gemv.q8x.at("q6_k").minCtasPerSm, 7) << target;
    EXPECT_EQ(s.gemv.q8x.at("q4_1").unitsInFlight, 2) << target;
    EXPECT_EQ(s.gemv.q8x.at("q5_0").rowsPerWarp, 1) << target;
  }
  EXPECT_TRUE(loadSchedule(schedulePath("spirv")).gemv.q8x.empty());  // optional
  // The f32 GEMVs (every target, SPIR-V's included): units in flight per weight type.
  for (const char *target : {"sm_80", "sm_86", "sm_89", "sm_90", "spirv"}) {
    const TargetSchedule s = loadSchedule(schedulePath(target));
    ASSERT_EQ(s.gemv.f32.size(), 7u) << target;
    for (const char *ty : {"q4_0", "q4_k", "q6_k", "f16"})
      EXPECT_EQ(s.gemv.f32.at(ty).unitsInFlight, 2) << target << " " << ty;
    for (const char *ty : {"q4_1", "q5_0", "q8_0"})
      EXPECT_EQ(s.gemv.f32.at(ty).unitsInFlight, 3) << target << " " << ty;
    EXPECT_EQ(s.gemv.f32.at("q4_0").rowsPerWarp, 1) << target;
    EXPECT_EQ(s.gemv.f32.at("q4_0").minCtasPerSm, 0) << target;
  }
  // F16's tensor-core GEMVs (PTX): 4 warps, 1 m-tile, 4 chunks in flight; split K 16, 1, 2.
  for (const char *target : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    const TargetSchedule s = loadSchedule(schedulePath(target));
    ASSERT_TRUE(s.gemv.f16Mma && s.gemv.f16MmaSplitK) << target;
    EXPECT_EQ(s.gemv.f16Mma->warps, 4) << target;
    EXPECT_EQ(s.gemv.f16Mma->mTiles, 1) << target;
    EXPECT_EQ(s.gemv.f16Mma->unitsInFlight, 4) << target;
    EXPECT_EQ(s.gemv.f16MmaSplitK->warps, 16) << target;
    EXPECT_EQ(s.gemv.f16MmaSplitK->unitsInFlight, 2) << target;
  }
  EXPECT_FALSE(loadSchedule(schedulePath("spirv")).gemv.f16Mma.has_value());
  std::ifstream in(schedulePath("sm_80"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string shipped =
      R"("q4_k": { "rows_per_warp": 2, "units_in_flight": 1, "min_ctas_per_sm": 6 })";
  const size_t at = text.find(shipped);
  ASSERT_NE(at, std::string::npos);
  auto parse = [&](const std::string &entry) {
    std::string t = text;
    t.replace(at, shipped.size(), entry);
    return parseSchedule(t, "t.json");
  };
  auto error = [&](const std::string &entry) {
    try {
      parse(entry);
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const GemvTypeSchedule alt = parse(R"("q4_k": {"rows_per_warp": 4, "units_in_flight": 2})").gemv.q8x.at("q4_k");
  EXPECT_EQ(alt.rowsPerWarp, 4);
  EXPECT_EQ(alt.unitsInFlight, 2);
  EXPECT_EQ(alt.minCtasPerSm, 0);  // optional
  EXPECT_EQ(error(R"("q4_k": {"rows_per_warp": 9, "units_in_flight": 1})"),
            "t.json: $.gemv.q8x.q4_k.rows_per_warp: 9 is more than 8");
  EXPECT_EQ(error(R"("q4_k": {"rows_per_warp": 1, "units_in_flight": 0})"),
            "t.json: $.gemv.q8x.q4_k.units_in_flight: must be >= 1, got 0");
  EXPECT_EQ(error(R"("q4_k": {"units_in_flight": 1})"),
            "t.json: $.gemv.q8x.q4_k.rows_per_warp: missing field");
  EXPECT_EQ(error(R"("q4_k": {"rows_per_warp": 1, "units_in_flight": 1, "warps": 8})"),
            "t.json: $.gemv.q8x.q4_k.warps: not a field of the int8 GEMVs "
            "(rows_per_warp, units_in_flight, min_ctas_per_sm)");
  EXPECT_EQ(error(R"("q2_k": {"rows_per_warp": 1, "units_in_flight": 1})"),
            "t.json: $.gemv.q8x.q2_k: not a weight type of the int8 GEMVs (q4_1, "
            "q4_k, q5_0, q6_k, q8_0)");
}

TEST(Schedule, Errors) {
  EXPECT_THROW(loadSchedule("/nonexistent/x.json"), std::runtime_error);
  try {
    parseSchedule("{\"format_version\": 1, \"target\": 7}", "t.json");
    FAIL() << "expected an error";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(), "t.json: $.target: expected a string, got 7");
  }
  try {
    parseSchedule("{\"format_version\": 2}", "t.json");
    FAIL() << "expected an error";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(), "t.json: $.format_version: unsupported version (this compiler reads 1)");
  }
  EXPECT_THROW(parseSchedule("{nope", "t.json"), std::runtime_error);
  // A prefill split that is not whole 64-key tiles.
  std::ifstream in(schedulePath("sm_90"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("\"prefill_split_min\": 2048");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 25, "\"prefill_split_min\": 100");
  try {
    parseSchedule(text, "t.json");
    FAIL() << "expected an error";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("prefill_split_min: 100 is not a multiple of 64"), std::string::npos) << e.what();
  }
  // gemm.mma_in_flight: 0 or 1 wgmma groups pending across a k tile.
  text.replace(text.find("\"stages\": 3,"), 12, "\"stages\": 3, \"mma_in_flight\": 1,");
  text.replace(text.find("\"prefill_split_min\": 100"), 24, "\"prefill_split_min\": 2048");
  EXPECT_EQ(parseSchedule(text, "t.json").gemm.mmaInFlight, 1);
  text.replace(text.find("\"mma_in_flight\": 1"), 18, "\"mma_in_flight\": 2");
  try {
    parseSchedule(text, "t.json");
    FAIL() << "expected an error";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("$.gemm.mma_in_flight: 2 is not 0 or 1"), std::string::npos) << e.what();
  }
}

} // namespace

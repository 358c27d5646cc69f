//===- KernelTable.cpp - which built-in kernels implement a graph op ------===//
#include "codegen/KernelTable.h"

#include <cstdlib>

namespace swz::codegen {

const std::map<std::string, std::vector<KernelRef>> &gpuImpls() {
  static const std::map<std::string, std::vector<KernelRef>> impls = [] {
    std::map<std::string, std::vector<KernelRef>> t = {
        {"add.f32", {{"add_f32", "add_f32", "all"}}},
        {"argmax.f32", {{"argmax_f32", "argmax_f32", "all"}}},
        {"rms_norm.f32", {{"rms_norm_f32", "rms_norm_f32", "all"}}},
        // qwen3's q/k norm: the same kernel over T * n_head rows of head_dim.
        {"head_norm.f32", {{"rms_norm_f32", "rms_norm_f32", "all"}}},
        {"rope.f32", {{"rope_f32", "rope_f32", "all"}}},
        {"swiglu.f32", {{"swiglu_f32", "swiglu_f32", "all"}}},
    };
    // attention_f16kv.mlir: kv_store_f16 writes the batch's k, v into the layer's paged
    // f16 KV cache; prefill runs flash attention (split over the keys at fixed offsets, then
    // attention_split_reduce, when the context is longer than one split); decode runs split-K
    // partials ("flash decoding") and attention_split_reduce. For head_dim 64 and 128
    // the PTX prefill is the tensor-core variant (attention_f16kv_mma.mlir); other
    // head sizes (<= 128) use the portable kernel everywhere.
    const KernelRef store{"attention_f16kv", "kv_store_f16", "all"};
    const KernelRef portable{"attention_f16kv", "flash_attention_f16kv", "prefill"};
    // PTX decode at head_dim 128: warps over keys (attention_decode.mlir), whose last
    // split merges the partials itself (no attention_split_reduce launch); the portable
    // kernel everywhere else.
    const std::vector<KernelRef> decode = {
        {"attention_f16kv", "flash_attention_f16kv", "decode"},
        {"attention_f16kv", "attention_split_reduce", "decode"}};
    const std::vector<KernelRef> decodeHd128 = {
        {"attention_decode", "flash_decode_f16kv_hd128", "decode", true, false},
        {"attention_f16kv", "flash_attention_f16kv", "decode", false, true},
        {"attention_f16kv", "attention_split_reduce", "decode", false, true}};
    // Prefill splits the keys too when its context is longer than one split (of a length
    // fixed per executor), then reduces as decode does (compiler/driver/launch_bindings.cpp).
    const KernelRef prefillReduce{"attention_f16kv", "attention_split_reduce", "prefill"};
    auto attention = [&](std::vector<KernelRef> prefill, const KernelRef &store, bool hd128) {
      std::vector<KernelRef> v = {store};
      v.insert(v.end(), prefill.begin(), prefill.end());
      v.push_back(prefillReduce);
      const std::vector<KernelRef> &d = hd128 ? decodeHd128 : decode;
      v.insert(v.end(), d.begin(), d.end());
      return v;
    };
    // "+rope_k": swz-fuse folded the graph's rope(k) into the KV write
    // (rope_kv_store_f16 rotates k while storing it).
    const KernelRef ropeStore{"attention_f16kv", "rope_kv_store_f16", "all"};
    const std::vector<std::pair<std::string, std::vector<KernelRef>>> variants = {
        {"attention.f16kv", {portable}},
        {"attention.f16kv.hd64",
         {{"attention_f16kv_mma", "flash_attention_f16kv_mma", "prefill", true, false},
          {"attention_f16kv", "flash_attention_f16kv", "prefill", false, true}}},
        {"attention.f16kv.hd128",
         {{"attention_f16kv_mma", "flash_attention_f16kv_mma_hd128", "prefill", true, false},
          {"attention_f16kv", "flash_attention_f16kv", "prefill", false, true}}},
    };
    for (const auto &[key, prefill] : variants) {
      const bool hd128 = key == "attention.f16kv.hd128";
      t[key] = attention(prefill, store, hd128);
      t[key + "+rope_k"] = attention(prefill, ropeStore, hd128);
    }
    // Matmuls. Decode (a few rows): the dequantizing GEMV matmul_<type> (gemv_<type>.mlir),
    // whose `flags` add bias[n] (1) and/or res[t, n] (2), so one kernel serves the plain,
    // bias and fused-residual forms. Prefill, as llama.cpp's cuBLAS path: the activations
    // rounded to f16 (convert_f32_f16), the weight dequantized to an f16 scratch
    // (dequant_<type>_f16), then the tensor-core GEMM (PTX; optional bias); on SPIR-V the
    // portable tiled GEMM on f32 activations. (GEMMs that dequantized Q4_1 / Q8_0
    // straight into their shared tiles ran 3.5x slower at T = 512 on the H200 than
    // dequant + gemm_f16, bench/RESULTS.md 2026-11-30, and were removed.) The PTX prefill
    // GEMMs (gemm_f16, gemm_skinny) add bias and a fused residual in their epilogue, as the
    // GEMVs; SPIR-V's portable GEMM has no residual input, so there a fused residual costs
    // one add_f32 after it.
    // Q5_0 has no dequant kernel yet: its GEMV runs prefill batches too. On PTX, Q4_1,
    // Q4_K, Q5_0, Q6_K and Q8_0 decode on int8 activations with dp4a (gemv_q8x.mlir,
    // llama.cpp's mmvq).
    const KernelRef convert{"dequant_f16", "convert_f32_f16", "prefill", true, false};
    const KernelRef residualAdd{"add_f32", "add_f32", "prefill", false, true};
    // F16 weights with K % 8 == 0 ("matmul.f16.k8", and ".k8.w16" for fewer rows than the
    // target schedule's gemv.f16_mma_split_k_below_rows: Codegen.cpp's kernelKey) decode on
    // the tensor cores on PTX (gemv_f16_mma.mlir: 16-byte weight loads,
    // mma.sync; 4 or 16 warps a workgroup); other K and SPIR-V keep matmul_f16.
    // Q4_K on the int8 tensor cores where the target schedule says so ("matmul.q4_k.mma",
    // 4 warps a workgroup, and ".mma.w8", 8: Codegen.cpp's kernelKey): the same quantized
    // activations, matmul_q4_k_mma_q8x / matmul_q4_k_mma_w8_q8x (gemv_q8x.mlir).
    for (const char *type : {"f16", "f16.k8", "f16.k8.w16", "q4_0", "q4_1", "q5_0", "q8_0", "q4_k", "q4_k.mma",
                             "q4_k.mma.w8", "q6_k"}) {
      const std::string key = type;
      const std::string ty = key.rfind("f16", 0) == 0 ? "f16" : key.rfind("q4_k", 0) == 0 ? "q4_k" : key;
      const std::string source = "gemv_" + ty;
      if (key == ty)
        t["get_rows." + ty] = {{source, "get_rows_" + ty, "all"}};
      const bool hasDequant = ty != "f16" && ty != "q5_0";
      const bool int8Decode = ty == "q4_1" || ty == "q4_k" || ty == "q6_k" || ty == "q8_0";  // and q5_0, below
      for (const char *epilogue : {"", "+bias", "+residual", "+bias+residual"}) {
        const bool residual = std::string(epilogue).find("residual") != std::string::npos;
        std::vector<KernelRef> v;
        if (ty == "q5_0") {
          // No dequant kernel: prefill (and SPIR-V's decode) run the f32-activation GEMV;
          // PTX decodes on int8 activations.
          v.push_back({"gemv_q8x", "quantize_q8_x", "decode", true, false});
          v.push_back({"gemv_q8x", "matmul_q5_0_q8x", "decode", true, false});
          v.push_back({source, "matmul_" + ty, "prefill", true, false});
          v.push_back({source, "matmul_" + ty, "all", false, true});
        } else {
          if (int8Decode) {
            // PTX decode: the activations quantized to int8 (quantize_q8_x; consecutive
            // matmuls of one input share it, see compile_gpu.cpp), then the dp4a GEMV.
            v.push_back({"gemv_q8x", "quantize_q8_x", "decode", true, false});
            const std::string entry = key == "q4_k.mma"      ? "matmul_q4_k_mma_q8x"
                                      : key == "q4_k.mma.w8" ? "matmul_q4_k_mma_w8_q8x"
                                                             : "matmul_" + ty + "_q8x";
            v.push_back({"gemv_q8x", entry, "decode", true, false});
            v.push_back({source, "matmul_" + ty, "decode", false, true});
          } else if (key != ty) {  // f16.k8 (4 warps a workgroup), f16.k8.w16 (16)
            v.push_back({"gemv_f16_mma", key == "f16.k8" ? "matmul_f16_mma" : "matmul_f16_mma_w16", "decode", true, false});
            v.push_back({source, "matmul_" + ty, "decode", false, true});
          } else {
            v.push_back({source, "matmul_" + ty, "decode"});
          }
          v.push_back(convert);
          if (hasDequant)
            v.push_back({"dequant_f16", "dequant_" + ty + "_f16", "prefill", true, false});
          v.push_back({"gemm_f16", "gemm_f16", "prefill", true, false});
          if (ty != "f16")
            v.push_back({"dequant_f16", "dequant_" + ty + "_f16", "prefill", false, true});
          v.push_back({"gemm_f32_f16w", "gemm_f32_f16w", "prefill", false, true});
          if (residual)
            v.push_back(residualAdd);
        }
        t["matmul." + key + epilogue] = v;
        // ".skinny": prompt passes of few rows take gemm_skinny_<type> (PTX: dequantizing in
        // its loads, bitwise the same as dequant + gemm_f16), larger ones the pair.
        if (ty == "q4_k" || ty == "q6_k" || ty == "q8_0") {
          std::vector<KernelRef> s;
          for (KernelRef k : v) {
            if (k.ptx && k.phase == "prefill") {
              if (k.entry == "convert_f32_f16")
                s.push_back({"gemm_skinny", "gemm_skinny_" + ty, "prefill", true, false, KernelRef::Rows::Small});
              k.rows = KernelRef::Rows::Large;
            }
            s.push_back(k);
          }
          t["matmul." + key + ".skinny" + epilogue] = s;
        }
      }
    }
    return t;
  }();
  return impls;
}

std::vector<KernelRef> kernelsFor(const std::string &key, bool ptx) {
  auto it = gpuImpls().find(key);
  // "attention.f16kv.hd96[+rope_k]" falls back to the head-size-generic kernels, whose
  // workgroup tiles hold head_dim <= 128; larger heads have no kernel yet.
  const std::string hdPrefix = "attention.f16kv.hd";
  if (it == gpuImpls().end() && key.rfind(hdPrefix, 0) == 0) {
    const size_t plus = key.find('+');
    const int hd = std::atoi(key.substr(hdPrefix.size(), plus - hdPrefix.size()).c_str());
    if (hd > 0 && hd <= 128)
      it = gpuImpls().find("attention.f16kv" + (plus == std::string::npos ? "" : key.substr(plus)));
  }
  if (it == gpuImpls().end())
    return {};
  std::vector<KernelRef> out;
  bool all = false, decode = false, prefill = false;
  for (const KernelRef &k : it->second) {
    if (!(ptx ? k.ptx : k.spirv))
      continue;
    out.push_back(k);
    all |= k.phase == "all";
    decode |= k.phase == "decode";
    prefill |= k.phase == "prefill";
  }
  // Every forward must be covered: "all" kernels, or both phases (one phase alone
  // would leave the other without a launch).
  if (decode != prefill || (!all && !decode))
    out.clear();
  return out;
}

} // namespace swz::codegen

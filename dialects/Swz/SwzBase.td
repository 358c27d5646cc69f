//===- SwzBase.td - the swz dialect and its enums ----------*- tablegen -*-===//
//
// The swz dialect describes an LLM forward pass at two levels:
//  * model-graph ops (swz.matmul, swz.rms_norm, ...) on tensors, one per step of
//    the llama/qwen2/qwen3 block, built by models/ from a GGUF file;
//  * tile-spec ops (swz.gemm_tile, swz.attention_tile) that describe a GPU kernel's
//    tiling and its shared-memory layout, filled in from compiler/schedules/<target>.json.
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_BASE_TD
#define SWZ_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Swz_Dialect : Dialect {
  let name = "swz";
  let cppNamespace = "::swz";
  let summary = "Swizzle's LLM model graph and GPU tile-spec dialect";
  let description = [{
    Model-graph ops mirror the steps of a transformer block as GGUF stores it
    (weights are [N, K] with K contiguous, as in ggml). Tile-spec ops carry one
    kernel's schedule: tile sizes, warps, pipeline stages, the tensor-core and copy
    instructions, and the shared-memory layout `#swz.swizzle<B, M, S>`.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Swz_Op<string mnemonic, list<Trait> traits = []>
    : Op<Swz_Dialect, mnemonic, traits>;

// Storage format of a weight tensor, named as ggml names them (ggml.h, enum ggml_type).
def Swz_QuantF32  : I32EnumAttrCase<"F32",  0, "f32">;
def Swz_QuantF16  : I32EnumAttrCase<"F16",  1, "f16">;
def Swz_QuantQ4_0 : I32EnumAttrCase<"Q4_0", 2, "q4_0">;
def Swz_QuantQ4_1 : I32EnumAttrCase<"Q4_1", 3, "q4_1">;
def Swz_QuantQ5_0 : I32EnumAttrCase<"Q5_0", 6, "q5_0">;
def Swz_QuantQ5_1 : I32EnumAttrCase<"Q5_1", 7, "q5_1">;
def Swz_QuantQ8_0 : I32EnumAttrCase<"Q8_0", 8, "q8_0">;
def Swz_QuantQ4_K : I32EnumAttrCase<"Q4_K", 12, "q4_k">;
def Swz_QuantQ5_K : I32EnumAttrCase<"Q5_K", 13, "q5_k">;
def Swz_QuantQ6_K : I32EnumAttrCase<"Q6_K", 14, "q6_k">;
def Swz_QuantBF16 : I32EnumAttrCase<"BF16", 30, "bf16">;
def Swz_QuantTypeEnum : I32EnumAttr<"QuantType",
    "weight storage format (values are ggml_type ids)",
    [Swz_QuantF32, Swz_QuantF16, Swz_QuantQ4_0, Swz_QuantQ4_1, Swz_QuantQ5_0,
     Swz_QuantQ5_1, Swz_QuantQ8_0, Swz_QuantQ4_K, Swz_QuantQ5_K, Swz_QuantQ6_K,
     Swz_QuantBF16]> {
  let cppNamespace = "::swz";
  let genSpecializedAttr = 0;
}
def Swz_QuantTypeAttr : EnumAttr<Swz_Dialect, Swz_QuantTypeEnum, "quant"> {
  let summary = "weight storage format, e.g. `#swz.quant<q4_k>`";
  let assemblyFormat = "`<` $value `>`";
}

// RoPE pair layout: `normal` rotates (x[2i], x[2i+1]) (llama), `neox` rotates
// (x[i], x[i + d/2]) (qwen2, qwen3).
def Swz_RopeNormal : I32EnumAttrCase<"Normal", 0, "normal">;
def Swz_RopeNeox   : I32EnumAttrCase<"Neox", 2, "neox">;
def Swz_RopeModeEnum : I32EnumAttr<"RopeMode", "RoPE pair layout",
    [Swz_RopeNormal, Swz_RopeNeox]> {
  let cppNamespace = "::swz";
  let genSpecializedAttr = 0;
}
def Swz_RopeModeAttr : EnumAttr<Swz_Dialect, Swz_RopeModeEnum, "rope_mode"> {
  let summary = "RoPE pair layout, `#swz.rope_mode<neox>` or `#swz.rope_mode<normal>`";
  let assemblyFormat = "`<` $value `>`";
}

#endif // SWZ_BASE_TD

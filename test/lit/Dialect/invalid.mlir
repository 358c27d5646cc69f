// Verifier diagnostics of the swz dialect, one case per split.
// RUN: swizzle-opt %s -split-input-file -verify-diagnostics

func.func @swizzle_overlap() attributes {
  // expected-error @+1 {{swizzle shift S=2 must be >= bits B=3 so that the source bits [M+S, M+S+B) and the target bits [M, M+B) do not overlap}}
  s = #swz.swizzle<3, 3, 2>} {
  return
}

// -----

func.func @swizzle_too_wide() attributes {
  // expected-error @+1 {{swizzle reads bits up to M+S+B=36, more than the 31 bits of an element offset}}
  s = #swz.swizzle<8, 20, 8>} {
  return
}

// -----

func.func @bad_quant() attributes {
  // expected-error @+2 {{expected ::swz::QuantType to be one of: f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k, bf16}}
  // expected-error @+1 {{failed to parse Swz_QuantTypeAttr parameter 'value' which is to be a `::swz::QuantType`}}
  q = #swz.quant<q3_k>} {
  return
}

// -----

func.func @matmul_k(%x: tensor<?x512xf32>, %w: tensor<64x256xf32>) {
  // expected-error @+1 {{'swz.matmul' op x dim 1 (K) (512) must equal weight dim 1 (K) (256)}}
  %0 = swz.matmul %x, %w {weight_type = #swz.quant<f16>} : tensor<?x512xf32>, tensor<64x256xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @matmul_n(%x: tensor<?x256xf32>, %w: tensor<64x256xf32>) {
  // expected-error @+1 {{'swz.matmul' op result dim 1 (N) (32) must equal weight dim 0 (N) (64)}}
  %0 = swz.matmul %x, %w {weight_type = #swz.quant<f16>} : tensor<?x256xf32>, tensor<64x256xf32> -> tensor<?x32xf32>
  return
}

// -----

// Qwen2.5-0.5B's hidden size 896 is not a whole number of 256-element k-quant blocks.
func.func @matmul_block(%x: tensor<?x896xf32>, %w: tensor<4864x896xf32>) {
  // expected-error @+1 {{'swz.matmul' op K = 896 is not a multiple of the q4_k block size 256}}
  %0 = swz.matmul %x, %w {weight_type = #swz.quant<q4_k>} : tensor<?x896xf32>, tensor<4864x896xf32> -> tensor<?x4864xf32>
  return
}

// -----

func.func @matmul_rank(%x: tensor<896xf32>, %w: tensor<64x896xf32>) {
  // expected-error @+1 {{'swz.matmul' op x must have rank 2, got 'tensor<896xf32>'}}
  %0 = swz.matmul %x, %w {weight_type = #swz.quant<f32>} : tensor<896xf32>, tensor<64x896xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @embedding_block(%t: tensor<100x48xf32>, %ids: tensor<?xi32>) {
  // expected-error @+1 {{'swz.embedding' op row length D = 48 is not a multiple of the q8_0 block size 32}}
  %0 = swz.embedding %t, %ids {weight_type = #swz.quant<q8_0>} : tensor<100x48xf32>, tensor<?xi32> -> tensor<?x48xf32>
  return
}

// -----

func.func @embedding_d(%t: tensor<100x64xf32>, %ids: tensor<?xi32>) {
  // expected-error @+1 {{'swz.embedding' op result dim 1 (D) (32) must equal table dim 1 (D) (64)}}
  %0 = swz.embedding %t, %ids {weight_type = #swz.quant<f32>} : tensor<100x64xf32>, tensor<?xi32> -> tensor<?x32xf32>
  return
}

// -----

func.func @rms_gamma(%x: tensor<?x576xf32>, %g: tensor<512xf32>) {
  // expected-error @+1 {{'swz.rms_norm' op gamma dim 0 (512) must equal the last dim of x (576)}}
  %0 = swz.rms_norm %x, %g {epsilon = 1.0e-05 : f32} : tensor<?x576xf32>, tensor<512xf32>
  return
}

// -----

func.func @rms_eps(%x: tensor<?x576xf32>, %g: tensor<576xf32>) {
  // expected-error @+1 {{'swz.rms_norm' op epsilon must be in (0, 1), got 0}}
  %0 = swz.rms_norm %x, %g {epsilon = 0.0 : f32} : tensor<?x576xf32>, tensor<576xf32>
  return
}

// -----

func.func @rope_odd(%q: tensor<?x14x64xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'swz.rope' op rotary_dim must be positive and even, got 63}}
  %0 = swz.rope %q, %pos {mode = #swz.rope_mode<neox>, theta = 1.0e+06 : f32, rotary_dim = 63 : i32} : tensor<?x14x64xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_wide(%q: tensor<?x14x64xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'swz.rope' op rotary_dim (128) exceeds the head dim (64)}}
  %0 = swz.rope %q, %pos {mode = #swz.rope_mode<neox>, theta = 1.0e+06 : f32, rotary_dim = 128 : i32} : tensor<?x14x64xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_positions(%q: tensor<8x14x64xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'swz.rope' op positions dim 0 (T) (4) must equal x dim 0 (T) (8)}}
  %0 = swz.rope %q, %pos {mode = #swz.rope_mode<normal>, theta = 1.0e+04 : f32, rotary_dim = 64 : i32} : tensor<8x14x64xf32>, tensor<4xi32>
  return
}

// -----

func.func @attention_gqa(%q: tensor<?x14x64xf32>, %k: tensor<?x4x64xf32>, %v: tensor<?x4x64xf32>) {
  // expected-error @+1 {{'swz.attention' op query heads (14) must be a multiple of KV heads (4) for grouped-query attention}}
  %0 = swz.attention %q, %k, %v {scale = 0.125 : f32} : tensor<?x14x64xf32>, tensor<?x4x64xf32>, tensor<?x4x64xf32> -> tensor<?x14x64xf32>
  return
}

// -----

func.func @attention_kv(%q: tensor<?x14x64xf32>, %k: tensor<?x2x64xf32>, %v: tensor<?x2x128xf32>) {
  // expected-error @+1 {{'swz.attention' op k and v shapes differ in dim 2: 'tensor<?x2x64xf32>' vs 'tensor<?x2x128xf32>'}}
  %0 = swz.attention %q, %k, %v {scale = 0.125 : f32} : tensor<?x14x64xf32>, tensor<?x2x64xf32>, tensor<?x2x128xf32> -> tensor<?x14x64xf32>
  return
}

// -----

func.func @attention_headdim(%q: tensor<?x14x128xf32>, %k: tensor<?x2x64xf32>, %v: tensor<?x2x64xf32>) {
  // expected-error @+1 {{'swz.attention' op q head dim (128) must equal k head dim (64)}}
  %0 = swz.attention %q, %k, %v {scale = 0.125 : f32} : tensor<?x14x128xf32>, tensor<?x2x64xf32>, tensor<?x2x64xf32> -> tensor<?x14x128xf32>
  return
}

// -----

// expected-note @+1 {{prior use here}}
func.func @swiglu_types(%g: tensor<?x1536xf32>, %u: tensor<?x1024xf32>) {
  // expected-error @+1 {{use of value '%u' expects different type than prior uses: 'tensor<?x1536xf32>' vs 'tensor<?x1024xf32>'}}
  %0 = swz.swiglu %g, %u : tensor<?x1536xf32>
  return
}

// -----

func.func @argmax_rows(%l: tensor<2x100xf32>) {
  // expected-error @+1 {{'swz.argmax' op result dim 0 (T) (3) must equal logits dim 0 (T) (2)}}
  %0 = swz.argmax %l : tensor<2x100xf32> -> tensor<3xi32>
  return
}

// -----

// expected-error @+1 {{'swz.gemm_tile' op tile M must be a positive multiple of 16 (mma M), got 100}}
swz.gemm_tile @m : f16 tile(100, 128, 64) warps(4) stages(3)

// -----

// expected-error @+1 {{'swz.gemm_tile' op tile K must be a positive multiple of 16 (mma K), got 40}}
swz.gemm_tile @k : f16 tile(128, 128, 40) warps(4) stages(3)

// -----

// expected-error @+1 {{'swz.gemm_tile' op element_type must be f16 or bf16 (the 16-bit inputs of mma.m16n8k16), got 'f32'}}
swz.gemm_tile @f32 : f32

// -----

// expected-error @+1 {{'swz.gemm_tile' op warps must be a power of two in [1, 16], got 3}}
swz.gemm_tile @w : f16 tile(128, 128, 64) warps(3) stages(3)

// -----

// expected-error @+1 {{'swz.gemm_tile' op a scheduled tile needs both warps(...) and stages(...)}}
swz.gemm_tile @nostages : f16 tile(128, 128, 64) warps(4)

// -----

// expected-error @+1 {{'swz.gemm_tile' op the 16x8 tile has 1 m16n8 fragments, which do not split evenly over 2 warps}}
swz.gemm_tile @frag : f16 tile(16, 8, 64) warps(2) stages(1)

// -----

// Swizzle<3,3,3> moves 16-byte chunks within 64-element (128-byte) blocks.
// expected-error @+1 {{'swz.gemm_tile' op smem layout #swz.swizzle<3, 3, 3> permutes columns in blocks of 64 elements, which does not divide the row length tile K = 32}}
swz.gemm_tile @span : f16 tile(128, 128, 32) warps(4) stages(3) smem(#swz.swizzle<3, 3, 3>)

// -----

// expected-error @+1 {{'swz.gemm_tile' op conflict_free is a claim about a scheduled tile; set tile(M, N, K) and smem(...) first}}
swz.gemm_tile @claim : f16 {conflict_free}

// -----

// expected-error @+1 {{'swz.attention_tile' op block_q (64) must be a positive multiple of 16 x warps (128): each warp owns 16 query rows}}
swz.attention_tile @bq : f16 head_dim(64) block(64, 64) warps(8) stages(2)

// -----

// expected-error @+1 {{'swz.attention_tile' op head_dim must be a multiple of 16 in [16, 256], got 72}}
swz.attention_tile @hd : f16 head_dim(72)

// -----

// expected-error @+1 {{'swz.attention_tile' op warps, stages, smem and keys_in_flight need block(Q, KV) as well}}
swz.attention_tile @partial : f16 head_dim(64) warps(4)

// -----

func.func @bias_width(%x: tensor<?x896xf32>, %w: tensor<128x896xf32>, %b: tensor<64xf32>) -> tensor<?x128xf32> {
  // expected-error @+1 {{'swz.matmul' op bias dim 0 (64) must equal weight dim 0 (N) (128)}}
  %y = swz.matmul %x, %w bias(%b : tensor<64xf32>) {weight_type = #swz.quant<q8_0>}
      : tensor<?x896xf32>, tensor<128x896xf32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

func.func @residual_type(%x: tensor<?x896xf32>, %w: tensor<128x896xf32>, %r: tensor<?x64xf32>) -> tensor<?x128xf32> {
  // expected-error @+1 {{'swz.matmul' op residual type 'tensor<?x64xf32>' differs from the result type 'tensor<?x128xf32>'}}
  %y = swz.matmul %x, %w residual(%r : tensor<?x64xf32>) {weight_type = #swz.quant<q8_0>}
      : tensor<?x896xf32>, tensor<128x896xf32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

func.func @kv_cache_rows(%q: tensor<5x14x64xf32>, %k: tensor<9x2x64xf32>, %v: tensor<9x2x64xf32>) -> tensor<5x14x64xf32> {
  // expected-error @+1 {{'swz.attention' op k dim 0 (new rows S) (9) must equal q dim 0 (T) (5)}}
  %o = swz.attention %q, %k, %v {scale = 0.125 : f32, causal, layer = 0 : i32}
      : tensor<5x14x64xf32>, tensor<9x2x64xf32>, tensor<9x2x64xf32> -> tensor<5x14x64xf32>
  return %o : tensor<5x14x64xf32>
}

// -----

func.func @kv_cache_causal(%q: tensor<?x14x64xf32>, %k: tensor<?x2x64xf32>, %v: tensor<?x2x64xf32>) -> tensor<?x14x64xf32> {
  // expected-error @+1 {{'swz.attention' op attention over layer 2's KV cache must be causal}}
  %o = swz.attention %q, %k, %v {scale = 0.125 : f32, layer = 2 : i32}
      : tensor<?x14x64xf32>, tensor<?x2x64xf32>, tensor<?x2x64xf32> -> tensor<?x14x64xf32>
  return %o : tensor<?x14x64xf32>
}

// -----

func.func @rope_k_partial(%q: tensor<?x14x64xf32>, %k: tensor<?x2x64xf32>, %v: tensor<?x2x64xf32>, %p: tensor<?xi32>) -> tensor<?x14x64xf32> {
  // expected-error @+1 {{'swz.attention' op rope_k needs positions, k_rope_mode, k_rope_theta and k_rope_dim together}}
  %o = swz.attention %q, %k, %v rope_k(%p : tensor<?xi32>) {scale = 0.125 : f32, causal, layer = 0 : i32}
      : tensor<?x14x64xf32>, tensor<?x2x64xf32>, tensor<?x2x64xf32> -> tensor<?x14x64xf32>
  return %o : tensor<?x14x64xf32>
}

// -----

func.func @rope_k_without_cache(%q: tensor<?x14x64xf32>, %k: tensor<?x2x64xf32>, %v: tensor<?x2x64xf32>, %p: tensor<?xi32>) -> tensor<?x14x64xf32> {
  // expected-error @+1 {{'swz.attention' op rope_k (RoPE fused into the KV write) needs a KV-cache layer}}
  %o = swz.attention %q, %k, %v rope_k(%p : tensor<?xi32>) {scale = 0.125 : f32, causal,
      k_rope_mode = #swz.rope_mode<neox>, k_rope_theta = 1.0e+06 : f32, k_rope_dim = 64 : i32}
      : tensor<?x14x64xf32>, tensor<?x2x64xf32>, tensor<?x2x64xf32> -> tensor<?x14x64xf32>
  return %o : tensor<?x14x64xf32>
}

// -----

func.func @rope_k_dim(%q: tensor<?x14x64xf32>, %k: tensor<?x2x64xf32>, %v: tensor<?x2x64xf32>, %p: tensor<?xi32>) -> tensor<?x14x64xf32> {
  // expected-error @+1 {{'swz.attention' op k_rope_dim (96) must be even, positive and at most the head dim (64)}}
  %o = swz.attention %q, %k, %v rope_k(%p : tensor<?xi32>) {scale = 0.125 : f32, causal, layer = 1 : i32,
      k_rope_mode = #swz.rope_mode<neox>, k_rope_theta = 1.0e+06 : f32, k_rope_dim = 96 : i32}
      : tensor<?x14x64xf32>, tensor<?x2x64xf32>, tensor<?x2x64xf32> -> tensor<?x14x64xf32>
  return %o : tensor<?x14x64xf32>
}

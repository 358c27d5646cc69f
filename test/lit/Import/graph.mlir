// Import of the runtime's model graph (models::build_graph, docs/graph.md) into the
// swz dialect: `swizzlec compile --emit-mlir=import` on small random-weight models of
// each architecture (swizzlec synth), then the fusion and outlining stages.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %swizzlec synth --preset qwen2.5-coder-0.5b --type q8_0 --n-layer 1 --n-embd 128 --n-head 4 --n-head-kv 2 --head-dim 32 --n-ff 256 --n-vocab 512 -o %t/qwen2.gguf
// RUN: %swizzlec compile %t/qwen2.gguf --target sm_90 --emit-mlir=import | FileCheck %s --check-prefix=QWEN2
// RUN: %swizzlec synth --preset qwen3-0.6b --type q4_k --n-layer 1 --n-embd 256 --n-head 4 --n-head-kv 2 --head-dim 64 --n-ff 512 --n-vocab 512 -o %t/qwen3.gguf
// RUN: %swizzlec compile %t/qwen3.gguf --target sm_90 --emit-mlir=import | FileCheck %s --check-prefix=QWEN3
// RUN: %swizzlec synth --preset smollm2-135m --type q4_1 --n-layer 2 --n-embd 128 --n-head 4 --n-head-kv 2 --head-dim 32 --n-ff 256 --n-vocab 512 -o %t/llama.gguf
// RUN: %swizzlec compile %t/llama.gguf --target sm_90 --emit-mlir=import | FileCheck %s --check-prefix=LLAMA
// RUN: not %swizzlec compile %t/llama.gguf --target cpu --emit-mlir=import 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not %swizzlec compile %t/llama.gguf --target sm_90 --emit-mlir=lower 2>&1 | FileCheck %s --check-prefix=STAGE

// qwen2: q/k/v biases become the matmul's bias operand; neox RoPE on [T, heads, head_dim].
// QWEN2: func.func @forward(%arg0: tensor<?xi32> {swz.input = "tokens"}, %arg1: tensor<?xi32> {swz.input = "positions"}, %arg2: tensor<512x128xf32> {swz.weight = "token_embd.weight"}
// QWEN2: swz.embedding %arg2, %arg0 {swz.graph_ops = [0], weight_type = #swz.quant<q8_0>}
// QWEN2: swz.matmul %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<128xf32>) {swz.graph_ops = [2], weight_type = #swz.quant<q8_0>} : tensor<?x128xf32>, tensor<128x128xf32> -> tensor<?x128xf32>
// QWEN2: tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2]] output_shape [%{{.*}}, 4, 32] : tensor<?x128xf32> into tensor<?x4x32xf32>
// QWEN2: swz.rope %{{.*}}, %arg1 {mode = #swz.rope_mode<neox>, rotary_dim = 32 : i32, swz.graph_ops = [5], theta = 1.000000e+06 : f32} : tensor<?x4x32xf32>
// QWEN2: swz.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, layer = 0 : i32, scale = 0.176776692 : f32, swz.graph_ops = [7]} : tensor<?x4x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32> -> tensor<?x4x32xf32>
// QWEN2: swz.swiglu
// The LM head (tied to token_embd) runs on the output rows only.
// QWEN2: swz.matmul %{{.*}}, %arg2 {swz.graph_ops = [17], swz.rows = "output", weight_type = #swz.quant<q8_0>} : tensor<?x128xf32>, tensor<512x128xf32> -> tensor<?x512xf32>
// QWEN2: return

// qwen3: q/k head_norm is an rms_norm over each head ([T, heads, head_dim], gamma [head_dim]).
// QWEN3: swz.matmul %{{.*}}, %{{.*}} {swz.graph_ops = [2], weight_type = #swz.quant<q4_k>} : tensor<?x256xf32>, tensor<256x256xf32> -> tensor<?x256xf32>
// QWEN3: swz.rms_norm %{{.*}}, %{{.*}} {epsilon = {{.*}}, swz.graph_ops = [5]} : tensor<?x4x64xf32>, tensor<64xf32>
// QWEN3: swz.rope

// llama (SmolLM2): normal RoPE, two layers → two KV-cache layers.
// LLAMA: swz.rope %{{.*}}, %arg1 {mode = #swz.rope_mode<normal>
// LLAMA: swz.attention {{.*}}layer = 0 : i32
// LLAMA: swz.attention {{.*}}layer = 1 : i32

// CPU: error: --emit-mlir needs a GPU target
// STAGE: error: unknown --emit-mlir stage 'lower' (import, fuse or outline)

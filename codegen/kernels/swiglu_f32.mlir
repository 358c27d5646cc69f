// SwiGLU (Shazeer 2020): out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).
//
// Elementwise over n elements: launch with grid (ceil(n / 64)), block 64. The
// gpu.module carries a SPIR-V target environment (Vulkan 1.1 / SPIR-V 1.3,
// Shader), so convert-gpu-to-spirv lowers it for the spirv target. Bindings
// (descriptor set 0): gate, up, out are StorageBuffer runtime arrays of f32 at
// bindings 0, 1, 2; the scalar n is a 4-byte StorageBuffer at binding 3.
module attributes {gpu.container_module} {
  gpu.module @swz_swiglu attributes {
      spirv.target_env = #spirv.target_env<#spirv.vce<v1.3, [Shader],
          [SPV_KHR_storage_buffer_storage_class]>, #spirv.resource_limits<>>} {
    gpu.func @swiglu_f32(%gate: memref<?xf32>, %up: memref<?xf32>,
                         %out: memref<?xf32>, %n: i32) kernel
        attributes {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>,
                    swz.grid = "ceil(n/64), 1, 1"} {
      %bid = gpu.block_id x
      %tid = gpu.thread_id x
      %bdim = gpu.block_dim x
      %base = arith.muli %bid, %bdim : index
      %i = arith.addi %base, %tid : index
      %ii = arith.index_cast %i : index to i32
      %inb = arith.cmpi slt, %ii, %n : i32
      scf.if %inb {
        %g = memref.load %gate[%i] : memref<?xf32>
        %u = memref.load %up[%i] : memref<?xf32>
        %one = arith.constant 1.0 : f32
        %ng = arith.negf %g : f32
        %e = math.exp %ng : f32
        %den = arith.addf %one, %e : f32
        %s = arith.divf %g, %den : f32
        %r = arith.mulf %s, %u : f32
        memref.store %r, %out[%i] : memref<?xf32>
      }
      gpu.return
    }
  }
}

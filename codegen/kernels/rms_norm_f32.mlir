// RMSNorm (Zhang & Sennrich 2019): y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * gamma.
//
// x, y: [rows, d] row-major f32, passed flat (memref<?xf32>: the SPIR-V lowering
// takes 1-D dynamic buffers) with the row length d as an i32 scalar; gamma: [d]
// f32; eps: f32. Any d >= 1; y may alias x.
// Launch: grid (rows, 1, 1), block 256 (one workgroup per row). Each thread sums
// the squares of columns tid, tid + 256, ...; the 256 partial sums meet in
// workgroup memory and a tree of 8 halving steps (barrier after each) leaves the
// row total in partials[0]; every thread then writes its columns.
// Bindings for SPIR-V (set 0): x, gamma, y, d, eps at 0..4. The same source
// lowers to PTX (`.shared` array) and, through swz-spirv-workgroup-memory, to
// SPIR-V (a Workgroup-storage-class variable); no subgroup operations, so the
// result does not depend on the device's subgroup size (lavapipe's is 8).
module attributes {gpu.container_module} {
  gpu.module @swz_rms_norm attributes {
      spirv.target_env = #spirv.target_env<#spirv.vce<v1.3, [Shader],
          [SPV_KHR_storage_buffer_storage_class]>, #spirv.resource_limits<>>} {
    memref.global "private" @partials : memref<256xf32, #gpu.address_space<workgroup>>

    gpu.func @rms_norm_f32(%x: memref<?xf32>, %gamma: memref<?xf32>, %y: memref<?xf32>,
                           %d: i32, %eps: f32) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "rows, 1, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %zero = arith.constant 0.0 : f32
      %partials = memref.get_global @partials : memref<256xf32, #gpu.address_space<workgroup>>
      %row = gpu.block_id x
      %tid = gpu.thread_id x
      %D = arith.index_cast %d : i32 to index
      %base = arith.muli %row, %D : index
      %partial = scf.for %i = %tid to %D step %c256 iter_args(%acc = %zero) -> (f32) {
        %k = arith.addi %base, %i : index
        %v = memref.load %x[%k] : memref<?xf32>
        %acc2 = math.fma %v, %v, %acc : f32
        scf.yield %acc2 : f32
      }
      memref.store %partial, %partials[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      // s = 128, 64, ..., 1: thread t < s adds partials[t + s] into partials[t].
      %s_end = scf.for %step = %c0 to %c8 step %c1 iter_args(%s = %c128) -> (index) {
        %active = arith.cmpi ult, %tid, %s : index
        scf.if %active {
          %o = arith.addi %tid, %s : index
          %a = memref.load %partials[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
          %b = memref.load %partials[%o] : memref<256xf32, #gpu.address_space<workgroup>>
          %ab = arith.addf %a, %b : f32
          memref.store %ab, %partials[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
        }
        gpu.barrier
        %s2 = arith.divui %s, %c2 : index
        scf.yield %s2 : index
      }
      %total = memref.load %partials[%c0] : memref<256xf32, #gpu.address_space<workgroup>>
      %Df = arith.uitofp %d : i32 to f32
      %mean = arith.divf %total, %Df : f32
      %meps = arith.addf %mean, %eps : f32
      // PTX: libdevice's __nv_rsqrtf, linked and inlined when the NVVM target finds
      // the CUDA toolkit (CUDA_ROOT): rsqrt.approx.f32, max relative error 2^-22.9
      // per the PTX ISA. SPIR-V: GLSL.std.450 InverseSqrt.
      %inv = math.rsqrt %meps : f32
      scf.for %i = %tid to %D step %c256 {
        %k = arith.addi %base, %i : index
        %v = memref.load %x[%k] : memref<?xf32>
        %g = memref.load %gamma[%i] : memref<?xf32>
        %n = arith.mulf %v, %inv : f32
        %r = arith.mulf %n, %g : f32
        memref.store %r, %y[%k] : memref<?xf32>
      }
      gpu.return
    }
  }
}

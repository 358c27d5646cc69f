// RMSNorm (Zhang & Sennrich 2019): y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * gamma.
//
// x, y: [rows, d] row-major f32, passed flat (memref<?xf32>: the SPIR-V lowering
// takes 1-D dynamic buffers) with the row length d as an i32 scalar; gamma: [d]
// f32; eps: f32. Any d >= 1; y may alias x.
// Launch: grid (rows, 1, 1), block 256 (one workgroup per row). Each thread sums
// the squares of columns tid, tid + 256, ... (in that order, loads four at a time); the 256 partial sums meet in
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
      %c512 = arith.constant 512 : index
      %c768 = arith.constant 768 : index
      %c1024 = arith.constant 1024 : index
      %zero = arith.constant 0.0 : f32
      %partials = memref.get_global @partials : memref<256xf32, #gpu.address_space<workgroup>>
      %row = gpu.block_id x
      %tid = gpu.thread_id x
      %D = arith.index_cast %d : i32 to index
      %base = arith.muli %row, %D : index
      // Columns tid, tid + 256, ... in order, four an iteration: their loads are
      // independent and in flight together (one column an iteration waited on each
      // load in turn). Columns past d read column i (valid) and add 0.
      %partial = scf.for %i = %tid to %D step %c1024 iter_args(%acc = %zero) -> (f32) {
        %k0 = arith.addi %base, %i : index
        %i1 = arith.addi %i, %c256 : index
        %in1 = arith.cmpi ult, %i1, %D : index
        %ic1 = arith.select %in1, %i1, %i : index
        %k1 = arith.addi %base, %ic1 : index
        %i2 = arith.addi %i, %c512 : index
        %in2 = arith.cmpi ult, %i2, %D : index
        %ic2 = arith.select %in2, %i2, %i : index
        %k2 = arith.addi %base, %ic2 : index
        %i3 = arith.addi %i, %c768 : index
        %in3 = arith.cmpi ult, %i3, %D : index
        %ic3 = arith.select %in3, %i3, %i : index
        %k3 = arith.addi %base, %ic3 : index
        %l0 = memref.load %x[%k0] : memref<?xf32>
        %l1 = memref.load %x[%k1] : memref<?xf32>
        %l2 = memref.load %x[%k2] : memref<?xf32>
        %l3 = memref.load %x[%k3] : memref<?xf32>
        %v1 = arith.select %in1, %l1, %zero : f32
        %v2 = arith.select %in2, %l2, %zero : f32
        %v3 = arith.select %in3, %l3, %zero : f32
        %s0 = math.fma %l0, %l0, %acc : f32
        %s1 = math.fma %v1, %v1, %s0 : f32
        %s2 = math.fma %v2, %v2, %s1 : f32
        %s3 = math.fma %v3, %v3, %s2 : f32
        scf.yield %s3 : f32
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
      scf.for %i = %tid to %D step %c1024 {
        %k0 = arith.addi %base, %i : index
        %i1 = arith.addi %i, %c256 : index
        %in1 = arith.cmpi ult, %i1, %D : index
        %ic1 = arith.select %in1, %i1, %i : index
        %k1 = arith.addi %base, %ic1 : index
        %i2 = arith.addi %i, %c512 : index
        %in2 = arith.cmpi ult, %i2, %D : index
        %ic2 = arith.select %in2, %i2, %i : index
        %k2 = arith.addi %base, %ic2 : index
        %i3 = arith.addi %i, %c768 : index
        %in3 = arith.cmpi ult, %i3, %D : index
        %ic3 = arith.select %in3, %i3, %i : index
        %k3 = arith.addi %base, %ic3 : index
        %ic0 = arith.addi %i, %c0 : index
        %v0 = memref.load %x[%k0] : memref<?xf32>
        %g0 = memref.load %gamma[%ic0] : memref<?xf32>
        %v1 = memref.load %x[%k1] : memref<?xf32>
        %g1 = memref.load %gamma[%ic1] : memref<?xf32>
        %v2 = memref.load %x[%k2] : memref<?xf32>
        %g2 = memref.load %gamma[%ic2] : memref<?xf32>
        %v3 = memref.load %x[%k3] : memref<?xf32>
        %g3 = memref.load %gamma[%ic3] : memref<?xf32>
        %n0 = arith.mulf %v0, %inv : f32
        %r0 = arith.mulf %n0, %g0 : f32
        %n1 = arith.mulf %v1, %inv : f32
        %r1 = arith.mulf %n1, %g1 : f32
        %n2 = arith.mulf %v2, %inv : f32
        %r2 = arith.mulf %n2, %g2 : f32
        %n3 = arith.mulf %v3, %inv : f32
        %r3 = arith.mulf %n3, %g3 : f32
        memref.store %r0, %y[%k0] : memref<?xf32>
        scf.if %in1 {
          memref.store %r1, %y[%k1] : memref<?xf32>
        }
        scf.if %in2 {
          memref.store %r2, %y[%k2] : memref<?xf32>
        }
        scf.if %in3 {
          memref.store %r3, %y[%k3] : memref<?xf32>
        }
      }
      gpu.return
    }
  }
}

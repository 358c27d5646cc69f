// RMSNorm (Zhang & Sennrich 2019): y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * gamma.
//
// One warp (32 threads) per row: launch with grid (rows), block 32. Each lane
// sums the squares of columns lane, lane + 32, ...; a butterfly of five
// shuffle-xor steps gives every lane the row total; each lane then writes its
// columns. x, y: [rows, D] row-major f32; gamma: [D] f32. Any D >= 1.
module attributes {gpu.container_module} {
  gpu.module @swz_rms_norm {
    gpu.func @rms_norm_f32(%x: memref<?x?xf32>, %gamma: memref<?xf32>,
                           %y: memref<?x?xf32>, %eps: f32) kernel
        attributes {known_block_size = array<i32: 32, 1, 1>, swz.grid = "rows, 1, 1"} {
      %c1 = arith.constant 1 : index
      %c32 = arith.constant 32 : index
      %w32 = arith.constant 32 : i32
      %zero = arith.constant 0.0 : f32
      %row = gpu.block_id x
      %lane = gpu.thread_id x
      %D = memref.dim %x, %c1 : memref<?x?xf32>
      %partial = scf.for %i = %lane to %D step %c32 iter_args(%acc = %zero) -> (f32) {
        %v = memref.load %x[%row, %i] : memref<?x?xf32>
        %acc2 = math.fma %v, %v, %acc : f32
        scf.yield %acc2 : f32
      }
      %o16 = arith.constant 16 : i32
      %o8 = arith.constant 8 : i32
      %o4 = arith.constant 4 : i32
      %o2 = arith.constant 2 : i32
      %o1 = arith.constant 1 : i32
      %s16, %v16 = gpu.shuffle xor %partial, %o16, %w32 : f32
      %t16 = arith.addf %partial, %s16 : f32
      %s8, %v8 = gpu.shuffle xor %t16, %o8, %w32 : f32
      %t8 = arith.addf %t16, %s8 : f32
      %s4, %v4 = gpu.shuffle xor %t8, %o4, %w32 : f32
      %t4 = arith.addf %t8, %s4 : f32
      %s2, %v2 = gpu.shuffle xor %t4, %o2, %w32 : f32
      %t2 = arith.addf %t4, %s2 : f32
      %s1, %v1 = gpu.shuffle xor %t2, %o1, %w32 : f32
      %total = arith.addf %t2, %s1 : f32
      %Di = arith.index_cast %D : index to i32
      %Df = arith.uitofp %Di : i32 to f32
      %mean = arith.divf %total, %Df : f32
      %meps = arith.addf %mean, %eps : f32
      // Lowers to libdevice's __nv_rsqrtf, which the NVVM target links (and
      // inlines: rsqrt.approx.f32, max relative error 2^-22.9 per the PTX ISA) when
      // it finds the CUDA toolkit (CUDA_ROOT); without it the PTX would keep an
      // unresolved .extern, which the lit test rejects.
      %inv = math.rsqrt %meps : f32
      scf.for %i = %lane to %D step %c32 {
        %v = memref.load %x[%row, %i] : memref<?x?xf32>
        %g = memref.load %gamma[%i] : memref<?xf32>
        %n = arith.mulf %v, %inv : f32
        %r = arith.mulf %n, %g : f32
        memref.store %r, %y[%row, %i] : memref<?x?xf32>
      }
      gpu.return
    }
  }
}

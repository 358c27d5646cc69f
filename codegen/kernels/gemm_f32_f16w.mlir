// Portable tiled prefill GEMM (no tensor cores; the spirv target, e.g. Mesa
// lavapipe or any Vulkan 1.1 device): y[T, N] (f32) = x[T, K] (f32) · W[N, K]ᵀ
// (f16) (+ bias[N]), f32 accumulation. W is the dequant_<type>_f16 scratch (or a
// GGUF F16 tensor as is), K contiguous (ggml order). Any T, N >= 1, K >= 1.
//
// A workgroup of 16 x 16 = 256 invocations computes a 64x64 tile of y at
// (workgroup id y * 64, workgroup id x * 64); invocation (tx, ty) = (id % 16, id / 16)
// owns the 4x4 outputs at rows ty + 16 i and columns tx + 16 j (i, j < 4). The K
// loop moves 16-wide k slices of x and W through workgroup memory (f32, k-major:
// xs[k][m], ws[k][n], 2 x 4 KiB; W converted from f16 on the way in): each
// invocation loads 4 elements of each slice (16 consecutive invocations read 16
// consecutive k of one row), zero past T, N or K; after a barrier every
// invocation runs 16 rank-1 updates of its 4x4 block with vector<4xf32> FMAs.
// Workgroup memory is a memref.alloc in memory space 3 (what MLIR 19's
// convert-gpu-to-spirv turns into a Workgroup-class spirv.GlobalVariable; it
// lowers neither workgroup attributions nor workgroup memref.globals to SPIR-V).
//
// Launch record: workgroup (256, 1, 1), grid (ceil(N/64), ceil(T/64), 1).
// Arguments (storage buffers at set 0, binding = argument index): x: memref<?xf32>
// [T*K], w: memref<?xf16> [N*K], y: memref<?xf32> [T*N], bias: memref<?xf32> [N]
// (read only if has_bias != 0; bind any buffer otherwise), T, N, K, has_bias: i32.
module attributes {gpu.container_module} {
  gpu.module @swz_gemm_f32_f16w attributes {
      swz.targets = "spirv",
      spirv.target_env = #spirv.target_env<#spirv.vce<v1.3,
          [Shader, Float16, StorageBuffer16BitAccess],
          [SPV_KHR_storage_buffer_storage_class, SPV_KHR_16bit_storage]>,
          #spirv.resource_limits<>>} {
    gpu.func @gemm_f32_f16w(%x: memref<?xf32>, %w: memref<?xf16>, %y: memref<?xf32>,
                            %bias: memref<?xf32>, %t_i32: i32, %n_i32: i32, %k_i32: i32,
                            %has_bias: i32) kernel
        attributes {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "ceil(N/64), ceil(T/64), 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c48 = arith.constant 48 : index
      %c64 = arith.constant 64 : index
      %c256 = arith.constant 256 : index
      %zero_i32 = arith.constant 0 : i32
      %fz = arith.constant 0.0 : f32
      %vz = arith.constant dense<0.0> : vector<4xf32>
      %xs = memref.alloc() : memref<1024xf32, 3>
      %ws = memref.alloc() : memref<1024xf32, 3>
      %tid = gpu.thread_id x
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %T = arith.index_cast %t_i32 : i32 to index
      %N = arith.index_cast %n_i32 : i32 to index
      %K = arith.index_cast %k_i32 : i32 to index
      %row0 = arith.muli %by, %c64 : index
      %col0 = arith.muli %bx, %c64 : index
      %tx = arith.remui %tid, %c16 : index
      %ty = arith.divui %tid, %c16 : index
      // Loader role: element tid + 256 i of a 64 x 16 slice is row (tid / 16) + 16 i,
      // k = tid % 16.
      %ld_k = arith.remui %tid, %c16 : index
      %ld_r = arith.divui %tid, %c16 : index
      %Kp = arith.addi %K, %c16 : index
      %Kp1 = arith.subi %Kp, %c1 : index
      %nk = arith.divui %Kp1, %c16 : index
      %acc:4 = scf.for %kt = %c0 to %nk step %c1
          iter_args(%a0 = %vz, %a1 = %vz, %a2 = %vz, %a3 = %vz)
          -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>) {
        %k0 = arith.muli %kt, %c16 : index
        %gk = arith.addi %k0, %ld_k : index
        %kin = arith.cmpi ult, %gk, %K : index
        scf.for %i = %c0 to %c4 step %c1 {
          %i16 = arith.muli %i, %c16 : index
          %r = arith.addi %ld_r, %i16 : index
          %sidx0 = arith.muli %ld_k, %c64 : index
          %sidx = arith.addi %sidx0, %r : index
          %xr = arith.addi %row0, %r : index
          %xin = arith.cmpi ult, %xr, %T : index
          %xok = arith.andi %xin, %kin : i1
          %xv = scf.if %xok -> (f32) {
            %o0 = arith.muli %xr, %K : index
            %o = arith.addi %o0, %gk : index
            %v = memref.load %x[%o] : memref<?xf32>
            scf.yield %v : f32
          } else {
            scf.yield %fz : f32
          }
          memref.store %xv, %xs[%sidx] : memref<1024xf32, 3>
          %wr = arith.addi %col0, %r : index
          %win = arith.cmpi ult, %wr, %N : index
          %wok = arith.andi %win, %kin : i1
          %wv = scf.if %wok -> (f32) {
            %o0 = arith.muli %wr, %K : index
            %o = arith.addi %o0, %gk : index
            %h = memref.load %w[%o] : memref<?xf16>
            %v = arith.extf %h : f16 to f32
            scf.yield %v : f32
          } else {
            scf.yield %fz : f32
          }
          memref.store %wv, %ws[%sidx] : memref<1024xf32, 3>
        }
        gpu.barrier
        %r:4 = scf.for %kk = %c0 to %c16 step %c1
            iter_args(%b0 = %a0, %b1 = %a1, %b2 = %a2, %b3 = %a3)
            -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>) {
          %kb = arith.muli %kk, %c64 : index
          %xb = arith.addi %kb, %ty : index
          %wb = arith.addi %kb, %tx : index
          %wi0 = arith.addi %wb, %c0 : index
          %wv0 = memref.load %ws[%wi0] : memref<1024xf32, 3>
          %wi1 = arith.addi %wb, %c16 : index
          %wv1 = memref.load %ws[%wi1] : memref<1024xf32, 3>
          %wi2 = arith.addi %wb, %c32 : index
          %wv2 = memref.load %ws[%wi2] : memref<1024xf32, 3>
          %wi3 = arith.addi %wb, %c48 : index
          %wv3 = memref.load %ws[%wi3] : memref<1024xf32, 3>
          %wvec0 = vector.insert %wv0, %vz [0] : f32 into vector<4xf32>
          %wvec1 = vector.insert %wv1, %wvec0 [1] : f32 into vector<4xf32>
          %wvec2 = vector.insert %wv2, %wvec1 [2] : f32 into vector<4xf32>
          %wvec3 = vector.insert %wv3, %wvec2 [3] : f32 into vector<4xf32>
          %xi0 = arith.addi %xb, %c0 : index
          %xv0 = memref.load %xs[%xi0] : memref<1024xf32, 3>
          %xsp0 = vector.broadcast %xv0 : f32 to vector<4xf32>
          %n0 = vector.fma %xsp0, %wvec3, %b0 : vector<4xf32>
          %xi1 = arith.addi %xb, %c16 : index
          %xv1 = memref.load %xs[%xi1] : memref<1024xf32, 3>
          %xsp1 = vector.broadcast %xv1 : f32 to vector<4xf32>
          %n1 = vector.fma %xsp1, %wvec3, %b1 : vector<4xf32>
          %xi2 = arith.addi %xb, %c32 : index
          %xv2 = memref.load %xs[%xi2] : memref<1024xf32, 3>
          %xsp2 = vector.broadcast %xv2 : f32 to vector<4xf32>
          %n2 = vector.fma %xsp2, %wvec3, %b2 : vector<4xf32>
          %xi3 = arith.addi %xb, %c48 : index
          %xv3 = memref.load %xs[%xi3] : memref<1024xf32, 3>
          %xsp3 = vector.broadcast %xv3 : f32 to vector<4xf32>
          %n3 = vector.fma %xsp3, %wvec3, %b3 : vector<4xf32>
          scf.yield %n0, %n1, %n2, %n3 : vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>
        }
        // Every invocation is done with this slice before the next one overwrites it.
        gpu.barrier
        scf.yield %r#0, %r#1, %r#2, %r#3 : vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>
      }
      %use_bias = arith.cmpi ne, %has_bias, %zero_i32 : i32
      %ctx = arith.addi %col0, %tx : index
      %rty = arith.addi %row0, %ty : index
      %ycol0 = arith.addi %ctx, %c0 : index
      %cin0 = arith.cmpi ult, %ycol0, %N : index
      %bok0 = arith.andi %cin0, %use_bias : i1
      %bv0 = scf.if %bok0 -> (f32) {
        %v = memref.load %bias[%ycol0] : memref<?xf32>
        scf.yield %v : f32
      } else {
        scf.yield %fz : f32
      }
      %ycol1 = arith.addi %ctx, %c16 : index
      %cin1 = arith.cmpi ult, %ycol1, %N : index
      %bok1 = arith.andi %cin1, %use_bias : i1
      %bv1 = scf.if %bok1 -> (f32) {
        %v = memref.load %bias[%ycol1] : memref<?xf32>
        scf.yield %v : f32
      } else {
        scf.yield %fz : f32
      }
      %ycol2 = arith.addi %ctx, %c32 : index
      %cin2 = arith.cmpi ult, %ycol2, %N : index
      %bok2 = arith.andi %cin2, %use_bias : i1
      %bv2 = scf.if %bok2 -> (f32) {
        %v = memref.load %bias[%ycol2] : memref<?xf32>
        scf.yield %v : f32
      } else {
        scf.yield %fz : f32
      }
      %ycol3 = arith.addi %ctx, %c48 : index
      %cin3 = arith.cmpi ult, %ycol3, %N : index
      %bok3 = arith.andi %cin3, %use_bias : i1
      %bv3 = scf.if %bok3 -> (f32) {
        %v = memref.load %bias[%ycol3] : memref<?xf32>
        scf.yield %v : f32
      } else {
        scf.yield %fz : f32
      }
      %yrow_0 = arith.addi %rty, %c0 : index
      %rin0 = arith.cmpi ult, %yrow_0, %T : index
      %yrow0 = arith.muli %yrow_0, %N : index
      %v00 = vector.extract %acc#0[0] : f32 from vector<4xf32>
      %ok00 = arith.andi %rin0, %cin0 : i1
      scf.if %ok00 {
        %s = arith.addf %v00, %bv0 : f32
        %o = arith.addi %yrow0, %ycol0 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v01 = vector.extract %acc#0[1] : f32 from vector<4xf32>
      %ok01 = arith.andi %rin0, %cin1 : i1
      scf.if %ok01 {
        %s = arith.addf %v01, %bv1 : f32
        %o = arith.addi %yrow0, %ycol1 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v02 = vector.extract %acc#0[2] : f32 from vector<4xf32>
      %ok02 = arith.andi %rin0, %cin2 : i1
      scf.if %ok02 {
        %s = arith.addf %v02, %bv2 : f32
        %o = arith.addi %yrow0, %ycol2 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v03 = vector.extract %acc#0[3] : f32 from vector<4xf32>
      %ok03 = arith.andi %rin0, %cin3 : i1
      scf.if %ok03 {
        %s = arith.addf %v03, %bv3 : f32
        %o = arith.addi %yrow0, %ycol3 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %yrow_1 = arith.addi %rty, %c16 : index
      %rin1 = arith.cmpi ult, %yrow_1, %T : index
      %yrow1 = arith.muli %yrow_1, %N : index
      %v10 = vector.extract %acc#1[0] : f32 from vector<4xf32>
      %ok10 = arith.andi %rin1, %cin0 : i1
      scf.if %ok10 {
        %s = arith.addf %v10, %bv0 : f32
        %o = arith.addi %yrow1, %ycol0 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v11 = vector.extract %acc#1[1] : f32 from vector<4xf32>
      %ok11 = arith.andi %rin1, %cin1 : i1
      scf.if %ok11 {
        %s = arith.addf %v11, %bv1 : f32
        %o = arith.addi %yrow1, %ycol1 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v12 = vector.extract %acc#1[2] : f32 from vector<4xf32>
      %ok12 = arith.andi %rin1, %cin2 : i1
      scf.if %ok12 {
        %s = arith.addf %v12, %bv2 : f32
        %o = arith.addi %yrow1, %ycol2 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v13 = vector.extract %acc#1[3] : f32 from vector<4xf32>
      %ok13 = arith.andi %rin1, %cin3 : i1
      scf.if %ok13 {
        %s = arith.addf %v13, %bv3 : f32
        %o = arith.addi %yrow1, %ycol3 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %yrow_2 = arith.addi %rty, %c32 : index
      %rin2 = arith.cmpi ult, %yrow_2, %T : index
      %yrow2 = arith.muli %yrow_2, %N : index
      %v20 = vector.extract %acc#2[0] : f32 from vector<4xf32>
      %ok20 = arith.andi %rin2, %cin0 : i1
      scf.if %ok20 {
        %s = arith.addf %v20, %bv0 : f32
        %o = arith.addi %yrow2, %ycol0 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v21 = vector.extract %acc#2[1] : f32 from vector<4xf32>
      %ok21 = arith.andi %rin2, %cin1 : i1
      scf.if %ok21 {
        %s = arith.addf %v21, %bv1 : f32
        %o = arith.addi %yrow2, %ycol1 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v22 = vector.extract %acc#2[2] : f32 from vector<4xf32>
      %ok22 = arith.andi %rin2, %cin2 : i1
      scf.if %ok22 {
        %s = arith.addf %v22, %bv2 : f32
        %o = arith.addi %yrow2, %ycol2 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v23 = vector.extract %acc#2[3] : f32 from vector<4xf32>
      %ok23 = arith.andi %rin2, %cin3 : i1
      scf.if %ok23 {
        %s = arith.addf %v23, %bv3 : f32
        %o = arith.addi %yrow2, %ycol3 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %yrow_3 = arith.addi %rty, %c48 : index
      %rin3 = arith.cmpi ult, %yrow_3, %T : index
      %yrow3 = arith.muli %yrow_3, %N : index
      %v30 = vector.extract %acc#3[0] : f32 from vector<4xf32>
      %ok30 = arith.andi %rin3, %cin0 : i1
      scf.if %ok30 {
        %s = arith.addf %v30, %bv0 : f32
        %o = arith.addi %yrow3, %ycol0 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v31 = vector.extract %acc#3[1] : f32 from vector<4xf32>
      %ok31 = arith.andi %rin3, %cin1 : i1
      scf.if %ok31 {
        %s = arith.addf %v31, %bv1 : f32
        %o = arith.addi %yrow3, %ycol1 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v32 = vector.extract %acc#3[2] : f32 from vector<4xf32>
      %ok32 = arith.andi %rin3, %cin2 : i1
      scf.if %ok32 {
        %s = arith.addf %v32, %bv2 : f32
        %o = arith.addi %yrow3, %ycol2 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      %v33 = vector.extract %acc#3[3] : f32 from vector<4xf32>
      %ok33 = arith.andi %rin3, %cin3 : i1
      scf.if %ok33 {
        %s = arith.addf %v33, %bv3 : f32
        %o = arith.addi %yrow3, %ycol3 : index
        memref.store %s, %y[%o] : memref<?xf32>
      }
      gpu.return
    }
  }
}

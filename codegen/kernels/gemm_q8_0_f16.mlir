// Prefill GEMM with the Q8_0 weight dequantized straight into shared memory:
// y[T, N] (f32) = x[T, K] (f16) · W[N, K]ᵀ (+ bias[N]), W the GGUF Q8_0 tensor's raw
// bytes (block: d f16 little-endian, 32 x int8 q; w = d * q). No f16 copy of W in
// global memory: 34 bytes per 32 weights are read instead of 64.
//
// As gemm_f16.mlir (same schedule: 64x64x64 tiles, 4 warps, 3 stages, ldmatrix.x4 +
// mma.sync.m16n8k16 over Swizzle<3,3,3> shared memory, zero-filled edges, guarded
// stores, bias), except for the weight tile: instead of cp.async, thread tid forms
// 16-byte chunks tid + 128 i (i < 4) of the 64 x 64 tile itself (row n, 8 weights
// of one block: 2 bytes of d and 8 bytes of q, each f16(d * q) rounded from f32
// exactly as dequant_q8_0_f16 does) and stores them with one 16-byte vector store:
// 8 lanes fill one 128-byte row, the cp.async.16 pattern of the bank-conflict
// analysis. Those loads are synchronous; the x tile keeps its cp.async pipeline.
//
// Launch record: block (128, 1, 1), grid (ceil(N/64), ceil(T/64), 1), no dynamic
// shared memory (48 KiB static). Arguments: x: memref<?x?xf16> [T, K] (K % 32 == 0),
// w: memref<?xi8> (N * K / 32 blocks of 34 bytes), y: memref<?x?xf32> [T, N],
// bias: memref<?xf32> [N] (read only if has_bias != 0), has_bias: i32, n: i32 = N.
module attributes {gpu.container_module} {
  gpu.module @swz_gemm_q8_0_f16 {
    memref.global "private" @gemm_x : memref<192x64xf16, #gpu.address_space<workgroup>>
        {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}
    memref.global "private" @gemm_w : memref<192x64xf16, #gpu.address_space<workgroup>>
        {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}

    gpu.func @gemm_q8_0_f16(%x: memref<?x?xf16>, %w: memref<?xi8>, %y: memref<?x?xf32>,
                            %bias: memref<?xf32>, %has_bias: i32, %n_i32: i32) kernel
        attributes {known_block_size = array<i32: 128, 1, 1>,
                    swz.grid = "ceil(N/64), ceil(T/64), 1", swz.schedule = "gemm"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %c5 = arith.constant 5 : index
      %c6 = arith.constant 6 : index
      %c7 = arith.constant 7 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c63 = arith.constant 63 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %zero_i32 = arith.constant 0 : i32
      %zero = arith.constant dense<0.0> : vector<2x2xf32>
      %zero_b = arith.constant dense<0.0> : vector<2x2xf16>
      %sx = memref.get_global @gemm_x : memref<192x64xf16, #gpu.address_space<workgroup>>
      %sw = memref.get_global @gemm_w : memref<192x64xf16, #gpu.address_space<workgroup>>
      %tid = gpu.thread_id x
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %row0 = arith.muli %by, %c64 : index
      %col0 = arith.muli %bx, %c64 : index
      %T = memref.dim %x, %c0 : memref<?x?xf16>
      %K = memref.dim %x, %c1 : memref<?x?xf16>
      %N = arith.index_cast %n_i32 : i32 to index
      %c34 = arith.constant 34 : index
      %nblk = arith.divui %K, %c32 : index
      %wrow_bytes = arith.muli %nblk, %c34 : index
      %s8_16 = arith.constant 8 : i16
      %zero_v8 = arith.constant dense<0.0> : vector<8xf16>
      %Tm1 = arith.subi %T, %c1 : index
      %Nm1 = arith.subi %N, %c1 : index
      %Km8 = arith.subi %K, %c8 : index
      %Kp = arith.addi %K, %c63 : index
      %nk = arith.divui %Kp, %c64 : index

      // Copy roles: thread tid moves 16-byte chunks tid + 128 i (i < 4) of each
      // 64x64 tile: row (tid + 128 i) / 8, chunk tid % 8 (8 lanes = one 128-byte row).
      %cp_row = arith.divui %tid, %c8 : index
      %cp_ch = arith.remui %tid, %c8 : index
      %cp_col = arith.muli %cp_ch, %c8 : index

      // Warp tile and ldmatrix lane addresses (lane l gives one row address of one
      // 8x8 matrix): x: row l % 16, k offset 8 (l / 16) -> a0..a3 of m16n8k16;
      // W: row 8 (l / 16) + l % 8, k offset 8 ((l / 8) % 2) -> b0, b1 of two n8 tiles.
      %warp = arith.divui %tid, %c32 : index
      %lane = arith.remui %tid, %c32 : index
      %wm = arith.divui %warp, %c2 : index
      %wn = arith.remui %warp, %c2 : index
      %wrow = arith.muli %wm, %c32 : index
      %wcol = arith.muli %wn, %c32 : index
      %l16 = arith.remui %lane, %c16 : index
      %lh = arith.divui %lane, %c16 : index
      %a_k = arith.muli %lh, %c8 : index
      %a_r = arith.addi %wrow, %l16 : index
      %l8 = arith.remui %lane, %c8 : index
      %lq = arith.divui %lane, %c8 : index
      %lq2 = arith.remui %lq, %c2 : index
      %b_k = arith.muli %lq2, %c8 : index
      %b_n8 = arith.muli %lh, %c8 : index
      %b_rr = arith.addi %b_n8, %l8 : index
      %b_r = arith.addi %wcol, %b_rr : index
      // Prologue: k tiles 0 and 1 into stages 0 and 1 (a group each, possibly empty).
      %p0_k0 = arith.muli %c0, %c64 : index
      %p0_s0 = arith.muli %c0, %c64 : index
      %p0_gc = arith.addi %p0_k0, %cp_col : index
      %p0_kin = arith.cmpi ult, %p0_gc, %K : index
      %p0_gcc = arith.minui %p0_gc, %Km8 : index
      scf.for %p0_i = %c0 to %c4 step %c1 {
        %p0_r16 = arith.muli %p0_i, %c16 : index
        %p0_r = arith.addi %p0_r16, %cp_row : index
        %p0_sr = arith.addi %p0_s0, %p0_r : index
        %p0_xr = arith.addi %row0, %p0_r : index
        %p0_xin = arith.cmpi ult, %p0_xr, %T : index
        %p0_xok = arith.andi %p0_xin, %p0_kin : i1
        %p0_xn = arith.select %p0_xok, %c8, %c0 : index
        %p0_xrc = arith.minui %p0_xr, %Tm1 : index
        %p0_xt = nvgpu.device_async_copy %x[%p0_xrc, %p0_gcc], %sx[%p0_sr, %cp_col], 8, %p0_xn {bypassL1}
            : memref<?x?xf16> to memref<192x64xf16, #gpu.address_space<workgroup>>
        %p0_wr = arith.addi %col0, %p0_r : index
        %p0_win = arith.cmpi ult, %p0_wr, %N : index
        %p0_wok = arith.andi %p0_win, %p0_kin : i1
        %p0_wv = scf.if %p0_wok -> (vector<8xf16>) {
          %p0_blk = arith.divui %p0_gc, %c32 : index
          %p0_j0 = arith.remui %p0_gc, %c32 : index
          %p0_rb = arith.muli %p0_wr, %wrow_bytes : index
          %p0_bb = arith.muli %p0_blk, %c34 : index
          %p0_base = arith.addi %p0_rb, %p0_bb : index
          %p0_base1 = arith.addi %p0_base, %c1 : index
          %p0_d0 = memref.load %w[%p0_base] : memref<?xi8>
          %p0_d1 = memref.load %w[%p0_base1] : memref<?xi8>
          %p0_dl = arith.extui %p0_d0 : i8 to i16
          %p0_dh = arith.extui %p0_d1 : i8 to i16
          %p0_dhs = arith.shli %p0_dh, %s8_16 : i16
          %p0_dbits = arith.ori %p0_dl, %p0_dhs : i16
          %p0_dh16 = arith.bitcast %p0_dbits : i16 to f16
          %p0_d = arith.extf %p0_dh16 : f16 to f32
          %p0_qs0 = arith.addi %p0_base, %c2 : index
          %p0_qb = arith.addi %p0_qs0, %p0_j0 : index
          %p0_qo0 = arith.addi %p0_qb, %c0 : index
          %p0_q0 = memref.load %w[%p0_qo0] : memref<?xi8>
          %p0_qf0 = arith.sitofp %p0_q0 : i8 to f32
          %p0_v0 = arith.mulf %p0_qf0, %p0_d : f32
          %p0_h0 = arith.truncf %p0_v0 : f32 to f16
          %p0_vec0 = vector.insert %p0_h0, %zero_v8 [0] : f16 into vector<8xf16>
          %p0_qo1 = arith.addi %p0_qb, %c1 : index
          %p0_q1 = memref.load %w[%p0_qo1] : memref<?xi8>
          %p0_qf1 = arith.sitofp %p0_q1 : i8 to f32
          %p0_v1 = arith.mulf %p0_qf1, %p0_d : f32
          %p0_h1 = arith.truncf %p0_v1 : f32 to f16
          %p0_vec1 = vector.insert %p0_h1, %p0_vec0 [1] : f16 into vector<8xf16>
          %p0_qo2 = arith.addi %p0_qb, %c2 : index
          %p0_q2 = memref.load %w[%p0_qo2] : memref<?xi8>
          %p0_qf2 = arith.sitofp %p0_q2 : i8 to f32
          %p0_v2 = arith.mulf %p0_qf2, %p0_d : f32
          %p0_h2 = arith.truncf %p0_v2 : f32 to f16
          %p0_vec2 = vector.insert %p0_h2, %p0_vec1 [2] : f16 into vector<8xf16>
          %p0_qo3 = arith.addi %p0_qb, %c3 : index
          %p0_q3 = memref.load %w[%p0_qo3] : memref<?xi8>
          %p0_qf3 = arith.sitofp %p0_q3 : i8 to f32
          %p0_v3 = arith.mulf %p0_qf3, %p0_d : f32
          %p0_h3 = arith.truncf %p0_v3 : f32 to f16
          %p0_vec3 = vector.insert %p0_h3, %p0_vec2 [3] : f16 into vector<8xf16>
          %p0_qo4 = arith.addi %p0_qb, %c4 : index
          %p0_q4 = memref.load %w[%p0_qo4] : memref<?xi8>
          %p0_qf4 = arith.sitofp %p0_q4 : i8 to f32
          %p0_v4 = arith.mulf %p0_qf4, %p0_d : f32
          %p0_h4 = arith.truncf %p0_v4 : f32 to f16
          %p0_vec4 = vector.insert %p0_h4, %p0_vec3 [4] : f16 into vector<8xf16>
          %p0_qo5 = arith.addi %p0_qb, %c5 : index
          %p0_q5 = memref.load %w[%p0_qo5] : memref<?xi8>
          %p0_qf5 = arith.sitofp %p0_q5 : i8 to f32
          %p0_v5 = arith.mulf %p0_qf5, %p0_d : f32
          %p0_h5 = arith.truncf %p0_v5 : f32 to f16
          %p0_vec5 = vector.insert %p0_h5, %p0_vec4 [5] : f16 into vector<8xf16>
          %p0_qo6 = arith.addi %p0_qb, %c6 : index
          %p0_q6 = memref.load %w[%p0_qo6] : memref<?xi8>
          %p0_qf6 = arith.sitofp %p0_q6 : i8 to f32
          %p0_v6 = arith.mulf %p0_qf6, %p0_d : f32
          %p0_h6 = arith.truncf %p0_v6 : f32 to f16
          %p0_vec6 = vector.insert %p0_h6, %p0_vec5 [6] : f16 into vector<8xf16>
          %p0_qo7 = arith.addi %p0_qb, %c7 : index
          %p0_q7 = memref.load %w[%p0_qo7] : memref<?xi8>
          %p0_qf7 = arith.sitofp %p0_q7 : i8 to f32
          %p0_v7 = arith.mulf %p0_qf7, %p0_d : f32
          %p0_h7 = arith.truncf %p0_v7 : f32 to f16
          %p0_vec7 = vector.insert %p0_h7, %p0_vec6 [7] : f16 into vector<8xf16>
          scf.yield %p0_vec7 : vector<8xf16>
        } else {
          scf.yield %zero_v8 : vector<8xf16>
        }
        vector.store %p0_wv, %sw[%p0_sr, %cp_col] : memref<192x64xf16, #gpu.address_space<workgroup>>, vector<8xf16>
      }
      %p0_g = nvgpu.device_async_create_group {}
      %has1 = arith.cmpi ult, %c1, %nk : index
      scf.if %has1 {
        %p1_k0 = arith.muli %c1, %c64 : index
        %p1_s0 = arith.muli %c1, %c64 : index
        %p1_gc = arith.addi %p1_k0, %cp_col : index
        %p1_kin = arith.cmpi ult, %p1_gc, %K : index
        %p1_gcc = arith.minui %p1_gc, %Km8 : index
        scf.for %p1_i = %c0 to %c4 step %c1 {
          %p1_r16 = arith.muli %p1_i, %c16 : index
          %p1_r = arith.addi %p1_r16, %cp_row : index
          %p1_sr = arith.addi %p1_s0, %p1_r : index
          %p1_xr = arith.addi %row0, %p1_r : index
          %p1_xin = arith.cmpi ult, %p1_xr, %T : index
          %p1_xok = arith.andi %p1_xin, %p1_kin : i1
          %p1_xn = arith.select %p1_xok, %c8, %c0 : index
          %p1_xrc = arith.minui %p1_xr, %Tm1 : index
          %p1_xt = nvgpu.device_async_copy %x[%p1_xrc, %p1_gcc], %sx[%p1_sr, %cp_col], 8, %p1_xn {bypassL1}
              : memref<?x?xf16> to memref<192x64xf16, #gpu.address_space<workgroup>>
          %p1_wr = arith.addi %col0, %p1_r : index
          %p1_win = arith.cmpi ult, %p1_wr, %N : index
          %p1_wok = arith.andi %p1_win, %p1_kin : i1
          %p1_wv = scf.if %p1_wok -> (vector<8xf16>) {
            %p1_blk = arith.divui %p1_gc, %c32 : index
            %p1_j0 = arith.remui %p1_gc, %c32 : index
            %p1_rb = arith.muli %p1_wr, %wrow_bytes : index
            %p1_bb = arith.muli %p1_blk, %c34 : index
            %p1_base = arith.addi %p1_rb, %p1_bb : index
            %p1_base1 = arith.addi %p1_base, %c1 : index
            %p1_d0 = memref.load %w[%p1_base] : memref<?xi8>
            %p1_d1 = memref.load %w[%p1_base1] : memref<?xi8>
            %p1_dl = arith.extui %p1_d0 : i8 to i16
            %p1_dh = arith.extui %p1_d1 : i8 to i16
            %p1_dhs = arith.shli %p1_dh, %s8_16 : i16
            %p1_dbits = arith.ori %p1_dl, %p1_dhs : i16
            %p1_dh16 = arith.bitcast %p1_dbits : i16 to f16
            %p1_d = arith.extf %p1_dh16 : f16 to f32
            %p1_qs0 = arith.addi %p1_base, %c2 : index
            %p1_qb = arith.addi %p1_qs0, %p1_j0 : index
            %p1_qo0 = arith.addi %p1_qb, %c0 : index
            %p1_q0 = memref.load %w[%p1_qo0] : memref<?xi8>
            %p1_qf0 = arith.sitofp %p1_q0 : i8 to f32
            %p1_v0 = arith.mulf %p1_qf0, %p1_d : f32
            %p1_h0 = arith.truncf %p1_v0 : f32 to f16
            %p1_vec0 = vector.insert %p1_h0, %zero_v8 [0] : f16 into vector<8xf16>
            %p1_qo1 = arith.addi %p1_qb, %c1 : index
            %p1_q1 = memref.load %w[%p1_qo1] : memref<?xi8>
            %p1_qf1 = arith.sitofp %p1_q1 : i8 to f32
            %p1_v1 = arith.mulf %p1_qf1, %p1_d : f32
            %p1_h1 = arith.truncf %p1_v1 : f32 to f16
            %p1_vec1 = vector.insert %p1_h1, %p1_vec0 [1] : f16 into vector<8xf16>
            %p1_qo2 = arith.addi %p1_qb, %c2 : index
            %p1_q2 = memref.load %w[%p1_qo2] : memref<?xi8>
            %p1_qf2 = arith.sitofp %p1_q2 : i8 to f32
            %p1_v2 = arith.mulf %p1_qf2, %p1_d : f32
            %p1_h2 = arith.truncf %p1_v2 : f32 to f16
            %p1_vec2 = vector.insert %p1_h2, %p1_vec1 [2] : f16 into vector<8xf16>
            %p1_qo3 = arith.addi %p1_qb, %c3 : index
            %p1_q3 = memref.load %w[%p1_qo3] : memref<?xi8>
            %p1_qf3 = arith.sitofp %p1_q3 : i8 to f32
            %p1_v3 = arith.mulf %p1_qf3, %p1_d : f32
            %p1_h3 = arith.truncf %p1_v3 : f32 to f16
            %p1_vec3 = vector.insert %p1_h3, %p1_vec2 [3] : f16 into vector<8xf16>
            %p1_qo4 = arith.addi %p1_qb, %c4 : index
            %p1_q4 = memref.load %w[%p1_qo4] : memref<?xi8>
            %p1_qf4 = arith.sitofp %p1_q4 : i8 to f32
            %p1_v4 = arith.mulf %p1_qf4, %p1_d : f32
            %p1_h4 = arith.truncf %p1_v4 : f32 to f16
            %p1_vec4 = vector.insert %p1_h4, %p1_vec3 [4] : f16 into vector<8xf16>
            %p1_qo5 = arith.addi %p1_qb, %c5 : index
            %p1_q5 = memref.load %w[%p1_qo5] : memref<?xi8>
            %p1_qf5 = arith.sitofp %p1_q5 : i8 to f32
            %p1_v5 = arith.mulf %p1_qf5, %p1_d : f32
            %p1_h5 = arith.truncf %p1_v5 : f32 to f16
            %p1_vec5 = vector.insert %p1_h5, %p1_vec4 [5] : f16 into vector<8xf16>
            %p1_qo6 = arith.addi %p1_qb, %c6 : index
            %p1_q6 = memref.load %w[%p1_qo6] : memref<?xi8>
            %p1_qf6 = arith.sitofp %p1_q6 : i8 to f32
            %p1_v6 = arith.mulf %p1_qf6, %p1_d : f32
            %p1_h6 = arith.truncf %p1_v6 : f32 to f16
            %p1_vec6 = vector.insert %p1_h6, %p1_vec5 [6] : f16 into vector<8xf16>
            %p1_qo7 = arith.addi %p1_qb, %c7 : index
            %p1_q7 = memref.load %w[%p1_qo7] : memref<?xi8>
            %p1_qf7 = arith.sitofp %p1_q7 : i8 to f32
            %p1_v7 = arith.mulf %p1_qf7, %p1_d : f32
            %p1_h7 = arith.truncf %p1_v7 : f32 to f16
            %p1_vec7 = vector.insert %p1_h7, %p1_vec6 [7] : f16 into vector<8xf16>
            scf.yield %p1_vec7 : vector<8xf16>
          } else {
            scf.yield %zero_v8 : vector<8xf16>
          }
          vector.store %p1_wv, %sw[%p1_sr, %cp_col] : memref<192x64xf16, #gpu.address_space<workgroup>>, vector<8xf16>
        }
      }
      %p1_g = nvgpu.device_async_create_group {}

      // Main loop: wait for k tile kt (at most the group of kt + 1 in flight), make
      // it visible to all warps (the barrier also retires every warp's reads of
      // stage (kt + 2) % 3 = (kt - 1) % 3), start k tile kt + 2, then multiply.
      %res:8 = scf.for %kt = %c0 to %nk step %c1
          iter_args(%acc00_in = %zero, %acc01_in = %zero, %acc02_in = %zero, %acc03_in = %zero, %acc10_in = %zero, %acc11_in = %zero, %acc12_in = %zero, %acc13_in = %zero)
          -> (vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>) {
        nvgpu.device_async_wait %p1_g {numGroups = 1 : i32}
        gpu.barrier
        %kt2 = arith.addi %kt, %c2 : index
        %has2 = arith.cmpi ult, %kt2, %nk : index
        scf.if %has2 {
          %st2 = arith.remui %kt2, %c3 : index
          %m_k0 = arith.muli %kt2, %c64 : index
          %m_s0 = arith.muli %st2, %c64 : index
          %m_gc = arith.addi %m_k0, %cp_col : index
          %m_kin = arith.cmpi ult, %m_gc, %K : index
          %m_gcc = arith.minui %m_gc, %Km8 : index
          scf.for %m_i = %c0 to %c4 step %c1 {
            %m_r16 = arith.muli %m_i, %c16 : index
            %m_r = arith.addi %m_r16, %cp_row : index
            %m_sr = arith.addi %m_s0, %m_r : index
            %m_xr = arith.addi %row0, %m_r : index
            %m_xin = arith.cmpi ult, %m_xr, %T : index
            %m_xok = arith.andi %m_xin, %m_kin : i1
            %m_xn = arith.select %m_xok, %c8, %c0 : index
            %m_xrc = arith.minui %m_xr, %Tm1 : index
            %m_xt = nvgpu.device_async_copy %x[%m_xrc, %m_gcc], %sx[%m_sr, %cp_col], 8, %m_xn {bypassL1}
                : memref<?x?xf16> to memref<192x64xf16, #gpu.address_space<workgroup>>
            %m_wr = arith.addi %col0, %m_r : index
            %m_win = arith.cmpi ult, %m_wr, %N : index
            %m_wok = arith.andi %m_win, %m_kin : i1
            %m_wv = scf.if %m_wok -> (vector<8xf16>) {
              %m_blk = arith.divui %m_gc, %c32 : index
              %m_j0 = arith.remui %m_gc, %c32 : index
              %m_rb = arith.muli %m_wr, %wrow_bytes : index
              %m_bb = arith.muli %m_blk, %c34 : index
              %m_base = arith.addi %m_rb, %m_bb : index
              %m_base1 = arith.addi %m_base, %c1 : index
              %m_d0 = memref.load %w[%m_base] : memref<?xi8>
              %m_d1 = memref.load %w[%m_base1] : memref<?xi8>
              %m_dl = arith.extui %m_d0 : i8 to i16
              %m_dh = arith.extui %m_d1 : i8 to i16
              %m_dhs = arith.shli %m_dh, %s8_16 : i16
              %m_dbits = arith.ori %m_dl, %m_dhs : i16
              %m_dh16 = arith.bitcast %m_dbits : i16 to f16
              %m_d = arith.extf %m_dh16 : f16 to f32
              %m_qs0 = arith.addi %m_base, %c2 : index
              %m_qb = arith.addi %m_qs0, %m_j0 : index
              %m_qo0 = arith.addi %m_qb, %c0 : index
              %m_q0 = memref.load %w[%m_qo0] : memref<?xi8>
              %m_qf0 = arith.sitofp %m_q0 : i8 to f32
              %m_v0 = arith.mulf %m_qf0, %m_d : f32
              %m_h0 = arith.truncf %m_v0 : f32 to f16
              %m_vec0 = vector.insert %m_h0, %zero_v8 [0] : f16 into vector<8xf16>
              %m_qo1 = arith.addi %m_qb, %c1 : index
              %m_q1 = memref.load %w[%m_qo1] : memref<?xi8>
              %m_qf1 = arith.sitofp %m_q1 : i8 to f32
              %m_v1 = arith.mulf %m_qf1, %m_d : f32
              %m_h1 = arith.truncf %m_v1 : f32 to f16
              %m_vec1 = vector.insert %m_h1, %m_vec0 [1] : f16 into vector<8xf16>
              %m_qo2 = arith.addi %m_qb, %c2 : index
              %m_q2 = memref.load %w[%m_qo2] : memref<?xi8>
              %m_qf2 = arith.sitofp %m_q2 : i8 to f32
              %m_v2 = arith.mulf %m_qf2, %m_d : f32
              %m_h2 = arith.truncf %m_v2 : f32 to f16
              %m_vec2 = vector.insert %m_h2, %m_vec1 [2] : f16 into vector<8xf16>
              %m_qo3 = arith.addi %m_qb, %c3 : index
              %m_q3 = memref.load %w[%m_qo3] : memref<?xi8>
              %m_qf3 = arith.sitofp %m_q3 : i8 to f32
              %m_v3 = arith.mulf %m_qf3, %m_d : f32
              %m_h3 = arith.truncf %m_v3 : f32 to f16
              %m_vec3 = vector.insert %m_h3, %m_vec2 [3] : f16 into vector<8xf16>
              %m_qo4 = arith.addi %m_qb, %c4 : index
              %m_q4 = memref.load %w[%m_qo4] : memref<?xi8>
              %m_qf4 = arith.sitofp %m_q4 : i8 to f32
              %m_v4 = arith.mulf %m_qf4, %m_d : f32
              %m_h4 = arith.truncf %m_v4 : f32 to f16
              %m_vec4 = vector.insert %m_h4, %m_vec3 [4] : f16 into vector<8xf16>
              %m_qo5 = arith.addi %m_qb, %c5 : index
              %m_q5 = memref.load %w[%m_qo5] : memref<?xi8>
              %m_qf5 = arith.sitofp %m_q5 : i8 to f32
              %m_v5 = arith.mulf %m_qf5, %m_d : f32
              %m_h5 = arith.truncf %m_v5 : f32 to f16
              %m_vec5 = vector.insert %m_h5, %m_vec4 [5] : f16 into vector<8xf16>
              %m_qo6 = arith.addi %m_qb, %c6 : index
              %m_q6 = memref.load %w[%m_qo6] : memref<?xi8>
              %m_qf6 = arith.sitofp %m_q6 : i8 to f32
              %m_v6 = arith.mulf %m_qf6, %m_d : f32
              %m_h6 = arith.truncf %m_v6 : f32 to f16
              %m_vec6 = vector.insert %m_h6, %m_vec5 [6] : f16 into vector<8xf16>
              %m_qo7 = arith.addi %m_qb, %c7 : index
              %m_q7 = memref.load %w[%m_qo7] : memref<?xi8>
              %m_qf7 = arith.sitofp %m_q7 : i8 to f32
              %m_v7 = arith.mulf %m_qf7, %m_d : f32
              %m_h7 = arith.truncf %m_v7 : f32 to f16
              %m_vec7 = vector.insert %m_h7, %m_vec6 [7] : f16 into vector<8xf16>
              scf.yield %m_vec7 : vector<8xf16>
            } else {
              scf.yield %zero_v8 : vector<8xf16>
            }
            vector.store %m_wv, %sw[%m_sr, %cp_col] : memref<192x64xf16, #gpu.address_space<workgroup>>, vector<8xf16>
          }
        }
        %m_g = nvgpu.device_async_create_group {}
        %st = arith.remui %kt, %c3 : index
        %srow = arith.muli %st, %c64 : index
        %ar = arith.addi %srow, %a_r : index
        %br = arith.addi %srow, %b_r : index
        %kr:8 = scf.for %kk = %c0 to %c64 step %c16
            iter_args(%acc00_k = %acc00_in, %acc01_k = %acc01_in, %acc02_k = %acc02_in, %acc03_k = %acc03_in, %acc10_k = %acc10_in, %acc11_k = %acc11_in, %acc12_k = %acc12_in, %acc13_k = %acc13_in)
            -> (vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>) {
          %ak = arith.addi %kk, %a_k : index
          %bk = arith.addi %kk, %b_k : index
          %ar0 = arith.addi %ar, %c0 : index
          %fa0 = nvgpu.ldmatrix %sx[%ar0, %ak] {numTiles = 4 : i32, transpose = false}
              : memref<192x64xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
          %ar1 = arith.addi %ar, %c16 : index
          %fa1 = nvgpu.ldmatrix %sx[%ar1, %ak] {numTiles = 4 : i32, transpose = false}
              : memref<192x64xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
          %br0 = arith.addi %br, %c0 : index
          %fb0 = nvgpu.ldmatrix %sw[%br0, %bk] {numTiles = 4 : i32, transpose = false}
              : memref<192x64xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
          %fb0_0 = vector.extract %fb0[0] : vector<2xf16> from vector<4x2xf16>
          %fb0_1 = vector.extract %fb0[1] : vector<2xf16> from vector<4x2xf16>
          %fb0_a = vector.insert %fb0_0, %zero_b [0] : vector<2xf16> into vector<2x2xf16>
          %b0 = vector.insert %fb0_1, %fb0_a [1] : vector<2xf16> into vector<2x2xf16>
          %fb1_0 = vector.extract %fb0[2] : vector<2xf16> from vector<4x2xf16>
          %fb1_1 = vector.extract %fb0[3] : vector<2xf16> from vector<4x2xf16>
          %fb1_a = vector.insert %fb1_0, %zero_b [0] : vector<2xf16> into vector<2x2xf16>
          %b1 = vector.insert %fb1_1, %fb1_a [1] : vector<2xf16> into vector<2x2xf16>
          %br1 = arith.addi %br, %c16 : index
          %fb1 = nvgpu.ldmatrix %sw[%br1, %bk] {numTiles = 4 : i32, transpose = false}
              : memref<192x64xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
          %fb2_0 = vector.extract %fb1[0] : vector<2xf16> from vector<4x2xf16>
          %fb2_1 = vector.extract %fb1[1] : vector<2xf16> from vector<4x2xf16>
          %fb2_a = vector.insert %fb2_0, %zero_b [0] : vector<2xf16> into vector<2x2xf16>
          %b2 = vector.insert %fb2_1, %fb2_a [1] : vector<2xf16> into vector<2x2xf16>
          %fb3_0 = vector.extract %fb1[2] : vector<2xf16> from vector<4x2xf16>
          %fb3_1 = vector.extract %fb1[3] : vector<2xf16> from vector<4x2xf16>
          %fb3_a = vector.insert %fb3_0, %zero_b [0] : vector<2xf16> into vector<2x2xf16>
          %b3 = vector.insert %fb3_1, %fb3_a [1] : vector<2xf16> into vector<2x2xf16>
          %d00 = nvgpu.mma.sync (%fa0, %b0, %acc00_k) {mmaShape = [16, 8, 16]}
              : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
          %d01 = nvgpu.mma.sync (%fa0, %b1, %acc01_k) {mmaShape = [16, 8, 16]}
              : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
          %d02 = nvgpu.mma.sync (%fa0, %b2, %acc02_k) {mmaShape = [16, 8, 16]}
              : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
          %d03 = nvgpu.mma.sync (%fa0, %b3, %acc03_k) {mmaShape = [16, 8, 16]}
              : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
          %d10 = nvgpu.mma.sync (%fa1, %b0, %acc10_k) {mmaShape = [16, 8, 16]}
              : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
          %d11 = nvgpu.mma.sync (%fa1, %b1, %acc11_k) {mmaShape = [16, 8, 16]}
              : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
          %d12 = nvgpu.mma.sync (%fa1, %b2, %acc12_k) {mmaShape = [16, 8, 16]}
              : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
          %d13 = nvgpu.mma.sync (%fa1, %b3, %acc13_k) {mmaShape = [16, 8, 16]}
              : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
          scf.yield %d00, %d01, %d02, %d03, %d10, %d11, %d12, %d13 : vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>
        }
        scf.yield %kr#0, %kr#1, %kr#2, %kr#3, %kr#4, %kr#5, %kr#6, %kr#7 : vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>
      }
      // Nothing may be left in flight when the block exits (the tail groups are empty).
      nvgpu.device_async_wait %p1_g {numGroups = 0 : i32}

      // Epilogue. Accumulator fragment of m16n8 tile (m, n): element [i][j] is
      // y[row0 + wrow + 16 m + lane / 4 + 8 i][col0 + wcol + 8 n + 2 (lane % 4) + j].
      %q = arith.divui %lane, %c4 : index
      %m4 = arith.remui %lane, %c4 : index
      %cq = arith.muli %m4, %c2 : index
      %er0 = arith.addi %row0, %wrow : index
      %erow = arith.addi %er0, %q : index
      %ec0 = arith.addi %col0, %wcol : index
      %ecol = arith.addi %ec0, %cq : index
      %use_bias = arith.cmpi ne, %has_bias, %zero_i32 : i32
      %cc9 = arith.constant 9 : index
      %cc17 = arith.constant 17 : index
      %cc24 = arith.constant 24 : index
      %cc25 = arith.constant 25 : index
      %col00 = arith.addi %ecol, %c0 : index
      %cin00 = arith.cmpi ult, %col00, %N : index
      %colc00 = arith.minui %col00, %Nm1 : index
      %bv00 = scf.if %use_bias -> (f32) {
        %v = memref.load %bias[%colc00] : memref<?xf32>
        scf.yield %v : f32
      } else {
        %z = arith.constant 0.0 : f32
        scf.yield %z : f32
      }
      %col01 = arith.addi %ecol, %c1 : index
      %cin01 = arith.cmpi ult, %col01, %N : index
      %colc01 = arith.minui %col01, %Nm1 : index
      %bv01 = scf.if %use_bias -> (f32) {
        %v = memref.load %bias[%colc01] : memref<?xf32>
        scf.yield %v : f32
      } else {
        %z = arith.constant 0.0 : f32
        scf.yield %z : f32
      }
      %col10 = arith.addi %ecol, %c8 : index
      %cin10 = arith.cmpi ult, %col10, %N : index
      %colc10 = arith.minui %col10, %Nm1 : index
      %bv10 = scf.if %use_bias -> (f32) {
        %v = memref.load %bias[%colc10] : memref<?xf32>
        scf.yield %v : f32
      } else {
        %z = arith.constant 0.0 : f32
        scf.yield %z : f32
      }
      %col11 = arith.addi %ecol, %cc9 : index
      %cin11 = arith.cmpi ult, %col11, %N : index
      %colc11 = arith.minui %col11, %Nm1 : index
      %bv11 = scf.if %use_bias -> (f32) {
        %v = memref.load %bias[%colc11] : memref<?xf32>
        scf.yield %v : f32
      } else {
        %z = arith.constant 0.0 : f32
        scf.yield %z : f32
      }
      %col20 = arith.addi %ecol, %c16 : index
      %cin20 = arith.cmpi ult, %col20, %N : index
      %colc20 = arith.minui %col20, %Nm1 : index
      %bv20 = scf.if %use_bias -> (f32) {
        %v = memref.load %bias[%colc20] : memref<?xf32>
        scf.yield %v : f32
      } else {
        %z = arith.constant 0.0 : f32
        scf.yield %z : f32
      }
      %col21 = arith.addi %ecol, %cc17 : index
      %cin21 = arith.cmpi ult, %col21, %N : index
      %colc21 = arith.minui %col21, %Nm1 : index
      %bv21 = scf.if %use_bias -> (f32) {
        %v = memref.load %bias[%colc21] : memref<?xf32>
        scf.yield %v : f32
      } else {
        %z = arith.constant 0.0 : f32
        scf.yield %z : f32
      }
      %col30 = arith.addi %ecol, %cc24 : index
      %cin30 = arith.cmpi ult, %col30, %N : index
      %colc30 = arith.minui %col30, %Nm1 : index
      %bv30 = scf.if %use_bias -> (f32) {
        %v = memref.load %bias[%colc30] : memref<?xf32>
        scf.yield %v : f32
      } else {
        %z = arith.constant 0.0 : f32
        scf.yield %z : f32
      }
      %col31 = arith.addi %ecol, %cc25 : index
      %cin31 = arith.cmpi ult, %col31, %N : index
      %colc31 = arith.minui %col31, %Nm1 : index
      %bv31 = scf.if %use_bias -> (f32) {
        %v = memref.load %bias[%colc31] : memref<?xf32>
        scf.yield %v : f32
      } else {
        %z = arith.constant 0.0 : f32
        scf.yield %z : f32
      }
      %row00 = arith.addi %erow, %c0 : index
      %rin00 = arith.cmpi ult, %row00, %T : index
      %v0000 = vector.extract %res#0[0, 0] : f32 from vector<2x2xf32>
      %ok0000 = arith.andi %rin00, %cin00 : i1
      scf.if %ok0000 {
        %s = arith.addf %v0000, %bv00 : f32
        memref.store %s, %y[%row00, %col00] : memref<?x?xf32>
      }
      %v0001 = vector.extract %res#0[0, 1] : f32 from vector<2x2xf32>
      %ok0001 = arith.andi %rin00, %cin01 : i1
      scf.if %ok0001 {
        %s = arith.addf %v0001, %bv01 : f32
        memref.store %s, %y[%row00, %col01] : memref<?x?xf32>
      }
      %v0010 = vector.extract %res#1[0, 0] : f32 from vector<2x2xf32>
      %ok0010 = arith.andi %rin00, %cin10 : i1
      scf.if %ok0010 {
        %s = arith.addf %v0010, %bv10 : f32
        memref.store %s, %y[%row00, %col10] : memref<?x?xf32>
      }
      %v0011 = vector.extract %res#1[0, 1] : f32 from vector<2x2xf32>
      %ok0011 = arith.andi %rin00, %cin11 : i1
      scf.if %ok0011 {
        %s = arith.addf %v0011, %bv11 : f32
        memref.store %s, %y[%row00, %col11] : memref<?x?xf32>
      }
      %v0020 = vector.extract %res#2[0, 0] : f32 from vector<2x2xf32>
      %ok0020 = arith.andi %rin00, %cin20 : i1
      scf.if %ok0020 {
        %s = arith.addf %v0020, %bv20 : f32
        memref.store %s, %y[%row00, %col20] : memref<?x?xf32>
      }
      %v0021 = vector.extract %res#2[0, 1] : f32 from vector<2x2xf32>
      %ok0021 = arith.andi %rin00, %cin21 : i1
      scf.if %ok0021 {
        %s = arith.addf %v0021, %bv21 : f32
        memref.store %s, %y[%row00, %col21] : memref<?x?xf32>
      }
      %v0030 = vector.extract %res#3[0, 0] : f32 from vector<2x2xf32>
      %ok0030 = arith.andi %rin00, %cin30 : i1
      scf.if %ok0030 {
        %s = arith.addf %v0030, %bv30 : f32
        memref.store %s, %y[%row00, %col30] : memref<?x?xf32>
      }
      %v0031 = vector.extract %res#3[0, 1] : f32 from vector<2x2xf32>
      %ok0031 = arith.andi %rin00, %cin31 : i1
      scf.if %ok0031 {
        %s = arith.addf %v0031, %bv31 : f32
        memref.store %s, %y[%row00, %col31] : memref<?x?xf32>
      }
      %row01 = arith.addi %erow, %c8 : index
      %rin01 = arith.cmpi ult, %row01, %T : index
      %v0100 = vector.extract %res#0[1, 0] : f32 from vector<2x2xf32>
      %ok0100 = arith.andi %rin01, %cin00 : i1
      scf.if %ok0100 {
        %s = arith.addf %v0100, %bv00 : f32
        memref.store %s, %y[%row01, %col00] : memref<?x?xf32>
      }
      %v0101 = vector.extract %res#0[1, 1] : f32 from vector<2x2xf32>
      %ok0101 = arith.andi %rin01, %cin01 : i1
      scf.if %ok0101 {
        %s = arith.addf %v0101, %bv01 : f32
        memref.store %s, %y[%row01, %col01] : memref<?x?xf32>
      }
      %v0110 = vector.extract %res#1[1, 0] : f32 from vector<2x2xf32>
      %ok0110 = arith.andi %rin01, %cin10 : i1
      scf.if %ok0110 {
        %s = arith.addf %v0110, %bv10 : f32
        memref.store %s, %y[%row01, %col10] : memref<?x?xf32>
      }
      %v0111 = vector.extract %res#1[1, 1] : f32 from vector<2x2xf32>
      %ok0111 = arith.andi %rin01, %cin11 : i1
      scf.if %ok0111 {
        %s = arith.addf %v0111, %bv11 : f32
        memref.store %s, %y[%row01, %col11] : memref<?x?xf32>
      }
      %v0120 = vector.extract %res#2[1, 0] : f32 from vector<2x2xf32>
      %ok0120 = arith.andi %rin01, %cin20 : i1
      scf.if %ok0120 {
        %s = arith.addf %v0120, %bv20 : f32
        memref.store %s, %y[%row01, %col20] : memref<?x?xf32>
      }
      %v0121 = vector.extract %res#2[1, 1] : f32 from vector<2x2xf32>
      %ok0121 = arith.andi %rin01, %cin21 : i1
      scf.if %ok0121 {
        %s = arith.addf %v0121, %bv21 : f32
        memref.store %s, %y[%row01, %col21] : memref<?x?xf32>
      }
      %v0130 = vector.extract %res#3[1, 0] : f32 from vector<2x2xf32>
      %ok0130 = arith.andi %rin01, %cin30 : i1
      scf.if %ok0130 {
        %s = arith.addf %v0130, %bv30 : f32
        memref.store %s, %y[%row01, %col30] : memref<?x?xf32>
      }
      %v0131 = vector.extract %res#3[1, 1] : f32 from vector<2x2xf32>
      %ok0131 = arith.andi %rin01, %cin31 : i1
      scf.if %ok0131 {
        %s = arith.addf %v0131, %bv31 : f32
        memref.store %s, %y[%row01, %col31] : memref<?x?xf32>
      }
      %row10 = arith.addi %erow, %c16 : index
      %rin10 = arith.cmpi ult, %row10, %T : index
      %v1000 = vector.extract %res#4[0, 0] : f32 from vector<2x2xf32>
      %ok1000 = arith.andi %rin10, %cin00 : i1
      scf.if %ok1000 {
        %s = arith.addf %v1000, %bv00 : f32
        memref.store %s, %y[%row10, %col00] : memref<?x?xf32>
      }
      %v1001 = vector.extract %res#4[0, 1] : f32 from vector<2x2xf32>
      %ok1001 = arith.andi %rin10, %cin01 : i1
      scf.if %ok1001 {
        %s = arith.addf %v1001, %bv01 : f32
        memref.store %s, %y[%row10, %col01] : memref<?x?xf32>
      }
      %v1010 = vector.extract %res#5[0, 0] : f32 from vector<2x2xf32>
      %ok1010 = arith.andi %rin10, %cin10 : i1
      scf.if %ok1010 {
        %s = arith.addf %v1010, %bv10 : f32
        memref.store %s, %y[%row10, %col10] : memref<?x?xf32>
      }
      %v1011 = vector.extract %res#5[0, 1] : f32 from vector<2x2xf32>
      %ok1011 = arith.andi %rin10, %cin11 : i1
      scf.if %ok1011 {
        %s = arith.addf %v1011, %bv11 : f32
        memref.store %s, %y[%row10, %col11] : memref<?x?xf32>
      }
      %v1020 = vector.extract %res#6[0, 0] : f32 from vector<2x2xf32>
      %ok1020 = arith.andi %rin10, %cin20 : i1
      scf.if %ok1020 {
        %s = arith.addf %v1020, %bv20 : f32
        memref.store %s, %y[%row10, %col20] : memref<?x?xf32>
      }
      %v1021 = vector.extract %res#6[0, 1] : f32 from vector<2x2xf32>
      %ok1021 = arith.andi %rin10, %cin21 : i1
      scf.if %ok1021 {
        %s = arith.addf %v1021, %bv21 : f32
        memref.store %s, %y[%row10, %col21] : memref<?x?xf32>
      }
      %v1030 = vector.extract %res#7[0, 0] : f32 from vector<2x2xf32>
      %ok1030 = arith.andi %rin10, %cin30 : i1
      scf.if %ok1030 {
        %s = arith.addf %v1030, %bv30 : f32
        memref.store %s, %y[%row10, %col30] : memref<?x?xf32>
      }
      %v1031 = vector.extract %res#7[0, 1] : f32 from vector<2x2xf32>
      %ok1031 = arith.andi %rin10, %cin31 : i1
      scf.if %ok1031 {
        %s = arith.addf %v1031, %bv31 : f32
        memref.store %s, %y[%row10, %col31] : memref<?x?xf32>
      }
      %row11 = arith.addi %erow, %cc24 : index
      %rin11 = arith.cmpi ult, %row11, %T : index
      %v1100 = vector.extract %res#4[1, 0] : f32 from vector<2x2xf32>
      %ok1100 = arith.andi %rin11, %cin00 : i1
      scf.if %ok1100 {
        %s = arith.addf %v1100, %bv00 : f32
        memref.store %s, %y[%row11, %col00] : memref<?x?xf32>
      }
      %v1101 = vector.extract %res#4[1, 1] : f32 from vector<2x2xf32>
      %ok1101 = arith.andi %rin11, %cin01 : i1
      scf.if %ok1101 {
        %s = arith.addf %v1101, %bv01 : f32
        memref.store %s, %y[%row11, %col01] : memref<?x?xf32>
      }
      %v1110 = vector.extract %res#5[1, 0] : f32 from vector<2x2xf32>
      %ok1110 = arith.andi %rin11, %cin10 : i1
      scf.if %ok1110 {
        %s = arith.addf %v1110, %bv10 : f32
        memref.store %s, %y[%row11, %col10] : memref<?x?xf32>
      }
      %v1111 = vector.extract %res#5[1, 1] : f32 from vector<2x2xf32>
      %ok1111 = arith.andi %rin11, %cin11 : i1
      scf.if %ok1111 {
        %s = arith.addf %v1111, %bv11 : f32
        memref.store %s, %y[%row11, %col11] : memref<?x?xf32>
      }
      %v1120 = vector.extract %res#6[1, 0] : f32 from vector<2x2xf32>
      %ok1120 = arith.andi %rin11, %cin20 : i1
      scf.if %ok1120 {
        %s = arith.addf %v1120, %bv20 : f32
        memref.store %s, %y[%row11, %col20] : memref<?x?xf32>
      }
      %v1121 = vector.extract %res#6[1, 1] : f32 from vector<2x2xf32>
      %ok1121 = arith.andi %rin11, %cin21 : i1
      scf.if %ok1121 {
        %s = arith.addf %v1121, %bv21 : f32
        memref.store %s, %y[%row11, %col21] : memref<?x?xf32>
      }
      %v1130 = vector.extract %res#7[1, 0] : f32 from vector<2x2xf32>
      %ok1130 = arith.andi %rin11, %cin30 : i1
      scf.if %ok1130 {
        %s = arith.addf %v1130, %bv30 : f32
        memref.store %s, %y[%row11, %col30] : memref<?x?xf32>
      }
      %v1131 = vector.extract %res#7[1, 1] : f32 from vector<2x2xf32>
      %ok1131 = arith.andi %rin11, %cin31 : i1
      scf.if %ok1131 {
        %s = arith.addf %v1131, %bv31 : f32
        memref.store %s, %y[%row11, %col31] : memref<?x?xf32>
      }
      gpu.return
    }
  }
}

// Weight dequantization for prefill (llama.cpp's cuBLAS path does the same):
// GGUF block-quantized weights -> f16 [N, K] scratch that gemm_f16 (tensor cores,
// PTX) or gemm_f32_f16w (portable, SPIR-V) multiplies; plus convert_f32_f16 for
// the f32 activations. One source for both targets (gpu + memref + arith + scf).
//
// Block layouts: ggml's ggml-common.h (runtime/ggml/blocks.h), f16 fields little-
// endian; the weight is the GGUF tensor's raw bytes, row n = K / blck blocks:
//   Q4_0  (18 B / 32): d f16, qs[16]              x[j] = d * (q - 8), q = (qs[j%16] >> 4*(j/16)) & 15
//   Q4_1  (20 B / 32): d, m f16, qs[16]           x[j] = d * q + m            (q as Q4_0)
//   Q8_0  (34 B / 32): d f16, qs[32] int8         x[j] = d * qs[j]
//   Q4_K (144 B / 256): d, dmin f16, scales[12], qs[128]
//         element e: group g = e/64, l = e%64, sub-block s = 2g + l/32,
//         q = (qs[32g + l%32] >> 4*(l/32)) & 15, (sc, m) = get_scale_min_k4(s, scales),
//         x = (d*sc) * q - dmin*m
//   Q6_K (210 B / 256): ql[128], qh[64], scales[16] int8, d f16
//         element e: h = e/128, r = e%128, p = r/32, l = r%32,
//         q = ((ql[64h + l + 32(p%2)] >> 4*(p/2)) & 15) | (((qh[32h + l] >> 2p) & 3) << 4),
//         x = d * scales[8h + l/16 + 2p] * (q - 32)
// Values are formed in f32 (ggml's dequantize_row_* arithmetic) and rounded to f16.
//
// Launch record (all entries): block 256 threads; the thread block with linear id
// blockIdx.x + blockIdx.y * gridDim.x handles row n of the output (dequant: weight
// row n of N; convert: activation row t of T), ids >= rows do nothing. The normal
// grid is (rows, 1, 1); a device whose grid x is limited (Vulkan: often 65535) can
// launch (65535, ceil(rows / 65535), 1). Threads stride over the row's K elements.
// (dequant_q4_k_f16: a thread takes 4 qs bytes of a block, 8 elements, one block a
// warp, 8 blocks of the row an iteration; out is memref<?xvector<4xf16>>, two 8-byte
// stores a thread.)
// Arguments: dequant_<type>_f16(w: memref<?xi8> raw bytes, out: memref<?xf16> (Q4_K:
// memref<?xvector<4xf16>>) [N*K] row-major, n_rows: i32 = N, k: i32 = K, a multiple of the block size);
// convert_f32_f16(x: memref<?xf32> [T*K], out: memref<?xf16> [T*K], rows: i32, k: i32).
// SPIR-V: each argument is a storage buffer at (set 0, binding = argument index).
module attributes {gpu.container_module} {
  gpu.module @swz_dequant_f16 attributes {
      spirv.target_env = #spirv.target_env<#spirv.vce<v1.3,
          [Shader, Int8, Int16, Float16, StorageBuffer8BitAccess, StorageBuffer16BitAccess],
          [SPV_KHR_storage_buffer_storage_class, SPV_KHR_8bit_storage, SPV_KHR_16bit_storage]>,
          #spirv.resource_limits<>>} {
    gpu.func @dequant_q4_0_f16(%w: memref<?xi8>, %out: memref<?xf16>, %rows: i32, %k: i32) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "rows, 1, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %i4 = arith.constant 4 : i32
      %i8s = arith.constant 8 : i32
      %i15 = arith.constant 15 : i32
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %gx = gpu.grid_dim x
      %tid = gpu.thread_id x
      %ry = arith.muli %by, %gx : index
      %row = arith.addi %ry, %bx : index
      %nrows = arith.index_cast %rows : i32 to index
      %K = arith.index_cast %k : i32 to index
      %inb = arith.cmpi ult, %row, %nrows : index
      scf.if %inb {
        %orow = arith.muli %row, %K : index
        %cbb = arith.constant 18 : index
        %cblk = arith.constant 32 : index
        %nb = arith.divui %K, %cblk : index
        %rowbytes = arith.muli %nb, %cbb : index
        %wrow = arith.muli %row, %rowbytes : index
        scf.for %e = %tid to %K step %c256 {
          %s8_16 = arith.constant 8 : i16
          %b = arith.divui %e, %cblk : index
          %j = arith.remui %e, %cblk : index
          %boff = arith.muli %b, %cbb : index
          %base = arith.addi %wrow, %boff : index
          %d_o1 = arith.addi %base, %c1 : index
          %d_b0 = memref.load %w[%base] : memref<?xi8>
          %d_b1 = memref.load %w[%d_o1] : memref<?xi8>
          %d_l = arith.extui %d_b0 : i8 to i16
          %d_h = arith.extui %d_b1 : i8 to i16
          %d_hs = arith.shli %d_h, %s8_16 : i16
          %d_bits = arith.ori %d_l, %d_hs : i16
          %d_f16 = arith.bitcast %d_bits : i16 to f16
          %d = arith.extf %d_f16 : f16 to f32
          %jj = arith.remui %j, %c16 : index
          %hi = arith.divui %j, %c16 : index
          %qo = arith.addi %base, %c2 : index
          %qo2 = arith.addi %qo, %jj : index
          %qb = memref.load %w[%qo2] : memref<?xi8>
          %q32 = arith.extui %qb : i8 to i32
          %hi32 = arith.index_cast %hi : index to i32
          %sh = arith.muli %hi32, %i4 : i32
          %qs = arith.shrui %q32, %sh : i32
          %q = arith.andi %qs, %i15 : i32
          %qm = arith.subi %q, %i8s : i32
          %qf = arith.sitofp %qm : i32 to f32
          %x = arith.mulf %qf, %d : f32
          %h = arith.truncf %x : f32 to f16
          %oi = arith.addi %orow, %e : index
          memref.store %h, %out[%oi] : memref<?xf16>
        }
      }
      gpu.return
    }

    gpu.func @dequant_q4_1_f16(%w: memref<?xi8>, %out: memref<?xf16>, %rows: i32, %k: i32) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "rows, 1, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %i4 = arith.constant 4 : i32
      %i8s = arith.constant 8 : i32
      %i15 = arith.constant 15 : i32
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %gx = gpu.grid_dim x
      %tid = gpu.thread_id x
      %ry = arith.muli %by, %gx : index
      %row = arith.addi %ry, %bx : index
      %nrows = arith.index_cast %rows : i32 to index
      %K = arith.index_cast %k : i32 to index
      %inb = arith.cmpi ult, %row, %nrows : index
      scf.if %inb {
        %orow = arith.muli %row, %K : index
        %cbb = arith.constant 20 : index
        %cblk = arith.constant 32 : index
        %nb = arith.divui %K, %cblk : index
        %rowbytes = arith.muli %nb, %cbb : index
        %wrow = arith.muli %row, %rowbytes : index
        scf.for %e = %tid to %K step %c256 {
          %s8_16 = arith.constant 8 : i16
          %b = arith.divui %e, %cblk : index
          %j = arith.remui %e, %cblk : index
          %boff = arith.muli %b, %cbb : index
          %base = arith.addi %wrow, %boff : index
          %d_o1 = arith.addi %base, %c1 : index
          %d_b0 = memref.load %w[%base] : memref<?xi8>
          %d_b1 = memref.load %w[%d_o1] : memref<?xi8>
          %d_l = arith.extui %d_b0 : i8 to i16
          %d_h = arith.extui %d_b1 : i8 to i16
          %d_hs = arith.shli %d_h, %s8_16 : i16
          %d_bits = arith.ori %d_l, %d_hs : i16
          %d_f16 = arith.bitcast %d_bits : i16 to f16
          %d = arith.extf %d_f16 : f16 to f32
          %mo = arith.addi %base, %c2 : index
          %m_o1 = arith.addi %mo, %c1 : index
          %m_b0 = memref.load %w[%mo] : memref<?xi8>
          %m_b1 = memref.load %w[%m_o1] : memref<?xi8>
          %m_l = arith.extui %m_b0 : i8 to i16
          %m_h = arith.extui %m_b1 : i8 to i16
          %m_hs = arith.shli %m_h, %s8_16 : i16
          %m_bits = arith.ori %m_l, %m_hs : i16
          %m_f16 = arith.bitcast %m_bits : i16 to f16
          %m = arith.extf %m_f16 : f16 to f32
          %jj = arith.remui %j, %c16 : index
          %hi = arith.divui %j, %c16 : index
          %qo = arith.addi %base, %c4 : index
          %qo2 = arith.addi %qo, %jj : index
          %qb = memref.load %w[%qo2] : memref<?xi8>
          %q32 = arith.extui %qb : i8 to i32
          %hi32 = arith.index_cast %hi : index to i32
          %sh = arith.muli %hi32, %i4 : i32
          %qs = arith.shrui %q32, %sh : i32
          %q = arith.andi %qs, %i15 : i32
          %qf = arith.uitofp %q : i32 to f32
          %dq = arith.mulf %d, %qf : f32
          %x = arith.addf %dq, %m : f32
          %h = arith.truncf %x : f32 to f16
          %oi = arith.addi %orow, %e : index
          memref.store %h, %out[%oi] : memref<?xf16>
        }
      }
      gpu.return
    }

    gpu.func @dequant_q8_0_f16(%w: memref<?xi8>, %out: memref<?xf16>, %rows: i32, %k: i32) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "rows, 1, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %i4 = arith.constant 4 : i32
      %i8s = arith.constant 8 : i32
      %i15 = arith.constant 15 : i32
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %gx = gpu.grid_dim x
      %tid = gpu.thread_id x
      %ry = arith.muli %by, %gx : index
      %row = arith.addi %ry, %bx : index
      %nrows = arith.index_cast %rows : i32 to index
      %K = arith.index_cast %k : i32 to index
      %inb = arith.cmpi ult, %row, %nrows : index
      scf.if %inb {
        %orow = arith.muli %row, %K : index
        %cbb = arith.constant 34 : index
        %cblk = arith.constant 32 : index
        %nb = arith.divui %K, %cblk : index
        %rowbytes = arith.muli %nb, %cbb : index
        %wrow = arith.muli %row, %rowbytes : index
        scf.for %e = %tid to %K step %c256 {
          %s8_16 = arith.constant 8 : i16
          %b = arith.divui %e, %cblk : index
          %j = arith.remui %e, %cblk : index
          %boff = arith.muli %b, %cbb : index
          %base = arith.addi %wrow, %boff : index
          %d_o1 = arith.addi %base, %c1 : index
          %d_b0 = memref.load %w[%base] : memref<?xi8>
          %d_b1 = memref.load %w[%d_o1] : memref<?xi8>
          %d_l = arith.extui %d_b0 : i8 to i16
          %d_h = arith.extui %d_b1 : i8 to i16
          %d_hs = arith.shli %d_h, %s8_16 : i16
          %d_bits = arith.ori %d_l, %d_hs : i16
          %d_f16 = arith.bitcast %d_bits : i16 to f16
          %d = arith.extf %d_f16 : f16 to f32
          %qo = arith.addi %base, %c2 : index
          %qo2 = arith.addi %qo, %j : index
          %qb = memref.load %w[%qo2] : memref<?xi8>
          %qf = arith.sitofp %qb : i8 to f32
          %x = arith.mulf %qf, %d : f32
          %h = arith.truncf %x : f32 to f16
          %oi = arith.addi %orow, %e : index
          memref.store %h, %out[%oi] : memref<?xf16>
        }
      }
      gpu.return
    }

    gpu.func @dequant_q4_k_f16(%w: memref<?xi8>, %out: memref<?xvector<4xf16>>, %rows: i32, %k: i32) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "rows, 1, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %c144 = arith.constant 144 : index
      %c256 = arith.constant 256 : index
      %i4 = arith.constant 4 : i32
      %i6 = arith.constant 6 : i32
      %i15 = arith.constant 15 : i32
      %i63 = arith.constant 63 : i32
      %s8_16 = arith.constant 8 : i16
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %gx = gpu.grid_dim x
      %tid = gpu.thread_id x
      %ry = arith.muli %by, %gx : index
      %row = arith.addi %ry, %bx : index
      %nrows = arith.index_cast %rows : i32 to index
      %K = arith.index_cast %k : i32 to index
      %inb = arith.cmpi ult, %row, %nrows : index
      // Thread t: block b0 + t / 32 of the row (8 blocks an iteration), group g = (t % 32) / 8,
      // qs bytes 4u .. 4u + 3 of the group (u = t % 8): the low nibbles are elements
      // 64g + 4u .. +3 (sub-block 2g), the high ones 64g + 32 + 4u .. +3 (sub-block 2g + 1).
      %tb = arith.divui %tid, %c32 : index
      %t32 = arith.remui %tid, %c32 : index
      %g = arith.divui %t32, %c8 : index
      %u = arith.remui %t32, %c8 : index
      %u4 = arith.muli %u, %c4 : index
      %g2 = arith.muli %g, %c2 : index
      %g32 = arith.muli %g, %c32 : index
      %g64 = arith.muli %g, %c64 : index
      %lo4 = arith.cmpi ult, %g2, %c4 : index
      %sbm4 = arith.remui %g2, %c4 : index
      scf.if %inb {
        %orow = arith.muli %row, %K : index
        %nb = arith.divui %K, %c256 : index
        %rowbytes = arith.muli %nb, %c144 : index
        %wrow = arith.muli %row, %rowbytes : index
        scf.for %b0 = %c0 to %nb step %c8 {
          %b = arith.addi %b0, %tb : index
          %inblk = arith.cmpi ult, %b, %nb : index
          scf.if %inblk {
            %boff = arith.muli %b, %c144 : index
            %base = arith.addi %wrow, %boff : index
            %d_o0 = arith.addi %base, %c0 : index
            %d_o1 = arith.addi %d_o0, %c1 : index
            %d_b0 = memref.load %w[%d_o0] : memref<?xi8>
            %d_b1 = memref.load %w[%d_o1] : memref<?xi8>
            %d_l = arith.extui %d_b0 : i8 to i16
            %d_h = arith.extui %d_b1 : i8 to i16
            %d_hs = arith.shli %d_h, %s8_16 : i16
            %d_bits = arith.ori %d_l, %d_hs : i16
            %d_f16 = arith.bitcast %d_bits : i16 to f16
            %d = arith.extf %d_f16 : f16 to f32
            %dmin_o0 = arith.addi %base, %c2 : index
            %dmin_o1 = arith.addi %dmin_o0, %c1 : index
            %dmin_b0 = memref.load %w[%dmin_o0] : memref<?xi8>
            %dmin_b1 = memref.load %w[%dmin_o1] : memref<?xi8>
            %dmin_l = arith.extui %dmin_b0 : i8 to i16
            %dmin_h = arith.extui %dmin_b1 : i8 to i16
            %dmin_hs = arith.shli %dmin_h, %s8_16 : i16
            %dmin_bits = arith.ori %dmin_l, %dmin_hs : i16
            %dmin_f16 = arith.bitcast %dmin_bits : i16 to f16
            %dmin = arith.extf %dmin_f16 : f16 to f32
            // get_scale_min_k4(s, scales), scales at byte 4: for s and s + 1 (s = 2g), the bytes
            // A = q[s % 4], B = q[s % 4 + 4], C = q[s % 4 + 8] (+1 for s + 1).
            %scb = arith.addi %base, %c4 : index
            %oA00 = arith.addi %scb, %sbm4 : index
            %oA0 = arith.addi %oA00, %c0 : index
            %oB0 = arith.addi %oA0, %c4 : index
            %oC0 = arith.addi %oB0, %c4 : index
            %bA08 = memref.load %w[%oA0] : memref<?xi8>
            %bA0 = arith.extui %bA08 : i8 to i32
            %bB08 = memref.load %w[%oB0] : memref<?xi8>
            %bB0 = arith.extui %bB08 : i8 to i32
            %bC08 = memref.load %w[%oC0] : memref<?xi8>
            %bC0 = arith.extui %bC08 : i8 to i32
            %scL0 = arith.andi %bA0, %i63 : i32
            %mL0 = arith.andi %bB0, %i63 : i32
            %cLo0 = arith.andi %bC0, %i15 : i32
            %aTop0 = arith.shrui %bA0, %i6 : i32
            %aTop40 = arith.shli %aTop0, %i4 : i32
            %scH0 = arith.ori %cLo0, %aTop40 : i32
            %cHi0 = arith.shrui %bC0, %i4 : i32
            %bTop0 = arith.shrui %bB0, %i6 : i32
            %bTop40 = arith.shli %bTop0, %i4 : i32
            %mH0 = arith.ori %cHi0, %bTop40 : i32
            %sc0 = arith.select %lo4, %scL0, %scH0 : i32
            %mn0 = arith.select %lo4, %mL0, %mH0 : i32
            %scf0 = arith.uitofp %sc0 : i32 to f32
            %mnf0 = arith.uitofp %mn0 : i32 to f32
            %d10 = arith.mulf %d, %scf0 : f32
            %m10 = arith.mulf %dmin, %mnf0 : f32
            %oA10 = arith.addi %scb, %sbm4 : index
            %oA1 = arith.addi %oA10, %c1 : index
            %oB1 = arith.addi %oA1, %c4 : index
            %oC1 = arith.addi %oB1, %c4 : index
            %bA18 = memref.load %w[%oA1] : memref<?xi8>
            %bA1 = arith.extui %bA18 : i8 to i32
            %bB18 = memref.load %w[%oB1] : memref<?xi8>
            %bB1 = arith.extui %bB18 : i8 to i32
            %bC18 = memref.load %w[%oC1] : memref<?xi8>
            %bC1 = arith.extui %bC18 : i8 to i32
            %scL1 = arith.andi %bA1, %i63 : i32
            %mL1 = arith.andi %bB1, %i63 : i32
            %cLo1 = arith.andi %bC1, %i15 : i32
            %aTop1 = arith.shrui %bA1, %i6 : i32
            %aTop41 = arith.shli %aTop1, %i4 : i32
            %scH1 = arith.ori %cLo1, %aTop41 : i32
            %cHi1 = arith.shrui %bC1, %i4 : i32
            %bTop1 = arith.shrui %bB1, %i6 : i32
            %bTop41 = arith.shli %bTop1, %i4 : i32
            %mH1 = arith.ori %cHi1, %bTop41 : i32
            %sc1 = arith.select %lo4, %scL1, %scH1 : i32
            %mn1 = arith.select %lo4, %mL1, %mH1 : i32
            %scf1 = arith.uitofp %sc1 : i32 to f32
            %mnf1 = arith.uitofp %mn1 : i32 to f32
            %d11 = arith.mulf %d, %scf1 : f32
            %m11 = arith.mulf %dmin, %mnf1 : f32
            %qo0 = arith.addi %base, %c16 : index
            %qo1 = arith.addi %qo0, %g32 : index
            %qo = arith.addi %qo1, %u4 : index
            %ob0 = arith.muli %b, %c256 : index
            %ob1 = arith.addi %orow, %ob0 : index
            %ob2 = arith.addi %ob1, %g64 : index
            %olo = arith.addi %ob2, %u4 : index
            %ohi = arith.addi %olo, %c32 : index
            // x = (d * sc) * q - dmin * m in f32, as ggml's dequantize_row_q4_K, rounded to f16.
            %qi0 = arith.addi %qo, %c0 : index
            %qb0 = memref.load %w[%qi0] : memref<?xi8>
            %qi1 = arith.addi %qo, %c1 : index
            %qb1 = memref.load %w[%qi1] : memref<?xi8>
            %qi2 = arith.addi %qo, %c2 : index
            %qb2 = memref.load %w[%qi2] : memref<?xi8>
            %qi3 = arith.addi %qo, %c3 : index
            %qb3 = memref.load %w[%qi3] : memref<?xi8>
            %zv = arith.constant dense<0.0> : vector<4xf16>
            %q32_0 = arith.extui %qb0 : i8 to i32
            %q0_0 = arith.andi %q32_0, %i15 : i32
            %qf0_0 = arith.uitofp %q0_0 : i32 to f32
            %dq0_0 = arith.mulf %d10, %qf0_0 : f32
            %x0_0 = arith.subf %dq0_0, %m10 : f32
            %h0_0 = arith.truncf %x0_0 : f32 to f16
            %v0_0 = vector.insert %h0_0, %zv [0] : f16 into vector<4xf16>
            %q32_1 = arith.extui %qb1 : i8 to i32
            %q0_1 = arith.andi %q32_1, %i15 : i32
            %qf0_1 = arith.uitofp %q0_1 : i32 to f32
            %dq0_1 = arith.mulf %d10, %qf0_1 : f32
            %x0_1 = arith.subf %dq0_1, %m10 : f32
            %h0_1 = arith.truncf %x0_1 : f32 to f16
            %v0_1 = vector.insert %h0_1, %v0_0 [1] : f16 into vector<4xf16>
            %q32_2 = arith.extui %qb2 : i8 to i32
            %q0_2 = arith.andi %q32_2, %i15 : i32
            %qf0_2 = arith.uitofp %q0_2 : i32 to f32
            %dq0_2 = arith.mulf %d10, %qf0_2 : f32
            %x0_2 = arith.subf %dq0_2, %m10 : f32
            %h0_2 = arith.truncf %x0_2 : f32 to f16
            %v0_2 = vector.insert %h0_2, %v0_1 [2] : f16 into vector<4xf16>
            %q32_3 = arith.extui %qb3 : i8 to i32
            %q0_3 = arith.andi %q32_3, %i15 : i32
            %qf0_3 = arith.uitofp %q0_3 : i32 to f32
            %dq0_3 = arith.mulf %d10, %qf0_3 : f32
            %x0_3 = arith.subf %dq0_3, %m10 : f32
            %h0_3 = arith.truncf %x0_3 : f32 to f16
            %v0_3 = vector.insert %h0_3, %v0_2 [3] : f16 into vector<4xf16>
            %ov0 = arith.divui %olo, %c4 : index
            memref.store %v0_3, %out[%ov0] : memref<?xvector<4xf16>>
            %q1_0 = arith.shrui %q32_0, %i4 : i32
            %qf1_0 = arith.uitofp %q1_0 : i32 to f32
            %dq1_0 = arith.mulf %d11, %qf1_0 : f32
            %x1_0 = arith.subf %dq1_0, %m11 : f32
            %h1_0 = arith.truncf %x1_0 : f32 to f16
            %v1_0 = vector.insert %h1_0, %zv [0] : f16 into vector<4xf16>
            %q1_1 = arith.shrui %q32_1, %i4 : i32
            %qf1_1 = arith.uitofp %q1_1 : i32 to f32
            %dq1_1 = arith.mulf %d11, %qf1_1 : f32
            %x1_1 = arith.subf %dq1_1, %m11 : f32
            %h1_1 = arith.truncf %x1_1 : f32 to f16
            %v1_1 = vector.insert %h1_1, %v1_0 [1] : f16 into vector<4xf16>
            %q1_2 = arith.shrui %q32_2, %i4 : i32
            %qf1_2 = arith.uitofp %q1_2 : i32 to f32
            %dq1_2 = arith.mulf %d11, %qf1_2 : f32
            %x1_2 = arith.subf %dq1_2, %m11 : f32
            %h1_2 = arith.truncf %x1_2 : f32 to f16
            %v1_2 = vector.insert %h1_2, %v1_1 [2] : f16 into vector<4xf16>
            %q1_3 = arith.shrui %q32_3, %i4 : i32
            %qf1_3 = arith.uitofp %q1_3 : i32 to f32
            %dq1_3 = arith.mulf %d11, %qf1_3 : f32
            %x1_3 = arith.subf %dq1_3, %m11 : f32
            %h1_3 = arith.truncf %x1_3 : f32 to f16
            %v1_3 = vector.insert %h1_3, %v1_2 [3] : f16 into vector<4xf16>
            %ov1 = arith.divui %ohi, %c4 : index
            memref.store %v1_3, %out[%ov1] : memref<?xvector<4xf16>>
          }
        }
      }
      gpu.return
    }

    gpu.func @dequant_q6_k_f16(%w: memref<?xi8>, %out: memref<?xf16>, %rows: i32, %k: i32) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "rows, 1, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %i4 = arith.constant 4 : i32
      %i8s = arith.constant 8 : i32
      %i15 = arith.constant 15 : i32
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %gx = gpu.grid_dim x
      %tid = gpu.thread_id x
      %ry = arith.muli %by, %gx : index
      %row = arith.addi %ry, %bx : index
      %nrows = arith.index_cast %rows : i32 to index
      %K = arith.index_cast %k : i32 to index
      %inb = arith.cmpi ult, %row, %nrows : index
      scf.if %inb {
        %orow = arith.muli %row, %K : index
        %cbb = arith.constant 210 : index
        %cblk = arith.constant 256 : index
        %nb = arith.divui %K, %cblk : index
        %rowbytes = arith.muli %nb, %cbb : index
        %wrow = arith.muli %row, %rowbytes : index
        scf.for %e = %tid to %K step %c256 {
          %s8_16 = arith.constant 8 : i16
          %b = arith.divui %e, %cblk : index
          %j = arith.remui %e, %cblk : index
          %boff = arith.muli %b, %cbb : index
          %base = arith.addi %wrow, %boff : index
          %do = arith.constant 208 : index
          %dofs = arith.addi %base, %do : index
          %d_o1 = arith.addi %dofs, %c1 : index
          %d_b0 = memref.load %w[%dofs] : memref<?xi8>
          %d_b1 = memref.load %w[%d_o1] : memref<?xi8>
          %d_l = arith.extui %d_b0 : i8 to i16
          %d_h = arith.extui %d_b1 : i8 to i16
          %d_hs = arith.shli %d_h, %s8_16 : i16
          %d_bits = arith.ori %d_l, %d_hs : i16
          %d_f16 = arith.bitcast %d_bits : i16 to f16
          %d = arith.extf %d_f16 : f16 to f32
          %hh = arith.divui %j, %c128 : index
          %r = arith.remui %j, %c128 : index
          %p = arith.divui %r, %c32 : index
          %l = arith.remui %r, %c32 : index
          %p2 = arith.remui %p, %c2 : index
          %pd = arith.divui %p, %c2 : index
          // ql[64h + l + 32(p%2)] >> 4(p/2)
          %h64 = arith.muli %hh, %c64 : index
          %p32 = arith.muli %p2, %c32 : index
          %qlo0 = arith.addi %base, %h64 : index
          %qlo1 = arith.addi %qlo0, %l : index
          %qlo = arith.addi %qlo1, %p32 : index
          %qlb = memref.load %w[%qlo] : memref<?xi8>
          %ql32 = arith.extui %qlb : i8 to i32
          %pd32 = arith.index_cast %pd : index to i32
          %shl = arith.muli %pd32, %i4 : i32
          %qls = arith.shrui %ql32, %shl : i32
          %qlow = arith.andi %qls, %i15 : i32
          // qh at byte 128: (qh[32h + l] >> 2p) & 3
          %h32 = arith.muli %hh, %c32 : index
          %qho0 = arith.addi %base, %c128 : index
          %qho1 = arith.addi %qho0, %h32 : index
          %qho = arith.addi %qho1, %l : index
          %qhb = memref.load %w[%qho] : memref<?xi8>
          %qh32 = arith.extui %qhb : i8 to i32
          %p32i = arith.index_cast %p : index to i32
          %i2 = arith.constant 2 : i32
          %i3 = arith.constant 3 : i32
          %i32c = arith.constant 32 : i32
          %shh = arith.muli %p32i, %i2 : i32
          %qhs = arith.shrui %qh32, %shh : i32
          %qh2 = arith.andi %qhs, %i3 : i32
          %qh4 = arith.shli %qh2, %i4 : i32
          %q = arith.ori %qlow, %qh4 : i32
          %qm = arith.subi %q, %i32c : i32
          // scales (int8) at byte 192: index 8h + l/16 + 2p
          %c192 = arith.constant 192 : index
          %h8 = arith.muli %hh, %c8 : index
          %l16 = arith.divui %l, %c16 : index
          %pp = arith.muli %p, %c2 : index
          %so0 = arith.addi %base, %c192 : index
          %so1 = arith.addi %so0, %h8 : index
          %so2 = arith.addi %so1, %l16 : index
          %so = arith.addi %so2, %pp : index
          %scb = memref.load %w[%so] : memref<?xi8>
          %scf = arith.sitofp %scb : i8 to f32
          %ds = arith.mulf %d, %scf : f32
          %qf = arith.sitofp %qm : i32 to f32
          %x = arith.mulf %ds, %qf : f32
          %h = arith.truncf %x : f32 to f16
          %oi = arith.addi %orow, %e : index
          memref.store %h, %out[%oi] : memref<?xf16>
        }
      }
      gpu.return
    }

    gpu.func @convert_f32_f16(%x: memref<?xf32>, %out: memref<?xf16>, %rows: i32, %k: i32) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "rows, 1, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %i4 = arith.constant 4 : i32
      %i8s = arith.constant 8 : i32
      %i15 = arith.constant 15 : i32
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %gx = gpu.grid_dim x
      %tid = gpu.thread_id x
      %ry = arith.muli %by, %gx : index
      %row = arith.addi %ry, %bx : index
      %nrows = arith.index_cast %rows : i32 to index
      %K = arith.index_cast %k : i32 to index
      %inb = arith.cmpi ult, %row, %nrows : index
      scf.if %inb {
        %orow = arith.muli %row, %K : index
        // Columns e + 256 j, j = 0..7, an iteration: eight loads in flight, then the
        // stores (one column an iteration waited on each load: 10.5 us for 512 x 3584).
        %c2048 = arith.constant 2048 : index
        scf.for %e = %tid to %K step %c2048 {
          %ce0 = arith.addi %e, %c0 : index
          %in0 = arith.cmpi ult, %ce0, %K : index
          %cc0 = arith.select %in0, %ce0, %e : index
          %oi0 = arith.addi %orow, %cc0 : index
          %cst1 = arith.constant 256 : index
          %ce1 = arith.addi %e, %cst1 : index
          %in1 = arith.cmpi ult, %ce1, %K : index
          %cc1 = arith.select %in1, %ce1, %e : index
          %oi1 = arith.addi %orow, %cc1 : index
          %cst2 = arith.constant 512 : index
          %ce2 = arith.addi %e, %cst2 : index
          %in2 = arith.cmpi ult, %ce2, %K : index
          %cc2 = arith.select %in2, %ce2, %e : index
          %oi2 = arith.addi %orow, %cc2 : index
          %cst3 = arith.constant 768 : index
          %ce3 = arith.addi %e, %cst3 : index
          %in3 = arith.cmpi ult, %ce3, %K : index
          %cc3 = arith.select %in3, %ce3, %e : index
          %oi3 = arith.addi %orow, %cc3 : index
          %cst4 = arith.constant 1024 : index
          %ce4 = arith.addi %e, %cst4 : index
          %in4 = arith.cmpi ult, %ce4, %K : index
          %cc4 = arith.select %in4, %ce4, %e : index
          %oi4 = arith.addi %orow, %cc4 : index
          %cst5 = arith.constant 1280 : index
          %ce5 = arith.addi %e, %cst5 : index
          %in5 = arith.cmpi ult, %ce5, %K : index
          %cc5 = arith.select %in5, %ce5, %e : index
          %oi5 = arith.addi %orow, %cc5 : index
          %cst6 = arith.constant 1536 : index
          %ce6 = arith.addi %e, %cst6 : index
          %in6 = arith.cmpi ult, %ce6, %K : index
          %cc6 = arith.select %in6, %ce6, %e : index
          %oi6 = arith.addi %orow, %cc6 : index
          %cst7 = arith.constant 1792 : index
          %ce7 = arith.addi %e, %cst7 : index
          %in7 = arith.cmpi ult, %ce7, %K : index
          %cc7 = arith.select %in7, %ce7, %e : index
          %oi7 = arith.addi %orow, %cc7 : index
          %v0 = memref.load %x[%oi0] : memref<?xf32>
          %v1 = memref.load %x[%oi1] : memref<?xf32>
          %v2 = memref.load %x[%oi2] : memref<?xf32>
          %v3 = memref.load %x[%oi3] : memref<?xf32>
          %v4 = memref.load %x[%oi4] : memref<?xf32>
          %v5 = memref.load %x[%oi5] : memref<?xf32>
          %v6 = memref.load %x[%oi6] : memref<?xf32>
          %v7 = memref.load %x[%oi7] : memref<?xf32>
          %h0 = arith.truncf %v0 : f32 to f16
          scf.if %in0 {
            memref.store %h0, %out[%oi0] : memref<?xf16>
          }
          %h1 = arith.truncf %v1 : f32 to f16
          scf.if %in1 {
            memref.store %h1, %out[%oi1] : memref<?xf16>
          }
          %h2 = arith.truncf %v2 : f32 to f16
          scf.if %in2 {
            memref.store %h2, %out[%oi2] : memref<?xf16>
          }
          %h3 = arith.truncf %v3 : f32 to f16
          scf.if %in3 {
            memref.store %h3, %out[%oi3] : memref<?xf16>
          }
          %h4 = arith.truncf %v4 : f32 to f16
          scf.if %in4 {
            memref.store %h4, %out[%oi4] : memref<?xf16>
          }
          %h5 = arith.truncf %v5 : f32 to f16
          scf.if %in5 {
            memref.store %h5, %out[%oi5] : memref<?xf16>
          }
          %h6 = arith.truncf %v6 : f32 to f16
          scf.if %in6 {
            memref.store %h6, %out[%oi6] : memref<?xf16>
          }
          %h7 = arith.truncf %v7 : f32 to f16
          scf.if %in7 {
            memref.store %h7, %out[%oi7] : memref<?xf16>
          }
        }
      }
      gpu.return
    }
  }
}

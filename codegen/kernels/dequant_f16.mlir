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
// Arguments: dequant_<type>_f16(w: memref<?xi8> raw bytes, out: memref<?xf16>
// [N*K] row-major, n_rows: i32 = N, k: i32 = K, a multiple of the block size);
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

    gpu.func @dequant_q4_k_f16(%w: memref<?xi8>, %out: memref<?xf16>, %rows: i32, %k: i32) kernel
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
        %cbb = arith.constant 144 : index
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
          %dmin_o1 = arith.addi %mo, %c1 : index
          %dmin_b0 = memref.load %w[%mo] : memref<?xi8>
          %dmin_b1 = memref.load %w[%dmin_o1] : memref<?xi8>
          %dmin_l = arith.extui %dmin_b0 : i8 to i16
          %dmin_h = arith.extui %dmin_b1 : i8 to i16
          %dmin_hs = arith.shli %dmin_h, %s8_16 : i16
          %dmin_bits = arith.ori %dmin_l, %dmin_hs : i16
          %dmin_f16 = arith.bitcast %dmin_bits : i16 to f16
          %dmin = arith.extf %dmin_f16 : f16 to f32
          %g = arith.divui %j, %c64 : index
          %l = arith.remui %j, %c64 : index
          %hi = arith.divui %l, %c32 : index
          %l32 = arith.remui %l, %c32 : index
          %g2 = arith.muli %g, %c2 : index
          %sb = arith.addi %g2, %hi : index
          // qs at byte 16 of the block: byte 32g + l%32, nibble l/32.
          %g32 = arith.muli %g, %c32 : index
          %qo0 = arith.addi %base, %c16 : index
          %qo1 = arith.addi %qo0, %g32 : index
          %qo2 = arith.addi %qo1, %l32 : index
          %qb = memref.load %w[%qo2] : memref<?xi8>
          %q32 = arith.extui %qb : i8 to i32
          %hi32 = arith.index_cast %hi : index to i32
          %sh = arith.muli %hi32, %i4 : i32
          %qs = arith.shrui %q32, %sh : i32
          %q = arith.andi %qs, %i15 : i32
          // get_scale_min_k4(sb, scales) with scales at byte 4 of the block.
          %i63 = arith.constant 63 : i32
          %i6 = arith.constant 6 : i32
          %lo4 = arith.cmpi ult, %sb, %c4 : index
          %sc0 = arith.addi %base, %c4 : index
          %sbm4 = arith.remui %sb, %c4 : index
          // j < 4: sc = q[j] & 63, m = q[j+4] & 63.
          // j >= 4: sc = (q[j+4] & 15) | (q[j-4] >> 6) << 4, m = (q[j+4] >> 4) | (q[j] >> 6) << 4.
          %oA = arith.addi %sc0, %sbm4 : index
          %oB = arith.addi %oA, %c4 : index
          %oC = arith.addi %oB, %c4 : index
          %bA8 = memref.load %w[%oA] : memref<?xi8>
          %bB8 = memref.load %w[%oB] : memref<?xi8>
          %bC8 = memref.load %w[%oC] : memref<?xi8>
          %bA = arith.extui %bA8 : i8 to i32
          %bB = arith.extui %bB8 : i8 to i32
          %bC = arith.extui %bC8 : i8 to i32
          %scL = arith.andi %bA, %i63 : i32
          %mL = arith.andi %bB, %i63 : i32
          %cLo = arith.andi %bC, %i15 : i32
          %aTop = arith.shrui %bA, %i6 : i32
          %aTop4 = arith.shli %aTop, %i4 : i32
          %scH = arith.ori %cLo, %aTop4 : i32
          %cHi = arith.shrui %bC, %i4 : i32
          %bTop = arith.shrui %bB, %i6 : i32
          %bTop4 = arith.shli %bTop, %i4 : i32
          %mH = arith.ori %cHi, %bTop4 : i32
          %sc = arith.select %lo4, %scL, %scH : i32
          %mn = arith.select %lo4, %mL, %mH : i32
          %scf = arith.uitofp %sc : i32 to f32
          %mnf = arith.uitofp %mn : i32 to f32
          %d1 = arith.mulf %d, %scf : f32
          %m1 = arith.mulf %dmin, %mnf : f32
          %qf = arith.uitofp %q : i32 to f32
          %dq = arith.mulf %d1, %qf : f32
          %x = arith.subf %dq, %m1 : f32
          %h = arith.truncf %x : f32 to f16
          %oi = arith.addi %orow, %e : index
          memref.store %h, %out[%oi] : memref<?xf16>
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
        scf.for %e = %tid to %K step %c256 {
          %oi = arith.addi %orow, %e : index
          %v = memref.load %x[%oi] : memref<?xf32>
          %h = arith.truncf %v : f32 to f16
          memref.store %h, %out[%oi] : memref<?xf16>
        }
      }
      gpu.return
    }
  }
}

// Greedy sampling: out[t] = argmax_i logits[t, i], ties to the lowest index (as
// llama.cpp's greedy sampler, which keeps the first maximum). NaN never wins; a
// row with no comparable element (all NaN) gives 0.
//
// logits: [T, n_vocab] f32 row-major, passed flat (memref<?xf32>: the SPIR-V
// lowering takes 1-D dynamic buffers); out: [T] i32; n_vocab: i32 scalar >= 1.
// Launch: grid (T, 1, 1), block 256 (one workgroup per row). Thread j scans
// columns j, j + 256, ... (coalesced) keeping its first maximum; the 256
// (value, index) pairs meet in workgroup memory and a tree of 8 halving steps
// (barrier after each) keeps, of two pairs, the larger value or on equal values
// the lower index. No subgroup operations, so the result does not depend on the
// device's subgroup size. Bindings for SPIR-V (set 0): logits, out, n_vocab at 0..2.
module attributes {gpu.container_module} {
  gpu.module @swz_argmax attributes {
      spirv.target_env = #spirv.target_env<#spirv.vce<v1.3, [Shader],
          [SPV_KHR_storage_buffer_storage_class]>, #spirv.resource_limits<>>} {
    memref.global "private" @best_v : memref<256xf32, #gpu.address_space<workgroup>>
    memref.global "private" @best_i : memref<256xi32, #gpu.address_space<workgroup>>

    gpu.func @argmax_f32(%logits: memref<?xf32>, %out: memref<?xi32>, %n_vocab: i32) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "T, 1, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %c512 = arith.constant 512 : index
      %c768 = arith.constant 768 : index
      %c1024 = arith.constant 1024 : index
      %zero_i = arith.constant 0 : i32
      %ninf = arith.constant 0xFF800000 : f32
      %nan = arith.constant 0x7FC00000 : f32
      %bv_s = memref.get_global @best_v : memref<256xf32, #gpu.address_space<workgroup>>
      %bi_s = memref.get_global @best_i : memref<256xi32, #gpu.address_space<workgroup>>
      %row = gpu.block_id x
      %tid = gpu.thread_id x
      %V = arith.index_cast %n_vocab : i32 to index
      %base = arith.muli %row, %V : index
      // (value, index); index n_vocab = none yet. Within a thread indices grow, so a
      // later equal value never replaces an earlier one; -inf is taken by the tie rule.
      // Columns tid, tid + 256, ... in order, four an iteration (their loads in flight
      // together); columns past n_vocab read column i and count as NaN (never taken).
      %best:2 = scf.for %i = %tid to %V step %c1024 iter_args(%bv = %ninf, %bi = %n_vocab) -> (f32, i32) {
        %k0 = arith.addi %base, %i : index
        %i0 = arith.addi %i, %c0 : index
        %i1 = arith.addi %i, %c256 : index
        %in1 = arith.cmpi ult, %i1, %V : index
        %ic1 = arith.select %in1, %i1, %i : index
        %k1 = arith.addi %base, %ic1 : index
        %i2 = arith.addi %i, %c512 : index
        %in2 = arith.cmpi ult, %i2, %V : index
        %ic2 = arith.select %in2, %i2, %i : index
        %k2 = arith.addi %base, %ic2 : index
        %i3 = arith.addi %i, %c768 : index
        %in3 = arith.cmpi ult, %i3, %V : index
        %ic3 = arith.select %in3, %i3, %i : index
        %k3 = arith.addi %base, %ic3 : index
        %l0 = memref.load %logits[%k0] : memref<?xf32>
        %l1 = memref.load %logits[%k1] : memref<?xf32>
        %l2 = memref.load %logits[%k2] : memref<?xf32>
        %l3 = memref.load %logits[%k3] : memref<?xf32>
        %ii0 = arith.index_cast %i0 : index to i32
        %gt0 = arith.cmpf ogt, %l0, %bv : f32
        %eq0 = arith.cmpf oeq, %l0, %bv : f32
        %lt0 = arith.cmpi slt, %ii0, %bi : i32
        %tie0 = arith.andi %eq0, %lt0 : i1
        %take0 = arith.ori %gt0, %tie0 : i1
        %nv0 = arith.select %take0, %l0, %bv : f32
        %ni0 = arith.select %take0, %ii0, %bi : i32
        %v1 = arith.select %in1, %l1, %nan : f32
        %ii1 = arith.index_cast %i1 : index to i32
        %gt1 = arith.cmpf ogt, %v1, %nv0 : f32
        %eq1 = arith.cmpf oeq, %v1, %nv0 : f32
        %lt1 = arith.cmpi slt, %ii1, %ni0 : i32
        %tie1 = arith.andi %eq1, %lt1 : i1
        %take1 = arith.ori %gt1, %tie1 : i1
        %nv1 = arith.select %take1, %v1, %nv0 : f32
        %ni1 = arith.select %take1, %ii1, %ni0 : i32
        %v2 = arith.select %in2, %l2, %nan : f32
        %ii2 = arith.index_cast %i2 : index to i32
        %gt2 = arith.cmpf ogt, %v2, %nv1 : f32
        %eq2 = arith.cmpf oeq, %v2, %nv1 : f32
        %lt2 = arith.cmpi slt, %ii2, %ni1 : i32
        %tie2 = arith.andi %eq2, %lt2 : i1
        %take2 = arith.ori %gt2, %tie2 : i1
        %nv2 = arith.select %take2, %v2, %nv1 : f32
        %ni2 = arith.select %take2, %ii2, %ni1 : i32
        %v3 = arith.select %in3, %l3, %nan : f32
        %ii3 = arith.index_cast %i3 : index to i32
        %gt3 = arith.cmpf ogt, %v3, %nv2 : f32
        %eq3 = arith.cmpf oeq, %v3, %nv2 : f32
        %lt3 = arith.cmpi slt, %ii3, %ni2 : i32
        %tie3 = arith.andi %eq3, %lt3 : i1
        %take3 = arith.ori %gt3, %tie3 : i1
        %nv3 = arith.select %take3, %v3, %nv2 : f32
        %ni3 = arith.select %take3, %ii3, %ni2 : i32
        scf.yield %nv3, %ni3 : f32, i32
      }
      memref.store %best#0, %bv_s[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
      memref.store %best#1, %bi_s[%tid] : memref<256xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      // s = 128, 64, ..., 1: thread t < s merges pair t + s into pair t.
      %s_end = scf.for %step = %c0 to %c8 step %c1 iter_args(%s = %c128) -> (index) {
        %active = arith.cmpi ult, %tid, %s : index
        scf.if %active {
          %o = arith.addi %tid, %s : index
          %av = memref.load %bv_s[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
          %ai = memref.load %bi_s[%tid] : memref<256xi32, #gpu.address_space<workgroup>>
          %ov = memref.load %bv_s[%o] : memref<256xf32, #gpu.address_space<workgroup>>
          %oi = memref.load %bi_s[%o] : memref<256xi32, #gpu.address_space<workgroup>>
          %gt = arith.cmpf ogt, %ov, %av : f32
          %eq = arith.cmpf oeq, %ov, %av : f32
          %lt = arith.cmpi slt, %oi, %ai : i32
          %tie = arith.andi %eq, %lt : i1
          %take = arith.ori %gt, %tie : i1
          %nv = arith.select %take, %ov, %av : f32
          %ni = arith.select %take, %oi, %ai : i32
          memref.store %nv, %bv_s[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
          memref.store %ni, %bi_s[%tid] : memref<256xi32, #gpu.address_space<workgroup>>
        }
        gpu.barrier
        %s2 = arith.divui %s, %c2 : index
        scf.yield %s2 : index
      }
      %first = arith.cmpi eq, %tid, %c0 : index
      scf.if %first {
        %idx = memref.load %bi_s[%c0] : memref<256xi32, #gpu.address_space<workgroup>>
        %none = arith.cmpi eq, %idx, %n_vocab : i32
        %r = arith.select %none, %zero_i, %idx : i32
        memref.store %r, %out[%row] : memref<?xi32>
      }
      gpu.return
    }

    // argmax_split_f32(logits, part_v, part_i, n_vocab, chunk): the first pass of a
    // two-pass argmax (PTX decode: one workgroup a row left 151k logits to 256 threads).
    // Grid (T, n_part = ceil(n_vocab / chunk), 1): workgroup (row, p) finds the first
    // maximum of columns [p chunk, min((p + 1) chunk, n_vocab)) as argmax_f32 does and
    // writes it to part_v / part_i[row n_part + p] (index n_vocab: none, all NaN).
    gpu.func @argmax_split_f32(%logits: memref<?xf32>, %part_v: memref<?xf32>, %part_i: memref<?xi32>,
                               %n_vocab: i32, %chunk: i32) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "T, n_part, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %c512 = arith.constant 512 : index
      %c768 = arith.constant 768 : index
      %c1024 = arith.constant 1024 : index
      %zero_i = arith.constant 0 : i32
      %ninf = arith.constant 0xFF800000 : f32
      %nan = arith.constant 0x7FC00000 : f32
      %bv_s = memref.get_global @best_v : memref<256xf32, #gpu.address_space<workgroup>>
      %bi_s = memref.get_global @best_i : memref<256xi32, #gpu.address_space<workgroup>>
      %row = gpu.block_id x
      %p = gpu.block_id y
      %np = gpu.grid_dim y
      %tid = gpu.thread_id x
      %V = arith.index_cast %n_vocab : i32 to index
      %C = arith.index_cast %chunk : i32 to index
      %base = arith.muli %row, %V : index
      %lo = arith.muli %p, %C : index
      %lo_c = arith.addi %lo, %C : index
      %hi = arith.minui %lo_c, %V : index
      %start = arith.addi %lo, %tid : index
      %best:2 = scf.for %i = %start to %hi step %c1024 iter_args(%bv = %ninf, %bi = %n_vocab) -> (f32, i32) {
        %k0 = arith.addi %base, %i : index
        %i0 = arith.addi %i, %c0 : index
        %i1 = arith.addi %i, %c256 : index
        %in1 = arith.cmpi ult, %i1, %hi : index
        %ic1 = arith.select %in1, %i1, %i : index
        %k1 = arith.addi %base, %ic1 : index
        %i2 = arith.addi %i, %c512 : index
        %in2 = arith.cmpi ult, %i2, %hi : index
        %ic2 = arith.select %in2, %i2, %i : index
        %k2 = arith.addi %base, %ic2 : index
        %i3 = arith.addi %i, %c768 : index
        %in3 = arith.cmpi ult, %i3, %hi : index
        %ic3 = arith.select %in3, %i3, %i : index
        %k3 = arith.addi %base, %ic3 : index
        %l0 = memref.load %logits[%k0] : memref<?xf32>
        %l1 = memref.load %logits[%k1] : memref<?xf32>
        %l2 = memref.load %logits[%k2] : memref<?xf32>
        %l3 = memref.load %logits[%k3] : memref<?xf32>
        %ii0 = arith.index_cast %i0 : index to i32
        %gt0 = arith.cmpf ogt, %l0, %bv : f32
        %eq0 = arith.cmpf oeq, %l0, %bv : f32
        %lt0 = arith.cmpi slt, %ii0, %bi : i32
        %tie0 = arith.andi %eq0, %lt0 : i1
        %take0 = arith.ori %gt0, %tie0 : i1
        %nv0 = arith.select %take0, %l0, %bv : f32
        %ni0 = arith.select %take0, %ii0, %bi : i32
        %v1 = arith.select %in1, %l1, %nan : f32
        %ii1 = arith.index_cast %i1 : index to i32
        %gt1 = arith.cmpf ogt, %v1, %nv0 : f32
        %eq1 = arith.cmpf oeq, %v1, %nv0 : f32
        %lt1 = arith.cmpi slt, %ii1, %ni0 : i32
        %tie1 = arith.andi %eq1, %lt1 : i1
        %take1 = arith.ori %gt1, %tie1 : i1
        %nv1 = arith.select %take1, %v1, %nv0 : f32
        %ni1 = arith.select %take1, %ii1, %ni0 : i32
        %v2 = arith.select %in2, %l2, %nan : f32
        %ii2 = arith.index_cast %i2 : index to i32
        %gt2 = arith.cmpf ogt, %v2, %nv1 : f32
        %eq2 = arith.cmpf oeq, %v2, %nv1 : f32
        %lt2 = arith.cmpi slt, %ii2, %ni1 : i32
        %tie2 = arith.andi %eq2, %lt2 : i1
        %take2 = arith.ori %gt2, %tie2 : i1
        %nv2 = arith.select %take2, %v2, %nv1 : f32
        %ni2 = arith.select %take2, %ii2, %ni1 : i32
        %v3 = arith.select %in3, %l3, %nan : f32
        %ii3 = arith.index_cast %i3 : index to i32
        %gt3 = arith.cmpf ogt, %v3, %nv2 : f32
        %eq3 = arith.cmpf oeq, %v3, %nv2 : f32
        %lt3 = arith.cmpi slt, %ii3, %ni2 : i32
        %tie3 = arith.andi %eq3, %lt3 : i1
        %take3 = arith.ori %gt3, %tie3 : i1
        %nv3 = arith.select %take3, %v3, %nv2 : f32
        %ni3 = arith.select %take3, %ii3, %ni2 : i32
        scf.yield %nv3, %ni3 : f32, i32
      }
      memref.store %best#0, %bv_s[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
      memref.store %best#1, %bi_s[%tid] : memref<256xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      // s = 128, 64, ..., 1: thread t < s merges pair t + s into pair t.
      %s_end = scf.for %step = %c0 to %c8 step %c1 iter_args(%s = %c128) -> (index) {
        %active = arith.cmpi ult, %tid, %s : index
        scf.if %active {
          %o = arith.addi %tid, %s : index
          %av = memref.load %bv_s[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
          %ai = memref.load %bi_s[%tid] : memref<256xi32, #gpu.address_space<workgroup>>
          %ov = memref.load %bv_s[%o] : memref<256xf32, #gpu.address_space<workgroup>>
          %oi = memref.load %bi_s[%o] : memref<256xi32, #gpu.address_space<workgroup>>
          %gt = arith.cmpf ogt, %ov, %av : f32
          %eq = arith.cmpf oeq, %ov, %av : f32
          %lt = arith.cmpi slt, %oi, %ai : i32
          %tie = arith.andi %eq, %lt : i1
          %take = arith.ori %gt, %tie : i1
          %nv = arith.select %take, %ov, %av : f32
          %ni = arith.select %take, %oi, %ai : i32
          memref.store %nv, %bv_s[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
          memref.store %ni, %bi_s[%tid] : memref<256xi32, #gpu.address_space<workgroup>>
        }
        gpu.barrier
        %s2 = arith.divui %s, %c2 : index
        scf.yield %s2 : index
      }
      %first = arith.cmpi eq, %tid, %c0 : index
      scf.if %first {
        %v = memref.load %bv_s[%c0] : memref<256xf32, #gpu.address_space<workgroup>>
        %idx = memref.load %bi_s[%c0] : memref<256xi32, #gpu.address_space<workgroup>>
        %rp = arith.muli %row, %np : index
        %slot = arith.addi %rp, %p : index
        memref.store %v, %part_v[%slot] : memref<?xf32>
        memref.store %idx, %part_i[%slot] : memref<?xi32>
      }
      gpu.return
    }

    // argmax_reduce_f32(part_v, part_i, out, n_part, n_vocab): the second pass. Grid (T, 1,
    // 1): thread j merges parts j, j + 256, ... of its row in order, then the tree of
    // argmax_f32; the merge (larger value, or equal value and lower index) is the same, so
    // out is argmax_f32's answer (ties to the lowest index, none -> 0).
    gpu.func @argmax_reduce_f32(%part_v: memref<?xf32>, %part_i: memref<?xi32>, %out: memref<?xi32>,
                                %n_part: i32, %n_vocab: i32) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "T, 1, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %c512 = arith.constant 512 : index
      %c768 = arith.constant 768 : index
      %c1024 = arith.constant 1024 : index
      %zero_i = arith.constant 0 : i32
      %ninf = arith.constant 0xFF800000 : f32
      %nan = arith.constant 0x7FC00000 : f32
      %bv_s = memref.get_global @best_v : memref<256xf32, #gpu.address_space<workgroup>>
      %bi_s = memref.get_global @best_i : memref<256xi32, #gpu.address_space<workgroup>>
      %row = gpu.block_id x
      %tid = gpu.thread_id x
      %NP = arith.index_cast %n_part : i32 to index
      %base = arith.muli %row, %NP : index
      %best:2 = scf.for %j = %tid to %NP step %c256 iter_args(%bv = %ninf, %bi = %n_vocab) -> (f32, i32) {
        %k = arith.addi %base, %j : index
        %ov = memref.load %part_v[%k] : memref<?xf32>
        %oi = memref.load %part_i[%k] : memref<?xi32>
        %gt = arith.cmpf ogt, %ov, %bv : f32
        %eq = arith.cmpf oeq, %ov, %bv : f32
        %lt = arith.cmpi slt, %oi, %bi : i32
        %tie = arith.andi %eq, %lt : i1
        %take = arith.ori %gt, %tie : i1
        %nv = arith.select %take, %ov, %bv : f32
        %ni = arith.select %take, %oi, %bi : i32
        scf.yield %nv, %ni : f32, i32
      }
      memref.store %best#0, %bv_s[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
      memref.store %best#1, %bi_s[%tid] : memref<256xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      // s = 128, 64, ..., 1: thread t < s merges pair t + s into pair t.
      %s_end = scf.for %step = %c0 to %c8 step %c1 iter_args(%s = %c128) -> (index) {
        %active = arith.cmpi ult, %tid, %s : index
        scf.if %active {
          %o = arith.addi %tid, %s : index
          %av = memref.load %bv_s[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
          %ai = memref.load %bi_s[%tid] : memref<256xi32, #gpu.address_space<workgroup>>
          %ov = memref.load %bv_s[%o] : memref<256xf32, #gpu.address_space<workgroup>>
          %oi = memref.load %bi_s[%o] : memref<256xi32, #gpu.address_space<workgroup>>
          %gt = arith.cmpf ogt, %ov, %av : f32
          %eq = arith.cmpf oeq, %ov, %av : f32
          %lt = arith.cmpi slt, %oi, %ai : i32
          %tie = arith.andi %eq, %lt : i1
          %take = arith.ori %gt, %tie : i1
          %nv = arith.select %take, %ov, %av : f32
          %ni = arith.select %take, %oi, %ai : i32
          memref.store %nv, %bv_s[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
          memref.store %ni, %bi_s[%tid] : memref<256xi32, #gpu.address_space<workgroup>>
        }
        gpu.barrier
        %s2 = arith.divui %s, %c2 : index
        scf.yield %s2 : index
      }
      %first = arith.cmpi eq, %tid, %c0 : index
      scf.if %first {
        %idx = memref.load %bi_s[%c0] : memref<256xi32, #gpu.address_space<workgroup>>
        %none = arith.cmpi eq, %idx, %n_vocab : i32
        %r = arith.select %none, %zero_i, %idx : i32
        memref.store %r, %out[%row] : memref<?xi32>
      }
      gpu.return
    }
  }
}

// Rotary position embedding (Su et al. 2021, RoFormer), in place, as llama.cpp's
// ggml_rope: for token t, head h and pair i < n_rot/2, with
// angle = positions[t] * theta^(-2i / n_rot), rotate
//   norm (llama):        (x[2i], x[2i+1])
//   neox (qwen2, qwen3): (x[i],  x[i + n_rot/2])
// of the head's slice x[t, h*head_dim : (h+1)*head_dim]; features >= n_rot stay.
//
// x: [T, n_head*head_dim] f32 row-major, passed flat (memref<?xf32>: the SPIR-V
// lowering takes 1-D dynamic buffers); positions: [T] i32; scalars head_dim,
// n_rot (even, <= head_dim), theta (the graph op's attrs) and neox (1 = neox,
// 0 = norm). Launch: grid (T, n_head), block 32; lanes stride over the pairs.
module attributes {gpu.container_module} {
  gpu.module @swz_rope attributes {
      spirv.target_env = #spirv.target_env<#spirv.vce<v1.3, [Shader],
          [SPV_KHR_storage_buffer_storage_class]>, #spirv.resource_limits<>>} {
    gpu.func @rope_f32(%x: memref<?xf32>, %positions: memref<?xi32>, %head_dim: i32,
                       %n_rot: i32, %theta: f32, %neox: i32) kernel
        attributes {known_block_size = array<i32: 32, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [32, 1, 1]>,
                    swz.grid = "T, n_head, 1"} {
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c32 = arith.constant 32 : index
      %zero_i = arith.constant 0 : i32
      %m2 = arith.constant -2.0 : f32
      %t = gpu.block_id x
      %h = gpu.block_id y
      %lane = gpu.thread_id x
      %hd = arith.index_cast %head_dim : i32 to index
      %nr = arith.index_cast %n_rot : i32 to index
      %half = arith.divui %nr, %c2 : index
      // Row t starts at t * n_head * head_dim; n_head = gridDim.y.
      %n_head = gpu.grid_dim y
      %row_len = arith.muli %n_head, %hd : index
      %row = arith.muli %t, %row_len : index
      %hoff = arith.muli %h, %hd : index
      %base = arith.addi %row, %hoff : index
      %pos_i = memref.load %positions[%t] : memref<?xi32>
      %pos = arith.sitofp %pos_i : i32 to f32
      %nr_f = arith.uitofp %n_rot : i32 to f32
      %ln_theta = math.log %theta : f32
      %is_neox = arith.cmpi ne, %neox, %zero_i : i32
      scf.for %i = %lane to %half step %c32 {
        %i_i32 = arith.index_cast %i : index to i32
        %i_f = arith.uitofp %i_i32 : i32 to f32
        %e0 = arith.mulf %m2, %i_f : f32
        %e = arith.divf %e0, %nr_f : f32
        %le = arith.mulf %e, %ln_theta : f32
        %freq = math.exp %le : f32
        %ang = arith.mulf %pos, %freq : f32
        %c = math.cos %ang : f32
        %s = math.sin %ang : f32
        %two_i = arith.muli %i, %c2 : index
        %two_i1 = arith.addi %two_i, %c1 : index
        %i_half = arith.addi %i, %half : index
        %j0 = arith.select %is_neox, %i, %two_i : index
        %j1 = arith.select %is_neox, %i_half, %two_i1 : index
        %k0 = arith.addi %base, %j0 : index
        %k1 = arith.addi %base, %j1 : index
        %x0 = memref.load %x[%k0] : memref<?xf32>
        %x1 = memref.load %x[%k1] : memref<?xf32>
        %a = arith.mulf %x0, %c : f32
        %b = arith.mulf %x1, %s : f32
        %y0 = arith.subf %a, %b : f32
        %d = arith.mulf %x0, %s : f32
        %f = arith.mulf %x1, %c : f32
        %y1 = arith.addf %d, %f : f32
        memref.store %y0, %x[%k0] : memref<?xf32>
        memref.store %y1, %x[%k1] : memref<?xf32>
      }
      gpu.return
    }
  }
}

// Residual add: out[i] = a[i] + b[i] for i < n (out may alias a).
//
// Launch: grid (ceil(n / 256)), block 256. The gpu.module carries a SPIR-V target
// environment, so the same source lowers to PTX (gpu-lower-to-nvvm) and to SPIR-V
// (convert-gpu-to-spirv; bindings 0..3 of set 0: a, b, out, n).
module attributes {gpu.container_module} {
  gpu.module @swz_add attributes {
      spirv.target_env = #spirv.target_env<#spirv.vce<v1.3, [Shader],
          [SPV_KHR_storage_buffer_storage_class]>, #spirv.resource_limits<>>} {
    gpu.func @add_f32(%a: memref<?xf32>, %b: memref<?xf32>, %out: memref<?xf32>,
                      %n: i32) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [256, 1, 1]>,
                    swz.grid = "ceil(n/256), 1, 1"} {
      %c256 = arith.constant 256 : index
      %bid = gpu.block_id x
      %tid = gpu.thread_id x
      %base = arith.muli %bid, %c256 : index
      %i = arith.addi %base, %tid : index
      %ii = arith.index_cast %i : index to i32
      %inb = arith.cmpi slt, %ii, %n : i32
      scf.if %inb {
        %x = memref.load %a[%i] : memref<?xf32>
        %y = memref.load %b[%i] : memref<?xf32>
        %s = arith.addf %x, %y : f32
        memref.store %s, %out[%i] : memref<?xf32>
      }
      gpu.return
    }
  }
}

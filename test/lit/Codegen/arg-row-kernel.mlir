// RUN: kiln-opt %s -split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg | FileCheck %s --check-prefix=GPU
// RUN: kiln-opt %s -split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=65535" --kiln-kernel-to-linalg | FileCheck %s --check-prefix=LLVMPIPE
// RUN: kiln-opt %s -split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=65535" --kiln-kernel-to-linalg --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// RUN: kiln-opt %s -split-input-file --kiln-kernel-to-linalg | FileCheck %s --check-prefix=CPU
// argmax / argmin over long rows on a graphics device: a workgroup per result, each
// work item the best (value, position) of its strided columns, then a tree
// in workgroup memory; positions break ties (the first occurrence wins).

// 2^24 + 2 columns on llvmpipe (65535 loop iterations per invocation):
// 512 work items of 32769 trips each.
func.func @argmax_long(%x: tensor<16777218xf32>) -> tensor<i32> {
  %0 = kiln.kernel on "vulkan:0" (%x) : (tensor<16777218xf32>) -> tensor<i32> {
  ^bb0(%a: tensor<16777218xf32>):
    %i = kiln.arg_reduce max %a [0] : tensor<16777218xf32> -> tensor<i32>
    kiln.yield %i : tensor<i32>
  }
  return %0 : tensor<i32>
}
// LLVMPIPE-LABEL: func.func @argmax_long_kernel0
// LLVMPIPE: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c512{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}})
// LLVMPIPE: memref.alloc() : memref<512xf32, 3>
// LLVMPIPE: memref.alloc() : memref<512xi32, 3>
// LLVMPIPE: scf.for {{.*}} = %c1{{(_[0-9]+)?}} to %c32769
// LLVMPIPE: arith.cmpf ogt
// LLVMPIPE: gpu.barrier
// LLVMPIPE-COUNT-9: gpu.barrier
// LLVMPIPE-NOT: gpu.barrier
// LLVMPIPE: gpu.terminator
// VALID: spirv.module @__spv__argmax_long_kernel0_kernel: valid
// Without a loop budget: 256 work items.
// GPU-LABEL: func.func @argmax_long_kernel0
// GPU: memref.alloc() : memref<256xf32, 3>
// GPU: scf.for {{.*}} to %c65537
// The CPU keeps one loop per result.
// CPU-LABEL: func.func @argmax_long_kernel0
// CPU-NOT: gpu.launch

// -----

// Rows of 5000 with an epilogue (position + 1 as f32): rows by workgroups,
// the epilogue written by work item 0.
func.func @argmin_rows(%x: tensor<3x5000xf32>) -> tensor<3xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x) : (tensor<3x5000xf32>) -> tensor<3xf32> {
  ^bb0(%a: tensor<3x5000xf32>):
    %i = kiln.arg_reduce min %a [1] : tensor<3x5000xf32> -> tensor<3xi32>
    %f = kiln.cast %i : tensor<3xi32> -> tensor<3xf32>
    kiln.yield %f : tensor<3xf32>
  }
  return %0 : tensor<3xf32>
}
// GPU-LABEL: func.func @argmin_rows_kernel0
// GPU: gpu.launch blocks({{.*}}) in ({{.*}} = %c3{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}})
// GPU: arith.cmpf olt
// GPU: arith.cmpi eq
// GPU: arith.sitofp
// VALID: spirv.module @__spv__argmin_rows_kernel0_kernel: valid

// -----

// Short rows stay one work item's loop (no tree, no barrier).
func.func @argmax_short(%x: tensor<64x100xf32>) -> tensor<64xi32> {
  %0 = kiln.kernel on "vulkan:0" (%x) : (tensor<64x100xf32>) -> tensor<64xi32> {
  ^bb0(%a: tensor<64x100xf32>):
    %i = kiln.arg_reduce max %a [1] : tensor<64x100xf32> -> tensor<64xi32>
    kiln.yield %i : tensor<64xi32>
  }
  return %0 : tensor<64xi32>
}
// GPU-LABEL: func.func @argmax_short_kernel0
// GPU-NOT: gpu.barrier
// GPU: scf.parallel

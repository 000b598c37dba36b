// RUN: kiln-opt %s -split-input-file --kiln-kernel-to-linalg | FileCheck %s --check-prefix=CPU
// RUN: kiln-opt %s -split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=65535" --kiln-kernel-to-linalg | FileCheck %s --check-prefix=LLVMPIPE
// RUN: kiln-opt %s -split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=65535" --kiln-kernel-to-linalg --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// Long rows: a cascade of loops of at most 4096 (CPU) or 256 (GPU) trips,
// each level starting from the identity and folded into the level above,
// so 2^32 ones sum to 2^32 in f32 and no loop outruns llvmpipe's budget.

// 2^22 columns = 1024 blocks of 4096 on the host, two nested loops: the
// inner one from 0.0 with reassociable adds, its total added outside it.
func.func @sum_long(%x: tensor<4194304xf32>) -> tensor<f32> {
  %0 = kiln.kernel on "cpu:0" (%x) : (tensor<4194304xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<4194304xf32>):
    %s = kiln.reduce sum %a [0] : tensor<4194304xf32> -> tensor<f32>
    kiln.yield %s : tensor<f32>
  }
  return %0 : tensor<f32>
}
// CPU-LABEL: func.func @sum_long_kernel0
// CPU: scf.for {{.*}} to %c1024 {{.*}} iter_args(%[[OUTER:[a-z0-9_]+]] = %{{.*}}) -> (f32)
// CPU: %[[INNER:[0-9]+]] = scf.for {{.*}} to %c4096{{.*}} iter_args
// CPU: arith.addf {{.*}} fastmath<reassoc>
// CPU: arith.addf %[[OUTER]], %[[INNER]] : f32

// -----

// A row of 5000: one full block of 4096 and a tail loop of 904, both from
// the identity (max: -inf), then combined: no loop of zero trips.
func.func @max_tail(%x: tensor<2x5000xf32>) -> tensor<2xf32> {
  %0 = kiln.kernel on "cpu:0" (%x) : (tensor<2x5000xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2x5000xf32>):
    %m = kiln.reduce max %a [1] : tensor<2x5000xf32> -> tensor<2xf32>
    kiln.yield %m : tensor<2xf32>
  }
  return %0 : tensor<2xf32>
}
// CPU-LABEL: func.func @max_tail_kernel0
// CPU: %[[FULL:[0-9]+]] = scf.for {{.*}} to %c1{{(_[0-9]+)?}} step
// CPU: scf.for {{.*}} to %c4096
// CPU: arith.maximumf
// CPU: %[[TAIL:[0-9]+]] = scf.for {{.*}} to %c904
// CPU: arith.maximumf
// CPU: arith.maximumf %[[FULL]], %[[TAIL]] : f32

// -----

// On llvmpipe (65535 iterations per invocation in all) 2^24 columns take a
// workgroup of 1024: 16384 chunks per work item, and more subgroups (128)
// than lanes (8), so each lane folds 16 published partials.
func.func @sum_2_24(%x: tensor<16777216xf32>) -> tensor<f32> {
  %0 = kiln.kernel on "vulkan:0" (%x) : (tensor<16777216xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<16777216xf32>):
    %s = kiln.reduce sum %a [0] : tensor<16777216xf32> -> tensor<f32>
    kiln.yield %s : tensor<f32>
  }
  return %0 : tensor<f32>
}
// LLVMPIPE-LABEL: func.func @sum_2_24_kernel0
// LLVMPIPE: threads({{.*}}) in ({{.*}} = %c1024
// LLVMPIPE: memref.alloc() : memref<128xf32, 3>
// LLVMPIPE: scf.for {{.*}} to %c64
// LLVMPIPE: scf.for {{.*}} to %c256
// LLVMPIPE: gpu.barrier
// LLVMPIPE-COUNT-16: memref.load %{{.*}} : memref<128xf32, 3>
// VALID: spirv.module @__spv__sum_2_24_kernel0_kernel: valid

// -----

// A column reduction over few long columns takes a workgroup per column
// too (a work item would loop 2^22 times).
func.func @columns(%x: tensor<4194304x2xf32>) -> tensor<2xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x) : (tensor<4194304x2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<4194304x2xf32>):
    %s = kiln.reduce sum %a [0] : tensor<4194304x2xf32> -> tensor<2xf32>
    kiln.yield %s : tensor<2xf32>
  }
  return %0 : tensor<2xf32>
}
// LLVMPIPE-LABEL: func.func @columns_kernel0
// LLVMPIPE: gpu.launch blocks({{.*}}) in ({{.*}} = %c2, {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// VALID: spirv.module @__spv__columns_kernel0_kernel: valid

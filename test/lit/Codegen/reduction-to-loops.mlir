// RUN: kiln-opt %s --kiln-kernel-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg --kiln-attach-target=target=vulkan:lavapipe --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// RUN: kiln-opt %s --kiln-kernel-to-linalg --kiln-linalg-to-llvm | FileCheck %s --check-prefix=LLVM
// CHECK: #[[IDX:.*]] = affine_map<(d0, d1) -> (d0 + d1 * 4 + (d0 floordiv 4) * 16)>
// A reduction kernel: a parallel loop over results around a loop over the
// reduced elements that carries the accumulator from the identity; the
// prologue is evaluated at each reduced element's index.

func.func @rowmax(%x: tensor<6x5x4xf32>) -> tensor<6x4xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x) : (tensor<6x5x4xf32>) -> tensor<6x4xf32> {
  ^bb0(%a: tensor<6x5x4xf32>):
    %e = kiln.abs %a : tensor<6x5x4xf32>
    %m = kiln.reduce max %e [1] : tensor<6x5x4xf32> -> tensor<6x4xf32>
    kiln.yield %m : tensor<6x4xf32>
  }
  return %0 : tensor<6x4xf32>
}
// CHECK: func.func @rowmax_kernel0(%[[X:.*]]: memref<120xf32>, %[[OUT:.*]]: memref<24xf32>) attributes {kiln.iteration_size = 120 : i64, kiln.outer_size = 24 : i64}
// CHECK: scf.parallel (%[[O:.*]]) = (%{{.*}}) to (%{{.*}}) step
// CHECK: %[[INIT:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[ACC:.*]] = scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[A:.*]] = %[[INIT]]) -> (f32)
// result (i, k) reads x[i, r, k]: 20 * i + 4 * r + k, simplified above
// CHECK: affine.apply #[[IDX]](%[[O]], %[[R]])
// CHECK: math.absf
// CHECK: arith.maximumf %[[A]]
// CHECK: memref.store %[[ACC]], %[[OUT]][%[[O]]]
// VALID: spirv.module @__spv__rowmax_kernel0_kernel: valid
// LLVM: llvm.func @rowmax_kernel0(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)

// RUN: kiln-opt %s --kiln-kernel-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg --kiln-attach-target=target=vulkan:lavapipe --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// RUN: kiln-opt %s --kiln-kernel-to-linalg --kiln-linalg-to-llvm | FileCheck %s --check-prefix=LLVM
// pad and concat: loads clamped into their buffers, then a select on the
// result coordinate.

func.func @g(%a: tensor<4x3xf32>, %b: tensor<4x2xf32>) -> tensor<6x5xf32> {
  %0 = kiln.kernel on "vulkan:0" (%a, %b) : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<6x5xf32> {
  ^bb0(%x: tensor<4x3xf32>, %y: tensor<4x2xf32>):
    %c = kiln.concat %x, %y axis 1 : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x5xf32>
    %p = kiln.pad %c low [1, 0] high [1, 0] value -1.0 : tensor<4x5xf32> -> tensor<6x5xf32>
    kiln.yield %p : tensor<6x5xf32>
  }
  return %0 : tensor<6x5xf32>
}
// CHECK: func.func @g_kernel0
// CHECK: scf.parallel
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: memref.load
// CHECK: arith.select
// CHECK: memref.store
// VALID: valid
// LLVM: llvm.func @g_kernel0

// gather: the position is loaded, then clamped, then used.
func.func @gather(%x: tensor<5x3xf32>, %i: tensor<4xi32>) -> tensor<4x3xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x, %i) : (tensor<5x3xf32>, tensor<4xi32>) -> tensor<4x3xf32> {
  ^bb0(%a: tensor<5x3xf32>, %b: tensor<4xi32>):
    %g = kiln.gather %a, %b axis 0 : tensor<5x3xf32>, tensor<4xi32> -> tensor<4x3xf32>
    %e = kiln.exp %g : tensor<4x3xf32>
    kiln.yield %e : tensor<4x3xf32>
  }
  return %0 : tensor<4x3xf32>
}
// CHECK-LABEL: func.func @gather_kernel1
// CHECK: arith.index_cast
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: memref.load
// CHECK: math.exp
// VALID: valid

// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise))' | FileCheck %s
// A reduction takes its elementwise producers (prologue) and joins its
// consumers' kernel (epilogue) when they read it per row; reductions over
// the same input and axes share one kernel (softmax, layer norm).

// CHECK-LABEL: func.func @prologue_and_epilogue
func.func @prologue_and_epilogue() -> tensor<4x1xf32> {
  %x = kiln.input 0 : tensor<4x8xf32>
  %w = kiln.input 1 : tensor<8xf32>
  %0 = kiln.mul %x, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = kiln.exp %0 : tensor<4x8xf32>
  %2 = kiln.reduce sum %1 [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %3 = kiln.sqrt %2 : tensor<4x1xf32>
  return %3 : tensor<4x1xf32>
  // CHECK: kiln.kernel {{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x1xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.mul
  // CHECK-NEXT: kiln.exp
  // CHECK-NEXT: kiln.reduce sum
  // CHECK-NEXT: kiln.sqrt
  // CHECK-NEXT: kiln.yield
  // CHECK-NOT: kiln.kernel
}

// A view after the division would read other rows' sums: the sum stays a
// kernel of its own (with exp recomputed in front), the division and the
// transpose another.
// CHECK-LABEL: func.func @view_after_row_value
func.func @view_after_row_value() -> tensor<4x4xf32> {
  %x = kiln.input 0 : tensor<4x4xf32>
  %e = kiln.exp %x : tensor<4x4xf32>
  %z = kiln.reduce sum %e [1] keepdims : tensor<4x4xf32> -> tensor<4x1xf32>
  %y = kiln.div %e, %z : tensor<4x4xf32>, tensor<4x1xf32> -> tensor<4x4xf32>
  %t = kiln.transpose %y [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  return %t : tensor<4x4xf32>
  // CHECK: %[[Z:.*]] = kiln.kernel {{.*}} -> tensor<4x1xf32>
  // CHECK: kiln.reduce sum
  // CHECK: kiln.kernel {{.*}}(%{{.*}}, %[[Z]])
  // CHECK-NOT: kiln.reduce
  // CHECK: kiln.transpose
}

// Reductions over different axes are different kernels.
// CHECK-LABEL: func.func @different_axes
func.func @different_axes() -> tensor<1x1xf32> {
  %x = kiln.input 0 : tensor<4x8xf32>
  %r = kiln.reduce sum %x [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %c = kiln.reduce max %r [0] keepdims : tensor<4x1xf32> -> tensor<1x1xf32>
  return %c : tensor<1x1xf32>
  // CHECK: kiln.kernel
  // CHECK: kiln.reduce sum
  // CHECK: kiln.kernel
  // CHECK: kiln.reduce max
}

// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise))' | FileCheck %s
// softmax is one kernel: the max, the sum of exp(x - max) and the division
// share the row, so every value stays inside the kernel.

// CHECK-LABEL: func.func @softmax
func.func @softmax() -> tensor<4x8xf32> {
  %x = kiln.input 0 : tensor<4x8xf32>
  %m = kiln.reduce max %x [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %s = kiln.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = kiln.exp %s : tensor<4x8xf32>
  %z = kiln.reduce sum %e [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %y = kiln.div %e, %z : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
  // CHECK: kiln.kernel {{.*}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.reduce max
  // CHECK-NEXT: kiln.sub
  // CHECK-NEXT: kiln.exp
  // CHECK-NEXT: kiln.reduce sum
  // CHECK-NEXT: kiln.div
  // CHECK-NEXT: kiln.yield
  // CHECK-NOT: kiln.kernel
}


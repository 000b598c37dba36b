// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise))' | FileCheck %s
// A reduction roots a kernel and takes its elementwise producers (prologue);
// its consumers start a new kernel.

// CHECK-LABEL: func.func @prologue
func.func @prologue() -> tensor<4x1xf32> {
  %x = kiln.input 0 : tensor<4x8xf32>
  %w = kiln.input 1 : tensor<8xf32>
  %0 = kiln.mul %x, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = kiln.exp %0 : tensor<4x8xf32>
  %2 = kiln.reduce sum %1 [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %3 = kiln.sqrt %2 : tensor<4x1xf32>
  return %3 : tensor<4x1xf32>
  // CHECK: %[[R:.*]] = kiln.kernel {{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x1xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.mul
  // CHECK-NEXT: kiln.exp
  // CHECK-NEXT: kiln.reduce sum
  // CHECK-NEXT: kiln.yield
  // CHECK: kiln.kernel {{.*}}(%[[R]]) : (tensor<4x1xf32>) -> tensor<4x1xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.sqrt
}

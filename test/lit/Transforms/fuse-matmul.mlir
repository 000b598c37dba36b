// RUN: kiln-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise))' | FileCheck %s
// A matmul joins the kernel of its elementwise epilogue (bias, activation,
// residual); only views fuse in front of its operands.

// CHECK-LABEL: func.func @linear_gelu_residual
func.func @linear_gelu_residual() -> tensor<16x24xf32> {
  %x = kiln.input 0 : tensor<16x40xf32>
  %w = kiln.input 1 : tensor<24x40xf32>
  %b = kiln.input 2 : tensor<24xf32>
  %r = kiln.input 3 : tensor<16x24xf32>
  %wt = kiln.transpose %w [1, 0] : tensor<24x40xf32> -> tensor<40x24xf32>
  %m = kiln.matmul %x, %wt : tensor<16x40xf32>, tensor<40x24xf32> -> tensor<16x24xf32>
  %a = kiln.add %m, %b : tensor<16x24xf32>, tensor<24xf32> -> tensor<16x24xf32>
  %g = kiln.gelu %a : tensor<16x24xf32>
  %y = kiln.add %g, %r : tensor<16x24xf32>, tensor<16x24xf32> -> tensor<16x24xf32>
  return %y : tensor<16x24xf32>
  // CHECK: kiln.kernel {{.*}} -> tensor<16x24xf32>
  // CHECK-DAG: kiln.transpose
  // CHECK-DAG: kiln.matmul
  // CHECK: kiln.gelu
  // CHECK: kiln.yield
  // CHECK-NOT: kiln.kernel
}

// -----

// An elementwise producer of an operand is not recomputed per product term:
// it is a kernel of its own.
// CHECK-LABEL: func.func @scaled_operand
func.func @scaled_operand() -> tensor<4x5xf32> {
  %x = kiln.input 0 : tensor<4x3xf32>
  %w = kiln.input 1 : tensor<3x5xf32>
  %e = kiln.exp %x : tensor<4x3xf32>
  %m = kiln.matmul %e, %w : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
  return %m : tensor<4x5xf32>
  // CHECK: %[[E:.*]] = kiln.kernel {{.*}} -> tensor<4x3xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.exp
  // CHECK: kiln.kernel {{.*}}(%[[E]], %{{.*}}) {{.*}} -> tensor<4x5xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.matmul
}

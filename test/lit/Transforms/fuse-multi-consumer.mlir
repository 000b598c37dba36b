// RUN: kiln-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise))' | FileCheck %s
// A value read both by a contraction (which reads its operands as they are)
// and by a later kernel's epilogue is written out once, by the kernel of its
// own producers, and both read it: no second kernel for it, nothing computed
// twice.

// a = linear(x) + x; a + linear(linear(a)): three kernels.
// CHECK-LABEL: func.func @residual_linear
func.func @residual_linear() -> tensor<8x16xf32> {
  %x = kiln.input 0 : tensor<8x16xf32>
  %w = kiln.input 1 : tensor<16x16xf32>
  %w2 = kiln.input 2 : tensor<16x16xf32>
  %m = kiln.matmul %x, %w : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %a = kiln.add %m, %x : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %m2 = kiln.matmul %a, %w2 : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %m3 = kiln.matmul %m2, %w : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %y = kiln.add %a, %m3 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
  // CHECK: %[[A:.*]] = kiln.kernel {{.*}} -> tensor<8x16xf32>
  // CHECK: kiln.matmul
  // CHECK-NEXT: kiln.add
  // CHECK-NEXT: kiln.yield
  // CHECK: %[[M2:.*]] = kiln.kernel {{.*}}(%[[A]], {{.*}}) : {{.*}} -> tensor<8x16xf32>
  // CHECK: kiln.matmul
  // CHECK-NEXT: kiln.yield
  // CHECK: kiln.kernel {{.*}}(%[[M2]], {{.*}}%[[A]]{{.*}}) : {{.*}} -> tensor<8x16xf32>
  // CHECK: kiln.matmul
  // CHECK-NEXT: kiln.add
  // CHECK-NEXT: kiln.yield
  // CHECK-NOT: kiln.kernel
}

// -----

// h = relu(conv(x)); conv(h) + h: the ReLU is the first conv's epilogue.
// CHECK-LABEL: func.func @conv_relu_residual
func.func @conv_relu_residual() -> tensor<1x4x8x8xf32> {
  %x = kiln.input 0 : tensor<1x4x8x8xf32>
  %w = kiln.input 1 : tensor<4x4x3x3xf32>
  %c = kiln.conv2d %x, %w strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
      : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32> -> tensor<1x4x8x8xf32>
  %h = kiln.relu %c : tensor<1x4x8x8xf32>
  %c2 = kiln.conv2d %h, %w strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
      : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32> -> tensor<1x4x8x8xf32>
  %y = kiln.add %c2, %h : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  return %y : tensor<1x4x8x8xf32>
  // CHECK: %[[H:.*]] = kiln.kernel
  // CHECK: kiln.conv2d
  // CHECK-NEXT: kiln.relu
  // CHECK-NEXT: kiln.yield
  // CHECK: kiln.kernel {{.*}}(%[[H]]
  // CHECK: kiln.conv2d
  // CHECK-NEXT: kiln.add
  // CHECK-NOT: kiln.relu
  // CHECK-NOT: kiln.kernel
}

// -----

// Softmax's exp(x - max) feeds its sum and its division, kernels that both
// take it: recomputed in each, one kernel in all.
// CHECK-LABEL: func.func @softmax_still_one_kernel
func.func @softmax_still_one_kernel() -> tensor<4x8xf32> {
  %x = kiln.input 0 : tensor<4x8xf32>
  %m = kiln.reduce max %x [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = kiln.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = kiln.exp %d : tensor<4x8xf32>
  %s = kiln.reduce sum %e [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %y = kiln.div %e, %s : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
  // CHECK: kiln.kernel
  // CHECK-NOT: kiln.kernel
}

// RUN: kiln-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise))' | FileCheck %s
// A convolution's bias and ReLU before a pool whose windows overlap
// (ResNet's stem: 3x3 windows, stride 2) are the convolution's epilogue,
// computed once per element, not the pool's prologue, which would compute
// them once per window reading each element (2.25 times here). Still two
// kernels.

// CHECK-LABEL: func.func @stem
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kiln.conv2d
// CHECK-NEXT: kiln.add
// CHECK-NEXT: kiln.relu
// CHECK-NEXT: kiln.yield
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kiln.pool2d max
// CHECK-NEXT: kiln.yield
func.func @stem(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x7x7xf32>, %b: tensor<16x1x1xf32>) -> tensor<1x16x8x8xf32> {
  %c = kiln.conv2d %x, %w strides [2, 2] padding [3, 3] dilation [1, 1] groups 1 : tensor<1x3x32x32xf32>, tensor<16x3x7x7xf32> -> tensor<1x16x16x16xf32>
  %s = kiln.add %c, %b : tensor<1x16x16x16xf32>, tensor<16x1x1xf32> -> tensor<1x16x16x16xf32>
  %r = kiln.relu %s : tensor<1x16x16x16xf32>
  %p = kiln.pool2d max %r kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<1x16x16x16xf32> -> tensor<1x16x8x8xf32>
  return %p : tensor<1x16x8x8xf32>
}

// -----

// Windows that do not overlap (2x2, stride 2) read each element once: the
// ReLU stays the pool's prologue, the convolution alone in its kernel.
// CHECK-LABEL: func.func @tiled
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kiln.conv2d
// CHECK-NEXT: kiln.yield
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kiln.relu
// CHECK-NEXT: kiln.pool2d max
func.func @tiled(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) -> tensor<1x16x16x16xf32> {
  %c = kiln.conv2d %x, %w strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32> -> tensor<1x16x32x32xf32>
  %r = kiln.relu %c : tensor<1x16x32x32xf32>
  %p = kiln.pool2d max %r kernel [2, 2] strides [2, 2] padding [0, 0] : tensor<1x16x32x32xf32> -> tensor<1x16x16x16xf32>
  return %p : tensor<1x16x16x16xf32>
}

// -----

// Elementwise work on an input (no contraction before it) stays the
// overlapping pool's prologue: one kernel.
// CHECK-LABEL: func.func @input
// CHECK: kiln.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kiln.relu
// CHECK-NEXT: kiln.pool2d max
// CHECK-NOT: kiln.kernel
func.func @input(%x: tensor<1x16x16x16xf32>) -> tensor<1x16x8x8xf32> {
  %r = kiln.relu %x : tensor<1x16x16x16xf32>
  %p = kiln.pool2d max %r kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<1x16x16x16xf32> -> tensor<1x16x8x8xf32>
  return %p : tensor<1x16x8x8xf32>
}

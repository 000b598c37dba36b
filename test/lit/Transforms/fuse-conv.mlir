// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise))' | FileCheck %s
// conv2d takes its elementwise consumers (batch norm in inference form,
// ReLU) as an epilogue in one kernel. When a pooling follows, fusion works
// from the results up: the pooling takes batch norm and ReLU as its
// prologue (each conv output is read once by a 2x2/2 window either way), and
// the convolution is a kernel of its own: two kernels both ways.

// CHECK-LABEL: func.func @conv_bn_relu
func.func @conv_bn_relu() -> tensor<1x8x8x8xf32> {
  %x = kiln.input 0 : tensor<1x3x8x8xf32>
  %w = kiln.input 1 : tensor<8x3x3x3xf32>
  %scale = kiln.input 2 : tensor<8x1x1xf32>
  %shift = kiln.input 3 : tensor<8x1x1xf32>
  %y = kiln.conv2d %x, %w strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
      : tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32> -> tensor<1x8x8x8xf32>
  %s = kiln.mul %y, %scale : tensor<1x8x8x8xf32>, tensor<8x1x1xf32> -> tensor<1x8x8x8xf32>
  %b = kiln.add %s, %shift : tensor<1x8x8x8xf32>, tensor<8x1x1xf32> -> tensor<1x8x8x8xf32>
  %r = kiln.relu %b : tensor<1x8x8x8xf32>
  return %r : tensor<1x8x8x8xf32>
  // CHECK: kiln.kernel {{.*}} -> tensor<1x8x8x8xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.conv2d
  // CHECK-NEXT: kiln.mul
  // CHECK-NEXT: kiln.add
  // CHECK-NEXT: kiln.relu
  // CHECK-NEXT: kiln.yield
  // CHECK-NOT: kiln.kernel
}

// CHECK-LABEL: func.func @conv_bn_relu_pool
func.func @conv_bn_relu_pool() -> tensor<1x8x4x4xf32> {
  %x = kiln.input 0 : tensor<1x3x8x8xf32>
  %w = kiln.input 1 : tensor<8x3x3x3xf32>
  %scale = kiln.input 2 : tensor<8x1x1xf32>
  %shift = kiln.input 3 : tensor<8x1x1xf32>
  %y = kiln.conv2d %x, %w strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
      : tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32> -> tensor<1x8x8x8xf32>
  %s = kiln.mul %y, %scale : tensor<1x8x8x8xf32>, tensor<8x1x1xf32> -> tensor<1x8x8x8xf32>
  %b = kiln.add %s, %shift : tensor<1x8x8x8xf32>, tensor<8x1x1xf32> -> tensor<1x8x8x8xf32>
  %r = kiln.relu %b : tensor<1x8x8x8xf32>
  %p = kiln.pool2d max %r kernel [2, 2] strides [2, 2] padding [0, 0]
      : tensor<1x8x8x8xf32> -> tensor<1x8x4x4xf32>
  return %p : tensor<1x8x4x4xf32>
  // CHECK: %[[C:.*]] = kiln.kernel {{.*}} -> tensor<1x8x8x8xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.conv2d
  // CHECK-NEXT: kiln.yield
  // CHECK: kiln.kernel {{.*}}(%[[C]], {{.*}}) -> tensor<1x8x4x4xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.mul
  // CHECK-NEXT: kiln.add
  // CHECK-NEXT: kiln.relu
  // CHECK-NEXT: kiln.pool2d max
  // CHECK-NEXT: kiln.yield
}

// A concat along the channels read only by a convolution's input (16 or
// more filters, one group) or by a pooling folds into that kernel: the
// convolution gathers each channel from its own input, the pool sweeps each
// plane from its own. The concatenated tensor is never written.
// CHECK-LABEL: func.func @concat_into_conv
func.func @concat_into_conv() -> tensor<1x16x6x6xf32> {
  %a = kiln.input 0 : tensor<1x4x6x6xf32>
  %b = kiln.input 1 : tensor<1x4x6x6xf32>
  %w = kiln.input 2 : tensor<16x8x3x3xf32>
  %r = kiln.relu %b : tensor<1x4x6x6xf32>
  %c = kiln.concat %a, %r axis 1 : (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) -> tensor<1x8x6x6xf32>
  %y = kiln.conv2d %c, %w strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
      : tensor<1x8x6x6xf32>, tensor<16x8x3x3xf32> -> tensor<1x16x6x6xf32>
  return %y : tensor<1x16x6x6xf32>
  // The ReLU in front stays a kernel of its own (a convolution reads its
  // operands as they are); the concat joins the convolution.
  // CHECK: %[[R:.*]] = kiln.kernel {{.*}} -> tensor<1x4x6x6xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.relu
  // CHECK: kiln.kernel {{.*}}%[[R]]{{.*}} -> tensor<1x16x6x6xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.concat
  // CHECK-NEXT: kiln.conv2d
  // CHECK-NEXT: kiln.yield
  // CHECK-NOT: kiln.kernel
}

// Under 16 filters the concat stays its own kernel (only the tiled forms
// gather from several inputs), and so it does for a grouped convolution.
// CHECK-LABEL: func.func @concat_narrow_conv
func.func @concat_narrow_conv() -> tensor<1x8x6x6xf32> {
  %a = kiln.input 0 : tensor<1x4x6x6xf32>
  %b = kiln.input 1 : tensor<1x4x6x6xf32>
  %w = kiln.input 2 : tensor<8x8x3x3xf32>
  %c = kiln.concat %a, %b axis 1 : (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) -> tensor<1x8x6x6xf32>
  %y = kiln.conv2d %c, %w strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
      : tensor<1x8x6x6xf32>, tensor<8x8x3x3xf32> -> tensor<1x8x6x6xf32>
  return %y : tensor<1x8x6x6xf32>
  // CHECK: %[[C:.*]] = kiln.kernel {{.*}} -> tensor<1x8x6x6xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.concat
  // CHECK-NEXT: kiln.yield
  // CHECK: kiln.kernel {{.*}}%[[C]]{{.*}} -> tensor<1x8x6x6xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.conv2d
}

// CHECK-LABEL: func.func @concat_into_pool
func.func @concat_into_pool() -> tensor<1x8x3x3xf32> {
  %a = kiln.input 0 : tensor<1x4x6x6xf32>
  %b = kiln.input 1 : tensor<1x4x6x6xf32>
  %r = kiln.relu %b : tensor<1x4x6x6xf32>
  %c = kiln.concat %a, %r axis 1 : (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) -> tensor<1x8x6x6xf32>
  %p = kiln.pool2d max %c kernel [2, 2] strides [2, 2] padding [0, 0]
      : tensor<1x8x6x6xf32> -> tensor<1x8x3x3xf32>
  return %p : tensor<1x8x3x3xf32>
  // The pool takes both the concat and the ReLU in front as its prologue.
  // CHECK: kiln.kernel {{.*}} -> tensor<1x8x3x3xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.relu
  // CHECK-NEXT: kiln.concat
  // CHECK-NEXT: kiln.pool2d
  // CHECK-NEXT: kiln.yield
  // CHECK-NOT: kiln.kernel
}

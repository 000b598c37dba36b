// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// Every kiln op prints in a form that parses back to the same IR.

// CHECK-LABEL: func.func @sources
func.func @sources() -> (tensor<4xf32>, tensor<2x3xf16>, tensor<f32>) {
  // CHECK: kiln.input 0 on "vulkan:1" : tensor<4xf32>
  %0 = kiln.input 0 on "vulkan:1" : tensor<4xf32>
  // CHECK: kiln.constant on "vulkan:0" adapter "6d657361" written "default" dense<1.000000e+00> : tensor<2x3xf16>
  %1 = kiln.constant on "vulkan:0" adapter "6d657361" written "default" dense<1.0> : tensor<2x3xf16>
  // CHECK: kiln.constant dense<2.500000e+00> : tensor<f32>
  %2 = kiln.constant dense<2.5> : tensor<f32>
  return %0, %1, %2 : tensor<4xf32>, tensor<2x3xf16>, tensor<f32>
}

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: kiln.neg %{{.*}} : tensor<8xf32>
  %0 = kiln.neg %x : tensor<8xf32>
  // CHECK-NEXT: kiln.abs
  %1 = kiln.abs %0 : tensor<8xf32>
  // CHECK-NEXT: kiln.exp
  %2 = kiln.exp %1 : tensor<8xf32>
  // CHECK-NEXT: kiln.log
  %3 = kiln.log %2 : tensor<8xf32>
  // CHECK-NEXT: kiln.sqrt
  %4 = kiln.sqrt %3 : tensor<8xf32>
  // CHECK-NEXT: kiln.rsqrt
  %5 = kiln.rsqrt %4 : tensor<8xf32>
  // CHECK-NEXT: kiln.tanh
  %6 = kiln.tanh %5 : tensor<8xf32>
  // CHECK-NEXT: kiln.sigmoid
  %7 = kiln.sigmoid %6 : tensor<8xf32>
  // CHECK-NEXT: kiln.relu
  %8 = kiln.relu %7 : tensor<8xf32>
  // CHECK-NEXT: kiln.gelu %{{.*}} on "vulkan:0" : tensor<8xf32>
  %9 = kiln.gelu %8 on "vulkan:0" : tensor<8xf32>
  return %9 : tensor<8xf32>
}

// CHECK-LABEL: func.func @binary
func.func @binary(%a: tensor<4x1xf32>, %b: tensor<3xf32>) -> tensor<4x3xf32> {
  // CHECK: kiln.add %{{.*}}, %{{.*}} : tensor<4x1xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %0 = kiln.add %a, %b : tensor<4x1xf32>, tensor<3xf32> -> tensor<4x3xf32>
  // CHECK: kiln.sub
  %1 = kiln.sub %0, %b : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  // CHECK: kiln.mul
  %2 = kiln.mul %1, %a : tensor<4x3xf32>, tensor<4x1xf32> -> tensor<4x3xf32>
  // CHECK: kiln.div
  %3 = kiln.div %2, %2 : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  // CHECK: kiln.max
  %4 = kiln.max %3, %2 : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  // CHECK: kiln.min
  %5 = kiln.min %4, %2 : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  // CHECK: kiln.pow
  %6 = kiln.pow %5, %b : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  // CHECK: kiln.cmp le, %{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4x1xf32> -> tensor<4x3xi1>
  %7 = kiln.cmp le, %6, %a : tensor<4x3xf32>, tensor<4x1xf32> -> tensor<4x3xi1>
  // CHECK: kiln.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x3xi1>, tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %8 = kiln.select %7, %6, %b : tensor<4x3xi1>, tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  return %8 : tensor<4x3xf32>
}

// CHECK-LABEL: func.func @transfer_and_kernel
func.func @transfer_and_kernel(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: kiln.transfer %{{.*}} to "vulkan:1" written "vulkan:1" : tensor<4xf32>
  %0 = kiln.transfer %x to "vulkan:1" written "vulkan:1" : tensor<4xf32>
  // CHECK: kiln.kernel on "vulkan:1"(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4xf32>):
  // CHECK-NEXT: %[[E:.*]] = kiln.exp %[[A]]
  // CHECK-NEXT: kiln.yield %[[E]] : tensor<4xf32>
  %1 = kiln.kernel on "vulkan:1" (%0) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = kiln.exp %a : tensor<4xf32>
    kiln.yield %e : tensor<4xf32>
  }
  return %1 : tensor<4xf32>
}

// CHECK-LABEL: func.func @views
func.func @views(%x: tensor<4x3xf32>) -> (tensor<2x12xf32>, tensor<3x2xf32>) {
  // CHECK: kiln.transpose %{{.*}} [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
  %t = kiln.transpose %x [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
  // CHECK: kiln.reshape %{{.*}} : tensor<3x4xf32> -> tensor<12xf32>
  %r = kiln.reshape %t : tensor<3x4xf32> -> tensor<12xf32>
  // CHECK: kiln.broadcast_to %{{.*}} : tensor<12xf32> -> tensor<2x12xf32>
  %b = kiln.broadcast_to %r : tensor<12xf32> -> tensor<2x12xf32>
  // CHECK: kiln.slice %{{.*}} starts [3, 0] steps [-2, 1] : tensor<4x3xf32> -> tensor<2x3xf32>
  %s = kiln.slice %x starts [3, 0] steps [-2, 1] : tensor<4x3xf32> -> tensor<2x3xf32>
  %u = kiln.transpose %s [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %b, %u : tensor<2x12xf32>, tensor<3x2xf32>
}

// CHECK-LABEL: func.func @pad_concat
func.func @pad_concat(%a: tensor<4x3xf32>, %b: tensor<4x2xf32>) -> (tensor<7x6xf32>, tensor<4x5xf32>) {
  // CHECK: kiln.pad %{{.*}} low [1, 0] high [2, 3] value 0.000000e+00 : tensor<4x3xf32> -> tensor<7x6xf32>
  %p = kiln.pad %a low [1, 0] high [2, 3] value 0.0 : tensor<4x3xf32> -> tensor<7x6xf32>
  // CHECK: kiln.concat %{{.*}}, %{{.*}} axis 1 : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x5xf32>
  %c = kiln.concat %a, %b axis 1 : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x5xf32>
  return %p, %c : tensor<7x6xf32>, tensor<4x5xf32>
}

// ceil_mode's sizes: 112 rows, window 3, stride 2 give 55 windows, or 56
// when the partial last one counts (SqueezeNet's pools).
// CHECK-LABEL: func.func @pool_ceil
func.func @pool_ceil(%x: tensor<1x2x112x112xf32>) -> (tensor<1x2x56x56xf32>, tensor<1x2x55x55xf32>) {
  // CHECK: kiln.pool2d max %{{.*}} kernel [3, 3] strides [2, 2] padding [0, 0] ceil_mode : tensor<1x2x112x112xf32> -> tensor<1x2x56x56xf32>
  %p = kiln.pool2d max %x kernel [3, 3] strides [2, 2] padding [0, 0] ceil_mode : tensor<1x2x112x112xf32> -> tensor<1x2x56x56xf32>
  // CHECK: kiln.pool2d max %{{.*}} kernel [3, 3] strides [2, 2] padding [0, 0] : tensor<1x2x112x112xf32> -> tensor<1x2x55x55xf32>
  %q = kiln.pool2d max %x kernel [3, 3] strides [2, 2] padding [0, 0] : tensor<1x2x112x112xf32> -> tensor<1x2x55x55xf32>
  return %p, %q : tensor<1x2x56x56xf32>, tensor<1x2x55x55xf32>
}

// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise))' | FileCheck %s
// layer norm is one kernel: the mean, the variance of the centered input,
// 1/sqrt(var + eps) per row and the affine normalization.

// CHECK-LABEL: func.func @layer_norm
func.func @layer_norm() -> tensor<6x16xf32> {
  %x = kiln.input 0 : tensor<6x16xf32>
  %g = kiln.input 1 : tensor<16xf32>
  %eps = kiln.input 2 : tensor<f32>
  %mu = kiln.reduce mean %x [1] keepdims : tensor<6x16xf32> -> tensor<6x1xf32>
  %c = kiln.sub %x, %mu : tensor<6x16xf32>, tensor<6x1xf32> -> tensor<6x16xf32>
  %sq = kiln.mul %c, %c : tensor<6x16xf32>, tensor<6x16xf32> -> tensor<6x16xf32>
  %var = kiln.reduce mean %sq [1] keepdims : tensor<6x16xf32> -> tensor<6x1xf32>
  %ve = kiln.add %var, %eps : tensor<6x1xf32>, tensor<f32> -> tensor<6x1xf32>
  %r = kiln.rsqrt %ve : tensor<6x1xf32>
  %n = kiln.mul %c, %r : tensor<6x16xf32>, tensor<6x1xf32> -> tensor<6x16xf32>
  %y = kiln.mul %n, %g : tensor<6x16xf32>, tensor<16xf32> -> tensor<6x16xf32>
  return %y : tensor<6x16xf32>
  // CHECK: kiln.kernel {{.*}} : (tensor<6x16xf32>, tensor<f32>, tensor<16xf32>) -> tensor<6x16xf32>
  // CHECK-COUNT-2: kiln.reduce mean
  // CHECK: kiln.rsqrt
  // CHECK: kiln.yield
  // CHECK-NOT: kiln.kernel
}


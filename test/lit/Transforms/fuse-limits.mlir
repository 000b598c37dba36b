// RUN: kiln-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise{max-bindings=4}))' | FileCheck %s --check-prefix=BIND
// RUN: kiln-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise{max-ops=2}))' | FileCheck %s --check-prefix=OPS
// RUN: kiln-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise))' | FileCheck %s --check-prefix=ALL
// Kernels stop growing at the device's binding limit and at max-ops; equal
// scalars are one operand.

// Two adds of the same scalar: one scalar operand. With max-bindings=4,
// growing from the result upwards: the last kernel reads the first one's
// result, b and c (four buffers with its own result); the first reads x,
// the scalar and a.
func.func @chain(%x: tensor<8xf32>, %a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>) -> tensor<8xf32> {
  %x0 = kiln.input 0 on "cpu:0" : tensor<8xf32>
  %a0 = kiln.input 1 on "cpu:0" : tensor<8xf32>
  %b0 = kiln.input 2 on "cpu:0" : tensor<8xf32>
  %c0 = kiln.input 3 on "cpu:0" : tensor<8xf32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %one2 = kiln.constant dense<1.0> : tensor<f32>
  %0 = kiln.add %x0, %one : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %1 = kiln.add %0, %one2 : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %2 = kiln.add %1, %a0 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %3 = kiln.add %2, %b0 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %4 = kiln.add %3, %c0 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %4 : tensor<8xf32>
}
// BIND: kiln.constant on "cpu:0" dense<1.000000e+00> : tensor<f32>
// BIND-NOT: kiln.constant
// BIND: kiln.kernel on "cpu:0"{{.*}} : (tensor<8xf32>, tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
// BIND: kiln.kernel on "cpu:0"{{.*}} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// OPS-COUNT-3: kiln.kernel
// OPS-NOT: kiln.kernel
// ALL-COUNT-1: kiln.kernel
// ALL-NOT: kiln.kernel

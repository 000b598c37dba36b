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

// -----

// A concat of more parts than a kernel binds: concats of at most
// max-bindings - 1 = 3 parts, joined the same way (7 -> 3 + 3 + 1 -> 3),
// each kernel within four buffers.
func.func @wide_concat() -> tensor<14xf32> {
  %p0 = kiln.input 0 on "cpu:0" : tensor<2xf32>
  %p1 = kiln.input 1 on "cpu:0" : tensor<2xf32>
  %p2 = kiln.input 2 on "cpu:0" : tensor<2xf32>
  %p3 = kiln.input 3 on "cpu:0" : tensor<2xf32>
  %p4 = kiln.input 4 on "cpu:0" : tensor<2xf32>
  %p5 = kiln.input 5 on "cpu:0" : tensor<2xf32>
  %p6 = kiln.input 6 on "cpu:0" : tensor<2xf32>
  %0 = kiln.concat %p0, %p1, %p2, %p3, %p4, %p5, %p6 axis 0 : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<14xf32>
  return %0 : tensor<14xf32>
}
// BIND-LABEL: func.func @wide_concat
// BIND: kiln.kernel on "cpu:0"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<6xf32>
// BIND: kiln.concat {{.*}} : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<6xf32>
// BIND: kiln.kernel on "cpu:0"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<6xf32>
// BIND: kiln.kernel on "cpu:0"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<6xf32>, tensor<6xf32>, tensor<2xf32>) -> tensor<14xf32>
// BIND: kiln.concat {{.*}} : (tensor<6xf32>, tensor<6xf32>, tensor<2xf32>) -> tensor<14xf32>
// ALL-LABEL: func.func @wide_concat
// ALL: kiln.concat {{.*}} : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<14xf32>
// OPS-LABEL: func.func @wide_concat

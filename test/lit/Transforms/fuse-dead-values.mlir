// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise))' | FileCheck %s
// RUN: kiln-compile %s --target cpu --describe | FileCheck %s --check-prefix=PROGRAM
// Values nothing reads (a hand-written or imported graph) are dropped before
// fusion, with everything only they read; they would otherwise root a
// kernel without results. The graph's inputs stay, numbered as written.

func.func @graph() -> tensor<64x32xf32> {
  %x = kiln.input 0 on "cpu:0" : tensor<64x32xf32>
  %w = kiln.input 1 on "cpu:0" : tensor<32xf32>
  %s = kiln.mul %x, %w : tensor<64x32xf32>, tensor<32xf32> -> tensor<64x32xf32>
  %t = kiln.tanh %s : tensor<64x32xf32>
  %y = kiln.add %x, %x : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}
// CHECK-LABEL: func.func @graph
// CHECK: kiln.input 0
// CHECK: kiln.input 1
// CHECK-NOT: kiln.mul
// CHECK-NOT: kiln.tanh
// CHECK: kiln.kernel
// CHECK: kiln.add
// CHECK-NOT: kiln.kernel

// PROGRAM: input input0: [64, 32] f32
// PROGRAM: input input1: [32] f32
// PROGRAM: %2 = dispatch kernel 0 (cpu:0) (%0) on cpu:0
// PROGRAM-NOT: dispatch

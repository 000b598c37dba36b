// RUN: kiln-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(kiln-place-devices,kiln-fuse-elementwise))' | FileCheck %s
// Fusion: every maximal elementwise chain on one device becomes one kernel.

// Six elementwise ops with a broadcast: one kernel; the scalar constant and
// the broadcast operand are kernel inputs (so another scalar value reuses
// the compiled kernel).
// CHECK-LABEL: func.func @chain_with_broadcast
func.func @chain_with_broadcast() -> tensor<64x32xf32> {
  %x = kiln.input 0 on "vulkan:0" : tensor<64x32xf32>
  %b = kiln.input 1 : tensor<32xf32>
  %h = kiln.constant dense<0.5> : tensor<f32>
  %0 = kiln.add %x, %b : tensor<64x32xf32>, tensor<32xf32> -> tensor<64x32xf32>
  %1 = kiln.mul %0, %h : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf32>
  %2 = kiln.tanh %1 : tensor<64x32xf32>
  %3 = kiln.exp %2 : tensor<64x32xf32>
  %4 = kiln.gelu %3 : tensor<64x32xf32>
  %5 = kiln.sub %4, %x : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
  return %5 : tensor<64x32xf32>
  // CHECK: %[[X:.*]] = kiln.input 0 on "vulkan:0"
  // CHECK: %[[B:.*]] = kiln.input 1 on "vulkan:0"
  // CHECK: %[[H:.*]] = kiln.constant on "vulkan:0" dense<5.000000e-01> : tensor<f32>
  // CHECK: %[[K:.*]] = kiln.kernel on "vulkan:0"(%[[X]], %[[B]], %[[H]]) : (tensor<64x32xf32>, tensor<32xf32>, tensor<f32>) -> tensor<64x32xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.add
  // CHECK-NEXT: kiln.mul
  // CHECK-NEXT: kiln.tanh
  // CHECK-NEXT: kiln.exp
  // CHECK-NEXT: kiln.gelu
  // CHECK-NEXT: kiln.sub
  // CHECK-NEXT: kiln.yield
  // CHECK-NEXT: }
  // CHECK-NOT: kiln.kernel
  // CHECK: return %[[K]]
}

// -----

// A cheap value used by two different kernels is recomputed in each rather
// than written out and read back.
// CHECK-LABEL: func.func @shared_producer
func.func @shared_producer() -> (tensor<8xf32>, tensor<4x8xf32>) {
  %x = kiln.input 0 : tensor<8xf32>
  %y = kiln.input 1 : tensor<4x8xf32>
  %e = kiln.exp %x : tensor<8xf32>
  %a = kiln.neg %e : tensor<8xf32>
  %b = kiln.add %y, %e : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %a, %b : tensor<8xf32>, tensor<4x8xf32>
  // CHECK: %[[X:.*]] = kiln.input 0
  // CHECK-DAG: %[[A:.*]] = kiln.kernel {{.*}}(%[[X]]) : (tensor<8xf32>) -> tensor<8xf32>
  // CHECK-DAG: %[[B:.*]] = kiln.kernel {{.*}}(%[[X]], %{{.*}}) : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: return %[[A]], %[[B]]
}

// -----

// A shared value the host also reads is written out once and reused.
// CHECK-LABEL: func.func @shared_and_read
func.func @shared_and_read() -> (tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>) {
  %x = kiln.input 0 : tensor<8xf32>
  %y = kiln.input 1 : tensor<4x8xf32>
  %e = kiln.exp %x : tensor<8xf32>
  %a = kiln.neg %e : tensor<8xf32>
  %b = kiln.add %y, %e : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %e, %a, %b : tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>
  // CHECK: %[[E:.*]] = kiln.kernel {{.*}} -> tensor<8xf32>
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.exp
  // CHECK-DAG: kiln.kernel {{.*}}(%[[E]]) : (tensor<8xf32>) -> tensor<8xf32>
  // CHECK-DAG: kiln.kernel {{.*}}(%{{.*}}, %[[E]]) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
}

// -----

// Fusion never crosses a device or a transfer.
// CHECK-LABEL: func.func @device_boundary
func.func @device_boundary() -> tensor<8xf32> {
  %x = kiln.input 0 on "vulkan:0" : tensor<8xf32>
  %a = kiln.exp %x : tensor<8xf32>
  %b = kiln.neg %a : tensor<8xf32>
  %t = kiln.transfer %b to "vulkan:1" : tensor<8xf32>
  %c = kiln.tanh %t : tensor<8xf32>
  %d = kiln.abs %c : tensor<8xf32>
  return %d : tensor<8xf32>
  // CHECK: kiln.kernel on "vulkan:0"
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.exp
  // CHECK-NEXT: kiln.neg
  // CHECK: kiln.transfer {{.*}} to "vulkan:1"
  // CHECK: kiln.kernel on "vulkan:1"
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.tanh
  // CHECK-NEXT: kiln.abs
}

// -----

// An intermediate the host reads is an extra result of the same kernel.
// CHECK-LABEL: func.func @two_results
func.func @two_results() -> (tensor<8xf32>, tensor<8xf32>) {
  %x = kiln.input 0 : tensor<8xf32>
  %a = kiln.exp %x : tensor<8xf32>
  %b = kiln.sqrt %a : tensor<8xf32>
  return %a, %b : tensor<8xf32>, tensor<8xf32>
  // CHECK: %[[K:.*]]:2 = kiln.kernel {{.*}} -> (tensor<8xf32>, tensor<8xf32>)
  // CHECK: kiln.yield %{{.*}}, %{{.*}} : tensor<8xf32>, tensor<8xf32>
  // CHECK: return %[[K]]#0, %[[K]]#1
}

// -----

// Comparison and select fuse with the arithmetic around them.
// CHECK-LABEL: func.func @where
func.func @where() -> tensor<16xf32> {
  %x = kiln.input 0 : tensor<16xf32>
  %z = kiln.constant dense<0.0> : tensor<f32>
  %m = kiln.cmp gt, %x, %z : tensor<16xf32>, tensor<f32> -> tensor<16xi1>
  %n = kiln.neg %x : tensor<16xf32>
  %r = kiln.select %m, %x, %n : tensor<16xi1>, tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  return %r : tensor<16xf32>
  // CHECK: kiln.kernel
  // CHECK: kiln.cmp gt
  // CHECK: kiln.neg
  // CHECK: kiln.select
  // CHECK-NOT: kiln.kernel
}

// -----

// Views fuse: the transpose and the slice become indexing of one kernel.
// CHECK-LABEL: func.func @views_fold
func.func @views_fold() -> tensor<3x4xf32> {
  %x = kiln.input 0 : tensor<4x3xf32>
  %y = kiln.input 1 : tensor<8x4xf32>
  %t = kiln.transpose %x [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
  %s = kiln.slice %y starts [7, 0] steps [-2, 1] : tensor<8x4xf32> -> tensor<3x4xf32>
  %e = kiln.exp %t : tensor<3x4xf32>
  %r = kiln.add %e, %s : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
  // CHECK: kiln.kernel {{.*}} : (tensor<4x3xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  // CHECK-DAG: kiln.transpose
  // CHECK-DAG: kiln.slice
  // CHECK-DAG: kiln.exp
  // CHECK: kiln.add
  // CHECK-NOT: kiln.kernel
}

// -----

// A splat of rank > 0 is copied into the kernel; its original, now unused,
// is not kept (it would be uploaded on every run).
// CHECK-LABEL: func.func @splat_copied
func.func @splat_copied() -> tensor<16xf32> {
  %x = kiln.input 0 : tensor<16xf32>
  %z = kiln.constant dense<0.0> : tensor<16xf32>
  %r = kiln.max %x, %z : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  return %r : tensor<16xf32>
  // CHECK-NOT: kiln.constant on
  // CHECK: kiln.kernel
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.constant dense<0.000000e+00> : tensor<16xf32>
  // CHECK-NEXT: kiln.max
}

// -----

// A scalar whose value is fixed (kiln.inline_scalar: a CPU program compiled
// ahead of time) is copied into the kernel like any splat: a literal, not
// an operand.
// CHECK-LABEL: func.func @fixed_scalars
func.func @fixed_scalars() -> tensor<64xf32> {
  %x = kiln.input 0 on "cpu:0" : tensor<64xf32>
  %lo = kiln.constant {kiln.inline_scalar} dense<0.0> : tensor<f32>
  %hi = kiln.constant {kiln.inline_scalar} dense<6.0> : tensor<f32>
  %0 = kiln.max %x, %lo : tensor<64xf32>, tensor<f32> -> tensor<64xf32>
  %1 = kiln.min %0, %hi : tensor<64xf32>, tensor<f32> -> tensor<64xf32>
  return %1 : tensor<64xf32>
  // CHECK: %[[X:.*]] = kiln.input 0 on "cpu:0"
  // CHECK-NEXT: %[[K:.*]] = kiln.kernel on "cpu:0"(%[[X]]) : (tensor<64xf32>) -> tensor<64xf32> {
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kiln.constant {{.*}}dense<0.000000e+00> : tensor<f32>
  // CHECK-NEXT: kiln.max
  // CHECK-NEXT: kiln.constant {{.*}}dense<6.000000e+00> : tensor<f32>
  // CHECK-NEXT: kiln.min
  // CHECK: return %[[K]]
}

// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// A matmul with k past 1024 runs k in slices of 512 on the CPU: the first
// slice's sums start at zero and wait in a buffer (the split's rows x the
// panel), the middle slices resume from it and store back, the last one
// resumes and ends in the epilogue. The adds keep their order, so the result
// is the unsliced one bit for bit. The last panel sweeps only the register
// blocks that reach into [0, N) (520 columns: ragged with panels of 96 or 64).

func.func @long_k(%x: tensor<64x2048xf32>, %w: tensor<2048x520xf32>) -> tensor<64x520xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w) : (tensor<64x2048xf32>, tensor<2048x520xf32>) -> tensor<64x520xf32> {
  ^bb0(%a: tensor<64x2048xf32>, %b: tensor<2048x520xf32>):
    %m = kiln.matmul %a, %b : tensor<64x2048xf32>, tensor<2048x520xf32> -> tensor<64x520xf32>
    %r = kiln.relu %m : tensor<64x520xf32>
    kiln.yield %r : tensor<64x520xf32>
  }
  return %0 : tensor<64x520xf32>
}
// CHECK-LABEL: func.func @long_k_kernel0
// CHECK: %[[PANEL:.*]] = memref.alloc() {alignment = 64 : i64}
// CHECK: %[[SUMS:.*]] = memref.alloc() {alignment = 64 : i64}
// The panel's end: its register blocks up to N.
// CHECK: %[[END:.*]] = arith.minui %c{{96|64}}{{.*}}, %{{.*}} : index
// First slice: from zero, into the buffer, no epilogue.
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[END]] step
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c512{{.*}} step %c1{{.*}} iter_args(%{{.*}} = %cst
// CHECK: vector.fma
// CHECK: vector.store %{{.*}}, %[[SUMS]]
// CHECK-NOT: arith.maximumf
// Middle slices.
// CHECK: scf.for %{{.*}} = %c512{{.*}} to %c1536{{.*}} step %c512
// CHECK: vector.load %[[SUMS]]
// CHECK: vector.fma
// CHECK: vector.store %{{.*}}, %[[SUMS]]
// Last slice: resumed, then the epilogue (ReLU).
// CHECK: vector.load %[[SUMS]]
// CHECK: scf.for %{{.*}} = %c1536{{.*}} to %c2048{{.*}} step %c1
// CHECK: vector.fma
// CHECK-NOT: vector.store %{{.*}}, %[[SUMS]]
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : vector<{{8|16}}xf32>
// CHECK: memref.dealloc %[[SUMS]]
// CHECK: memref.dealloc %[[PANEL]]

// k = 1024 runs unsliced: one k loop, no buffer of sums.
func.func @short_k(%x: tensor<64x1024xf32>, %w: tensor<1024x512xf32>) -> tensor<64x512xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w) : (tensor<64x1024xf32>, tensor<1024x512xf32>) -> tensor<64x512xf32> {
  ^bb0(%a: tensor<64x1024xf32>, %b: tensor<1024x512xf32>):
    %m = kiln.matmul %a, %b : tensor<64x1024xf32>, tensor<1024x512xf32> -> tensor<64x512xf32>
    kiln.yield %m : tensor<64x512xf32>
  }
  return %0 : tensor<64x512xf32>
}
// CHECK-LABEL: func.func @short_k_kernel1
// CHECK: memref.alloc() {alignment = 64 : i64}
// CHECK-NOT: memref.alloc() {alignment = 64 : i64}
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c1024{{.*}} step %c1{{.*}} iter_args
// CHECK-NOT: scf.for %{{.*}} = %c512
// CHECK: return

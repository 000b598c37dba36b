// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true --kiln-linalg-to-llvm | FileCheck %s --check-prefix=LLVM
// Attention over 8 heads of 100 queries and 100 keys (E = Ev = 32) on the
// CPU: each work unit takes 52 query rows (100 shared evenly by two units,
// in groups of 4), so 16 units. Per block of 64 keys it packs k^T once
// (32 x 64), computes 4 rows x 64 scores as 16 vector accumulators, takes
// each row's max, rescales the running sum and output by exp(old - new
// max), and adds p v with 4 rows x 2 vectors of output in registers. Only
// buffers of the unit's size: no 100 x 100 scores.

func.func @attention(%q: tensor<8x100x32xf32>, %k: tensor<8x100x32xf32>, %v: tensor<8x100x32xf32>) -> tensor<8x100x32xf32> {
  %0 = kiln.kernel on "cpu:0" (%q, %k, %v) : (tensor<8x100x32xf32>, tensor<8x100x32xf32>, tensor<8x100x32xf32>) -> tensor<8x100x32xf32> {
  ^bb0(%a: tensor<8x100x32xf32>, %b: tensor<8x100x32xf32>, %c: tensor<8x100x32xf32>):
    %o = kiln.attention %a, %b, %c scale 0.17677 : tensor<8x100x32xf32>, tensor<8x100x32xf32>, tensor<8x100x32xf32> -> tensor<8x100x32xf32>
    kiln.yield %o : tensor<8x100x32xf32>
  }
  return %0 : tensor<8x100x32xf32>
}
// CHECK-LABEL: func.func @attention_kernel0
// CHECK-SAME: kiln.outer_size = 16
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1664xf32>
// CHECK-NEXT: memref.alloc() {alignment = 64 : i64} : memref<2048xf32>
// CHECK-NEXT: memref.alloc() {alignment = 64 : i64} : memref<1664xf32>
// CHECK-NEXT: memref.alloca() : memref<256xf32>
// CHECK-NEXT: memref.alloca() : memref<52xf32>
// CHECK-NEXT: memref.alloca() : memref<52xf32>
// CHECK-NOT: memref.alloc
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c16
// The scores: 16 accumulators over E.
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-16: vector.fma
// CHECK: vector.reduction <maximumf>
// CHECK: math.exp
// The product with v: 4 rows x 2 vectors.
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-8: vector.fma
// CHECK: memref.dealloc
// LLVM: llvm.func @attention_kernel0
// LLVM: llvm.intr.fmuladd

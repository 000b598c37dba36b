// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true --kiln-linalg-to-llvm | FileCheck %s --check-prefix=LLVM
// matmul + bias + relu on the CPU: the outer loop runs over panels of B's
// columns (the threads' unit); each packs its panel, then keeps a block of
// rows x vectors accumulators in vector registers across the k loop (vector
// loads of the panel, broadcasts of A, vector FMAs), and evaluates the
// epilogue per result within the matrix's edges. The vector width is the
// host's (16 lanes with AVX-512, else 8).

func.func @linear_relu(%x: tensor<20x24xf32>, %w: tensor<40x24xf32>, %b: tensor<40xf32>) -> tensor<20x40xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w, %b) : (tensor<20x24xf32>, tensor<40x24xf32>, tensor<40xf32>) -> tensor<20x40xf32> {
  ^bb0(%a: tensor<20x24xf32>, %ww: tensor<40x24xf32>, %bb: tensor<40xf32>):
    %t = kiln.transpose %ww [1, 0] : tensor<40x24xf32> -> tensor<24x40xf32>
    %m = kiln.matmul %a, %t : tensor<20x24xf32>, tensor<24x40xf32> -> tensor<20x40xf32>
    %s = kiln.add %m, %bb : tensor<20x40xf32>, tensor<40xf32> -> tensor<20x40xf32>
    %r = kiln.relu %s : tensor<20x40xf32>
    kiln.yield %r : tensor<20x40xf32>
  }
  return %0 : tensor<20x40xf32>
}
// One 64-column panel covers the 40 columns; the 20 rows split in 2 (16
// and 4 rows) so that two threads have outer iterations to share (a split
// packs the panel again, so splits keep about 128 rows each past two).
// CHECK: func.func @linear_relu_kernel0({{.*}}) attributes {kiln.iteration_size = 19200 : i64, kiln.outer_size = 2 : i64}
// CHECK: %[[PANEL:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1536xf32>
// CHECK: scf.for
// The packed panel: zero past N.
// CHECK: arith.select
// CHECK: memref.store {{.*}}, %[[PANEL]]
// CHECK: scf.for {{.*}} iter_args
// CHECK: vector.load %[[PANEL]]
// CHECK: vector.broadcast
// CHECK: vector.fma {{.*}} : vector<{{8|16}}xf32>
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: memref.dealloc %[[PANEL]]
// LLVM: llvm.func @linear_relu_kernel0
// LLVM: llvm.call @malloc
// LLVM: llvm.intr.fmuladd({{.*}}) : (vector<{{8|16}}xf32>

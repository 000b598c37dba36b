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
// One panel (96 columns with AVX-512, 64 with AVX2) covers the 40 columns;
// the 20 rows split in 2 (16 and 4 rows) so that two threads have outer
// iterations to share (a split on another thread packs the panel again, so
// splits keep about 128 rows each past two).
// CHECK: func.func @linear_relu_kernel0({{.*}}) attributes {kiln.iteration_size = 19200 : i64, kiln.outer_size = 2 : i64}
// CHECK: %[[PANEL:.*]] = memref.alloc() {alignment = 64 : i64} : memref<{{1536|2304}}xf32>
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

// A projection as PyTorch's attention exports it: the tokens moved to the
// batch ([1, 128, 64] -> [128, 1, 64]), one row each, against one shared
// weight. The batch is one GEMM of 128 rows (3 panels of 32 columns, each
// swept in 2 halves of rows), not 128 matrix-vector products that each read the whole
// weight (the exported encoder's projection: 40 ms -> 1.8 ms).
func.func @tokens_as_batch(%x: tensor<1x128x64xf32>, %w: tensor<64x96xf32>) -> tensor<128x1x96xf32> {
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_gemm", lanes = 16, panel = 32, rows = 8, vectors = 2} (%x, %w) : (tensor<1x128x64xf32>, tensor<64x96xf32>) -> tensor<128x1x96xf32> {
  ^bb0(%a: tensor<1x128x64xf32>, %ww: tensor<64x96xf32>):
    %t = kiln.transpose %a [1, 0, 2] : tensor<1x128x64xf32> -> tensor<128x1x64xf32>
    %m = kiln.matmul %t, %ww : tensor<128x1x64xf32>, tensor<64x96xf32> -> tensor<128x1x96xf32>
    kiln.yield %m : tensor<128x1x96xf32>
  }
  return %0 : tensor<128x1x96xf32>
}
// CHECK-LABEL: func.func @tokens_as_batch_kernel1
// CHECK-SAME: kiln.outer_size = 6
// CHECK-NOT: vector.reduction
// CHECK: scf.for {{.*}} iter_args
// CHECK-COUNT-16: vector.fma

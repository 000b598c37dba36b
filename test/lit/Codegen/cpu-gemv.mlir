// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true --kiln-linalg-to-llvm | FileCheck %s --check-prefix=LLVM
// A linear layer at batch 1 on the CPU: a matrix-vector product over the
// weight's rows, 4 rows per outer iteration (10 outputs: 3 iterations),
// each row read as contiguous vectors against the same vector of x, summed
// across lanes at the end, the k tail (70 = 64 + 6 with 16 lanes, 66 + 4
// with 8) scalar; the bias per output.

func.func @linear1(%x: tensor<1x70xf32>, %w: tensor<10x70xf32>, %b: tensor<10xf32>) -> tensor<1x10xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w, %b) : (tensor<1x70xf32>, tensor<10x70xf32>, tensor<10xf32>) -> tensor<1x10xf32> {
  ^bb0(%a: tensor<1x70xf32>, %ww: tensor<10x70xf32>, %bb: tensor<10xf32>):
    %t = kiln.transpose %ww [1, 0] : tensor<10x70xf32> -> tensor<70x10xf32>
    %m = kiln.matmul %a, %t : tensor<1x70xf32>, tensor<70x10xf32> -> tensor<1x10xf32>
    %s = kiln.add %m, %bb : tensor<1x10xf32>, tensor<10xf32> -> tensor<1x10xf32>
    kiln.yield %s : tensor<1x10xf32>
  }
  return %0 : tensor<1x10xf32>
}
// CHECK: func.func @linear1_kernel0({{.*}}) attributes {kiln.iteration_size = 700 : i64, kiln.outer_size = 3 : i64}
// CHECK: scf.for
// CHECK: scf.for {{.*}} iter_args
// CHECK: vector.load %arg0
// CHECK-COUNT-4: vector.fma
// CHECK-COUNT-4: vector.reduction <add>
// CHECK: scf.for {{.*}} iter_args
// CHECK-COUNT-4: math.fma
// CHECK: scf.if
// CHECK: arith.addf
// CHECK: memref.store
// CHECK-NOT: memref.alloc
// LLVM: llvm.func @linear1_kernel0

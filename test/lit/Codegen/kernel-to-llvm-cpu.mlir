// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s --check-prefix=LINALG
// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true --kiln-linalg-to-llvm | FileCheck %s --check-prefix=LLVM
// The CPU form: dimensions that every operand treats alike are merged, the
// broadcasts stay projections (contiguous inner loads), transcendentals are
// polynomials, and the outermost loop runs over [begin, end) arguments.

func.func @graph(%x: tensor<8x4x32xf32>, %c: tensor<32xf32>, %r: tensor<8x4x1xf32>) -> tensor<8x4x32xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %c, %r) : (tensor<8x4x32xf32>, tensor<32xf32>, tensor<8x4x1xf32>) -> tensor<8x4x32xf32> {
  ^bb0(%a: tensor<8x4x32xf32>, %b: tensor<32xf32>, %d: tensor<8x4x1xf32>):
    %1 = kiln.mul %a, %b : tensor<8x4x32xf32>, tensor<32xf32> -> tensor<8x4x32xf32>
    %2 = kiln.add %1, %d : tensor<8x4x32xf32>, tensor<8x4x1xf32> -> tensor<8x4x32xf32>
    %3 = kiln.tanh %2 : tensor<8x4x32xf32>
    kiln.yield %3 : tensor<8x4x32xf32>
  }
  return %0 : tensor<8x4x32xf32>
}
// [8, 4] merge (every operand full or broadcast on both); 32 stays apart.
// LINALG-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// LINALG-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (0, d1)>
// LINALG-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// LINALG: func.func @graph_kernel0(%{{.*}}: memref<32x32xf32>, %{{.*}}: memref<1x32xf32>, %{{.*}}: memref<32x1xf32>, %{{.*}}: memref<32x32xf32>) attributes {kiln.iteration_size = 1024 : i64, kiln.outer_size = 32 : i64}
// LINALG: linalg.generic {indexing_maps = [#[[ID]], #[[COL]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]}

// LLVM: llvm.func @graph_kernel0(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[BEGIN:.*]]: i64, %[[END:.*]]: i64)
// LLVM-NOT: kiln.iteration_size
// LLVM: llvm.br ^bb1(%[[BEGIN]] : i64)
// LLVM: llvm.icmp "slt" %{{.*}}, %[[END]]
// LLVM-NOT: math.tanh
// LLVM-NOT: llvm.call @tanhf

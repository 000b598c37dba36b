// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// A CPU kernel reading through views that divide the flat index (an
// attention head's q: a slice of a fused projection, split into heads and
// transposed) runs as rows of its last dimension: the indices are linear
// in the position along the row, so LLVM vectorizes the loop over it. The
// row index alone is divided.

func.func @heads(%qkv: tensor<16x1x96xf32>) -> tensor<2x16x16xf32> {
  %0 = kiln.kernel on "cpu:0" (%qkv) : (tensor<16x1x96xf32>) -> tensor<2x16x16xf32> {
  ^bb0(%x: tensor<16x1x96xf32>):
    %s = kiln.slice %x starts [0, 0, 0] steps [1, 1, 1] : tensor<16x1x96xf32> -> tensor<16x1x32xf32>
    %r = kiln.reshape %s : tensor<16x1x32xf32> -> tensor<16x2x16xf32>
    %t = kiln.transpose %r [1, 0, 2] : tensor<16x2x16xf32> -> tensor<2x16x16xf32>
    %e = kiln.exp %t : tensor<2x16x16xf32>
    kiln.yield %e : tensor<2x16x16xf32>
  }
  return %0 : tensor<2x16x16xf32>
}
// Element (h, t, e) = row (h, t) = d0, e = d1 reads x[t, 0, h * 16 + e]:
// t * 96 + h * 16 + e with t = d0 mod 16, h = d0 floordiv 16 (and a term
// of h floordiv 2, zero here: the rows' own bound is not used).
// CHECK-DAG: #[[READ:.*]] = affine_map<(d0, d1) -> (d0 * 96 + d1 - (d0 floordiv 16) * 1520{{.*}})>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @heads_kernel0
// CHECK-SAME: attributes {kiln.iteration_size = 512 : i64, kiln.outer_size = 32 : i64}
// CHECK: %[[ROWS:.*]] = memref.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [32, 16] : memref<512xf32> into memref<32x16xf32>
// CHECK: linalg.generic {indexing_maps = [#[[READ]], #[[OUT]]], iterator_types = ["parallel", "parallel"]} ins(%{{.*}} : memref<1536xf32>) outs(%[[ROWS]] : memref<32x16xf32>)
// CHECK: math.exp

// Rows shorter than 8 elements keep the flat loop.
func.func @short_rows(%x: tensor<6x4xf32>) -> tensor<4x6xf32> {
  %0 = kiln.kernel on "cpu:0" (%x) : (tensor<6x4xf32>) -> tensor<4x6xf32> {
  ^bb0(%a: tensor<6x4xf32>):
    %t = kiln.transpose %a [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
    %n = kiln.neg %t : tensor<4x6xf32>
    kiln.yield %n : tensor<4x6xf32>
  }
  return %0 : tensor<4x6xf32>
}
// CHECK-LABEL: func.func @short_rows_kernel1
// CHECK-NOT: memref.expand_shape
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel"]

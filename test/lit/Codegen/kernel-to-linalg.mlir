// RUN: kiln-opt %s --kiln-kernel-to-linalg | FileCheck %s
// Each kernel becomes one linalg.generic over its flattened iteration space;
// broadcasts are floordiv/mod indexing maps on flat buffers.

// CHECK-DAG: #[[ID:.*]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0) -> (d0 floordiv 32)>
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0) -> (d0 mod 32)>
// CHECK-DAG: #[[SCALAR:.*]] = affine_map<(d0) -> (0)>
func.func @graph(%x: tensor<64x32xf32>, %r: tensor<64x1xf32>, %c: tensor<32xf32>, %s: tensor<f32>) -> tensor<64x32xf32> {
  // CHECK: kiln.kernel {{.*}} {kernel = @graph_kernel0}
  %0 = kiln.kernel on "vulkan:0" (%x, %r, %c, %s) : (tensor<64x32xf32>, tensor<64x1xf32>, tensor<32xf32>, tensor<f32>) -> tensor<64x32xf32> {
  ^bb0(%a: tensor<64x32xf32>, %b: tensor<64x1xf32>, %d: tensor<32xf32>, %e: tensor<f32>):
    %1 = kiln.add %a, %b : tensor<64x32xf32>, tensor<64x1xf32> -> tensor<64x32xf32>
    %2 = kiln.mul %1, %d : tensor<64x32xf32>, tensor<32xf32> -> tensor<64x32xf32>
    %3 = kiln.sub %2, %e : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf32>
    %4 = kiln.sigmoid %3 : tensor<64x32xf32>
    kiln.yield %4 : tensor<64x32xf32>
  }
  return %0 : tensor<64x32xf32>
}
// CHECK: func.func @graph_kernel0(%{{.*}}: memref<2048xf32>, %{{.*}}: memref<64xf32>, %{{.*}}: memref<32xf32>, %{{.*}}: memref<1xf32>, %{{.*}}: memref<2048xf32>) attributes {kiln.iteration_size = 2048 : i64, kiln.outer_size = 2048 : i64}
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[COL]], #[[SCALAR]], #[[ID]]], iterator_types = ["parallel"]}
// CHECK: arith.addf
// CHECK: arith.mulf
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: linalg.yield


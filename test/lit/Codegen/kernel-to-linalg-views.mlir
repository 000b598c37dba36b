// RUN: kiln-opt %s --kiln-kernel-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg --kiln-attach-target=target=vulkan:lavapipe --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// VALID: valid

// Views become indexing: x read through a transpose and directly is two
// linalg inputs over one buffer; the reversed slice is a negative stride.
// (d0 mod 4) * 3 + d0 floordiv 4, as simplified:
// CHECK-DAG: #[[T:.*]] = affine_map<(d0) -> (d0 * 3 - (d0 floordiv 4) * 11)>
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0) -> (d0)>
// 7 - 2 * (d0 mod 4), as simplified:
// CHECK-DAG: #[[S:.*]] = affine_map<(d0) -> (d0 * -2 + (d0 floordiv 4) * 8 + 7)>
func.func @views(%x: tensor<4x3xf32>, %y: tensor<8xf32>) -> tensor<3x4xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x, %y) : (tensor<4x3xf32>, tensor<8xf32>) -> tensor<3x4xf32> {
  ^bb0(%a: tensor<4x3xf32>, %b: tensor<8xf32>):
    %t = kiln.transpose %a [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
    %r = kiln.reshape %a : tensor<4x3xf32> -> tensor<3x4xf32>
    %s = kiln.slice %b starts [7] steps [-2] : tensor<8xf32> -> tensor<4xf32>
    %1 = kiln.add %t, %r : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
    %2 = kiln.mul %1, %s : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
    kiln.yield %2 : tensor<3x4xf32>
  }
  return %0 : tensor<3x4xf32>
}
// CHECK: func.func @views_kernel0(%[[X:.*]]: memref<12xf32>, %[[Y:.*]]: memref<8xf32>, %{{.*}}: memref<12xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[T]], #[[ID]], #[[S]], #[[ID]]], iterator_types = ["parallel"]} ins(%[[X]], %[[X]], %[[Y]] : memref<12xf32>, memref<12xf32>, memref<8xf32>)

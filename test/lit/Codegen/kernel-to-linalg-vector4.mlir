// RUN: kiln-opt %s -split-input-file --kiln-kernel-to-linalg=vector4=true | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-kernel-to-linalg=vector4=true --kiln-attach-target=target=vulkan:lavapipe --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// The GPU layout: groups of 4 elements with 16-byte accesses; an operand
// broadcast along the innermost dimension is one scalar per group, splatted.

// CHECK-DAG: #[[ID:.*]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0) -> (d0 floordiv 8)>
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0) -> (d0 mod 8)>
// CHECK-DAG: #[[SCALAR:.*]] = affine_map<(d0) -> (0)>
func.func @graph(%x: tensor<64x32xf32>, %r: tensor<64x1xf32>, %c: tensor<32xf32>, %s: tensor<f32>) -> tensor<64x32xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x, %r, %c, %s) : (tensor<64x32xf32>, tensor<64x1xf32>, tensor<32xf32>, tensor<f32>) -> tensor<64x32xf32> {
  ^bb0(%a: tensor<64x32xf32>, %b: tensor<64x1xf32>, %d: tensor<32xf32>, %e: tensor<f32>):
    %1 = kiln.add %a, %b : tensor<64x32xf32>, tensor<64x1xf32> -> tensor<64x32xf32>
    %2 = kiln.mul %1, %d : tensor<64x32xf32>, tensor<32xf32> -> tensor<64x32xf32>
    %3 = kiln.sub %2, %e : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf32>
    %4 = kiln.gelu %3 : tensor<64x32xf32>
    kiln.yield %4 : tensor<64x32xf32>
  }
  return %0 : tensor<64x32xf32>
}
// CHECK: func.func @graph_kernel0(%{{.*}}: memref<512xvector<4xf32>>, %{{.*}}: memref<64xf32>, %{{.*}}: memref<8xvector<4xf32>>, %{{.*}}: memref<1xf32>, %{{.*}}: memref<512xvector<4xf32>>) attributes {kiln.iteration_size = 2048 : i64, kiln.outer_size = 512 : i64}
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[COL]], #[[SCALAR]], #[[ID]]]
// CHECK-NEXT: ^bb0(%{{.*}}: vector<4xf32>, %[[R:.*]]: f32, %{{.*}}: vector<4xf32>, %{{.*}}: f32, %{{.*}}: vector<4xf32>):
// CHECK: vector.broadcast %[[R]] : f32 to vector<4xf32>
// GELU: erfc from one exp and one division, on the whole vector.
// CHECK: arith.divf {{.*}} : vector<4xf32>
// CHECK: math.exp %{{.*}} : vector<4xf32>
// CHECK: arith.select {{.*}} : vector<4xi1>, vector<4xf32>
// VALID: spirv.module @__spv__graph_kernel0_kernel: valid

// -----

// An innermost dimension that is not a multiple of 4 keeps the flat layout.
func.func @odd(%x: tensor<7x13xf32>) -> tensor<7x13xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x) : (tensor<7x13xf32>) -> tensor<7x13xf32> {
  ^bb0(%a: tensor<7x13xf32>):
    %1 = kiln.exp %a : tensor<7x13xf32>
    kiln.yield %1 : tensor<7x13xf32>
  }
  return %0 : tensor<7x13xf32>
}
// CHECK: func.func @odd_kernel0(%{{.*}}: memref<91xf32>, %{{.*}}: memref<91xf32>)
// VALID: spirv.module @__spv__odd_kernel0_kernel: valid

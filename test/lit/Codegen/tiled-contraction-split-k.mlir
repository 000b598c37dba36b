// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// k split over groups of work items (MatmulConfig::splitK): four groups of
// 32 work items, each with its own tiles, taking every fourth slice of 8;
// 70 = 9 slices, so a group's last slice past the end stages zeros. Groups
// 1..3 leave their sums in workgroup memory, and group 0 adds them in group
// order before the epilogue.

func.func @split(%x: tensor<100x70xf32>, %w: tensor<70x130xf32>, %b: tensor<130xf32>) -> tensor<100x130xf32> {
  %0 = kiln.kernel on "vulkan:0" config {form = "gemm", tile = array<i64: 16, 32, 8>, thread = array<i64: 4, 4>, split_k = 4} (%x, %w, %b) : (tensor<100x70xf32>, tensor<70x130xf32>, tensor<130xf32>) -> tensor<100x130xf32> {
  ^bb0(%a: tensor<100x70xf32>, %ww: tensor<70x130xf32>, %bb: tensor<130xf32>):
    %m = kiln.matmul %a, %ww : tensor<100x70xf32>, tensor<70x130xf32> -> tensor<100x130xf32>
    %s = kiln.add %m, %bb : tensor<100x130xf32>, tensor<130xf32> -> tensor<100x130xf32>
    kiln.yield %s : tensor<100x130xf32>
  }
  return %0 : tensor<100x130xf32>
}
// CHECK-LABEL: func.func @split_kernel0
// 5 x 7 workgroups of 4 x 32 work items.
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c5{{.*}}, {{.*}} = %c7{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c128
// CHECK: arith.divui %{{.*}}, %c32{{[_0-9]*}} :
// CHECK: arith.remui %{{.*}}, %c32{{[_0-9]*}} :
// Four groups' tiles: 4 x 8 x 16 and 4 x 8 x 32 floats.
// CHECK: memref.alloc() : memref<128xvector<4xf32>, 3>
// CHECK: memref.alloc() : memref<256xvector<4xf32>, 3>
// Slice it * 4 + group, clamped, and zeros past the ninth.
// CHECK: arith.minui %{{.*}}, %c8{{[_0-9]*}} :
// CHECK: arith.select {{.*}} : vector<4xi1>, vector<4xf32>
// Three iterations (ceil(9 / 4)).
// CHECK: scf.for %{{.*}} = %c0{{[_0-9]*}} to %c3{{[_0-9]*}} step %c1{{[_0-9]*}} iter_args
// CHECK: gpu.barrier
// CHECK: math.fma
// CHECK: gpu.barrier
// CHECK: scf.yield
// The partial sums: 3 groups x 4 vectors x 32 work items.
// CHECK: memref.alloc() : memref<384xvector<4xf32>, 3>
// CHECK: scf.if
// CHECK: } else {
// CHECK-COUNT-4: memref.store {{.*}} : memref<384xvector<4xf32>, 3>
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK-COUNT-12: memref.load {{.*}} : memref<384xvector<4xf32>, 3>
// CHECK: arith.addf
// VALID: spirv.module @__spv__split_kernel0_kernel: valid

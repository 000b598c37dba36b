// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// RUN: sed "s/stages = 2/stages = 3/" %s | not kiln-opt --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg 2>&1 | FileCheck %s --check-prefix=THREE
// Double-buffered tiles (MatmulConfig::stages = 2): slice 0 is staged
// before the k loop and slice 1 fetched into registers; each iteration
// stores slice kt + 1 into the buffer kt's FMAs do not read ((kt + 1) mod
// 2), issues slice kt + 2's global reads, runs kt's FMAs and ends with the
// only barrier of the iteration.

func.func @double(%x: tensor<100x70xf32>, %w: tensor<70x130xf32>, %b: tensor<130xf32>) -> tensor<100x130xf32> {
  %0 = kiln.kernel on "vulkan:0" config {form = "gemm", tile = array<i64: 32, 32, 8>, thread = array<i64: 4, 4>, stages = 2} (%x, %w, %b) : (tensor<100x70xf32>, tensor<70x130xf32>, tensor<130xf32>) -> tensor<100x130xf32> {
  ^bb0(%a: tensor<100x70xf32>, %ww: tensor<70x130xf32>, %bb: tensor<130xf32>):
    %m = kiln.matmul %a, %ww : tensor<100x70xf32>, tensor<70x130xf32> -> tensor<100x130xf32>
    %s = kiln.add %m, %bb : tensor<100x130xf32>, tensor<130xf32> -> tensor<100x130xf32>
    kiln.yield %s : tensor<100x130xf32>
  }
  return %0 : tensor<100x130xf32>
}
// CHECK-LABEL: func.func @double_kernel0
// Two buffers of 8 x 32 floats per tile.
// CHECK: memref.alloc() : memref<128xvector<4xf32>, 3>
// CHECK: memref.alloc() : memref<128xvector<4xf32>, 3>
// Slice 0 into buffer 0, one barrier, then the loop over 9 slices.
// CHECK: memref.store {{.*}} : memref<128xvector<4xf32>, 3>
// CHECK: gpu.barrier
// CHECK: scf.for %[[KT:.*]] = %c0{{[_0-9]*}} to %c9{{[_0-9]*}} step %c1{{[_0-9]*}} iter_args
// Slice kt + 1 into buffer (kt + 1) mod 2, 64 vectors further on.
// CHECK: %[[NEXT:.*]] = arith.addi %[[KT]], %c1
// CHECK: %[[OTHER:.*]] = arith.remui %[[NEXT]], %c2
// CHECK: arith.muli %[[OTHER]], %c64
// CHECK: memref.store
// CHECK-NOT: gpu.barrier
// Slice kt + 2, clamped to the last.
// CHECK: arith.addi %[[KT]], %c2
// CHECK: arith.minui %{{.*}}, %c8
// CHECK-NOT: gpu.barrier
// CHECK: %[[THIS:.*]] = arith.remui %[[KT]], %c2
// CHECK-NOT: gpu.barrier
// CHECK: math.fma
// CHECK: gpu.barrier
// CHECK-NEXT: scf.yield
// VALID: spirv.module @__spv__double_kernel0_kernel: valid

// THREE: stages must be 1 or 2

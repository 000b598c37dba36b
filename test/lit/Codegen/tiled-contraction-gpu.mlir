// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// matmul and conv2d on a GPU: shared-memory tiles (k-major), a k loop
// carrying each work item's register block, barriers around the compute,
// the next slice's global reads issued before the current one's FMAs, and
// the epilogue per result before a guarded store. Small problems get
// 64x64x16 tiles with 4x4 per work item (256 work items).

func.func @linear_relu(%x: tensor<100x70xf32>, %w: tensor<130x70xf32>, %b: tensor<130xf32>) -> tensor<100x130xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x, %w, %b) : (tensor<100x70xf32>, tensor<130x70xf32>, tensor<130xf32>) -> tensor<100x130xf32> {
  ^bb0(%a: tensor<100x70xf32>, %ww: tensor<130x70xf32>, %bb: tensor<130xf32>):
    %t = kiln.transpose %ww [1, 0] : tensor<130x70xf32> -> tensor<70x130xf32>
    %m = kiln.matmul %a, %t : tensor<100x70xf32>, tensor<70x130xf32> -> tensor<100x130xf32>
    %s = kiln.add %m, %bb : tensor<100x130xf32>, tensor<130xf32> -> tensor<100x130xf32>
    %r = kiln.relu %s : tensor<100x130xf32>
    kiln.yield %r : tensor<100x130xf32>
  }
  return %0 : tensor<100x130xf32>
}
// CHECK-LABEL: func.func @linear_relu_kernel0
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c128
// CHECK: memref.alloc() : memref<256xvector<4xf32>, 3>
// CHECK: memref.alloc() : memref<512xvector<4xf32>, 3>
// The first slice is fetched before the loop, the next one inside it.
// CHECK: vector.from_elements
// CHECK: scf.for {{.*}} iter_args
// CHECK: gpu.barrier
// CHECK: vector.from_elements
// CHECK: memref.load {{.*}} : memref<256xvector<4xf32>, 3>
// CHECK-COUNT-64: math.fma
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: memref.store

func.func @conv(%x: tensor<1x8x9x9xf32>, %w: tensor<32x8x3x3xf32>) -> tensor<1x32x9x9xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x, %w) : (tensor<1x8x9x9xf32>, tensor<32x8x3x3xf32>) -> tensor<1x32x9x9xf32> {
  ^bb0(%a: tensor<1x8x9x9xf32>, %f: tensor<32x8x3x3xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
        : tensor<1x8x9x9xf32>, tensor<32x8x3x3xf32> -> tensor<1x32x9x9xf32>
    kiln.yield %y : tensor<1x32x9x9xf32>
  }
  return %0 : tensor<1x32x9x9xf32>
}
// 32 output channels (M) x 81 positions: the 64x64 tiles.
// CHECK-LABEL: func.func @conv_kernel1
// CHECK: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c256
// CHECK: scf.for {{.*}} iter_args
// CHECK: gpu.barrier
// CHECK: math.fma
// VALID: spirv.module @__spv__linear_relu_kernel0_kernel: valid
// VALID: spirv.module @__spv__conv_kernel1_kernel: valid

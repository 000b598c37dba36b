// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg --kiln-linalg-to-spirv | FileCheck %s --check-prefix=SPIRV
// A depthwise 3x3 conv (stride 1, padding 1) + bias + ReLU on a GPU: one
// parallel loop over work items of 4 adjacent outputs of a row (16 planes x
// 10 rows x 3 blocks of a 10-wide row, the last block half outside it).
// Per window row each input column the 4 windows read is loaded once: 6
// loads for 12 taps at stride 1. The epilogue runs per output before its
// store, guarded where the last block passes the row's end.

func.func @depthwise(%x: tensor<1x16x10x10xf32>, %w: tensor<16x1x3x3xf32>, %b: tensor<1x16x1x1xf32>) -> tensor<1x16x10x10xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x, %w, %b) : (tensor<1x16x10x10xf32>, tensor<16x1x3x3xf32>, tensor<1x16x1x1xf32>) -> tensor<1x16x10x10xf32> {
  ^bb0(%a: tensor<1x16x10x10xf32>, %f: tensor<16x1x3x3xf32>, %c: tensor<1x16x1x1xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 16
        : tensor<1x16x10x10xf32>, tensor<16x1x3x3xf32> -> tensor<1x16x10x10xf32>
    %s = kiln.add %y, %c : tensor<1x16x10x10xf32>, tensor<1x16x1x1xf32> -> tensor<1x16x10x10xf32>
    %r = kiln.relu %s : tensor<1x16x10x10xf32>
    kiln.yield %r : tensor<1x16x10x10xf32>
  }
  return %0 : tensor<1x16x10x10xf32>
}
// CHECK-LABEL: func.func @depthwise_kernel0
// CHECK-SAME: kiln.outer_size = 480
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c480{{(_[0-9]+)?}})
// Per window row: its first tap's weight and the 4 columns it reads; each
// next tap reuses 3 of them and loads one new column (6 loads for 12 taps).
// CHECK: memref.load %arg1
// CHECK-COUNT-4: memref.load %arg0
// CHECK: math.fma
// CHECK: memref.load %arg1
// CHECK-NEXT: math.fma
// CHECK-NEXT: math.fma
// CHECK-NEXT: math.fma
// CHECK: memref.load %arg0
// CHECK: math.fma
// CHECK: memref.load %arg1
// CHECK-NEXT: math.fma
// CHECK-NEXT: math.fma
// CHECK-NEXT: math.fma
// CHECK: memref.load %arg0
// CHECK: math.fma
// The other two window rows alike (12 more column loads), then the
// epilogue of each output.
// CHECK-COUNT-12: memref.load %arg0
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: memref.store
// CHECK: scf.if
// CHECK: memref.store
// CHECK-NOT: scf.for
// SPIRV: spirv.module
// SPIRV: spirv.GL.Fma

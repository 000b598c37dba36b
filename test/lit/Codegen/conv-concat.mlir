// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s --check-prefix=CPU
// RUN: sed 's/"cpu:0"/"vulkan:0"/' %s | kiln-opt --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg | FileCheck %s --check-prefix=GPU
// RUN: sed 's/"cpu:0"/"vulkan:0"/' %s | kiln-opt --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// RUN: kiln-opt %s --kiln-kernel-to-linalg | FileCheck %s --check-prefix=UNTILED
// A concat of 4 + 12 channels folded into the 3x3 convolution that reads
// it: the concatenation is never written, each channel is gathered from
// the input holding it.

func.func @conv(%x: tensor<1x4x6x6xf32>, %y: tensor<1x12x6x6xf32>, %w: tensor<16x16x3x3xf32>) -> tensor<1x16x6x6xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %y, %w) : (tensor<1x4x6x6xf32>, tensor<1x12x6x6xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x6x6xf32> {
  ^bb0(%a: tensor<1x4x6x6xf32>, %b: tensor<1x12x6x6xf32>, %f: tensor<16x16x3x3xf32>):
    %c = kiln.concat %a, %b axis 1 : (tensor<1x4x6x6xf32>, tensor<1x12x6x6xf32>) -> tensor<1x16x6x6xf32>
    %p = kiln.conv2d %c, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<1x16x6x6xf32>, tensor<16x16x3x3xf32> -> tensor<1x16x6x6xf32>
    kiln.yield %p : tensor<1x16x6x6xf32>
  }
  return %0 : tensor<1x16x6x6xf32>
}

// The CPU packs B's rows source by source: k in [0, 36) are the first
// input's 4 channels x 9 taps, k in [36, 144) the second's 12.
// CPU-LABEL: func.func @conv_kernel0
// CPU: scf.for %{{.*}} = %c0{{.*}} to %c36{{.*}} step
// CPU: memref.load %arg0[{{.*}}] : memref<144xf32>
// CPU-NOT: memref.load %arg1
// CPU: scf.for %{{.*}} = %c36{{.*}} to %c144{{.*}} step
// CPU: memref.load %arg1[{{.*}}] : memref<432xf32>

// The GPU gathers a slot's 4 columns from the source its channel lies in,
// by a branch: uniform except at the sources' boundary.
// GPU-LABEL: func.func @conv_kernel0
// GPU: %[[HERE:.*]] = arith.cmpi ult, %{{.*}}, %c4
// GPU: scf.if %[[HERE]] -> (vector<4xf32>)
// GPU-COUNT-4: memref.load %arg0
// GPU: } else {
// GPU-COUNT-4: memref.load %arg1
// VALID: valid

// The untiled fallback reads both sources in bounds and keeps the one
// holding the channel.
// UNTILED-LABEL: func.func @conv_kernel0
// UNTILED: %[[A:.*]] = memref.load %arg0
// UNTILED: %[[B:.*]] = memref.load %arg1
// UNTILED: %[[SECOND:.*]] = arith.cmpi sge, %{{.*}}, %c4
// UNTILED: arith.select %[[SECOND]], %[[B]], %[[A]] : f32

// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true --kiln-linalg-to-llvm | FileCheck %s --check-prefix=LLVM
// A depthwise 3x3 conv (stride 2, padding 1) + bias + ReLU on the CPU: the
// outer loop runs over output planes (image, channel), each loading its 9
// weights once; each output row is swept in vectors of 16 outputs with the
// 9 taps accumulated in one register (wide loads shuffled to every second
// input column); vectors over the row's edges shuffle zeros in for the
// columns outside it. The epilogue runs on the vectors.

func.func @depthwise(%x: tensor<1x16x20x80xf32>, %w: tensor<16x1x3x3xf32>, %b: tensor<1x16x1x1xf32>) -> tensor<1x16x10x40xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w, %b) : (tensor<1x16x20x80xf32>, tensor<16x1x3x3xf32>, tensor<1x16x1x1xf32>) -> tensor<1x16x10x40xf32> {
  ^bb0(%a: tensor<1x16x20x80xf32>, %f: tensor<16x1x3x3xf32>, %c: tensor<1x16x1x1xf32>):
    %y = kiln.conv2d %a, %f strides [2, 2] padding [1, 1] dilation [1, 1] groups 16
        : tensor<1x16x20x80xf32>, tensor<16x1x3x3xf32> -> tensor<1x16x10x40xf32>
    %s = kiln.add %y, %c : tensor<1x16x10x40xf32>, tensor<1x16x1x1xf32> -> tensor<1x16x10x40xf32>
    %r = kiln.relu %s : tensor<1x16x10x40xf32>
    kiln.yield %r : tensor<1x16x10x40xf32>
  }
  return %0 : tensor<1x16x10x40xf32>
}
// 16 planes, 6400 outputs x 9 taps.
// CHECK: func.func @depthwise_kernel0({{.*}}) attributes {kiln.iteration_size = 57600 : i64, kiln.outer_size = 16 : i64}
// CHECK: scf.for
// CHECK-COUNT-9: memref.load
// CHECK: scf.for
// A row's window rows outside the image weigh zero.
// CHECK: arith.select
// Vectors at columns 0, 16 and 24 (the last overlapping the one before).
// Column 0's window reaches left of the row: per window row one load of the
// span its taps read, each tap shuffling its lanes out of it (lane 0 of the
// first tap reads the zero vector).
// CHECK: %[[SPAN:.*]] = vector.load {{.*}} : memref<25600xf32>, vector<32xf32>
// CHECK: vector.shuffle %[[SPAN]], %{{.*}} [32, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29]
// CHECK: vector.fma
// CHECK: vector.shuffle %[[SPAN]], %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
// CHECK: vector.shuffle %[[SPAN]], %{{.*}} [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31]
// The bias and ReLU on the vector of sums.
// CHECK: vector.broadcast {{.*}} : f32 to vector<16xf32>
// CHECK: arith.addf {{.*}} : vector<16xf32>
// CHECK: arith.maximumf {{.*}} : vector<16xf32>
// CHECK: vector.store {{.*}} : memref<6400xf32>, vector<16xf32>
// Column 16 inside: a loop of plain loads, every second lane kept.
// CHECK: scf.for %{{.*}} = %c16{{(_[0-9]+)?}} to %c32{{(_[0-9]+)?}} step %c16{{(_[0-9]+)?}}
// CHECK: vector.load {{.*}} : memref<25600xf32>, vector<32xf32>
// CHECK: vector.shuffle {{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30] : vector<32xf32>, vector<32xf32>
// CHECK-COUNT-9: vector.fma
// CHECK: vector.store
// Column 24 reaches past the row's end (its last lane's last tap).
// CHECK: vector.shuffle {{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
// CHECK: vector.store
// CHECK-NOT: math.fma
// LLVM: llvm.func @depthwise_kernel0
// LLVM: llvm.intr.fmuladd({{.*}}) : (vector<16xf32>

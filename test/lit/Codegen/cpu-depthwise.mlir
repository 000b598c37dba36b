// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true --kiln-linalg-to-llvm | FileCheck %s --check-prefix=LLVM
// A depthwise 3x3 conv (stride 2, padding 1) + bias + ReLU on the CPU: the
// outer loop runs over output planes (image, channel), each loading its 9
// weights once; each output row is swept in vectors of 16 outputs with the
// 9 taps accumulated in one register (wide loads shuffled to every second
// input column); vectors over the row's edges shuffle zeros in for the
// columns outside it. The epilogue runs on the vectors. Below it, a 14x14
// plane at stride 2 (rows of 7): split into padded parts, swept flat.

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
// Column 0's window reaches left of the row: each tap loads its own 32
// lanes, moved inside the row (the first tap's from column 0, not -1), and
// shuffles every second one out (lane 0 of the first tap reads the zero
// vector; the third tap's load starts at column 1).
// CHECK: %[[TAP0:.*]] = vector.load {{.*}} : memref<25600xf32>, vector<32xf32>
// CHECK: vector.shuffle %[[TAP0]], %{{.*}} [32, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29]
// CHECK: vector.fma
// CHECK: %[[TAP1:.*]] = vector.load {{.*}} : memref<25600xf32>, vector<32xf32>
// CHECK: vector.shuffle %[[TAP1]], %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
// CHECK: %[[TAP2:.*]] = vector.load {{.*}} : memref<25600xf32>, vector<32xf32>
// CHECK: vector.shuffle %[[TAP2]], %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
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

// MobileNetV2's 28 -> 14 layer: rows of 14 outputs would be all edges, so
// each plane is first split into 2 x 3 parts (window row parity, window
// column): per input row a masked load of its 28 columns, and per part a
// shuffle of the 14 columns it keeps (zero where the window leaves the row)
// and one 16-lane store. Then the 196 outputs are swept flat, 16 at a time,
// one plain load per tap and no shuffle.
func.func @split_planes(%x: tensor<1x8x28x28xf32>, %w: tensor<8x1x3x3xf32>) -> tensor<1x8x14x14xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w) : (tensor<1x8x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x14x14xf32> {
  ^bb0(%a: tensor<1x8x28x28xf32>, %f: tensor<8x1x3x3xf32>):
    %y = kiln.conv2d %a, %f strides [2, 2] padding [1, 1] dilation [1, 1] groups 8
        : tensor<1x8x28x28xf32>, tensor<8x1x3x3xf32> -> tensor<1x8x14x14xf32>
    kiln.yield %y : tensor<1x8x14x14xf32>
  }
  return %0 : tensor<1x8x14x14xf32>
}
// CHECK-LABEL: func.func @split_planes_kernel1
// Parts: 2 x 3 of (15 rows x 14 + 16) floats.
// CHECK: memref.alloca() : memref<1356xf32>
// CHECK: vector.maskedload {{.*}} : memref<6272xf32>, vector<32xi1>, vector<32xf32> into vector<32xf32>
// Part (0, 0) keeps columns -1, 1, ..., 25 of the padded row: -1 is zero.
// CHECK: vector.shuffle {{.*}} [32, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 32, 32]
// CHECK: vector.store {{.*}} : memref<1356xf32>, vector<16xf32>
// The flat sweep: 12 whole vectors in a loop, then one overlapping at 180.
// CHECK: scf.for %{{.*}} = %c0{{(_[0-9]+)?}} to %c192{{(_[0-9]+)?}} step %c16
// CHECK-COUNT-9: vector.load {{.*}} : memref<1356xf32>, vector<16xf32>
// CHECK-NOT: vector.shuffle
// CHECK: vector.store {{.*}} : memref<1568xf32>, vector<16xf32>

// MobileNetV2's 14 -> 7 layer: two rows of 7 outputs fit one vector and a
// row of 14 inputs fits one with lanes to spare, so there are no parts.
// Each input row is loaded once (lanes 14 and 15 zero); each tap of output
// rows (oh, oh + 1) is one shuffle of the two input rows it reads, column -1
// taking the zero lane 15 (31 in the second). Pairs at rows 0, 2, 4 and 5
// (overlapping) store their sums into a plane buffer (49 + 16), swept flat
// by the epilogue at 0, 16, 32 and 33.
func.func @pair_rows(%x: tensor<1x8x14x14xf32>, %w: tensor<8x1x3x3xf32>) -> tensor<1x8x7x7xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w) : (tensor<1x8x14x14xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x7x7xf32> {
  ^bb0(%a: tensor<1x8x14x14xf32>, %f: tensor<8x1x3x3xf32>):
    %y = kiln.conv2d %a, %f strides [2, 2] padding [1, 1] dilation [1, 1] groups 8
        : tensor<1x8x14x14xf32>, tensor<8x1x3x3xf32> -> tensor<1x8x7x7xf32>
    kiln.yield %y : tensor<1x8x7x7xf32>
  }
  return %0 : tensor<1x8x7x7xf32>
}
// CHECK-LABEL: func.func @pair_rows_kernel2
// CHECK: memref.alloca() : memref<65xf32>
// CHECK: scf.for
// The first pair's top window row: row -1 (zeros) above, row 1 below.
// CHECK: %[[ROW1:.*]] = vector.maskedload {{.*}} : memref<1568xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
// CHECK: vector.shuffle %{{.*}}, %[[ROW1]] [15, 1, 3, 5, 7, 9, 11, 31, 17, 19, 21, 23, 25, 27, 15, 1]
// CHECK: vector.fma
// CHECK: vector.shuffle %{{.*}}, %[[ROW1]] [0, 2, 4, 6, 8, 10, 12, 16, 18, 20, 22, 24, 26, 28, 0, 2]
// CHECK: vector.store {{.*}}[%c0{{(_[0-9]+)?}}] : memref<65xf32>, vector<16xf32>
// CHECK: vector.store {{.*}}[%c14{{(_[0-9]+)?}}] : memref<65xf32>, vector<16xf32>
// CHECK: vector.store {{.*}}[%c28{{(_[0-9]+)?}}] : memref<65xf32>, vector<16xf32>
// CHECK: vector.store {{.*}}[%c35{{(_[0-9]+)?}}] : memref<65xf32>, vector<16xf32>
// CHECK-NOT: vector.shuffle
// CHECK: vector.load {{.*}}[%c33{{(_[0-9]+)?}}] : memref<65xf32>, vector<16xf32>
// CHECK: vector.store {{.*}} : memref<392xf32>, vector<16xf32>
// CHECK-NOT: vector.maskedload
// CHECK: return

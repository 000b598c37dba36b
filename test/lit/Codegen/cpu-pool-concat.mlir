// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// A max pool over a concat of 4 + 12 channels (a fire module's output,
// ReLU in front of one input): each plane branches once to the input
// holding its channel and sweeps that input's rows in vectors, through
// that input's own prologue.

func.func @pool(%x: tensor<1x4x16x16xf32>, %y: tensor<1x12x16x16xf32>) -> tensor<1x16x8x8xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %y) : (tensor<1x4x16x16xf32>, tensor<1x12x16x16xf32>) -> tensor<1x16x8x8xf32> {
  ^bb0(%a: tensor<1x4x16x16xf32>, %b: tensor<1x12x16x16xf32>):
    %r = kiln.relu %b : tensor<1x12x16x16xf32>
    %c = kiln.concat %a, %r axis 1 : (tensor<1x4x16x16xf32>, tensor<1x12x16x16xf32>) -> tensor<1x16x16x16xf32>
    %p = kiln.pool2d max %c kernel [2, 2] strides [2, 2] padding [0, 0] : tensor<1x16x16x16xf32> -> tensor<1x16x8x8xf32>
    kiln.yield %p : tensor<1x16x8x8xf32>
  }
  return %0 : tensor<1x16x8x8xf32>
}
// CHECK-LABEL: func.func @pool_kernel0
// CHECK: %[[CH:.*]] = arith.remui %{{.*}}, %c16
// CHECK: %[[FIRST:.*]] = arith.cmpi ult, %[[CH]], %c4
// CHECK: scf.if %[[FIRST]] {
// CHECK: vector.load %arg0
// CHECK-NOT: %arg1
// CHECK: } else {
// CHECK: %[[LOCAL:.*]] = arith.subi %[[CH]], %c4
// CHECK: vector.load %arg1
// CHECK: arith.maximumf

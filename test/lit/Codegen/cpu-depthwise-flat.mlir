// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true --kiln-linalg-to-llvm | FileCheck %s --check-prefix=LLVM
// A depthwise 3x3 conv (stride 1, padding 1) on 7x7 planes + bias + ReLU6
// on the CPU: rows of 7 would fill half a vector, so each plane is swept
// flat in 16-lane vectors at 0, 16, 32 and 33 (the last overlapping). At 0,
// 32 and 33 the lanes inside the image are known: a tap whose lanes all lie
// inside is a plain load, one with some outside selects zeros with a
// constant mask, one whose load would start before the plane shuffles from
// the plane's first 16. At 16 (a loop over the positions whose loads stay
// in the plane) each lane's column, carried from the vector before (plus 16
// mod 7, wrapped once), decides the taps left and right of it. Taps accumulate per window row (3 chains, then
// summed). The epilogue runs on the vectors, indexed along the plane.

func.func @flat(%x: tensor<1x8x7x7xf32>, %w: tensor<8x1x3x3xf32>, %b: tensor<1x8x1x1xf32>) -> tensor<1x8x7x7xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w, %b) : (tensor<1x8x7x7xf32>, tensor<8x1x3x3xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x7x7xf32> {
  ^bb0(%a: tensor<1x8x7x7xf32>, %f: tensor<8x1x3x3xf32>, %c: tensor<1x8x1x1xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 8
        : tensor<1x8x7x7xf32>, tensor<8x1x3x3xf32> -> tensor<1x8x7x7xf32>
    %s = kiln.add %y, %c : tensor<1x8x7x7xf32>, tensor<1x8x1x1xf32> -> tensor<1x8x7x7xf32>
    %r = kiln.relu %s : tensor<1x8x7x7xf32>
    %six = kiln.constant dense<6.0> : tensor<f32>
    %m = kiln.min %r, %six : tensor<1x8x7x7xf32>, tensor<f32> -> tensor<1x8x7x7xf32>
    kiln.yield %m : tensor<1x8x7x7xf32>
  }
  return %0 : tensor<1x8x7x7xf32>
}
// CHECK: func.func @flat_kernel0({{.*}}) attributes {kiln.iteration_size = 3528 : i64, kiln.outer_size = 8 : i64}
// CHECK: scf.for
// CHECK-NOT: scf.for
// CHECK: vector.load {{.*}} : memref<392xf32>, vector<16xf32>
// CHECK: vector.shuffle
// CHECK: arith.constant dense<[{{.*}}]> : vector<16xi1>
// CHECK: arith.select {{.*}} : vector<16xi1>, vector<16xf32>
// CHECK: vector.fma {{.*}} : vector<16xf32>
// CHECK: arith.addf {{.*}} : vector<16xf32>
// CHECK: arith.maximumf {{.*}} : vector<16xf32>
// CHECK: scf.for %{{.*}} = %c16{{(_[0-9]+)?}} to %c32{{(_[0-9]+)?}} step %c16{{.*}} iter_args
// CHECK: arith.addi {{.*}} : vector<16xi32>
// CHECK: arith.cmpi uge, {{.*}} : vector<16xi32>
// CHECK: arith.cmpi ult, {{.*}} : vector<16xi32>
// CHECK: arith.select {{.*}} : vector<16xi1>, vector<16xf32>
// CHECK: arith.minimumf {{.*}} : vector<16xf32>
// CHECK: vector.store {{.*}} : memref<392xf32>, vector<16xf32>
// LLVM: llvm.func @flat_kernel0
// LLVM: llvm.intr.fmuladd{{.*}} : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>

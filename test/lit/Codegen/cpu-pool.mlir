// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true --kiln-linalg-to-llvm | FileCheck %s --check-prefix=LLVM
// A 3x3 max pool (stride 2, padding 1) behind a bias and ReLU (the
// convolution's epilogue, recomputed per window tap) on the CPU: the outer
// loop runs over planes; each output row is swept in vectors of 8 outputs
// (16 with AVX-512), each tap evaluating the prologue on 16 (32)
// consecutive inputs (the bias broadcast, the input a vector load); each
// window row is reduced over its taps and takes -inf outside the image, and
// one shuffle per vector keeps every second lane. The edge columns take a
// checked scalar loop.

func.func @bias_relu_pool(%x: tensor<1x4x20x40xf32>, %b: tensor<1x4x1x1xf32>) -> tensor<1x4x10x20xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %b) : (tensor<1x4x20x40xf32>, tensor<1x4x1x1xf32>) -> tensor<1x4x10x20xf32> {
  ^bb0(%a: tensor<1x4x20x40xf32>, %c: tensor<1x4x1x1xf32>):
    %s = kiln.add %a, %c : tensor<1x4x20x40xf32>, tensor<1x4x1x1xf32> -> tensor<1x4x20x40xf32>
    %r = kiln.relu %s : tensor<1x4x20x40xf32>
    %p = kiln.pool2d max %r kernel [3, 3] strides [2, 2] padding [1, 1]
        : tensor<1x4x20x40xf32> -> tensor<1x4x10x20xf32>
    kiln.yield %p : tensor<1x4x10x20xf32>
  }
  return %0 : tensor<1x4x10x20xf32>
}
// CHECK: func.func @bias_relu_pool_kernel0({{.*}}) attributes {kiln.iteration_size = 7200 : i64, kiln.outer_size = 4 : i64}
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for %{{.*}} = %c1{{(_[0-9]+)?}} to %c17 step %c{{8|16}}
// CHECK: vector.load {{.*}} : memref<3200xf32>, vector<[[WIDE:16|32]]xf32>
// CHECK: vector.broadcast {{.*}} : f32 to vector<[[WIDE]]xf32>
// CHECK: arith.addf {{.*}} : vector<[[WIDE]]xf32>
// CHECK: arith.maximumf {{.*}} : vector<[[WIDE]]xf32>
// CHECK: vector.load {{.*}} : memref<3200xf32>, vector<[[WIDE]]xf32>
// CHECK: arith.maximumf {{.*}} : vector<[[WIDE]]xf32>
// CHECK: arith.select {{.*}} : vector<[[WIDE]]xf32>
// CHECK-NOT: vector.shuffle
// CHECK: arith.select {{.*}} : vector<[[WIDE]]xf32>
// CHECK-NOT: vector.shuffle
// CHECK: arith.select {{.*}} : vector<[[WIDE]]xf32>
// CHECK-NEXT: arith.maximumf {{.*}} : vector<[[WIDE]]xf32>
// CHECK-NEXT: vector.shuffle {{.*}} [0, 2, 4, 6, 8, 10, 12, 14{{(, 16, 18, 20, 22, 24, 26, 28, 30)?}}]
// CHECK-NOT: vector.shuffle
// CHECK: vector.store {{.*}} : memref<800xf32>, vector<{{8|16}}xf32>
// CHECK: arith.constant {{11|3}} : index
// CHECK: vector.store
// CHECK: scf.for %{{.*}} = %c0{{(_[0-9]+)?}} to %c1{{(_[0-9]+)?}} step
// CHECK: scf.for %{{.*}} = %c19{{(_[0-9]+)?}} to %c20{{(_[0-9]+)?}} step
// LLVM: llvm.func @bias_relu_pool_kernel0
// The vector maxima are a compare and selects (kiln-cpu-expand-arith: x86
// has no NaN-propagating vector max, and llvm.maximum's own expansion is
// about twice as long); no vector llvm.intr.maximum is left.
// LLVM-NOT: llvm.intr.maximum({{.*}}) : (vector
// LLVM: llvm.fcmp "ugt" {{.*}} : vector<{{16|32}}xf32>
// LLVM: llvm.fcmp "uno" {{.*}} : vector<{{16|32}}xf32>

// A pool reading a kernel input straight (ResNet-18's, after the stem):
// each vector of outputs also fetches, at its columns, the input rows the
// output row after next adds (two at stride 2), a cache line per 16 of
// the wide load's lanes (4 with AVX-512, 2 with AVX2).
func.func @pool_input(%x: tensor<1x2x40x80xf32>) -> tensor<1x2x20x40xf32> {
  %0 = kiln.kernel on "cpu:0" (%x) : (tensor<1x2x40x80xf32>) -> tensor<1x2x20x40xf32> {
  ^bb0(%a: tensor<1x2x40x80xf32>):
    %p = kiln.pool2d max %a kernel [3, 3] strides [2, 2] padding [1, 1]
        : tensor<1x2x40x80xf32> -> tensor<1x2x20x40xf32>
    kiln.yield %p : tensor<1x2x20x40xf32>
  }
  return %0 : tensor<1x2x20x40xf32>
}
// CHECK-LABEL: func.func @pool_input_kernel1
// CHECK-SAME: (%[[IN:.*]]: memref<6400xf32>, %{{.*}}: memref<1600xf32>)
// CHECK: scf.for %{{.*}} = %c1{{(_[0-9]+)?}} to %c{{.*}} step %c{{8|16}}
// CHECK: memref.prefetch %[[IN]][%{{.*}}], read, locality<3>, data : memref<6400xf32>
// CHECK: memref.prefetch %[[IN]][%{{.*}}], read, locality<3>, data : memref<6400xf32>
// CHECK: vector.load %[[IN]]

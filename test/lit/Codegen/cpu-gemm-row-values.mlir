// RUN: kiln-opt %s --kiln-materialize-configs --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// A 1x1 convolution with a batch norm and ReLU on the CPU GEMM form: the
// batch norm's per-channel terms (the mean, and gamma * rsqrt(var + eps),
// and beta: the values the same along a row of pixels that meet the sums)
// are computed once per block of 12 rows (6 with AVX2), before the panel's
// tiles, into a small buffer (12 rows x 8 values); each tile's epilogue
// reads them and computes no rsqrt.

func.func @conv_bn(%x: tensor<1x24x56x56xf32>, %w: tensor<144x24x1x1xf32>, %mean: tensor<144xf32>, %gamma: tensor<144xf32>, %var: tensor<144xf32>, %eps: tensor<f32>, %beta: tensor<144xf32>) -> tensor<1x144x56x56xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w, %mean, %gamma, %var, %eps, %beta) : (tensor<1x24x56x56xf32>, tensor<144x24x1x1xf32>, tensor<144xf32>, tensor<144xf32>, tensor<144xf32>, tensor<f32>, tensor<144xf32>) -> tensor<1x144x56x56xf32> {
  ^bb0(%a0: tensor<1x24x56x56xf32>, %a1: tensor<144x24x1x1xf32>, %a2: tensor<144xf32>, %a3: tensor<144xf32>, %a4: tensor<144xf32>, %a5: tensor<f32>, %a6: tensor<144xf32>):
    %8 = kiln.conv2d %a0, %a1 strides [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<1x24x56x56xf32>, tensor<144x24x1x1xf32> -> tensor<1x144x56x56xf32>
    %9 = kiln.reshape %a2 : tensor<144xf32> -> tensor<144x1x1xf32>
    %10 = kiln.sub %8, %9 : tensor<1x144x56x56xf32>, tensor<144x1x1xf32> -> tensor<1x144x56x56xf32>
    %11 = kiln.reshape %a3 : tensor<144xf32> -> tensor<144x1x1xf32>
    %12 = kiln.reshape %a4 : tensor<144xf32> -> tensor<144x1x1xf32>
    %13 = kiln.add %12, %a5 : tensor<144x1x1xf32>, tensor<f32> -> tensor<144x1x1xf32>
    %14 = kiln.rsqrt %13 : tensor<144x1x1xf32>
    %15 = kiln.mul %11, %14 : tensor<144x1x1xf32>, tensor<144x1x1xf32> -> tensor<144x1x1xf32>
    %16 = kiln.mul %10, %15 : tensor<1x144x56x56xf32>, tensor<144x1x1xf32> -> tensor<1x144x56x56xf32>
    %17 = kiln.reshape %a6 : tensor<144xf32> -> tensor<144x1x1xf32>
    %18 = kiln.add %16, %17 : tensor<1x144x56x56xf32>, tensor<144x1x1xf32> -> tensor<1x144x56x56xf32>
    %19 = kiln.relu %18 : tensor<1x144x56x56xf32>
    kiln.yield %19 : tensor<1x144x56x56xf32>
  }
  return %0 : tensor<1x144x56x56xf32>
}
// CHECK-LABEL: func.func @conv_bn_kernel0(
// CHECK-SAME: %{{[^:]*}}: memref<75264xf32>, %[[F:[^:]*]]: memref<3456xf32>
// The block of rows: scalar loads of the row's parameters, its rsqrt, and
// three values stored per row into a buffer of 12 x 8 (6 x 8).
// CHECK: math.rsqrt %{{.*}} : f32
// CHECK: memref.store %{{.*}}, %[[ROWS:.*]][%c0{{(_[0-9]+)?}}] : memref<[[SIZE:96|48]]xf32>
// CHECK: memref.store %{{.*}}, %[[ROWS]][%c1{{(_[0-9]+)?}}] : memref<[[SIZE]]xf32>
// CHECK: memref.store %{{.*}}, %[[ROWS]][%c2{{(_[0-9]+)?}}] : memref<[[SIZE]]xf32>
// CHECK-NOT: memref.store %{{.*}}, %[[ROWS]][%c3{{(_[0-9]+)?}}]
// CHECK: memref.store %{{.*}}, %[[ROWS]][%c{{88|40}}{{(_[0-9]+)?}}] : memref<[[SIZE]]xf32>
// The panel's tiles: k steps of 12 x 2 vectors (6 x 2), then the epilogue per row
// reads the three values and does no rsqrt.
// Each k step also fetches a line of the filter's next block of rows
// (the convolution's A, [144][24]) into L2.
// CHECK: scf.for {{.*}} iter_args
// CHECK: memref.prefetch %[[F]][%{{.*}}], read, locality<2>, data : memref<3456xf32>
// CHECK-NOT: memref.prefetch
// CHECK: vector.fma
// CHECK: memref.load %[[ROWS]]
// CHECK-NOT: math.rsqrt
// CHECK: arith.maximumf {{.*}} : vector<{{16|8}}xf32>
// CHECK: return

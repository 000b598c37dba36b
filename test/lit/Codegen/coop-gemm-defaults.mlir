// RUN: kiln-opt %s --split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,units=132,coop=1" --kiln-materialize-configs | FileCheck %s
// The cooperative-matrix form's default tiles (CoopMatrixConfig::defaultFor)
// on a GPU of 132 compute units (the H200): the largest of 128 x 128, 128 x
// 64, 64 x 128, 64 x 64 x 64 and 32 x 32 x 64 whose workgroups fill every
// unit once, double-buffered when k has more than one slice (128 x 128 and
// 128 x 64 over k of 512 or more: slices of 64, one stage). On the H200
// the f16 transformer block's GEMMs of [4096, 512] results ran 1.2-1.4x
// faster as 128 x 64 than as 64 x 64 x 64 (two workgroups per unit).

// [4096, 2048] x [2048, 512]: 128 x 128 gives 128 workgroups, 128 x 64 256.
func.func @mlp_down(%a: tensor<4096x2048xf16>, %b: tensor<2048x512xf16>) -> tensor<4096x512xf16> {
  %0 = kiln.kernel on "vulkan:0" (%a, %b) : (tensor<4096x2048xf16>, tensor<2048x512xf16>) -> tensor<4096x512xf16> {
  ^bb0(%x: tensor<4096x2048xf16>, %y: tensor<2048x512xf16>):
    %m = kiln.matmul %x, %y : tensor<4096x2048xf16>, tensor<2048x512xf16> -> tensor<4096x512xf16>
    kiln.yield %m : tensor<4096x512xf16>
  }
  return %0 : tensor<4096x512xf16>
}
// k 2048 in slices of 64, one stage (1.17x two stages of 32 on the H200).
// CHECK-LABEL: func.func @mlp_down
// CHECK: config {form = "coop_gemm", subgroups = array<i64: 2, 2>, tile = array<i64: 128, 64, 64>}

// -----

// [4096, 512] x [512, 2048]: 512 workgroups of 128 x 128.
func.func @mlp_up(%a: tensor<4096x512xf16>, %b: tensor<512x2048xf16>) -> tensor<4096x2048xf16> {
  %0 = kiln.kernel on "vulkan:0" (%a, %b) : (tensor<4096x512xf16>, tensor<512x2048xf16>) -> tensor<4096x2048xf16> {
  ^bb0(%x: tensor<4096x512xf16>, %y: tensor<512x2048xf16>):
    %m = kiln.matmul %x, %y : tensor<4096x512xf16>, tensor<512x2048xf16> -> tensor<4096x2048xf16>
    kiln.yield %m : tensor<4096x2048xf16>
  }
  return %0 : tensor<4096x2048xf16>
}
// k 512 in slices of 64, one stage (1.11x two stages of 32).
// CHECK-LABEL: func.func @mlp_up
// CHECK: config {form = "coop_gemm", subgroups = array<i64: 2, 2>, tile = array<i64: 128, 128, 64>}

// -----

// Attention's p @ v, 256 products of [128, 128] x [128, 64]: a tile no
// wider than n, 128 x 64, 256 workgroups.
func.func @pv(%a: tensor<256x128x128xf16>, %b: tensor<256x128x64xf16>) -> tensor<256x128x64xf16> {
  %0 = kiln.kernel on "vulkan:0" (%a, %b) : (tensor<256x128x128xf16>, tensor<256x128x64xf16>) -> tensor<256x128x64xf16> {
  ^bb0(%x: tensor<256x128x128xf16>, %y: tensor<256x128x64xf16>):
    %m = kiln.matmul %x, %y : tensor<256x128x128xf16>, tensor<256x128x64xf16> -> tensor<256x128x64xf16>
    kiln.yield %m : tensor<256x128x64xf16>
  }
  return %0 : tensor<256x128x64xf16>
}
// CHECK-LABEL: func.func @pv
// CHECK: config {form = "coop_gemm", stages = 2 : i64, subgroups = array<i64: 2, 2>, tile = array<i64: 128, 64, 32>}

// -----

// A convolution gathers its B: 64 x 64 x 32 tiles of 2 x 4 subgroups, two
// stages (the ResNet stage at batch 32 on the H200, its gathers reading the
// table of window offsets into 16-byte groups: 1.02x one stage).
func.func @resnet_stage(%x: tensor<32x64x56x56xf16>, %w: tensor<64x64x3x3xf16>) -> tensor<32x64x56x56xf16> {
  %0 = kiln.kernel on "vulkan:0" (%x, %w) : (tensor<32x64x56x56xf16>, tensor<64x64x3x3xf16>) -> tensor<32x64x56x56xf16> {
  ^bb0(%a: tensor<32x64x56x56xf16>, %f: tensor<64x64x3x3xf16>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
        : tensor<32x64x56x56xf16>, tensor<64x64x3x3xf16> -> tensor<32x64x56x56xf16>
    kiln.yield %y : tensor<32x64x56x56xf16>
  }
  return %0 : tensor<32x64x56x56xf16>
}
// The ResNet stage gathers B in rows of 8 columns (56 wide): 2 x 2 subgroups.
// CHECK-LABEL: func.func @resnet_stage
// CHECK: config {form = "coop_gemm", stages = 2 : i64, subgroups = array<i64: 2, 2>, tile = array<i64: 64, 64, 32>}

// -----

// The next stage's planes are 28 wide, not whole 8-groups: the table's
// gather, 2 x 4 subgroups.
func.func @resnet_stage2(%x: tensor<32x128x28x28xf16>, %w: tensor<128x128x3x3xf16>) -> tensor<32x128x28x28xf16> {
  %0 = kiln.kernel on "vulkan:0" (%x, %w) : (tensor<32x128x28x28xf16>, tensor<128x128x3x3xf16>) -> tensor<32x128x28x28xf16> {
  ^bb0(%a: tensor<32x128x28x28xf16>, %f: tensor<128x128x3x3xf16>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
        : tensor<32x128x28x28xf16>, tensor<128x128x3x3xf16> -> tensor<32x128x28x28xf16>
    kiln.yield %y : tensor<32x128x28x28xf16>
  }
  return %0 : tensor<32x128x28x28xf16>
}
// CHECK-LABEL: func.func @resnet_stage2
// CHECK: config {form = "coop_gemm", stages = 2 : i64, subgroups = array<i64: 2, 4>, tile = array<i64: 64, 64, 32>}

// -----

// 4096^3: likewise (1.06x two stages of 32 on the H200).
func.func @square(%a: tensor<4096x4096xf16>, %b: tensor<4096x4096xf16>) -> tensor<4096x4096xf16> {
  %0 = kiln.kernel on "vulkan:0" (%a, %b) : (tensor<4096x4096xf16>, tensor<4096x4096xf16>) -> tensor<4096x4096xf16> {
  ^bb0(%x: tensor<4096x4096xf16>, %y: tensor<4096x4096xf16>):
    %m = kiln.matmul %x, %y : tensor<4096x4096xf16>, tensor<4096x4096xf16> -> tensor<4096x4096xf16>
    kiln.yield %m : tensor<4096x4096xf16>
  }
  return %0 : tensor<4096x4096xf16>
}
// CHECK-LABEL: func.func @square
// CHECK: config {form = "coop_gemm", subgroups = array<i64: 2, 2>, tile = array<i64: 128, 128, 64>}

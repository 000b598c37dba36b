// RUN: kiln-opt %s --split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,coop=1" --kiln-kernel-to-linalg | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,coop=1" --kiln-kernel-to-linalg --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=SPIRV
// The convolution's gather in the coop_gemm form (CoopMatrixGemm.cpp) in
// the shapes coop-gemm.mlir does not have (its conv: the table and 16-byte
// groups of k): the table element by element, no table, and rows of 8
// columns. The H200 runs check their
// results (scripts/half-gpu-bench.sh); here their IR and SPIR-V.
// SPIRV: spirv.module @__spv__conv_table_kernel0_kernel: serialized
// SPIRV: spirv.module @__spv__conv_no_table_kernel0_kernel: serialized
// SPIRV: spirv.module @__spv__conv_rows_kernel0_kernel: serialized
// SPIRV: spirv.module @__spv__conv_rows_residual_kernel0_kernel: serialized

// The table without the 16-byte groups: 32 x 32 x 16 tiles of 2 x 2
// subgroups give 64 groups for 128 work items, so B is gathered and stored
// element by element into a [k][n] tile of halves, each gather still
// reading its table entry.
// CHECK-LABEL: func.func @conv_table_kernel0(
// CHECK: memref.alloc() : memref<640xf16, 3>
// CHECK: %[[TAPS:.*]] = memref.alloc() : memref<288xi32, 3>
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK: memref.load %[[TAPS]]
// CHECK-NOT: vector.bitcast
// CHECK: gpu.subgroup_mma_compute
func.func @conv_table(%x: tensor<2x16x12x12xf16>, %w: tensor<32x16x3x3xf16>) -> tensor<2x32x12x12xf16> {
  %0 = kiln.kernel on "vulkan:0" config {form = "coop_gemm", tile = array<i64: 32, 32, 16>, subgroups = array<i64: 2, 2>} (%x, %w) : (tensor<2x16x12x12xf16>, tensor<32x16x3x3xf16>) -> tensor<2x32x12x12xf16> {
  ^bb0(%a: tensor<2x16x12x12xf16>, %f: tensor<32x16x3x3xf16>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
        : tensor<2x16x12x12xf16>, tensor<32x16x3x3xf16> -> tensor<2x32x12x12xf16>
    kiln.yield %y : tensor<2x32x12x12xf16>
  }
  return %0 : tensor<2x32x12x12xf16>
}


// -----

// A 7 x 7 window on 128 columns: its table (128 x 49 entries, 25 KB) does
// not fit beside two stages of 64 x 128 x 32 tiles in 48 KB, so each slot
// finds its window's corner once and every gather checks its bounds.
// CHECK-LABEL: func.func @conv_no_table_kernel0(
// CHECK-NOT: xi32, 3>
// CHECK: scf.for
// CHECK: gpu.subgroup_mma_compute
func.func @conv_no_table(%x: tensor<1x16x20x20xf16>, %w: tensor<64x16x7x7xf16>) -> tensor<1x64x20x20xf16> {
  %0 = kiln.kernel on "vulkan:0" config {form = "coop_gemm", tile = array<i64: 64, 128, 32>, subgroups = array<i64: 2, 4>, stages = 2} (%x, %w) : (tensor<1x16x20x20xf16>, tensor<64x16x7x7xf16>) -> tensor<1x64x20x20xf16> {
  ^bb0(%a: tensor<1x16x20x20xf16>, %f: tensor<64x16x7x7xf16>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [3, 3] dilation [1, 1] groups 1
        : tensor<1x16x20x20xf16>, tensor<64x16x7x7xf16> -> tensor<1x64x20x20xf16>
    kiln.yield %y : tensor<1x64x20x20xf16>
  }
  return %0 : tensor<1x64x20x20xf16>
}


// -----

// Rows of whole 8-groups (16 wide, stride 1): the input is read as 16-byte
// groups, two per 8 columns of one k, the 8 halves shifted out of their
// eight 32-bit words into a [k][n] tile of groups; no table.
// CHECK-LABEL: func.func @conv_rows_kernel0(
// CHECK-SAME: %arg0: memref<1024xvector<4xf32>>
// CHECK-NOT: xi32, 3>
// CHECK: memref.alloc() : memref<640xvector<4xf32>, 3>
// CHECK: memref.alloc() : memref<576xvector<4xf32>, 3>
// CHECK: memref.load %arg0[{{.*}}] : memref<1024xvector<4xf32>>
// CHECK: vector.bitcast {{.*}} : vector<4xf32> to vector<4xi32>
// CHECK: memref.load %arg0[{{.*}}] : memref<1024xvector<4xf32>>
// CHECK: arith.shrui
// CHECK: arith.shli
// CHECK: vector.bitcast {{.*}} : vector<4xi32> to vector<4xf32>
// CHECK: scf.for
// CHECK: gpu.subgroup_mma_compute
func.func @conv_rows(%x: tensor<2x32x8x16xf16>, %w: tensor<64x32x3x3xf16>) -> tensor<2x64x8x16xf16> {
  %0 = kiln.kernel on "vulkan:0" config {form = "coop_gemm", tile = array<i64: 64, 64, 32>, subgroups = array<i64: 2, 2>, stages = 2} (%x, %w) : (tensor<2x32x8x16xf16>, tensor<64x32x3x3xf16>) -> tensor<2x64x8x16xf16> {
  ^bb0(%a: tensor<2x32x8x16xf16>, %f: tensor<64x32x3x3xf16>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
        : tensor<2x32x8x16xf16>, tensor<64x32x3x3xf16> -> tensor<2x64x8x16xf16>
    kiln.yield %y : tensor<2x64x8x16xf16>
  }
  return %0 : tensor<2x64x8x16xf16>
}

// -----

// The same rows, but the epilogue reads the input too (a residual): its
// buffer stays halves, and B goes through the table.
// CHECK-LABEL: func.func @conv_rows_residual_kernel0(
// CHECK-SAME: %arg0: memref<8192xf16>
// CHECK: memref.alloc() : memref<{{[0-9]+}}xi32, 3>
// CHECK-NOT: vector<4xi32>
// CHECK: gpu.subgroup_mma_compute
func.func @conv_rows_residual(%x: tensor<2x32x8x16xf16>, %w: tensor<32x32x3x3xf16>) -> tensor<2x32x8x16xf16> {
  %0 = kiln.kernel on "vulkan:0" config {form = "coop_gemm", tile = array<i64: 32, 64, 32>, subgroups = array<i64: 2, 2>, stages = 2} (%x, %w) : (tensor<2x32x8x16xf16>, tensor<32x32x3x3xf16>) -> tensor<2x32x8x16xf16> {
  ^bb0(%a: tensor<2x32x8x16xf16>, %f: tensor<32x32x3x3xf16>):
    %c = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
        : tensor<2x32x8x16xf16>, tensor<32x32x3x3xf16> -> tensor<2x32x8x16xf16>
    %y = kiln.add %c, %a : tensor<2x32x8x16xf16>, tensor<2x32x8x16xf16> -> tensor<2x32x8x16xf16>
    kiln.yield %y : tensor<2x32x8x16xf16>
  }
  return %0 : tensor<2x32x8x16xf16>
}

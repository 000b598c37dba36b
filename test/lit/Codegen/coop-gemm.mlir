// RUN: kiln-opt %s --split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,units=132,coop=1" --kiln-materialize-configs | FileCheck %s --check-prefix=CONFIG
// RUN: kiln-opt %s --split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,units=132" --kiln-materialize-configs | FileCheck %s --check-prefix=NOCOOP
// RUN: kiln-opt %s --split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,coop=1" --kiln-kernel-to-linalg | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,coop=1" --kiln-kernel-to-linalg --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=SPIRV
// The cooperative-matrix form (CoopMatrixGemm.cpp): a matmul of two f16
// operands, on a GPU with 16x16x16 f16 cooperative matrices, is built from
// gpu.subgroup_mma_* ops; f32 matmuls and GPUs without them keep the tiled
// f32-FMA form. Its SPIR-V is 1.6 with the Vulkan memory model; Debian's
// SPIRV-Tools cannot validate it (kiln-spirv-check says so), so the H200
// runs check it (scripts/half-gpu-bench.sh).

// A linear layer: x [128, 768] times W^T (W [3072, 768]), bias, GELU. Both
// operands move in 16-byte groups (their buffers as vector<4xf32>); W^T is
// contiguous along k, so its tile is staged [n][k] and its fragments load
// column-major (transpose).
// With 132 compute units the tiles shrink until the workgroups fill every
// unit once (32 x 32 x 64, 2 x 2 subgroups of one fragment each); without
// a count, 128 x 128 of 2 x 2, k (768) in slices of 64, one stage.
// CONFIG-LABEL: func.func @linear
// CONFIG: config {form = "coop_gemm", stages = 2 : i64, subgroups = array<i64: 2, 2>, tile = array<i64: 32, 32, 64>}
// NOCOOP-LABEL: func.func @linear
// NOCOOP: config {form = "gemm"
// CHECK-LABEL: func.func @linear_kernel0(
// The epilogue reads the bias and writes the result 4 at a time: their
// buffers are 4-vectors of halves.
// CHECK-SAME: memref<12288xvector<4xf32>>, %{{.*}}: memref<294912xvector<4xf32>>, %[[BIAS:.*]]: memref<768xvector<4xf16>>, %[[OUT:.*]]: memref<98304xvector<4xf16>>)
// 24 x 1 workgroups of 4 subgroups of 32.
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c24{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c128
// Tiles of 128 rows of 64 + 8 halves, as 16-byte vectors (A [m][k], W^T
// [n][k]), one buffer each; a 16x16 f32 fragment per subgroup for the
// epilogue. Per slice: the staged reads into the tiles, a barrier, the next
// slice's reads, the multiplies, a barrier.
// CHECK: memref.alloc() : memref<1152xvector<4xf32>, 3>
// CHECK: memref.alloc() : memref<1152xvector<4xf32>, 3>
// CHECK: memref.alloc() : memref<1024xf32, 3>
// CHECK: gpu.subgroup_mma_constant_matrix
// CHECK: scf.for
// CHECK: memref.store {{.*}} : memref<1152xvector<4xf32>, 3>
// CHECK: gpu.barrier
// CHECK: gpu.subgroup_mma_load_matrix {{.*}} {leadDimension = 9 : index} : memref<1152xvector<4xf32>, 3> -> !gpu.mma_matrix<16x16xf16, "AOp">
// CHECK: gpu.subgroup_mma_load_matrix {{.*}} {leadDimension = 9 : index, transpose} : memref<1152xvector<4xf32>, 3> -> !gpu.mma_matrix<16x16xf16, "BOp">
// CHECK: gpu.subgroup_mma_compute {{.*}} -> !gpu.mma_matrix<16x16xf32, "COp">
// CHECK: gpu.barrier
// CHECK: scf.yield
// The epilogue: each subgroup's fragment through its own scratch, its
// lanes alone synchronized (subgroup scope), no workgroup barrier.
// CHECK: gpu.subgroup_mma_store_matrix {{.*}} {leadDimension = 16 : index} : !gpu.mma_matrix<16x16xf32, "COp">, memref<1024xf32, 3>
// CHECK-NOT: gpu.barrier
// CHECK: spirv.ControlBarrier <Subgroup>, <Subgroup>, <AcquireRelease|WorkgroupMemory>
// Each lane's 8 results of a fragment as 2 groups of 4 along a row: 4
// scratch reads, one bias read, GELU on 4 lanes (erf as a polynomial with
// an exp), one store, twice.
// CHECK: memref.load %[[BIAS]]{{.*}} : memref<768xvector<4xf16>>
// CHECK: math.exp {{.*}} : vector<4xf32>
// CHECK: memref.store {{.*}}, %[[OUT]]{{.*}} : memref<98304xvector<4xf16>>
// CHECK: memref.load %[[BIAS]]
// CHECK: memref.store {{.*}}, %[[OUT]]
// CHECK: spirv.ControlBarrier <Subgroup>, <Subgroup>
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
// SPIRV: spirv.module @__spv__linear_kernel0_kernel: serialized ({{[0-9]+}} words), not validated: SPIRV-Tools 2023.1 does not know cooperative matrices
func.func @linear(%x: tensor<128x768xf16>, %w: tensor<3072x768xf16>, %b: tensor<3072xf16>) -> tensor<128x3072xf16> {
  %0 = kiln.kernel on "vulkan:0" (%x, %w, %b) : (tensor<128x768xf16>, tensor<3072x768xf16>, tensor<3072xf16>) -> tensor<128x3072xf16> {
  ^bb0(%a: tensor<128x768xf16>, %ww: tensor<3072x768xf16>, %bb: tensor<3072xf16>):
    %wt = kiln.transpose %ww [1, 0] : tensor<3072x768xf16> -> tensor<768x3072xf16>
    %m = kiln.matmul %a, %wt : tensor<128x768xf16>, tensor<768x3072xf16> -> tensor<128x3072xf16>
    %s = kiln.add %m, %bb : tensor<128x3072xf16>, tensor<3072xf16> -> tensor<128x3072xf16>
    %g = kiln.gelu %s : tensor<128x3072xf16>
    kiln.yield %g : tensor<128x3072xf16>
  }
  return %0 : tensor<128x3072xf16>
}

// -----

// Ragged: k = 70 is no multiple of 8, so both operands go element by
// element (f16 loads and stores), zeros past the edges; the results past
// 100 x 130 are not stored.
// CONFIG-LABEL: func.func @ragged
// CONFIG: config {form = "coop_gemm"
// CHECK-LABEL: func.func @ragged_kernel0(
// CHECK-SAME: %{{.*}}: memref<7000xf16>, %{{.*}}: memref<9100xf16>
// CHECK: memref.alloc() : memref<{{[0-9]+}}xf16, 3>
// CHECK: arith.select {{.*}} : f16
// CHECK: gpu.subgroup_mma_load_matrix {{.*}} : memref<{{[0-9]+}}xf16, 3> -> !gpu.mma_matrix<16x16xf16, "AOp">
// CHECK: scf.if
// SPIRV: spirv.module @__spv__ragged_kernel0_kernel: serialized
func.func @ragged(%x: tensor<100x70xf16>, %w: tensor<70x130xf16>) -> tensor<100x130xf16> {
  %0 = kiln.kernel on "vulkan:0" (%x, %w) : (tensor<100x70xf16>, tensor<70x130xf16>) -> tensor<100x130xf16> {
  ^bb0(%a: tensor<100x70xf16>, %ww: tensor<70x130xf16>):
    %m = kiln.matmul %a, %ww : tensor<100x70xf16>, tensor<70x130xf16> -> tensor<100x130xf16>
    kiln.yield %m : tensor<100x130xf16>
  }
  return %0 : tensor<100x130xf16>
}

// -----

// f32 operands keep the tiled form on the same GPU.
// CONFIG-LABEL: func.func @single
// CONFIG: config {form = "gemm"
func.func @single(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x, %w) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> {
  ^bb0(%a: tensor<64x64xf32>, %ww: tensor<64x64xf32>):
    %m = kiln.matmul %a, %ww : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
    kiln.yield %m : tensor<64x64xf32>
  }
  return %0 : tensor<64x64xf32>
}

// -----

// An f16 convolution (implicit GEMM, one input): the filter rows move in
// 16-byte groups, the input is gathered element by element. Before the k
// loop the work items fill a table of each tile column's window: 32
// columns x 9 taps, the element's offset in its plane or -1 in the padding;
// every gather in the loop reads its entry there. Each work item gathers 8
// consecutive k of one column into one 16-byte group of a [n][k] tile, read
// by the B fragments column-major.
// CONFIG-LABEL: func.func @conv
// CONFIG: config {form = "coop_gemm"
// CHECK-LABEL: func.func @conv_kernel0(
// CHECK-SAME: %{{.*}}: memref<4608xf16>, %{{.*}}: memref<576xvector<4xf32>>
// CHECK: %[[TAPS:.*]] = memref.alloc() : memref<288xi32, 3>
// CHECK: arith.divui %{{.*}}, %c12
// CHECK: %[[NONE:.*]] = arith.constant -1 : i32
// CHECK: arith.select %{{.*}}, %{{.*}}, %[[NONE]] : i32
// CHECK: memref.store %{{.*}}, %[[TAPS]]
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK: memref.load %[[TAPS]]
// CHECK: arith.cmpi sge
// CHECK: vector.bitcast %{{.*}} : vector<2xf16> to vector<1xf32>
// CHECK: gpu.subgroup_mma_load_matrix %{{.*}} {leadDimension = 9 : index, transpose} : memref<576xvector<4xf32>, 3> -> !gpu.mma_matrix<16x16xf16, "BOp">
// CHECK: gpu.subgroup_mma_compute
// SPIRV: spirv.module @__spv__conv_kernel0_kernel: serialized
func.func @conv(%x: tensor<2x16x12x12xf16>, %w: tensor<32x16x3x3xf16>) -> tensor<2x32x12x12xf16> {
  %0 = kiln.kernel on "vulkan:0" (%x, %w) : (tensor<2x16x12x12xf16>, tensor<32x16x3x3xf16>) -> tensor<2x32x12x12xf16> {
  ^bb0(%a: tensor<2x16x12x12xf16>, %f: tensor<32x16x3x3xf16>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
        : tensor<2x16x12x12xf16>, tensor<32x16x3x3xf16> -> tensor<2x32x12x12xf16>
    kiln.yield %y : tensor<2x32x12x12xf16>
  }
  return %0 : tensor<2x32x12x12xf16>
}

// -----

// Two stages, the default where k has more than one slice: both tiles
// double-buffered (A: two buffers of 128 rows of 40
// halves, B: two of 32 rows of 136),
// slice 0 stored before the loop, then per slice the next slice's reads,
// this slice's multiplies from buffer kt % 2, the next slice stored into
// the other buffer and one barrier.
// CONFIG-LABEL: func.func @staged
// CONFIG: config {form = "coop_gemm", stages = 2 : i64
// CHECK-LABEL: func.func @staged_kernel0(
// CHECK: memref.alloc() : memref<1280xvector<4xf32>, 3>
// CHECK: memref.alloc() : memref<1088xvector<4xf32>, 3>
// CHECK: memref.store
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK: memref.load %arg
// CHECK: arith.remui %{{.*}}, %c2
// CHECK: gpu.subgroup_mma_compute
// CHECK: memref.store
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: scf.yield
// SPIRV: spirv.module @__spv__staged_kernel0_kernel: serialized
func.func @staged(%x: tensor<256x256xf16>, %w: tensor<256x256xf16>) -> tensor<256x256xf16> {
  %0 = kiln.kernel on "vulkan:0" (%x, %w) : (tensor<256x256xf16>, tensor<256x256xf16>) -> tensor<256x256xf16> {
  ^bb0(%a: tensor<256x256xf16>, %ww: tensor<256x256xf16>):
    %m = kiln.matmul %a, %ww : tensor<256x256xf16>, tensor<256x256xf16> -> tensor<256x256xf16>
    kiln.yield %m : tensor<256x256xf16>
  }
  return %0 : tensor<256x256xf16>
}

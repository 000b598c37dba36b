// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,units=132,coop=1,coopbf16=1" --kiln-materialize-configs | FileCheck %s --check-prefix=CONFIG
// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,units=132,coop=1" --kiln-materialize-configs | FileCheck %s --check-prefix=NOBF16
// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,coop=1,coopbf16=1" --kiln-kernel-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,coop=1,coopbf16=1" --kiln-kernel-to-linalg --kiln-linalg-to-spirv | kiln-opt --pass-pipeline='builtin.module(spirv.module(kiln-spirv-bf16-matrices))' | FileCheck %s --check-prefix=SPIRV
// bf16 on cooperative matrices (VK_KHR_shader_bfloat16): the coop_gemm
// form where the device multiplies bf16, the tiled form where it does not.
// The GPU dialect has no bf16 fragments, so the kernel is built on f16
// fragments holding bf16 bits; once lowered, kiln-spirv-bf16-matrices makes
// the A and B matrices bf16 and declares their capability. The H200 runs
// check it (scripts/half-gpu-bench.sh: exact on small integers).

// CONFIG: config {form = "coop_gemm"
// NOBF16: config {form = "gemm"
// The buffers stay bf16 until kiln-emulate-bf16-storage; each element read
// for a tile is bitcast to an f16 of the same bits.
// CHECK-LABEL: func.func @ragged_kernel0(
// CHECK-SAME: memref<7000xbf16>, %{{.*}}: memref<9100xbf16>, %{{.*}}: memref<130xbf16>, %{{.*}}: memref<13000xbf16>)
// CHECK: %[[E:.*]] = memref.load %{{.*}} : memref<7000xbf16>
// CHECK: arith.bitcast %[[E]] : bf16 to f16
// CHECK: gpu.subgroup_mma_compute
// SPIRV: spirv.module{{.*}}BFloat16TypeKHR, BFloat16CooperativeMatrixKHR{{.*}}SPV_KHR_bfloat16
// SPIRV-NOT: coopmatrix<16x16xf16
// SPIRV: spirv.KHR.CooperativeMatrixLoad {{.*}} -> !spirv.coopmatrix<16x16xbf16, Subgroup, MatrixA>
// SPIRV: spirv.KHR.CooperativeMatrixLoad {{.*}} -> !spirv.coopmatrix<16x16xbf16, Subgroup, MatrixB>
// SPIRV: spirv.KHR.CooperativeMatrixMulAdd {{.*}} : !spirv.coopmatrix<16x16xbf16, Subgroup, MatrixA>, !spirv.coopmatrix<16x16xbf16, Subgroup, MatrixB> -> !spirv.coopmatrix<16x16xf32, Subgroup, MatrixAcc>
// SPIRV-NOT: coopmatrix<16x16xf16
func.func @ragged(%x: tensor<100x70xbf16>, %w: tensor<70x130xbf16>, %b: tensor<130xbf16>) -> tensor<100x130xbf16> {
  %0 = kiln.kernel on "vulkan:0" (%x, %w, %b) : (tensor<100x70xbf16>, tensor<70x130xbf16>, tensor<130xbf16>) -> tensor<100x130xbf16> {
  ^bb0(%a: tensor<100x70xbf16>, %ww: tensor<70x130xbf16>, %bb: tensor<130xbf16>):
    %m = kiln.matmul %a, %ww : tensor<100x70xbf16>, tensor<70x130xbf16> -> tensor<100x130xbf16>
    %s = kiln.add %m, %bb : tensor<100x130xbf16>, tensor<130xbf16> -> tensor<100x130xbf16>
    kiln.yield %s : tensor<100x130xbf16>
  }
  return %0 : tensor<100x130xbf16>
}

// RUN: env KILN_CACHE_DIR=%t.cache KILN_GPU_LIMITS=subgroup=32,invocations=1024,shared=49152,groups=2147483647,units=132,coop=1,ptx=90 kiln-compile %s --target vulkan --ptx | FileCheck %s
// RUN: env KILN_CACHE_DIR=%t.cache KILN_GPU_LIMITS=subgroup=32,invocations=1024,shared=49152,groups=2147483647,units=132,coop=1 kiln-compile %s --target vulkan --ptx | FileCheck %s --allow-empty --check-prefix=NOCUDA
// A GPU CUDA also runs at sm_90 (the H200: ptx=90) gets, beside the
// cooperative-matrix SPIR-V, PTX on warpgroup MMA for each plain f16 GEMM
// whose tiles divide it: 128 x 256 x 32 in six 24 KB stages with two
// warpgroups, else 128 x 128 x 64 in four 32 KB stages with one. (Among
// SPIR-V kernels only large GEMMs keep it: kiln-compile-ptx-mixed.mlir.)

func.func @graph() -> (tensor<512x512xf16>, tensor<512x128xf16>) {
  %a = kiln.input 0 : tensor<512x256xf16>
  %b = kiln.input 1 : tensor<256x512xf16>
  %n = kiln.input 2 : tensor<256x128xf16>
  %wide = kiln.matmul %a, %b : tensor<512x256xf16>, tensor<256x512xf16> -> tensor<512x512xf16>
  %narrow = kiln.matmul %a, %n : tensor<512x256xf16>, tensor<256x128xf16> -> tensor<512x128xf16>
  return %wide, %narrow : tensor<512x512xf16>, tensor<512x128xf16>
}
// 4 x 2 CTAs of 256 threads, 6 x (128 x 32 + 32 x 256) halves of shared
// memory; parameters A, B, C, then M, N, K.
// CHECK: // kernel {{[0-9]+}} (vulkan:0): matmul -> [512, 512] f16
// CHECK-NEXT: // entry kiln_wgmma_gemm, wgmma 128x256x32 s6 wg2, sm_90, grid 8x1x1, block 256x1x1, shared 147456, params arg0 arg1 arg2 512 512 256
// CHECK: .target sm_90a
// CHECK: .maxntid 256, 1, 1
// Four stages loaded ahead, then one per loop iteration: each 2 groups of
// 16 bytes of A and 4 of B per thread.
// CHECK-COUNT-24: cp.async.cg.shared.global
// CHECK-NOT: cp.async.cg.shared.global
// CHECK: wgmma.fence.sync.aligned
// CHECK-COUNT-2: wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16
// CHECK: wgmma.commit_group.sync.aligned
// CHECK-NEXT: wgmma.wait_group.sync.aligned 1
// CHECK-COUNT-6: cp.async.cg.shared.global
// CHECK-NOT: cp.async.cg.shared.global
// CHECK: cvt.rn.f16x2.f32
// CHECK: // kernel {{[0-9]+}} (vulkan:0): matmul -> [512, 128] f16
// CHECK-NEXT: // entry kiln_wgmma_gemm, wgmma 128x128x64 s4 wg1, sm_90, grid 4x1x1, block 128x1x1, shared 131072, params arg0 arg1 arg2 512 128 256
// CHECK: .maxntid 128, 1, 1
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// CHECK-NOT: // kernel

// NOCUDA-NOT: kiln_wgmma_gemm

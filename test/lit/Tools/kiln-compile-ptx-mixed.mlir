// RUN: env KILN_CACHE_DIR=%t.cache KILN_GPU_LIMITS=subgroup=32,invocations=1024,shared=49152,groups=2147483647,units=132,coop=1,ptx=90 kiln-compile %s --target vulkan --ptx | FileCheck %s
// Among SPIR-V kernels, a GEMM's PTX must save more than the hand-overs
// between CUDA and Vulkan cost (0.1-0.2 ms each on the H200): the 4096^3
// GEMM keeps it, the 2048^3 one loses it. A GEMM with an epilogue (relu)
// or one no tile divides ([96, 2048]) never has PTX.

func.func @graph() -> (tensor<4096x1xf16>, tensor<2048x1xf16>, tensor<2048x2048xf16>, tensor<96x2048xf16>) {
  %a = kiln.input 0 : tensor<4096x4096xf16>
  %b = kiln.input 1 : tensor<4096x4096xf16>
  %c = kiln.input 2 : tensor<2048x2048xf16>
  %d = kiln.input 3 : tensor<2048x2048xf16>
  %s = kiln.input 4 : tensor<96x2048xf16>
  %big = kiln.matmul %a, %b : tensor<4096x4096xf16>, tensor<4096x4096xf16> -> tensor<4096x4096xf16>
  %bigsum = kiln.reduce sum %big [1] keepdims : tensor<4096x4096xf16> -> tensor<4096x1xf16>
  %mid = kiln.matmul %c, %d : tensor<2048x2048xf16>, tensor<2048x2048xf16> -> tensor<2048x2048xf16>
  %midsum = kiln.reduce sum %mid [1] keepdims : tensor<2048x2048xf16> -> tensor<2048x1xf16>
  %m = kiln.matmul %c, %d : tensor<2048x2048xf16>, tensor<2048x2048xf16> -> tensor<2048x2048xf16>
  %relu = kiln.relu %m : tensor<2048x2048xf16>
  %small = kiln.matmul %s, %d : tensor<96x2048xf16>, tensor<2048x2048xf16> -> tensor<96x2048xf16>
  return %bigsum, %midsum, %relu, %small : tensor<4096x1xf16>, tensor<2048x1xf16>, tensor<2048x2048xf16>, tensor<96x2048xf16>
}
// CHECK: // kernel {{[0-9]+}} (vulkan:0): matmul -> [4096, 4096] f16
// CHECK-NEXT: // entry kiln_wgmma_gemm, wgmma 128x256x32 s6 wg2, sm_90, grid 512x1x1
// CHECK-NOT: // kernel

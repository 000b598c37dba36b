// RUN: kiln-compile %s --target vulkan:generic,vulkan:nvidia-hopper --describe | FileCheck %s
// RUN: env KILN_GPU_LIMITS=vulkan:nvidia-hopper kiln-compile %s --target vulkan --describe | FileCheck %s --check-prefix=LIMITS
// RUN: env KILN_GPU_LIMITS=vulkan:nvidia-ampere not kiln-compile %s --target vulkan 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: kiln-compile %S/Inputs/concat12.mlir --target vulkan:generic --describe | FileCheck %s --check-prefix=WIDE
// RUN: kiln-compile --help | FileCheck %s --check-prefix=HELP
// Variants of one model: a row kernel (a softmax over rows of 1024) for no
// subgroup size at all, and for the Hopper profile's 32 lanes; each kernel
// says what it assumes. KILN_GPU_LIMITS takes a profile's name too.

func.func @graph() -> tensor<64x1024xf32> {
  %x = kiln.input 0 : tensor<64x1024xf32>
  %m = kiln.reduce max %x [1] keepdims : tensor<64x1024xf32> -> tensor<64x1xf32>
  %s = kiln.sub %x, %m : tensor<64x1024xf32>, tensor<64x1xf32> -> tensor<64x1024xf32>
  %e = kiln.exp %s : tensor<64x1024xf32>
  %z = kiln.reduce sum %e [1] keepdims : tensor<64x1024xf32> -> tensor<64x1xf32>
  %y = kiln.div %e, %z : tensor<64x1024xf32>, tensor<64x1xf32> -> tensor<64x1024xf32>
  return %y : tensor<64x1024xf32>
}
// CHECK: target vulkan:generic:
// CHECK: kernel 0 (vulkan:0) assumes: workgroup {{[0-9]+}}x1x1, {{[0-9]+}} bytes shared, 2 buffers, subgroup size any
// CHECK: target vulkan:nvidia-hopper:
// CHECK: kernel 0 (vulkan:0) assumes: workgroup {{[0-9]+}}x1x1, {{[0-9]+}} bytes shared, 2 buffers, subgroup size 32
// LIMITS: kernel 0 (vulkan:0) assumes: workgroup {{[0-9]+}}x1x1, {{[0-9]+}} bytes shared, 2 buffers, subgroup size 32
// A concat of 12 parts for the generic profile (8 buffers a kernel): split
// into kernels that bind 8 at most.
// WIDE-NOT: {{(9|1[0-9]) buffers}}
// WIDE: kernel 1 (vulkan:0) assumes: {{.*}}, {{[1-8]}} buffers
// BAD: KILN_GPU_LIMITS: 'vulkan:nvidia-ampere' is neither key=value nor a profile
// HELP: usage: kiln-compile graph.mlir|model.onnx
// HELP: vulkan:generic{{ +}}any Vulkan 1.1 GPU
// HELP: vulkan:nvidia-hopper{{ +}}NVIDIA H100/H200
// HELP: cpu:x86-64-v3{{ +}}AVX2, FMA, F16C

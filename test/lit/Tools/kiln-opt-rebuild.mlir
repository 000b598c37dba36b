// RUN: rm -rf %t && mkdir -p %t
// RUN: env KILN_DUMP_SPIRV=%t kiln-compile %s --target vulkan:nvidia-hopper -o %t/model.kiln
// RUN: ls %t/*.mlir | wc -l | FileCheck %s --check-prefix=COUNT
// RUN: cat %t/*.mlir | FileCheck %s --check-prefix=TARGET
// RUN: for m in %t/*.mlir; do b=${m%%.mlir}; kiln-opt $m --pass-pipeline="$(cat $b.pipeline)" | kiln-spirv-check --output $b.again.spv > /dev/null && cmp $b.spv $b.again.spv || exit 1; done
// Every kernel the compiler made can be made again by kiln-opt alone: the
// dumped kernel module carries its #kiln.target, and the dumped pipeline is
// the one the compiler ran; the SPIR-V comes out the same, word for word.

func.func @graph() -> tensor<64x256xf32> {
  %x = kiln.input 0 : tensor<64x1024xf32>
  %w = kiln.input 1 : tensor<1024x256xf32>
  %m = kiln.reduce max %x [1] keepdims : tensor<64x1024xf32> -> tensor<64x1xf32>
  %s = kiln.sub %x, %m : tensor<64x1024xf32>, tensor<64x1xf32> -> tensor<64x1024xf32>
  %e = kiln.exp %s : tensor<64x1024xf32>
  %z = kiln.reduce sum %e [1] keepdims : tensor<64x1024xf32> -> tensor<64x1xf32>
  %y = kiln.div %e, %z : tensor<64x1024xf32>, tensor<64x1xf32> -> tensor<64x1024xf32>
  %p = kiln.matmul %y, %w : tensor<64x1024xf32>, tensor<1024x256xf32> -> tensor<64x256xf32>
  %r = kiln.relu %p : tensor<64x256xf32>
  return %r : tensor<64x256xf32>
}
// COUNT: {{^[2-9]$}}
// TARGET: module attributes {kiln.target = #kiln.target<vulkan, subgroup = 32, workgroup = 1024, shared = 49152, bindings = 31, units = 132, groups = [65535, 65535, 65535], features = [f16, int64, coop_f16]>}

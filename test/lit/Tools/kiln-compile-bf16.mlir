// RUN: kiln-compile %s --target cpu --describe | FileCheck %s
// RUN: kiln-compile %s --target vulkan --describe | FileCheck %s --check-prefix=GPU
// bf16 in a compiled program: its inputs and outputs are bf16 (kiln-run
// reads and writes them as .npy of uint16 bits, '<u2'); every device
// computes it in f32 (a GPU keeps its buffers as 16-bit integers:
// kiln-emulate-bf16-storage).

func.func @graph() -> tensor<4xbf16> {
  %0 = kiln.input 0 on "cpu:0" : tensor<4xbf16>
  %1 = kiln.tanh %0 : tensor<4xbf16>
  %2 = kiln.add %1, %0 : tensor<4xbf16>, tensor<4xbf16> -> tensor<4xbf16>
  return %2 : tensor<4xbf16>
}
// CHECK: input input0: [4] bf16
// CHECK: output output0: [4] bf16
// CHECK: dispatch kernel 0 (cpu:0)
// GPU: input input0: [4] bf16
// GPU: output output0: [4] bf16
// GPU: dispatch kernel 0 (vulkan:0)

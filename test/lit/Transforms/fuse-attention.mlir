// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-place-devices{default-device=cpu:0},kiln-decompose-attention,kiln-fuse-elementwise))' | FileCheck %s --check-prefix=CPU
// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-place-devices{default-device=vulkan:0},kiln-decompose-attention,kiln-fuse-elementwise))' | FileCheck %s --check-prefix=GPU
// scaled_dot_product_attention over heads split from a projection (reshape
// and transpose views). On the host CPU one kernel, the views inside it (its
// reads go through them). Elsewhere kiln-decompose-attention writes it as
// q k^T times the scale, the causal rule, softmax and the product with v:
// three kernels (the scores, their scale, mask and softmax as one row
// kernel, the product).

func.func @attention() -> tensor<2x4x16x8xf32> {
  %x = kiln.input 0 : tensor<2x16x32xf32>
  %r = kiln.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %q = kiln.transpose %r [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %o = kiln.attention %q, %q, %q scale 0.35355 causal
      : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  return %o : tensor<2x4x16x8xf32>
}
// CPU: kiln.kernel on "cpu:0"
// CPU-NEXT: ^bb0
// CPU-NEXT: kiln.reshape
// CPU-NEXT: kiln.transpose
// CPU-NEXT: kiln.attention {{.*}} scale 3.535500e-01 causal
// CPU-NEXT: kiln.yield
// CPU-NOT: kiln.kernel

// GPU: %[[S:.*]] = kiln.kernel on "vulkan:0"
// GPU: kiln.transpose {{.*}} [0, 1, 3, 2]
// GPU-NEXT: kiln.matmul
// GPU-NEXT: kiln.yield
// GPU: %[[P:.*]] = kiln.kernel on "vulkan:0"(%[[S]]
// GPU: kiln.mul
// GPU-NEXT: kiln.cmp le
// GPU-NEXT: kiln.select
// GPU-NEXT: kiln.reduce max
// GPU-NEXT: kiln.sub
// GPU-NEXT: kiln.exp
// GPU-NEXT: kiln.reduce sum
// GPU-NEXT: kiln.div
// GPU: kiln.kernel on "vulkan:0"({{.*}}%[[P]]
// GPU: kiln.matmul
// GPU-NOT: kiln.attention

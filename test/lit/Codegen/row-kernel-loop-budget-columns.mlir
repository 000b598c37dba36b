// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=65535" --kiln-kernel-to-linalg | FileCheck %s
// A column reduction whose work item per column would need 65535 column
// trips plus the cascade's outer trips (past llvmpipe's budget) takes a
// workgroup per column instead of failing.

func.func @columns_at_the_budget(%x: tensor<65535x4096xf32>) -> tensor<4096xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x) : (tensor<65535x4096xf32>) -> tensor<4096xf32> {
  ^bb0(%a: tensor<65535x4096xf32>):
    %s = kiln.reduce sum %a [0] : tensor<65535x4096xf32> -> tensor<4096xf32>
    kiln.yield %s : tensor<4096xf32>
  }
  return %0 : tensor<4096xf32>
}
// CHECK-LABEL: func.func @columns_at_the_budget_kernel0
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c4096

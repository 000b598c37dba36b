// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=65535" --kiln-kernel-to-linalg=row-workgroup-size=-1 -verify-diagnostics
// A device that stops loops after 65535 iterations (llvmpipe) must never
// drop elements: a work item per row over 2^20 columns is refused, and the
// message says what to do.

func.func @too_long(%x: tensor<2x1048576xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'kiln.kernel' op reduces rows of 1048576 elements with 1052688 loop iterations per work item; the device runs at most 65535 per kernel invocation: reduce in two steps (reshape the rows and reduce twice) or run it on the CPU device}}
  %0 = kiln.kernel on "vulkan:0" (%x) : (tensor<2x1048576xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2x1048576xf32>):
    %s = kiln.reduce sum %a [1] : tensor<2x1048576xf32> -> tensor<2xf32>
    kiln.yield %s : tensor<2xf32>
  }
  return %0 : tensor<2xf32>
}

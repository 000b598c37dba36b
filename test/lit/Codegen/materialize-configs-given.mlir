// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-materialize-configs | FileCheck %s --check-prefix=GPU
// A config already present is kept as written.
// GPU-LABEL: func.func @given
// GPU: config {form = "loop", vector_width = 1 : i64, workgroup_size = 64 : i64}
func.func @given(%a: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %0 = kiln.kernel on "vulkan:0" config {form = "loop", vector_width = 1, workgroup_size = 64} (%a) : (tensor<64x32xf32>) -> tensor<64x32xf32> {
  ^bb0(%x: tensor<64x32xf32>):
    %t = kiln.tanh %x : tensor<64x32xf32>
    kiln.yield %t : tensor<64x32xf32>
  }
  return %0 : tensor<64x32xf32>
}

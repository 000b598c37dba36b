// RUN: kiln-opt %s --split-input-file --verify-diagnostics --kiln-materialize-configs
// A packed filter is only for a kernel whose filter the program stores
// packed: read as [Cout / 32][C][tap][32], a filter as the user wrote it
// would give wrong sums without an error.

func.func @unpacked(%x: tensor<1x64x14x14xf32>, %w: tensor<64x64x3x3xf32>) -> tensor<1x64x14x14xf32> {
  // expected-error @+1 {{config: packed_filter needs a filter the program stores packed}}
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_direct_conv", lanes = 16, pixels = 7, vectors = 2, packed_filter = true} (%x, %w) : (tensor<1x64x14x14xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x14x14xf32> {
  ^bb0(%a: tensor<1x64x14x14xf32>, %f: tensor<64x64x3x3xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<1x64x14x14xf32>, tensor<64x64x3x3xf32> -> tensor<1x64x14x14xf32>
    kiln.yield %y : tensor<1x64x14x14xf32>
  }
  return %0 : tensor<1x64x14x14xf32>
}

// -----

func.func @not_boolean(%x: tensor<1x64x14x14xf32>, %w: tensor<64x64x3x3xf32>) -> tensor<1x64x14x14xf32> {
  // expected-error @+1 {{config: 'packed_filter' must be true or false}}
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_direct_conv", lanes = 16, pixels = 7, vectors = 2, packed_filter = 1} (%x, %w) {kiln.weight_filter} : (tensor<1x64x14x14xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x14x14xf32> {
  ^bb0(%a: tensor<1x64x14x14xf32>, %f: tensor<64x64x3x3xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<1x64x14x14xf32>, tensor<64x64x3x3xf32> -> tensor<1x64x14x14xf32>
    kiln.yield %y : tensor<1x64x14x14xf32>
  }
  return %0 : tensor<1x64x14x14xf32>
}

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

// -----

// Likewise a matmul's packed right operand (CpuMatmulConfig::packedB).
func.func @unpacked_matrix(%x: tensor<40x256xf32>, %w: tensor<256x384xf32>) -> tensor<40x384xf32> {
  // expected-error @+1 {{config: packed_b needs a right operand the program stores packed}}
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_gemm", lanes = 16, rows = 6, vectors = 4, panel = 128, packed_b = true} (%x, %w) : (tensor<40x256xf32>, tensor<256x384xf32>) -> tensor<40x384xf32> {
  ^bb0(%a: tensor<40x256xf32>, %b: tensor<256x384xf32>):
    %m = kiln.matmul %a, %b : tensor<40x256xf32>, tensor<256x384xf32> -> tensor<40x384xf32>
    kiln.yield %m : tensor<40x384xf32>
  }
  return %0 : tensor<40x384xf32>
}

// -----

// N of 100 in panels of 128: the stored panels could not hold it.
func.func @ragged_matrix(%x: tensor<40x256xf32>, %w: tensor<256x100xf32>) -> tensor<40x100xf32> {
  // expected-error @+1 {{config: packed_b needs a matmul whose right operand is one weight}}
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_gemm", lanes = 16, rows = 6, vectors = 4, panel = 128, packed_b = true} (%x, %w) {kiln.weight_matrix} : (tensor<40x256xf32>, tensor<256x100xf32>) -> tensor<40x100xf32> {
  ^bb0(%a: tensor<40x256xf32>, %b: tensor<256x100xf32>):
    %m = kiln.matmul %a, %b : tensor<40x256xf32>, tensor<256x100xf32> -> tensor<40x100xf32>
    kiln.yield %m : tensor<40x100xf32>
  }
  return %0 : tensor<40x100xf32>
}

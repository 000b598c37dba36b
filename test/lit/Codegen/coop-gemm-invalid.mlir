// RUN: kiln-opt %s --split-input-file --verify-diagnostics --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,shared=49152,coop=1" --kiln-materialize-configs
// A coop_gemm config the kernel or the device cannot take says why.

func.func @share(%a: tensor<64x64xf16>, %b: tensor<64x64xf16>) -> tensor<64x64xf16> {
  // expected-error @+1 {{config: each subgroup's share of the tile must be whole 16 x 16 fragments}}
  %0 = kiln.kernel on "vulkan:0" config {form = "coop_gemm", tile = array<i64: 64, 48, 32>, subgroups = array<i64: 2, 2>} (%a, %b) : (tensor<64x64xf16>, tensor<64x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%x: tensor<64x64xf16>, %y: tensor<64x64xf16>):
    %m = kiln.matmul %x, %y : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf16>
    kiln.yield %m : tensor<64x64xf16>
  }
  return %0 : tensor<64x64xf16>
}

// -----

func.func @registers(%a: tensor<256x256xf16>, %b: tensor<256x256xf16>) -> tensor<256x256xf16> {
  // expected-error @+1 {{config: 64 accumulator fragments per subgroup are more than its registers hold (32 at most)}}
  %0 = kiln.kernel on "vulkan:0" config {form = "coop_gemm", tile = array<i64: 128, 128, 16>, subgroups = array<i64: 1, 1>} (%a, %b) : (tensor<256x256xf16>, tensor<256x256xf16>) -> tensor<256x256xf16> {
  ^bb0(%x: tensor<256x256xf16>, %y: tensor<256x256xf16>):
    %m = kiln.matmul %x, %y : tensor<256x256xf16>, tensor<256x256xf16> -> tensor<256x256xf16>
    kiln.yield %m : tensor<256x256xf16>
  }
  return %0 : tensor<256x256xf16>
}

// -----

// f32 operands are no cooperative-matrix kernel.
func.func @single(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{config: form 'coop_gemm' does not fit this kernel on this GPU, which is built as 'gemm'}}
  %0 = kiln.kernel on "vulkan:0" config {form = "coop_gemm", tile = array<i64: 64, 64, 32>, subgroups = array<i64: 2, 2>} (%a, %b) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>):
    %m = kiln.matmul %x, %y : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
    kiln.yield %m : tensor<64x64xf32>
  }
  return %0 : tensor<64x64xf32>
}

// -----

func.func @stages(%a: tensor<64x64xf16>, %b: tensor<64x64xf16>) -> tensor<64x64xf16> {
  // expected-error @+1 {{config: stages must be 1 or 2 (one shared buffer per tile, or two)}}
  %0 = kiln.kernel on "vulkan:0" config {form = "coop_gemm", tile = array<i64: 64, 64, 32>, subgroups = array<i64: 2, 2>, stages = 3} (%a, %b) : (tensor<64x64xf16>, tensor<64x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%x: tensor<64x64xf16>, %y: tensor<64x64xf16>):
    %m = kiln.matmul %x, %y : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf16>
    kiln.yield %m : tensor<64x64xf16>
  }
  return %0 : tensor<64x64xf16>
}

// -----

// Two stages double the tiles: 256 x 128 x 64 of 2 x 4 subgroups needs
// 2 x (256 x 72 + 128 x 72) x 2 bytes + 8 fragments (B counted as the
// larger of its [k][n] and [n][k] layouts).
func.func @shared(%a: tensor<512x512xf16>, %b: tensor<512x512xf16>) -> tensor<512x512xf16> {
  // expected-error @+1 {{config: 118784 bytes of shared memory exceed the device's 49152}}
  %0 = kiln.kernel on "vulkan:0" config {form = "coop_gemm", tile = array<i64: 256, 128, 64>, subgroups = array<i64: 2, 4>, stages = 2} (%a, %b) : (tensor<512x512xf16>, tensor<512x512xf16>) -> tensor<512x512xf16> {
  ^bb0(%x: tensor<512x512xf16>, %y: tensor<512x512xf16>):
    %m = kiln.matmul %x, %y : tensor<512x512xf16>, tensor<512x512xf16> -> tensor<512x512xf16>
    kiln.yield %m : tensor<512x512xf16>
  }
  return %0 : tensor<512x512xf16>
}

// RUN: kiln-opt %s --split-input-file --verify-diagnostics --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,invocations=512,shared=49152" --kiln-materialize-configs
// A config that the kernel or the device cannot take names what is wrong.

func.func @form(%a: tensor<64x32xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{config: 'form' must be one of "loop", "row", "arg_row", "gemm", "cpu", "cpu_gemm"}}
  %0 = kiln.kernel on "vulkan:0" config {form = "tiles"} (%a) : (tensor<64x32xf32>) -> tensor<64x32xf32> {
  ^bb0(%x: tensor<64x32xf32>):
    %t = kiln.tanh %x : tensor<64x32xf32>
    kiln.yield %t : tensor<64x32xf32>
  }
  return %0 : tensor<64x32xf32>
}

// -----

func.func @misspelt(%a: tensor<64x32xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{config: unknown key 'workgroupsize'}}
  %0 = kiln.kernel on "vulkan:0" config {form = "loop", vector_width = 1, workgroup_size = 64, workgroupsize = 32} (%a) : (tensor<64x32xf32>) -> tensor<64x32xf32> {
  ^bb0(%x: tensor<64x32xf32>):
    %t = kiln.tanh %x : tensor<64x32xf32>
    kiln.yield %t : tensor<64x32xf32>
  }
  return %0 : tensor<64x32xf32>
}

// -----

func.func @wrap(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{config: 'tile' sizes must be from 1 to 65536}}
  %0 = kiln.kernel on "vulkan:0" config {form = "gemm", tile = array<i64: 4294967360, 64, 16>, thread = array<i64: 4, 4>} (%a, %b) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>):
    %m = kiln.matmul %x, %y : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
    kiln.yield %m : tensor<64x64xf32>
  }
  return %0 : tensor<64x64xf32>
}

// -----

func.func @mismatch(%a: tensor<64x32xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{config: form 'gemm' does not fit this kernel on this GPU, which is built as 'loop'}}
  %0 = kiln.kernel on "vulkan:0" config {form = "gemm", tile = array<i64: 64, 64, 16>, thread = array<i64: 4, 4>} (%a) : (tensor<64x32xf32>) -> tensor<64x32xf32> {
  ^bb0(%x: tensor<64x32xf32>):
    %t = kiln.tanh %x : tensor<64x32xf32>
    kiln.yield %t : tensor<64x32xf32>
  }
  return %0 : tensor<64x32xf32>
}

// -----

func.func @toobig(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{config: 1024 work items exceed the device's 512}}
  %0 = kiln.kernel on "vulkan:0" config {form = "gemm", tile = array<i64: 128, 128, 16>, thread = array<i64: 4, 4>} (%a, %b) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>):
    %m = kiln.matmul %x, %y : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
    kiln.yield %m : tensor<64x64xf32>
  }
  return %0 : tensor<64x64xf32>
}

// -----

func.func @vector(%a: tensor<5x3xf32>) -> tensor<5x3xf32> {
  // expected-error @+1 {{config: vector width 4 needs f32 or f16 operands and results whose innermost dimension is a multiple of 4}}
  %0 = kiln.kernel on "vulkan:0" config {form = "loop", vector_width = 4, workgroup_size = 64} (%a) : (tensor<5x3xf32>) -> tensor<5x3xf32> {
  ^bb0(%x: tensor<5x3xf32>):
    %t = kiln.tanh %x : tensor<5x3xf32>
    kiln.yield %t : tensor<5x3xf32>
  }
  return %0 : tensor<5x3xf32>
}

// -----

// Sixteen groups of 256 work items are more than the device's 512.
func.func @split_too_wide(%a: tensor<128x256xf32>, %b: tensor<256x512xf32>) -> tensor<128x512xf32> {
  // expected-error @+1 {{4096 work items exceed the device's 512}}
  %0 = kiln.kernel on "vulkan:0" config {form = "gemm", tile = array<i64: 64, 64, 16>, thread = array<i64: 4, 4>, split_k = 16} (%a, %b) : (tensor<128x256xf32>, tensor<256x512xf32>) -> tensor<128x512xf32> {
  ^bb0(%x: tensor<128x256xf32>, %y: tensor<256x512xf32>):
    %m = kiln.matmul %x, %y : tensor<128x256xf32>, tensor<256x512xf32> -> tensor<128x512xf32>
    kiln.yield %m : tensor<128x512xf32>
  }
  return %0 : tensor<128x512xf32>
}

// -----

func.func @split_zero(%a: tensor<128x256xf32>, %b: tensor<256x512xf32>) -> tensor<128x512xf32> {
  // expected-error @+1 {{'split_k' must be an integer from 1 to 65536}}
  %0 = kiln.kernel on "vulkan:0" config {form = "gemm", tile = array<i64: 16, 32, 16>, thread = array<i64: 4, 4>, split_k = 0} (%a, %b) : (tensor<128x256xf32>, tensor<256x512xf32>) -> tensor<128x512xf32> {
  ^bb0(%x: tensor<128x256xf32>, %y: tensor<256x512xf32>):
    %m = kiln.matmul %x, %y : tensor<128x256xf32>, tensor<256x512xf32> -> tensor<128x512xf32>
    kiln.yield %m : tensor<128x512xf32>
  }
  return %0 : tensor<128x512xf32>
}

// -----

// A GPU without cooperative matrices builds f16 matmuls in the tiled form.
func.func @nocoop(%a: tensor<64x64xf16>, %b: tensor<64x64xf16>) -> tensor<64x64xf16> {
  // expected-error @+1 {{config: form 'coop_gemm' does not fit this kernel on this GPU, which is built as 'gemm'}}
  %0 = kiln.kernel on "vulkan:0" config {form = "coop_gemm", tile = array<i64: 64, 64, 32>, subgroups = array<i64: 2, 2>} (%a, %b) : (tensor<64x64xf16>, tensor<64x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%x: tensor<64x64xf16>, %y: tensor<64x64xf16>):
    %m = kiln.matmul %x, %y : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf16>
    kiln.yield %m : tensor<64x64xf16>
  }
  return %0 : tensor<64x64xf16>
}

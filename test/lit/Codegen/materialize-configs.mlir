// RUN: kiln-opt %s --split-input-file --kiln-attach-target="target=vulkan:lavapipe,loops=0,subgroup=32,invocations=1024,shared=49152,units=132" --kiln-materialize-configs | FileCheck %s --check-prefix=GPU
// RUN: kiln-opt %s --split-input-file --kiln-materialize-configs | FileCheck %s --check-prefix=CPU
// Every kernel gets the form it is built in and that form's knobs; codegen
// reads only this attribute.

// GPU-LABEL: func.func @chain
// GPU: kiln.kernel on "vulkan:0" config {form = "loop", vector_width = 4 : i64, workgroup_size = 256 : i64}
// CPU-LABEL: func.func @chain
// CPU: kiln.kernel on "vulkan:0" config {form = "cpu"}
func.func @chain(%a: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %0 = kiln.kernel on "vulkan:0" (%a) : (tensor<64x32xf32>) -> tensor<64x32xf32> {
  ^bb0(%x: tensor<64x32xf32>):
    %t = kiln.tanh %x : tensor<64x32xf32>
    kiln.yield %t : tensor<64x32xf32>
  }
  return %0 : tensor<64x32xf32>
}

// -----

// An odd innermost dimension: scalar accesses.
// GPU-LABEL: func.func @odd
// GPU: config {form = "loop", vector_width = 1 : i64, workgroup_size = 256 : i64}
func.func @odd(%a: tensor<5x3xf32>) -> tensor<5x3xf32> {
  %0 = kiln.kernel on "vulkan:0" (%a) : (tensor<5x3xf32>) -> tensor<5x3xf32> {
  ^bb0(%x: tensor<5x3xf32>):
    %t = kiln.exp %x : tensor<5x3xf32>
    kiln.yield %t : tensor<5x3xf32>
  }
  return %0 : tensor<5x3xf32>
}

// -----

// On the CPU a long k keeps the default panel: 96 columns with AVX-512 (two
// blocks of 3 vectors of 16), 64 with AVX2 (four blocks of 2 vectors of 8).
// The GEMM form sweeps k in slices of 512, whose part of the panel stays in
// L2.
// CPU-LABEL: func.func @long_k
// CPU: config {form = "cpu_gemm", lanes = {{8|16}} : i64, panel = {{64|96}} : i64
func.func @long_k(%a: tensor<64x4608xf32>, %b: tensor<4608x64xf32>) -> tensor<64x64xf32> {
  %0 = kiln.kernel on "cpu:0" (%a, %b) : (tensor<64x4608xf32>, tensor<4608x64xf32>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x4608xf32>, %y: tensor<4608x64xf32>):
    %m = kiln.matmul %x, %y : tensor<64x4608xf32>, tensor<4608x64xf32> -> tensor<64x64xf32>
    kiln.yield %m : tensor<64x64xf32>
  }
  return %0 : tensor<64x64xf32>
}

// -----

// A 128 x 512 result takes the smallest tiles on 132 SMs (even 16 x 32
// tiles give fewer than two workgroups per SM), and k split four ways (its
// 16 k slices allow no more at four per group): 512 warps; on the CPU the
// register-blocked GEMM.
// GPU-LABEL: func.func @mm
// GPU: config {form = "gemm", split_k = 4 : i64, thread = array<i64: 4, 4>, tile = array<i64: 16, 32, 16>}
// CPU-LABEL: func.func @mm
// CPU: config {form = "cpu_gemm", lanes = {{8|16}} : i64, panel = {{64|96}} : i64, rows = {{6|8}} : i64, vectors = {{2|3}} : i64}
func.func @mm(%a: tensor<128x256xf32>, %b: tensor<256x512xf32>) -> tensor<128x512xf32> {
  %0 = kiln.kernel on "vulkan:0" (%a, %b) : (tensor<128x256xf32>, tensor<256x512xf32>) -> tensor<128x512xf32> {
  ^bb0(%x: tensor<128x256xf32>, %y: tensor<256x512xf32>):
    %m = kiln.matmul %x, %y : tensor<128x256xf32>, tensor<256x512xf32> -> tensor<128x512xf32>
    kiln.yield %m : tensor<128x512xf32>
  }
  return %0 : tensor<128x512xf32>
}

// -----

// A softmax row of 1024: a workgroup of 128 per row.
// GPU-LABEL: func.func @rowsum
// GPU: config {form = "row", workgroup_per_row = true, workgroup_size = 128 : i64}
func.func @rowsum(%a: tensor<8x1024xf32>) -> tensor<8x1xf32> {
  %0 = kiln.kernel on "vulkan:0" (%a) : (tensor<8x1024xf32>) -> tensor<8x1xf32> {
  ^bb0(%x: tensor<8x1024xf32>):
    %s = kiln.reduce sum %x [1] keepdims : tensor<8x1024xf32> -> tensor<8x1xf32>
    kiln.yield %s : tensor<8x1xf32>
  }
  return %0 : tensor<8x1xf32>
}

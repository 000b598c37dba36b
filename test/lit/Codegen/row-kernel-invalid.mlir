// RUN: kiln-opt %s --kiln-kernel-to-linalg -split-input-file -verify-diagnostics
// Row kernels built from IR that fusion would not produce: each is refused
// with the reason, nothing is built.

func.func @different_axes(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %0 = kiln.kernel on "cpu:0" (%x) : (tensor<4x8xf32>) -> tensor<4x1xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %r = kiln.reduce sum %a [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
    // expected-error @+1 {{differs in shape or axes from the kernel's first reduction}}
    %c = kiln.reduce sum %a [0] keepdims : tensor<4x8xf32> -> tensor<1x8xf32>
    kiln.yield %r : tensor<4x1xf32>
  }
  return %0 : tensor<4x1xf32>
}

// -----

func.func @view_of_a_row_value(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = kiln.kernel on "cpu:0" (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    %s = kiln.reduce sum %a [1] keepdims : tensor<4x4xf32> -> tensor<4x1xf32>
    %d = kiln.div %a, %s : tensor<4x4xf32>, tensor<4x1xf32> -> tensor<4x4xf32>
    // expected-error @+1 {{reads a value computed from a reduction of its kernel through a view}}
    %t = kiln.transpose %d [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    kiln.yield %t : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @reduce_a_row_value(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %0 = kiln.kernel on "cpu:0" (%x) : (tensor<4x8xf32>) -> tensor<4x1xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %m = kiln.reduce max %a [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
    %e = kiln.exp %m : tensor<4x1xf32>
    // expected-error @+1 {{differs in shape or axes from the kernel's first reduction}}
    %s = kiln.reduce sum %e [1] keepdims : tensor<4x1xf32> -> tensor<4x1xf32>
    kiln.yield %s : tensor<4x1xf32>
  }
  return %0 : tensor<4x1xf32>
}

// -----

func.func @row_value_broadcast_wrongly(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = kiln.kernel on "cpu:0" (%x) : (tensor<8x8xf32>) -> tensor<8x8xf32> {
  ^bb0(%a: tensor<8x8xf32>):
    %s = kiln.reduce sum %a [1] : tensor<8x8xf32> -> tensor<8xf32>
    // (Without keepdims, [8] broadcasts along the columns, not the rows.)
    // expected-error @+1 {{reads a per-row value at a shape other than the row's or the reduction input's}}
    %d = kiln.div %a, %s : tensor<8x8xf32>, tensor<8xf32> -> tensor<8x8xf32>
    kiln.yield %d : tensor<8x8xf32>
  }
  return %0 : tensor<8x8xf32>
}

// -----

func.func @empty_reduction(%x: tensor<4x0xf32>) -> tensor<4x1xf32> {
  %0 = kiln.kernel on "cpu:0" (%x) : (tensor<4x0xf32>) -> tensor<4x1xf32> {
  ^bb0(%a: tensor<4x0xf32>):
    // expected-error @+1 {{reduces an empty dimension: not supported}}
    %s = kiln.reduce sum %a [1] keepdims : tensor<4x0xf32> -> tensor<4x1xf32>
    kiln.yield %s : tensor<4x1xf32>
  }
  return %0 : tensor<4x1xf32>
}

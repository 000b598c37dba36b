// RUN: kiln-opt %s -split-input-file -verify-diagnostics
// The verifiers: shapes, dtypes, broadcasting, devices and kernel bodies.

func.func @no_broadcast(%a: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'kiln.add' op shapes [4] and [3] do not broadcast (dimension 0: 4 vs 3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.add %a, %b : tensor<4xf32>, tensor<3xf32> -> tensor<4xf32>
  return
}

// -----

func.func @wrong_result_shape(%a: tensor<4x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'kiln.mul' op inferred type(s) 'tensor<4x3xf32>' are incompatible with return type(s) of operation 'tensor<4x1xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.mul %a, %b : tensor<4x1xf32>, tensor<3xf32> -> tensor<4x1xf32>
  return
}

// -----

func.func @mixed_dtypes(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+2 {{'kiln.sub' op element types differ: 'f32' and 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.sub %a, %b : tensor<4xf32>, tensor<4xf16> -> tensor<4xf32>
  return
}

// -----

func.func @bool_math(%a: tensor<4xi1>) {
  // expected-error @+1 {{'kiln.exp' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values}}
  %0 = kiln.exp %a : tensor<4xi1>
  return
}

// -----

func.func @cmp_result_not_bool(%a: tensor<4xf32>) {
  // expected-error @+1 {{'kiln.cmp' op result #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = kiln.cmp lt, %a, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @select_shapes(%c: tensor<5xi1>, %a: tensor<4xf32>) {
  // expected-error @+2 {{'kiln.select' op shapes [5] and [4] and [4] do not broadcast (dimension 0: 5 vs 4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.select %c, %a, %a : tensor<5xi1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @bad_device() {
  // expected-error @+1 {{expected a device such as "vulkan:0" or "cpu", got "gpu:0"}}
  %0 = kiln.input 0 on "gpu:0" : tensor<4xf32>
  return
}

// -----

func.func @bad_ordinal() {
  // expected-error @+1 {{expected a device such as "vulkan:0" or "cpu", got "vulkan:x"}}
  %0 = kiln.input 0 on "vulkan:x" : tensor<4xf32>
  return
}

// -----

func.func @kernel_yield_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{'kiln.kernel' op yielded types do not match the result types}}
  %0 = kiln.kernel (%x) : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%a: tensor<4xf32>):
    kiln.yield %a : tensor<4xf32>
  }
  return
}

// -----

func.func @kernel_non_elementwise(%x: tensor<4xf32>) {
  %0 = kiln.kernel (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{'kiln.transfer' op cannot be part of a kernel: only elementwise ops, views, reductions, contractions, attention and constants fuse}}
    %t = kiln.transfer %a to "vulkan:1" : tensor<4xf32>
    kiln.yield %t : tensor<4xf32>
  }
  return
}

// -----

func.func @kernel_shapes(%x: tensor<4xf32>, %y: tensor<2xf32>) {
  // expected-error @+1 {{'kiln.kernel' op all results must share one iteration shape}}
  %0:2 = kiln.kernel (%x, %y) : (tensor<4xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<2xf32>):
    kiln.yield %a, %b : tensor<4xf32>, tensor<2xf32>
  }
  return
}

// -----

func.func @bad_permutation(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{'kiln.transpose' op permutation [0, 0] is not a permutation of 0..1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.transpose %x [0, 0] : tensor<4x3xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @transpose_shape(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{'kiln.transpose' op inferred type(s) 'tensor<3x4xf32>' are incompatible with return type(s) of operation 'tensor<4x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.transpose %x [1, 0] : tensor<4x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{'kiln.reshape' op cannot view [4, 3] (12 elements) as [5, 2]}}
  %0 = kiln.reshape %x : tensor<4x3xf32> -> tensor<5x2xf32>
  return
}

// -----

func.func @broadcast_to(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{'kiln.broadcast_to' op cannot broadcast [4, 3] to [2, 4, 4]}}
  %0 = kiln.broadcast_to %x : tensor<4x3xf32> -> tensor<2x4x4xf32>
  return
}

// -----

func.func @slice_out_of_range(%x: tensor<8xf32>) {
  // expected-error @+1 {{'kiln.slice' op dimension 0: elements 2, 5, ... 8 are not all inside [0, 8)}}
  %0 = kiln.slice %x starts [2] steps [3] : tensor<8xf32> -> tensor<3xf32>
  return
}

// -----

func.func @slice_zero_step(%x: tensor<8xf32>) {
  // expected-error @+1 {{'kiln.slice' op step of dimension 0 is 0}}
  %0 = kiln.slice %x starts [2] steps [0] : tensor<8xf32> -> tensor<3xf32>
  return
}

// -----

func.func @dynamic_shape(%x: tensor<?xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %0 = kiln.exp %x : tensor<?xf32>
  return
}

// -----

func.func @kernel_dense_constant(%x: tensor<2xf32>) {
  %0 = kiln.kernel (%x) : (tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2xf32>):
    // expected-error @+1 {{'kiln.constant' op inside a kernel must be a splat}}
    %c = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %s = kiln.add %a, %c : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
    kiln.yield %s : tensor<2xf32>
  }
  return
}

// -----

func.func @matmul_contracted(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{'kiln.matmul' op [2, 3] x [4, 5]: the contracted dimensions (3 and 4) differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @reduce_axes(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{'kiln.reduce' op axes [1, 0] must be sorted, distinct and inside the rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.reduce sum %x [1, 0] : tensor<4x3xf32> -> tensor<f32>
  return
}

// -----

func.func @conv_groups(%x: tensor<1x4x8x8xf32>, %w: tensor<6x3x3x3xf32>) {
  // expected-error @+2 {{'kiln.conv2d' op 1 groups do not fit 4 input channels and a filter [6, 3, 3, 3] (it needs input channels / groups = 4 per filter)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.conv2d %x, %w strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<1x4x8x8xf32>, tensor<6x3x3x3xf32> -> tensor<1x6x8x8xf32>
  return
}

// -----

func.func @pool_window(%x: tensor<1x1x2x2xf32>) {
  // expected-error @+2 {{'kiln.pool2d' op the window (3) is larger than the padded input (2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.pool2d max %x kernel [3, 3] strides [1, 1] padding [0, 0] : tensor<1x1x2x2xf32> -> tensor<1x1x1x1xf32>
  return
}

// -----

// 8 rows, window 3, stride 2: 3 windows, or 4 with ceil_mode; 5 is neither.
func.func @pool_ceil_size(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{'kiln.pool2d' op inferred type(s) 'tensor<1x1x4x4xf32>' are incompatible with return type(s) of operation 'tensor<1x1x5x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.pool2d max %x kernel [3, 3] strides [2, 2] padding [0, 0] ceil_mode : tensor<1x1x8x8xf32> -> tensor<1x1x5x4xf32>
  return
}

// -----

// ceil_mode's size needs the ceil_mode attribute.
func.func @pool_ceil_without_attr(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{'kiln.pool2d' op inferred type(s) 'tensor<1x1x3x3xf32>' are incompatible with return type(s) of operation 'tensor<1x1x4x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.pool2d max %x kernel [3, 3] strides [2, 2] padding [0, 0] : tensor<1x1x8x8xf32> -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pad_negative(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{'kiln.pad' op padding must be non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.pad %x low [-1, 0] high [2, 3] value 0.0 : tensor<4x3xf32> -> tensor<5x6xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<3x2x4xf32>, %b: tensor<2x4x5xf32>) {
  // expected-error @+2 {{'kiln.matmul' op batch dimensions: shapes [3] and [2] do not broadcast (dimension 0: 3 vs 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.matmul %a, %b : tensor<3x2x4xf32>, tensor<2x4x5xf32> -> tensor<3x2x5xf32>
  return
}

// -----

func.func @arg_reduce_type(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{'kiln.arg_reduce' op inferred type(s) 'tensor<4xi32>' are incompatible with return type(s) of operation 'tensor<3xi32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.arg_reduce max %x [1] : tensor<4x3xf32> -> tensor<3xi32>
  return
}

// -----

func.func @pad_shape(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{'kiln.pad' op inferred type(s) 'tensor<7x6xf32>' are incompatible with return type(s) of operation 'tensor<7x5xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.pad %x low [1, 0] high [2, 3] value 0.0 : tensor<4x3xf32> -> tensor<7x5xf32>
  return
}

// -----

func.func @concat_sizes(%a: tensor<4x3xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+2 {{'kiln.concat' op inferred type(s) 'tensor<4x5xf32>' are incompatible with return type(s) of operation 'tensor<4x6xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.concat %a, %b axis 1 : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @gather_indices(%x: tensor<5x3xf32>, %i: tensor<2x2xi32>) {
  // expected-error @+2 {{'kiln.gather' op indices must be rank 1, got [2, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.gather %x, %i axis 0 : tensor<5x3xf32>, tensor<2x2xi32> -> tensor<4x3xf32>
  return
}

// -----

func.func @attention_sizes(%q: tensor<2x5x8xf32>, %k: tensor<2x7x4xf32>, %v: tensor<2x7x4xf32>) {
  // expected-error @+1 {{'kiln.attention' op needs k's last size to be q's (E) and v's length to be k's (S)}}
  %0 = kiln.attention %q, %k, %v scale 0.5 : tensor<2x5x8xf32>, tensor<2x7x4xf32>, tensor<2x7x4xf32> -> tensor<2x5x4xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<2x5x8xf32>, %k: tensor<1x7x8xf32>, %v: tensor<2x7x4xf32>) {
  // expected-error @+1 {{'kiln.attention' op result must be [batch..., L, Ev]}}
  %0 = kiln.attention %q, %k, %v scale 0.5 : tensor<2x5x8xf32>, tensor<1x7x8xf32>, tensor<2x7x4xf32> -> tensor<2x5x8xf32>
  return
}

// -----

func.func @attention_mask_and_causal(%q: tensor<5x8xf32>, %m: tensor<5x5xi1>) {
  // expected-error @+1 {{'kiln.attention' op takes a mask or causal, not both}}
  %0 = kiln.attention %q, %q, %q mask %m scale 0.5 causal : tensor<5x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>, tensor<5x5xi1> -> tensor<5x8xf32>
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<5x8xf32>, %m: tensor<3x5xf32>) {
  // expected-error @+1 {{'kiln.attention' op mask: }}
  %0 = kiln.attention %q, %q, %q mask %m scale 0.5 : tensor<5x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>, tensor<3x5xf32> -> tensor<5x8xf32>
  return
}

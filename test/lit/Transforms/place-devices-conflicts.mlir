// RUN: kiln-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(kiln-place-devices))'
// Every conflicting op is reported in one run, naming both devices, with a
// note at the line that committed each operand and the fix.

func.func @two_devices() -> tensor<4x3xf32> {
  // expected-note @+1 {{operand #0 ('tensor<4x3xf32>') is committed to "vulkan:0" here}}
  %w = kiln.input 0 on "vulkan:0" : tensor<4x3xf32>
  // expected-note @+1 {{operand #1 ('tensor<4x3xf32>') is committed to "vulkan:1" here}}
  %x = kiln.input 1 on "vulkan:1" : tensor<4x3xf32>
  // expected-error @+2 {{operands of 'kiln.add' are on different devices: operand #0 is on "vulkan:0", operand #1 is on "vulkan:1"}}
  // expected-note @+1 {{fix: move operand #1 to "vulkan:0" with `.to(<operand #0>.device())` at}}
  %y = kiln.add %w, %x : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// Two independent conflicts: both reported; the result of a conflicting op
// does not cause a third, cascaded report.
func.func @every_conflict() -> tensor<8xf32> {
  // expected-note @+1 {{operand #0 ('tensor<8xf32>') is committed to "vulkan:0" here}}
  %a = kiln.input 0 on "vulkan:0" : tensor<8xf32>
  // expected-note @+1 {{operand #0 ('tensor<8xf32>') is committed to "vulkan:0" here}}
  %a2 = kiln.input 3 on "vulkan:0" : tensor<8xf32>
  // expected-note @+1 {{operand #1 ('tensor<8xf32>') is committed to "vulkan:1" (written "cuda-like:1") here}}
  %b = kiln.input 1 on "vulkan:1" written "cuda-like:1" : tensor<8xf32>
  // expected-note @+1 {{operand #1 ('tensor<8xf32>') is committed to "vulkan:2" here}}
  %c = kiln.constant on "vulkan:2" dense<1.0> : tensor<8xf32>
  // expected-error @+2 {{operands of 'kiln.mul' are on different devices: operand #0 is on "vulkan:0", operand #1 is on "vulkan:1"}}
  // expected-note @+1 {{(32 bytes to transfer), or create it without a device so it follows}}
  %d = kiln.mul %a, %b : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  // expected-error @+2 {{operands of 'kiln.max' are on different devices: operand #0 is on "vulkan:0", operand #1 is on "vulkan:2"}}
  // expected-note @+1 {{fix: move operand #1 to "vulkan:0"}}
  %e = kiln.max %a2, %c : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %f = kiln.add %d, %e : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %f : tensor<8xf32>
}

// -----

// The device of a computed value comes from the line that committed its
// input, not the line of the computation.
func.func @committed_through_ops() -> tensor<2xf32> {
  // expected-note @+1 {{operand #0 ('tensor<2xi1>') is committed to "vulkan:0" here}}
  %a = kiln.input 0 on "vulkan:0" : tensor<2xf32>
  %b = kiln.exp %a : tensor<2xf32>
  %x = kiln.input 1 : tensor<2xf32>
  // expected-note @+1 {{operand #1 ('tensor<2xf32>') is committed to "vulkan:1" here}}
  %y = kiln.transfer %x to "vulkan:1" : tensor<2xf32>
  %m = kiln.cmp lt, %b, %b : tensor<2xf32>, tensor<2xf32> -> tensor<2xi1>
  // expected-error @+2 {{operands of 'kiln.select' are on different devices: operand #0 is on "vulkan:0", operand #1 is on "vulkan:1"}}
  // expected-note @+1 {{fix: move operand #1 to "vulkan:0" with `.to(<operand #0>.device())`}}
  %s = kiln.select %m, %y, %b : tensor<2xi1>, tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %s : tensor<2xf32>
}

// -----

// One physical adapter reached through two execution contexts (Vulkan and
// Metal on one Mac GPU) is its own case: separate runtimes, not a generic
// mismatch.
func.func @same_adapter_two_contexts() -> tensor<4xf32> {
  // expected-note @+1 {{operand #0 ('tensor<4xf32>') is committed to "vulkan:0" (written "default") here}}
  %a = kiln.input 0 on "vulkan:0" adapter "0000-gpu" written "default" : tensor<4xf32>
  // expected-note @+1 {{operand #1 ('tensor<4xf32>') is committed to "metal:0" here}}
  %b = kiln.input 1 on "metal:0" adapter "0000-gpu" written "metal:0" : tensor<4xf32>
  // expected-error @+2 {{operands of 'kiln.add' are on the same physical adapter (0000-gpu) through two execution contexts: operand #0 through "vulkan:0", operand #1 through "metal:0"; they are separate runtimes whose memory cannot be shared}}
  // expected-note @+1 {{fix: use one execution context for both: create operand #1 on "vulkan:0" (or set KILN_DEVICE=vulkan), or move it with `.to(<operand #0>.device())` (16 bytes, copied through the host)}}
  %c = kiln.add %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %c : tensor<4xf32>
}

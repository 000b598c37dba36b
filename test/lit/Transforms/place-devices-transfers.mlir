// RUN: kiln-opt %s -verify-diagnostics -pass-pipeline='builtin.module(func.func(kiln-place-devices{transfer-policy=log}))' | FileCheck %s
// Under the log and allow policies the pass inserts explicit transfers and
// reports each one with its direction and size.

// CHECK-LABEL: func.func @insert
func.func @insert() -> tensor<16x4xf32> {
  %a = kiln.input 0 on "vulkan:0" : tensor<16x4xf32>
  %b = kiln.input 1 on "vulkan:1" : tensor<16x4xf32>
  // CHECK: %[[B:.*]] = kiln.input 1 on "vulkan:1"
  // CHECK: %[[T:.*]] = kiln.transfer %[[B]] to "vulkan:0" : tensor<16x4xf32>
  // CHECK: kiln.add %{{.*}}, %[[T]] on "vulkan:0"
  // expected-remark @+1 {{inserted transfer of operand #1 (256 bytes) from "vulkan:1" to "vulkan:0"}}
  %c = kiln.add %a, %b : tensor<16x4xf32>, tensor<16x4xf32> -> tensor<16x4xf32>
  return %c : tensor<16x4xf32>
}

// RUN: kiln-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(kiln-place-devices{default-device=vulkan:0}))' | FileCheck %s
// Placement: committed values keep their device, results follow their
// committed operands, uncommitted values follow the users they meet.

// CHECK-LABEL: func.func @follow
func.func @follow() -> tensor<4xf32> {
  // CHECK: kiln.input 0 on "vulkan:1"
  %a = kiln.input 0 on "vulkan:1" : tensor<4xf32>
  // An uncommitted literal follows the committed operand it meets.
  // CHECK: kiln.input 1 on "vulkan:1"
  %b = kiln.input 1 : tensor<4xf32>
  // CHECK: kiln.add {{.*}} on "vulkan:1"
  %c = kiln.add %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  // CHECK: kiln.exp {{.*}} on "vulkan:1"
  %d = kiln.exp %c : tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

// Nothing committed: everything runs on the default device.
// CHECK-LABEL: func.func @all_uncommitted
func.func @all_uncommitted() -> tensor<4xf32> {
  // CHECK: kiln.input 0 on "vulkan:0"
  // CHECK: kiln.constant on "vulkan:0"
  // CHECK: kiln.mul {{.*}} on "vulkan:0"
  %a = kiln.input 0 : tensor<4xf32>
  %b = kiln.constant dense<2.0> : tensor<4xf32>
  %c = kiln.mul %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

// An uncommitted value used on two devices is materialized on each, with
// its uncommitted producers.
// CHECK-LABEL: func.func @clone_per_device
func.func @clone_per_device() -> (tensor<4xf32>, tensor<4xf32>) {
  %a = kiln.input 0 on "vulkan:0" : tensor<4xf32>
  %b = kiln.input 1 on "vulkan:1" : tensor<4xf32>
  %m = kiln.input 2 : tensor<4xf32>
  %n = kiln.neg %m : tensor<4xf32>
  %x = kiln.add %a, %n : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %y = kiln.add %b, %n : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %x, %y : tensor<4xf32>, tensor<4xf32>
  // CHECK-DAG: %[[M0:.*]] = kiln.input 2 on "vulkan:0"
  // CHECK-DAG: %[[M1:.*]] = kiln.input 2 on "vulkan:1"
  // CHECK-DAG: %[[N0:.*]] = kiln.neg %[[M0]] on "vulkan:0"
  // CHECK-DAG: %[[N1:.*]] = kiln.neg %[[M1]] on "vulkan:1"
  // CHECK-DAG: kiln.add %{{.*}}, %[[N0]] on "vulkan:0"
  // CHECK-DAG: kiln.add %{{.*}}, %[[N1]] on "vulkan:1"
}

// -----

// Rank-0 tensors never conflict: a committed scalar elsewhere is moved
// silently (a few bytes), like a CPU scalar meeting a GPU tensor.
// CHECK-LABEL: func.func @scalar_never_conflicts
func.func @scalar_never_conflicts() -> tensor<4xf32> {
  %a = kiln.input 0 on "vulkan:0" : tensor<4xf32>
  %s = kiln.constant on "vulkan:1" dense<3.0> : tensor<f32>
  // CHECK: %[[T:.*]] = kiln.transfer %{{.*}} to "vulkan:0" : tensor<f32>
  // CHECK: kiln.mul %{{.*}}, %[[T]] on "vulkan:0"
  %c = kiln.mul %a, %s : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

// A handle written differently but resolving to the same device is the
// same device: no conflict.
// CHECK-LABEL: func.func @same_device_two_spellings
func.func @same_device_two_spellings() -> tensor<4xf32> {
  %a = kiln.input 0 on "vulkan:0" written "default" : tensor<4xf32>
  %b = kiln.input 1 on "vulkan:0" written "vulkan" : tensor<4xf32>
  // CHECK: kiln.add {{.*}} on "vulkan:0" written "default"
  %c = kiln.add %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %c : tensor<4xf32>
}

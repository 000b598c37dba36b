// RUN: kiln-opt %s --kiln-graph-pipeline --kiln-kernel-to-linalg --kiln-attach-target=target=vulkan:lavapipe --kiln-linalg-to-spirv > %t
// RUN: FileCheck %s < %t
// RUN: kiln-spirv-check %t | FileCheck %s --check-prefix=VALID
// The whole chain from a graph to SPIR-V; every generated module validates.

func.func @chain() -> tensor<100x13xf32> {
  %x = kiln.input 0 on "vulkan:0" : tensor<100x13xf32>
  %b = kiln.input 1 : tensor<13xf32>
  %0 = kiln.add %x, %b : tensor<100x13xf32>, tensor<13xf32> -> tensor<100x13xf32>
  %1 = kiln.tanh %0 : tensor<100x13xf32>
  %2 = kiln.gelu %1 : tensor<100x13xf32>
  %3 = kiln.pow %2, %x : tensor<100x13xf32>, tensor<100x13xf32> -> tensor<100x13xf32>
  %4 = kiln.cmp ge, %3, %x : tensor<100x13xf32>, tensor<100x13xf32> -> tensor<100x13xi1>
  %5 = kiln.select %4, %3, %x : tensor<100x13xi1>, tensor<100x13xf32>, tensor<100x13xf32> -> tensor<100x13xf32>
  return %5 : tensor<100x13xf32>
}
// 1300 elements in workgroups of 256: 6 groups.
// CHECK: gpu.launch_func @chain_kernel0_kernel::@chain_kernel0_kernel blocks in (%[[G:.*]], %{{.*}}, %{{.*}}) threads in (%[[T:.*]], %{{.*}}, %{{.*}})
// CHECK: spirv.module @__spv__chain_kernel0_kernel Logical GLSL450
// CHECK-DAG: spirv.GlobalVariable @chain_kernel0_kernel_arg_0 bind(0, 0)
// CHECK-DAG: spirv.GlobalVariable @chain_kernel0_kernel_arg_2 bind(0, 2)
// CHECK-DAG: spirv.GL.Tanh
// CHECK-DAG: spirv.GL.Pow
// CHECK: spirv.EntryPoint "GLCompute" @chain_kernel0_kernel
// CHECK: spirv.ExecutionMode @chain_kernel0_kernel "LocalSize", 256, 1, 1
// VALID: spirv.module @__spv__chain_kernel0_kernel: valid

// RUN: kiln-compile %s --target cpu:host --describe | FileCheck %s
// RUN: kiln-compile %s --target cpu --describe | FileCheck %s --check-prefix=PORTABLE
// RUN: not kiln-compile %s --target vulkan:nvidia-ampere 2>&1 | FileCheck %s --check-prefix=PROFILE
// RUN: not kiln-compile %s --target cpu:x86-64-v3,cpu --cpu-isa x86-64-v3 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: kiln-compile %s --target cpu --cpu-isa x86-64-v3 --describe | FileCheck %s --check-prefix=V3
// RUN: not kiln-compile %s --target cpu --cpu-isa pentium 2>&1 | FileCheck %s --check-prefix=ISA
// RUN: not kiln-compile %s --target opencl 2>&1 | FileCheck %s --check-prefix=METAL
// RUN: rm -rf %t && mkdir %t && cp %s %t/graph.mlir
// RUN: kiln-compile %t/graph.mlir --target cpu | FileCheck %s --check-prefix=WROTE
// RUN: kiln-run %t/graph.kiln --device cpu:0 --describe | FileCheck %s --check-prefix=RAN
// kiln-compile: a graph through the pipeline every realize uses, to a
// Program. Committed inputs move to the target's device; the two matmuls
// are separate kernels, the relu fused into the first; the first result is
// an intermediate in a buffer slot, freed after the second matmul.

func.func @graph() -> tensor<4x8xf32> {
  %x = kiln.input 0 : tensor<4x16xf32>
  %w = kiln.input 1 on "vulkan:0" : tensor<16x16xf32>
  %v = kiln.input 2 : tensor<16x8xf32>
  %m = kiln.matmul %x, %w : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
  %r = kiln.relu %m : tensor<4x16xf32>
  %o = kiln.matmul %r, %v : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  return %o : tensor<4x8xf32>
}
// CHECK: input input0: [4, 16] f32
// CHECK: input input1: [16, 16] f32
// CHECK: input input2: [16, 8] f32
// CHECK: output output0: [4, 8] f32
// CHECK-DAG: = input 0 on cpu:0
// CHECK-DAG: = input 1 on cpu:0
// CHECK-DAG: = input 2 on cpu:0
// CHECK: %[[H:[0-9]+]] = dispatch kernel 0 (cpu:0)
// CHECK: = dispatch kernel 1 (cpu:0) (%[[H]], %{{[0-9]+}}) on cpu:0
// CHECK: %[[H]]: [4, 16] f32 in slot 0
// CHECK: outputs:
// CHECK: 1 slots, peak 256 bytes of 256 without reuse
// CHECK: cpu code: host ({{.+}}), {{[0-9]+}} bytes, needs

// PORTABLE: cpu code: x86-64-v3, {{[0-9]+}} bytes
// PROFILE: unknown profile 'nvidia-ampere' of target vulkan: the profiles are vulkan:generic, vulkan:nvidia-hopper, vulkan:amd-rdna
// TWICE: target cpu:x86-64-v3 is listed twice: list each target once

// V3: cpu code: x86-64-v3, {{[0-9]+}} bytes, needs sse3 ssse3 sse4.1 sse4.2 popcnt avx avx2 fma f16c bmi bmi2 lzcnt movbe{{$}}
// ISA: unknown CPU ISA level 'pentium': use one of host, x86-64, x86-64-v2, x86-64-v3, x86-64-v4

// METAL: unknown target 'opencl': use vulkan, cpu, metal or cuda
// Without -o, the .kiln goes beside the model, as a compiler's output does.
// WROTE: wrote {{.*}}graph.kiln
// RAN: cpu code:

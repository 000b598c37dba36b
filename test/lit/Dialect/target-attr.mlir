// RUN: kiln-opt %s --split-input-file --verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s --split-input-file --verify-diagnostics | kiln-opt --split-input-file | FileCheck %s
// RUN: sed '/^\/\/ -----/,$d' %s | kiln-opt --kiln-attach-target="target=vulkan:nvidia-hopper,units=114" | FileCheck %s --check-prefix=ATTACH
// RUN: sed '/^\/\/ -----/,$d' %s | not kiln-opt --kiln-attach-target="target=vulkan" 2>&1 | FileCheck %s --check-prefix=NOPROFILE
// RUN: sed '/^\/\/ -----/,$d' %s | not kiln-opt --kiln-attach-target="target=vulkan:nvidia-hopper,subgroup=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: sed '/^\/\/ -----/,$d' %s | kiln-opt --kiln-attach-target="target=cpu:x86-64-v3" | FileCheck %s --check-prefix=CPU
// #kiln.target prints what it holds, fields at 0 left out, and reads back
// the same; kiln-attach-target writes one from a profile and its edits.

// CHECK: module attributes {kiln.target = #kiln.target<vulkan, "nvidia-hopper", subgroup = 32, workgroup = 1024, shared = 49152, bindings = 31, units = 132, groups = [65535, 65535, 65535], features = [f16, int64, coop_f16]>}
module attributes {kiln.target = #kiln.target<vulkan, "nvidia-hopper", subgroup = 32, workgroup = 1024, shared = 49152, bindings = 31, units = 132, groups = [65535, 65535, 65535], features = [f16, int64, coop_f16]>} {
}
// ATTACH: #kiln.target<vulkan, "nvidia-hopper", subgroup = 32, workgroup = 1024, shared = 49152, bindings = 31, units = 114, groups = [65535, 65535, 65535], features = [f16, int64, coop_f16]>
// NOPROFILE: 'vulkan' names no device; name a profile: vulkan:generic, vulkan:nvidia-hopper, vulkan:amd-rdna, vulkan:lavapipe
// ZERO: 'subgroup=0' is not key=positive-integer
// CPU: #kiln.target<cpu, "x86-64-v3", cpu = "x86-64-v3">

// -----

// CHECK: #kiln.target<cpu>
module attributes {kiln.target = #kiln.target<cpu>} {
}

// -----

// expected-error @+1 {{unknown target api 'opencl', expected cpu, vulkan, metal or cuda}}
module attributes {kiln.target = #kiln.target<opencl>} {
}

// -----

// expected-error @+1 {{unknown target field 'lanes'}}
module attributes {kiln.target = #kiln.target<vulkan, lanes = 32>} {
}

// -----

// expected-error @+1 {{unknown target feature 'fp8'}}
module attributes {kiln.target = #kiln.target<vulkan, features = [fp8]>} {
}

// -----

// expected-error @+1 {{groups takes three counts, x, y and z}}
module attributes {kiln.target = #kiln.target<vulkan, groups = [65535, 65535]>} {
}

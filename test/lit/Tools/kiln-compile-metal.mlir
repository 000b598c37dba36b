// RUN: kiln-compile %s --target metal --describe --msl | FileCheck %s
// RUN: kiln-compile %s --target metal,vulkan -o %t.kiln
// RUN: not kiln-run %t.kiln --device cpu:0 2>&1 | FileCheck %s --check-prefix=NOCPU
// The metal target: the Vulkan path's kernels for Apple GPUs' limits (SIMD
// groups of 32), turned into MSL 2.1 by SPIRV-Cross. A softmax is one row
// kernel, a threadgroup per row reducing through simd shuffles and
// threadgroup memory; the bias add and relu one elementwise kernel. Buffers
// are [[buffer(i)]] in the binding order the file records.

func.func @graph() -> (tensor<64x1024xf32>, tensor<64x1024xf32>) {
  %x = kiln.input 0 : tensor<64x1024xf32>
  %b = kiln.input 1 : tensor<1024xf32>
  %m = kiln.reduce max %x [1] keepdims : tensor<64x1024xf32> -> tensor<64x1xf32>
  %s = kiln.sub %x, %m : tensor<64x1024xf32>, tensor<64x1xf32> -> tensor<64x1024xf32>
  %e = kiln.exp %s : tensor<64x1024xf32>
  %z = kiln.reduce sum %e [1] keepdims : tensor<64x1024xf32> -> tensor<64x1xf32>
  %p = kiln.div %e, %z : tensor<64x1024xf32>, tensor<64x1xf32> -> tensor<64x1024xf32>
  %y = kiln.add %x, %b : tensor<64x1024xf32>, tensor<1024xf32> -> tensor<64x1024xf32>
  %r = kiln.relu %y : tensor<64x1024xf32>
  return %p, %r : tensor<64x1024xf32>, tensor<64x1024xf32>
}
// CHECK: %[[X:[0-9]+]] = input 0 on metal:0
// CHECK: = dispatch kernel 0 (metal:0) (%[[X]]) on metal:0
// CHECK: = dispatch kernel 1 (metal:0) (%[[X]], %{{[0-9]+}}) on metal:0

// CHECK: // kernel 0 (metal:0): reduce+sub+exp+reduce+div -> [64, 1024] f32
// CHECK-NEXT: // entry [[ENTRY:[a-z_]+]], threadgroup {{[0-9]+}}x1x1, grid 64x1x1, buffers 0=arg0 1=arg1
// CHECK: #include <metal_stdlib>
// CHECK: simd_shuffle_xor
// CHECK: kernel void [[ENTRY]](device {{.*}} {{\[\[buffer\(0\)\]\]}}, device {{.*}} {{\[\[buffer\(1\)\]\]}}, {{.*}}{{\[\[threadgroup_position_in_grid\]\]}}
// CHECK: threadgroup_barrier(mem_flags::mem_threadgroup);

// CHECK: // kernel 1 (metal:0): add+relu -> [64, 1024] f32
// CHECK-NEXT: // entry {{.*}}, buffers 0=arg{{[0-2]}} 1=arg{{[0-2]}} 2=arg{{[0-2]}}
// CHECK: kernel void {{.*}}{{\[\[buffer\(2\)\]\]}}
// CHECK: fast::max(

// NOCPU: kiln-run: the model has no code for cpu:0 (cpu); it was compiled for: metal, vulkan

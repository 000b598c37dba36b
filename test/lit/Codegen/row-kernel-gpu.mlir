// RUN: kiln-opt %s --kiln-kernel-to-linalg=gpu=true | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg=gpu=true --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// RUN: kiln-opt %s --kiln-kernel-to-linalg | FileCheck %s --check-prefix=LOOPS
// RUN: kiln-opt %s --kiln-kernel-to-linalg="gpu=true row-workgroup-size=-1" | FileCheck %s --check-prefix=ITEMS
// RUN: kiln-opt %s --kiln-kernel-to-linalg="gpu=true row-workgroup-size=64" | FileCheck %s --check-prefix=WIDE
// RUN: not kiln-opt %s --kiln-kernel-to-linalg="gpu=true row-workgroup-size=12" 2>&1 | FileCheck %s --check-prefix=BAD
// softmax as one row kernel. On a GPU (subgroup 8): a workgroup of 16 per
// 100-wide row (about 8 columns per work item), 7 columns per work item
// held in registers: the input is loaded once (7 loads), both reductions
// are shuffle butterflies (3 xor steps each) around one shared-memory step
// between the 2 subgroups, and the last chunk is guarded.

func.func @softmax(%x: tensor<3x100xf32>) -> tensor<3x100xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x) : (tensor<3x100xf32>) -> tensor<3x100xf32> {
  ^bb0(%a: tensor<3x100xf32>):
    %m = kiln.reduce max %a [1] keepdims : tensor<3x100xf32> -> tensor<3x1xf32>
    %s = kiln.sub %a, %m : tensor<3x100xf32>, tensor<3x1xf32> -> tensor<3x100xf32>
    %e = kiln.exp %s : tensor<3x100xf32>
    %z = kiln.reduce sum %e [1] keepdims : tensor<3x100xf32> -> tensor<3x1xf32>
    %y = kiln.div %e, %z : tensor<3x100xf32>, tensor<3x1xf32> -> tensor<3x100xf32>
    kiln.yield %y : tensor<3x100xf32>
  }
  return %0 : tensor<3x100xf32>
}
// CHECK: func.func @softmax_kernel0(%[[X:.*]]: memref<300xf32>, %[[OUT:.*]]: memref<300xf32>)
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c3{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c16{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1
// CHECK-COUNT-2: memref.alloc() : memref<2xf32, 3>
// CHECK-COUNT-7: memref.load %[[X]]
// CHECK-NOT: memref.load %[[X]]
// CHECK-COUNT-3: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK-COUNT-3: gpu.shuffle xor
// CHECK: math.exp
// CHECK-COUNT-3: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK-COUNT-3: gpu.shuffle xor
// CHECK: scf.if
// CHECK: memref.store {{.*}}, %[[OUT]]
// VALID: spirv.module @__spv__softmax_kernel0_kernel: valid
// Without a GPU: a loop per row, a loop per reduction, one for the output.
// LOOPS: scf.parallel
// LOOPS: scf.for {{.*}} iter_args
// LOOPS: arith.maximumf {{.*}} fastmath<reassoc>
// LOOPS: scf.for {{.*}} iter_args
// LOOPS: arith.addf {{.*}} fastmath<reassoc>
// LOOPS: scf.for
// LOOPS: arith.divf
// A configured workgroup of 64: 2 columns per work item, 8 subgroups.
// WIDE: threads({{.*}}) in ({{.*}} = %c64
// WIDE-COUNT-2: memref.alloc() : memref<8xf32, 3>
// BAD: error: 'kiln.kernel' op config: workgroup size 12 must be a multiple of the subgroup size 8 and at most 1024
// A work item per row on a GPU: the loops, no reassociation flags.
// ITEMS-NOT: gpu.launch
// ITEMS: scf.parallel
// ITEMS: arith.maximumf
// ITEMS-NOT: fastmath
// ITEMS: arith.divf

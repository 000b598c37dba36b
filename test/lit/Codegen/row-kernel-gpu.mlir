// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg --kiln-linalg-to-spirv | kiln-spirv-check | FileCheck %s --check-prefix=VALID
// RUN: kiln-opt %s --kiln-kernel-to-linalg | FileCheck %s --check-prefix=LOOPS
// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg=row-workgroup-size=-1 | FileCheck %s --check-prefix=ITEMS
// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg=row-workgroup-size=64 | FileCheck %s --check-prefix=WIDE
// RUN: not kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg=row-workgroup-size=12 2>&1 | FileCheck %s --check-prefix=BAD
// softmax as one row kernel. On a GPU (subgroup 8): a workgroup of 16 per
// 100-wide row (about 8 columns per work item). The row is 25 groups of 4
// columns, so the input and output buffers are declared as 16-byte vectors
// and a work item holds 2 groups in registers: the input is loaded once (2
// vector loads), both reductions fold the lanes, then shuffle butterflies
// (3 xor steps each) around one shared-memory step between the 2
// subgroups, and the second chunk is guarded.

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
// CHECK: func.func @softmax_kernel0(%[[X:.*]]: memref<75xvector<4xf32>>, %[[OUT:.*]]: memref<75xvector<4xf32>>)
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c3{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c16{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1
// CHECK-COUNT-2: memref.alloc() : memref<2xf32, 3>
// CHECK-COUNT-2: memref.load %[[X]]{{.*}} : memref<75xvector<4xf32>>
// CHECK-NOT: memref.load %[[X]]
// CHECK: vector.extract
// CHECK: arith.maximumf
// CHECK-COUNT-3: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK-COUNT-3: gpu.shuffle xor
// CHECK: math.exp
// CHECK-COUNT-3: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK-COUNT-3: gpu.shuffle xor
// CHECK: scf.if
// CHECK: memref.store {{.*}}, %[[OUT]]{{.*}} : memref<75xvector<4xf32>>
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

// Many rows a subgroup covers (1027 rows of 24): 8 rows per workgroup, a
// subgroup each (129 workgroups of 64 work items, the last partly empty:
// each subgroup checks its row), 6 groups of 4 columns per row, no barrier.
// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg | FileCheck %s --check-prefix=ROWS
// ROWS-LABEL: func.func @narrow_rows_kernel{{[0-9]+}}(
// ROWS-SAME: memref<6162xvector<4xf32>>
// ROWS: gpu.launch blocks({{.*}}) in ({{.*}} = %c129{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c64
// ROWS: arith.divui {{.*}}, %c8
// ROWS: arith.cmpi ult, {{.*}}, %c1027
// ROWS-NOT: gpu.barrier
// ROWS: gpu.shuffle xor
// ROWS-NOT: gpu.barrier
// ROWS: return
func.func @narrow_rows(%x: tensor<1027x24xf32>) -> tensor<1027x24xf32> {
  %0 = kiln.kernel on "vulkan:0" (%x) : (tensor<1027x24xf32>) -> tensor<1027x24xf32> {
  ^bb0(%a: tensor<1027x24xf32>):
    %m = kiln.reduce max %a [1] keepdims : tensor<1027x24xf32> -> tensor<1027x1xf32>
    %s = kiln.sub %a, %m : tensor<1027x24xf32>, tensor<1027x1xf32> -> tensor<1027x24xf32>
    kiln.yield %s : tensor<1027x24xf32>
  }
  return %0 : tensor<1027x24xf32>
}

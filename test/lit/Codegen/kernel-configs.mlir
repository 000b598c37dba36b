// RUN: kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg=matmul-tiles=32,32,8,4,4 | FileCheck %s --check-prefix=TILES
// RUN: kiln-opt %s --kiln-kernel-to-linalg="coalesce=true cpu-matmul-block=4,8,1,16" | FileCheck %s --check-prefix=CPU
// RUN: not kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0,invocations=128" --kiln-kernel-to-linalg=matmul-tiles=64,64,16,4,4 2>&1 | FileCheck %s --check-prefix=TOOBIG
// RUN: not kiln-opt %s --kiln-attach-target="target=vulkan:lavapipe,loops=0" --kiln-kernel-to-linalg=matmul-tiles=64,64,16,3,4 2>&1 | FileCheck %s --check-prefix=UNEVEN
// Each kernel builder takes one configuration object; the defaults come
// from the device's limits, and another configuration (an autotuner's) is
// checked against them with the reason it does not fit.

func.func @mm(%a: tensor<64x32xf32>, %b: tensor<32x48xf32>) -> tensor<64x48xf32> {
  %0 = kiln.kernel on "vulkan:0" (%a, %b) : (tensor<64x32xf32>, tensor<32x48xf32>) -> tensor<64x48xf32> {
  ^bb0(%x: tensor<64x32xf32>, %y: tensor<32x48xf32>):
    %m = kiln.matmul %x, %y : tensor<64x32xf32>, tensor<32x48xf32> -> tensor<64x48xf32>
    kiln.yield %m : tensor<64x48xf32>
  }
  return %0 : tensor<64x48xf32>
}
// 32 x 32 tiles, 4 x 4 per work item: 64 work items, a 2 x 2 grid. A and B
// are plain inputs with K and N multiples of 4: their buffers are read as
// 16-byte vectors (A's tile then holds rows of k, As[i][k / 4]).
// TILES: func.func @mm_kernel0(%[[A:.*]]: memref<512xvector<4xf32>>, %[[B:.*]]: memref<384xvector<4xf32>>, %{{.*}}: memref<3072xf32>)
// TILES: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c64
// TILES: memref.alloc() : memref<64xvector<4xf32>, 3>
// TILES: memref.load %[[A]]
// TILES: memref.load %[[B]]
// TILES-COUNT-16: math.fma
// 4 rows x 1 vector of 8 lanes per register block, 16-column panels: 3
// panels, each with its 64 rows in 2 splits of 32.
// CPU: attributes {kiln.iteration_size = 98304 : i64, kiln.outer_size = 6 : i64}
// CPU: memref.alloc() {alignment = 64 : i64} : memref<512xf32>
// CPU-COUNT-4: vector.fma {{.*}} : vector<8xf32>
// TOOBIG: error: 'kiln.kernel' op config: 256 work items exceed the device's 128
// UNEVEN: error: 'kiln.kernel' op config: the tile must be a whole number of per-thread blocks

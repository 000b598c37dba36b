// RUN: kiln-opt %s --split-input-file --kiln-materialize-configs | FileCheck %s --check-prefix=CONFIG
// RUN: kiln-opt %s --split-input-file --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// A matmul whose right operand B the program stores packed (a weight of a
// program compiled ahead of time: kiln.weight_matrix on the kernel) reads
// B's panels in place, [N / panel][K][panel]: no panel buffer, no packing
// loop. Blocks of 6 rows x 4 vectors with AVX-512 (6 x 2 with AVX2), panels
// of up to 128 columns that divide N. A W read through a transpose packs
// the same way (its bytes permuted when the program is compiled).

func.func @packed(%x: tensor<40x256xf32>, %w: tensor<256x384xf32>) -> tensor<40x384xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w) {kiln.weight_matrix} : (tensor<40x256xf32>, tensor<256x384xf32>) -> tensor<40x384xf32> {
  ^bb0(%a: tensor<40x256xf32>, %b: tensor<256x384xf32>):
    %m = kiln.matmul %a, %b : tensor<40x256xf32>, tensor<256x384xf32> -> tensor<40x384xf32>
    kiln.yield %m : tensor<40x384xf32>
  }
  return %0 : tensor<40x384xf32>
}
// CONFIG-LABEL: func.func @packed
// CONFIG: config {form = "cpu_gemm", lanes = {{8|16}} : i64, packed_b = true, panel = {{64|128}} : i64, rows = 6 : i64, vectors = {{2|4}} : i64}
// CHECK-LABEL: func.func @packed_kernel0
// CHECK-SAME: (%[[X:.*]]: memref<10240xf32>, %[[W:.*]]: memref<98304xf32>, %{{.*}}: memref<15360xf32>)
// CHECK-NOT: memref.alloc()
// Panel j0 / panel starts at j0 * K.
// CHECK: %[[BASE:.*]] = arith.muli %{{.*}}, %c256{{.*}} : index
// Each k step of a block fetches a line of the rows read next (the next
// panel's) into L2, clamped to B's end; then reads the panel.
// CHECK: scf.for
// CHECK: scf.for %{{.*}} iter_args
// CHECK: arith.minui %{{.*}}, %{{.*}} : index
// CHECK-NEXT: memref.prefetch %[[W]][%{{.*}}], read, locality<2>, data : memref<98304xf32>
// CHECK-NOT: memref.prefetch
// CHECK: vector.load %[[W]][%{{.*}}] : memref<98304xf32>, vector<{{8|16}}xf32>
// CHECK: vector.fma
// CHECK-NOT: memref.dealloc %[[W]]
// CHECK: return

// -----

// Without the attribute the kernel packs its panels per call.
func.func @unmarked(%x: tensor<40x256xf32>, %w: tensor<256x384xf32>) -> tensor<40x384xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w) : (tensor<40x256xf32>, tensor<256x384xf32>) -> tensor<40x384xf32> {
  ^bb0(%a: tensor<40x256xf32>, %b: tensor<256x384xf32>):
    %m = kiln.matmul %a, %b : tensor<40x256xf32>, tensor<256x384xf32> -> tensor<40x384xf32>
    kiln.yield %m : tensor<40x384xf32>
  }
  return %0 : tensor<40x384xf32>
}
// CONFIG-LABEL: func.func @unmarked
// CONFIG-NOT: packed_b
// CONFIG: return
// CHECK-LABEL: func.func @unmarked_kernel0
// CHECK: memref.alloc() {alignment = 64 : i64}
// CHECK-NOT: memref.prefetch
// CHECK: return

// -----

// N of 100 is no whole number of panels: B stays as written.
func.func @ragged(%x: tensor<40x256xf32>, %w: tensor<256x100xf32>) -> tensor<40x100xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w) {kiln.weight_matrix} : (tensor<40x256xf32>, tensor<256x100xf32>) -> tensor<40x100xf32> {
  ^bb0(%a: tensor<40x256xf32>, %b: tensor<256x100xf32>):
    %m = kiln.matmul %a, %b : tensor<40x256xf32>, tensor<256x100xf32> -> tensor<40x100xf32>
    kiln.yield %m : tensor<40x100xf32>
  }
  return %0 : tensor<40x100xf32>
}
// CONFIG-LABEL: func.func @ragged
// CONFIG-NOT: packed_b
// CONFIG: return

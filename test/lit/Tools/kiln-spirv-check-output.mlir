// RUN: rm -f %t.spv %t2.spv
// RUN: sed '/^\/\/ -----/,$d' %s | kiln-opt --kiln-attach-target=target=vulkan:lavapipe --kiln-linalg-to-spirv | kiln-spirv-check --output %t.spv | FileCheck %s
// RUN: od -A n -t x4 -N 4 %t.spv | FileCheck %s --check-prefix=MAGIC
// RUN: kiln-opt %s --kiln-attach-target=target=vulkan:lavapipe --kiln-linalg-to-spirv > %t.two.mlir
// RUN: not kiln-spirv-check %t.two.mlir --output %t2.spv 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not test -e %t2.spv
// kiln-spirv-check --output writes the words of the one spirv.module it read
// (bench/half/make_ceiling.py's kernels go to kiln-spirv-replay so: the
// first function here); given two (the whole file) it writes nothing and
// says why.
// CHECK: spirv.module @__spv__scale_kernel: valid
// MAGIC: 07230203
// TWO: kiln-spirv-check: --output takes one spirv.module; the input has 2
func.func @scale(%a: memref<256xf32>, %b: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %t = arith.muli %bx, %c64 : index
    %i = arith.addi %t, %tx : index
    %v = memref.load %a[%i] : memref<256xf32>
    %w = arith.addf %v, %v : f32
    memref.store %w, %b[%i] : memref<256xf32>
    gpu.terminator
  }
  return
}

// -----

func.func @shift(%a: memref<256xf32>, %b: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %t = arith.muli %bx, %c64 : index
    %i = arith.addi %t, %tx : index
    %v = memref.load %a[%i] : memref<256xf32>
    memref.store %v, %b[%i] : memref<256xf32>
    gpu.terminator
  }
  return
}

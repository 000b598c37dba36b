// RUN: kiln-opt %s --pass-pipeline='builtin.module(func.func(kiln-emulate-bf16-storage))' --split-input-file --verify-diagnostics | FileCheck %s
// bf16 buffers become i16 buffers of the same bits (SPIR-V has no bf16):
// arithmetic in f32, the casts as shifts and rounding, moves as bits.

// CHECK-LABEL: func.func @scale
// CHECK-SAME: (%[[A:.*]]: memref<8xi16>, %[[O:.*]]: memref<8xi16>, %{{.*}}: index)
// The load is bits, widened into an f32's upper half...
// CHECK: %[[BITS:.*]] = memref.load %[[A]]
// CHECK-SAME: memref<8xi16>
// CHECK: %[[WIDE:.*]] = arith.extui %[[BITS]] : i16 to i32
// CHECK: %[[HIGH:.*]] = arith.shli %[[WIDE]]
// CHECK: %[[F:.*]] = arith.bitcast %[[HIGH]] : i32 to f32
// ... the product in f32 ...
// CHECK: arith.mulf %[[F]], %{{.*}} : f32
// ... rounded to nearest even (the bias counts the kept lowest bit) ...
// CHECK: arith.shrui
// CHECK: arith.andi
// CHECK: arith.addi
// CHECK: arith.trunci %{{.*}} : i32 to i16
// ... and stored as bits.
// CHECK: memref.store %{{.*}}, %[[O]]
// CHECK-SAME: memref<8xi16>
// CHECK-NOT: bf16
func.func @scale(%a: memref<8xbf16>, %o: memref<8xbf16>, %i: index) {
  %x = memref.load %a[%i] : memref<8xbf16>
  %two = arith.constant 2.0 : bf16
  %y = arith.mulf %x, %two : bf16
  memref.store %y, %o[%i] : memref<8xbf16>
  return
}

// -----

// A select of two loads (a concat's) moves bits, nothing is converted;
// workgroup tiles and vector loads are bits too.
// CHECK-LABEL: func.func @pick
// CHECK-SAME: memref<8xi16>, %{{.*}}: memref<8xi16>, %{{.*}}: memref<8xi16>
// CHECK: %[[T:.*]] = memref.alloc() : memref<4xvector<4xi16>, 3>
// CHECK: %[[X:.*]] = memref.load {{.*}} : memref<8xi16>
// CHECK: %[[Y:.*]] = memref.load {{.*}} : memref<8xi16>
// CHECK: %[[S:.*]] = arith.select %{{.*}}, %[[X]], %[[Y]] : i16
// CHECK: memref.store %[[S]], {{.*}} : memref<8xi16>
// CHECK: %[[V:.*]] = memref.load %[[T]]{{.*}} : memref<4xvector<4xi16>, 3>
// CHECK: vector.store %[[V]], {{.*}} : memref<8xi16>, vector<4xi16>
// CHECK-NOT: bf16
func.func @pick(%a: memref<8xbf16>, %b: memref<8xbf16>, %o: memref<8xbf16>, %c: i1, %i: index) {
  %t = memref.alloc() : memref<4xvector<4xbf16>, 3>
  %x = memref.load %a[%i] : memref<8xbf16>
  %y = memref.load %b[%i] : memref<8xbf16>
  %s = arith.select %c, %x, %y : bf16
  memref.store %s, %o[%i] : memref<8xbf16>
  %v = memref.load %t[%i] : memref<4xvector<4xbf16>, 3>
  vector.store %v, %o[%i] : memref<8xbf16>, vector<4xbf16>
  return
}

// -----

// Functions without bf16 are left as they are.
// CHECK-LABEL: func.func @half
// CHECK: memref.load {{.*}} : memref<8xf16>
// CHECK: arith.mulf {{.*}} : f16
func.func @half(%a: memref<8xf16>, %i: index) -> f16 {
  %x = memref.load %a[%i] : memref<8xf16>
  %y = arith.mulf %x, %x : f16
  return %y : f16
}

// -----

// An op the emulation does not cover (math on bf16: kiln's kernels compute
// it in f32) is named in an error, not computed on integers.
func.func @exp(%a: memref<256xbf16>, %o: memref<256xbf16>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0] : memref<256xbf16>
  // expected-error @+1 {{still computes on bf16 after emulation}}
  %w = math.exp %v : bf16
  memref.store %w, %o[%c0] : memref<256xbf16>
  return
}

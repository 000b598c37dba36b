// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// RUN: sed 's/ config {[^}]*}//' %s | kiln-opt --kiln-materialize-configs | FileCheck %s --check-prefix=DEFAULT
// A 1x1 projection (384 -> 64 channels, 14x14) with a residual, as in
// MobileNetV2, in the direct form's pointwise case: the plane is one flat
// row of 196 pixels read straight from the input (no slab), in blocks of 7
// pixels x 2 vectors of 16 output channels. 14 work units: 2 channel
// blocks x 7 runs of 4 pixel blocks (28 blocks in all).

func.func @project(%x: tensor<1x384x14x14xf32>, %w: tensor<64x384x1x1xf32>, %r: tensor<1x64x14x14xf32>) -> tensor<1x64x14x14xf32> {
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_direct_conv", lanes = 16, pixels = 7, vectors = 2} (%x, %w, %r) : (tensor<1x384x14x14xf32>, tensor<64x384x1x1xf32>, tensor<1x64x14x14xf32>) -> tensor<1x64x14x14xf32> {
  ^bb0(%a: tensor<1x384x14x14xf32>, %f: tensor<64x384x1x1xf32>, %s: tensor<1x64x14x14xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<1x384x14x14xf32>, tensor<64x384x1x1xf32> -> tensor<1x64x14x14xf32>
    %z = kiln.add %y, %s : tensor<1x64x14x14xf32>, tensor<1x64x14x14xf32> -> tensor<1x64x14x14xf32>
    kiln.yield %z : tensor<1x64x14x14xf32>
  }
  return %0 : tensor<1x64x14x14xf32>
}
// CHECK-LABEL: func.func @project_kernel0
// CHECK-SAME: kiln.outer_size = 14
// Only the packed filters are allocated (384 x 32), no slab:
// CHECK-NOT: memref<{{[0-9]+}}xf32>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<12288xf32>
// CHECK-NOT: memref.alloc() {alignment
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c14
// CHECK: scf.if
// The input channels' loop: 14 accumulators, 14 FMAs a channel.
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c384{{(_[0-9]+)?}} step %c1{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-14: vector.fma
// CHECK-NOT: vector.fma
// CHECK: scf.yield
// Each output channel's 7 pixels through the epilogue as one vector,
// transposed in registers: the 7 pixel vectors of 16 channels (and a zero
// vector) interleaved in three rounds of 8 two-source shuffles, then each
// channel's 7 pixels sliced out as 8 lanes (no loads through memory), the
// residual read and the result stored with a mask of 7 lanes (x86 has no
// 7-lane load or store):
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK-NEXT: vector.shuffle %{{.*}}#0, %{{.*}}#2 [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23]
// CHECK-COUNT-6: vector.shuffle
// CHECK-NEXT: vector.shuffle %{{.*}}#12, %[[ZERO]] [8, 24, 9, 25
// CHECK-NEXT: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 16, 17, 2, 3, 18, 19
// CHECK-COUNT-7: vector.shuffle
// CHECK-NEXT: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 16, 17, 18, 19
// CHECK-COUNT-7: vector.shuffle
// CHECK-NEXT: vector.extract_strided_slice %{{.*}} {offsets = [0], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
// CHECK-NEXT: vector.extract_strided_slice %{{.*}} {offsets = [8], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
// CHECK-NOT: vector.from_elements
// CHECK: %[[SEVEN:.*]] = vector.create_mask %c7{{.*}} : vector<8xi1>
// CHECK: %[[RES:.*]] = vector.maskedload %{{.*}}[%{{.*}}], %[[SEVEN]], %{{.*}} : memref<12544xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK: %[[SUM:.*]] = arith.addf %{{.*}}, %[[RES]] : vector<8xf32>
// CHECK-NEXT: vector.maskedstore %{{.*}}[%{{.*}}], %[[SEVEN]], %[[SUM]] : memref<12544xf32>, vector<8xi1>, vector<8xf32>
// CHECK-NOT: vector<7xf32>
// CHECK: memref.dealloc

// By default: the pointwise case in blocks of 7 pixels (they tile 196)
// with AVX-512 (AVX2: 6 pixels of two 8-lane vectors).
// DEFAULT: config {form = "cpu_direct_conv", lanes = {{8|16}} : i64, pixels = {{6|7}} : i64, vectors = 2 : i64}

// An expansion (64 -> 384) on 14 x 14 stays with the GEMM form (the direct
// form measured no faster).
func.func @expand(%x: tensor<1x64x14x14xf32>, %w: tensor<384x64x1x1xf32>) -> tensor<1x384x14x14xf32> {
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_gemm", lanes = 16, panel = 64, rows = 8, vectors = 2} (%x, %w) : (tensor<1x64x14x14xf32>, tensor<384x64x1x1xf32>) -> tensor<1x384x14x14xf32> {
  ^bb0(%a: tensor<1x64x14x14xf32>, %f: tensor<384x64x1x1xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<1x64x14x14xf32>, tensor<384x64x1x1xf32> -> tensor<1x384x14x14xf32>
    kiln.yield %y : tensor<1x384x14x14xf32>
  }
  return %0 : tensor<1x384x14x14xf32>
}
// DEFAULT-LABEL: func.func @expand
// DEFAULT: config {form = "cpu_gemm"

// On a 7 x 7 plane an expansion (160 -> 960) whose filter the program
// stores packed takes the direct form (49 pixels fill 64-column GEMM blocks
// poorly); with the filter as the user wrote it, the GEMM form.
func.func @expand7_packed(%x: tensor<1x160x7x7xf32>, %w: tensor<960x160x1x1xf32>) -> tensor<1x960x7x7xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w) {kiln.weight_filter} : (tensor<1x160x7x7xf32>, tensor<960x160x1x1xf32>) -> tensor<1x960x7x7xf32> {
  ^bb0(%a: tensor<1x160x7x7xf32>, %f: tensor<960x160x1x1xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<1x160x7x7xf32>, tensor<960x160x1x1xf32> -> tensor<1x960x7x7xf32>
    kiln.yield %y : tensor<1x960x7x7xf32>
  }
  return %0 : tensor<1x960x7x7xf32>
}
// DEFAULT-LABEL: func.func @expand7_packed
// DEFAULT: config {form = "cpu_direct_conv", lanes = {{16 : i64, packed_filter = true, pixels = 7|8 : i64, packed_filter = true, pixels = 6}} : i64, vectors = 2 : i64}
func.func @expand7(%x: tensor<1x160x7x7xf32>, %w: tensor<960x160x1x1xf32>) -> tensor<1x960x7x7xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w) : (tensor<1x160x7x7xf32>, tensor<960x160x1x1xf32>) -> tensor<1x960x7x7xf32> {
  ^bb0(%a: tensor<1x160x7x7xf32>, %f: tensor<960x160x1x1xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<1x160x7x7xf32>, tensor<960x160x1x1xf32> -> tensor<1x960x7x7xf32>
    kiln.yield %y : tensor<1x960x7x7xf32>
  }
  return %0 : tensor<1x960x7x7xf32>
}
// DEFAULT-LABEL: func.func @expand7
// DEFAULT: config {form = "cpu_gemm"

// A projection to one vector of channels (32 -> 16 at 112 x 112): the
// direct form with one vector (two GEMM row blocks of 8 would share every
// packed panel).
func.func @project16(%x: tensor<1x32x112x112xf32>, %w: tensor<16x32x1x1xf32>) -> tensor<1x16x112x112xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w) : (tensor<1x32x112x112xf32>, tensor<16x32x1x1xf32>) -> tensor<1x16x112x112xf32> {
  ^bb0(%a: tensor<1x32x112x112xf32>, %f: tensor<16x32x1x1xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<1x32x112x112xf32>, tensor<16x32x1x1xf32> -> tensor<1x16x112x112xf32>
    kiln.yield %y : tensor<1x16x112x112xf32>
  }
  return %0 : tensor<1x16x112x112xf32>
}
// DEFAULT-LABEL: func.func @project16
// DEFAULT: config {form = "cpu_direct_conv", lanes = {{16 : i64, pixels = 8 : i64, vectors = 1|8 : i64, pixels = 6 : i64, vectors = 2}} : i64}

// A classifier on a fire module's output (SqueezeNet's last convolution):
// the input a concat of two kernel inputs along the channels, read part by
// part (channels [0, 448) from one, [448, 512) from the other, into the
// same sums); 1000 output channels in blocks of 32, so with a packed filter
// the last block holds 8 (stored [C][8] after the full blocks) and reads
// them with masked loads into one vector per pixel, and only its 8
// channels reach the output.
func.func @classifier(%a: tensor<1x448x13x13xf32>, %b: tensor<1x64x13x13xf32>, %w: tensor<1000x512x1x1xf32>) -> tensor<1x1000x13x13xf32> {
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_direct_conv", lanes = 16, pixels = 8, vectors = 2, packed_filter = true} (%a, %b, %w) {kiln.weight_filter} : (tensor<1x448x13x13xf32>, tensor<1x64x13x13xf32>, tensor<1000x512x1x1xf32>) -> tensor<1x1000x13x13xf32> {
  ^bb0(%x: tensor<1x448x13x13xf32>, %y: tensor<1x64x13x13xf32>, %f: tensor<1000x512x1x1xf32>):
    %c = kiln.concat %x, %y axis 1 : (tensor<1x448x13x13xf32>, tensor<1x64x13x13xf32>) -> tensor<1x512x13x13xf32>
    %r = kiln.conv2d %c, %f strides [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<1x512x13x13xf32>, tensor<1000x512x1x1xf32> -> tensor<1x1000x13x13xf32>
    kiln.yield %r : tensor<1x1000x13x13xf32>
  }
  return %0 : tensor<1x1000x13x13xf32>
}
// CHECK-LABEL: func.func @classifier_kernel{{[0-9]+}}
// CHECK-SAME: (%[[A:.*]]: memref<75712xf32>, %[[B:.*]]: memref<10816xf32>, %[[W:.*]]: memref<512000xf32>, %[[OUT:.*]]: memref<169000xf32>)
// The last block (8 channels):
// CHECK: scf.if
// CHECK: %[[SUMS:.*]]:8 = scf.for %{{.*}} = %c0{{.*}} to %c448{{(_[0-9]+)?}} step %c1{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: %[[MASK:.*]] = vector.create_mask %c8{{.*}} : vector<16xi1>
// CHECK: vector.maskedload %[[W]][%{{.*}}], %[[MASK]]
// CHECK: memref.load %[[A]]
// CHECK-COUNT-8: vector.fma
// CHECK: scf.for %{{.*}} = %c448{{.*}} to %c512{{.*}} step %c1{{.*}} iter_args(%{{.*}} = %[[SUMS]]#0,
// CHECK: vector.maskedload %[[W]]
// CHECK: memref.load %[[B]]
// The sums transposed in registers (the concat is read by the convolution
// alone, so the epilogue is vectors of pixels), 8 channels stored:
// CHECK: vector.shuffle
// CHECK-COUNT-8: vector.store %{{.*}}, %[[OUT]][%{{.*}}] : memref<169000xf32>, vector<8xf32>
// CHECK-NEXT: }
// Full blocks: 16 accumulators from plain loads, 32 channels out.
// CHECK-NEXT: } else {
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c448{{(_[0-9]+)?}} step %c1{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-NOT: vector.maskedload
// CHECK: vector.load %[[W]]
// CHECK: scf.for %{{.*}} = %c448{{.*}} to %c512
// CHECK-COUNT-32: vector.store %{{.*}}, %[[OUT]][%{{.*}}] : memref<169000xf32>, vector<8xf32>
// CHECK-NOT: vector.store
// CHECK: return
// By default a pointwise convolution with a packed filter of a megabyte or
// more takes the direct form (the GEMM form would stream it from memory
// unprefetched), in blocks of 48 channels with AVX-512 (a last block of
// 40 of 1000 channels); with AVX2 blocks of 8 divide 1000.
func.func @classifier_default(%a: tensor<1x256x13x13xf32>, %b: tensor<1x256x13x13xf32>, %w: tensor<1000x512x1x1xf32>) -> tensor<1x1000x13x13xf32> {
  %0 = kiln.kernel on "cpu:0" (%a, %b, %w) {kiln.weight_filter} : (tensor<1x256x13x13xf32>, tensor<1x256x13x13xf32>, tensor<1000x512x1x1xf32>) -> tensor<1x1000x13x13xf32> {
  ^bb0(%x: tensor<1x256x13x13xf32>, %y: tensor<1x256x13x13xf32>, %f: tensor<1000x512x1x1xf32>):
    %c = kiln.concat %x, %y axis 1 : (tensor<1x256x13x13xf32>, tensor<1x256x13x13xf32>) -> tensor<1x512x13x13xf32>
    %r = kiln.conv2d %c, %f strides [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<1x512x13x13xf32>, tensor<1000x512x1x1xf32> -> tensor<1x1000x13x13xf32>
    kiln.yield %r : tensor<1x1000x13x13xf32>
  }
  return %0 : tensor<1x1000x13x13xf32>
}
// DEFAULT-LABEL: func.func @classifier_default
// DEFAULT: config {form = "cpu_direct_conv", lanes = {{16 : i64, packed_filter = true, pixels = 8 : i64, vectors = 3|8 : i64, packed_filter = true, pixels = 6 : i64, vectors = 1}} : i64}

// A packed expansion whose outputs are whole blocks of 48 channels takes
// the direct form in blocks of 3 vectors with AVX-512 (the GEMM form with
// AVX2), where the same expansion unpacked (@expand above) stays GEMM.
func.func @expand_packed(%x: tensor<1x64x14x14xf32>, %w: tensor<384x64x1x1xf32>) -> tensor<1x384x14x14xf32> {
  %0 = kiln.kernel on "cpu:0" (%x, %w) {kiln.weight_filter} : (tensor<1x64x14x14xf32>, tensor<384x64x1x1xf32>) -> tensor<1x384x14x14xf32> {
  ^bb0(%a: tensor<1x64x14x14xf32>, %f: tensor<384x64x1x1xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [0, 0] dilation [1, 1] groups 1 : tensor<1x64x14x14xf32>, tensor<384x64x1x1xf32> -> tensor<1x384x14x14xf32>
    kiln.yield %y : tensor<1x384x14x14xf32>
  }
  return %0 : tensor<1x384x14x14xf32>
}
// DEFAULT-LABEL: func.func @expand_packed
// DEFAULT: config {form = "{{cpu_direct_conv", lanes = 16 : i64, packed_filter = true, pixels = 7 : i64, vectors = 3|cpu_gemm", lanes = 8}} : i64

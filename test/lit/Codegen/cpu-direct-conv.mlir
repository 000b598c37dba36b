// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true --kiln-linalg-to-llvm | FileCheck %s --check-prefix=LLVM
// RUN: sed 's/ config {[^}]*}//' %s | kiln-opt --kiln-materialize-configs | FileCheck %s --check-prefix=DEFAULT
// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true | FileCheck %s --check-prefix=PACKED
// A dense 3x3 convolution (64 -> 64 channels, 56x56, padding 1) with bias
// and ReLU on the CPU: the direct form, vectors along the output channels,
// in its AVX-512 configuration (8 pixels x 2 vectors of 16 channels).
// 16 work units (2 blocks of 32 output channels x 8 bands of 7 rows); each
// copies its rows of input into a zero-padded slab (64 x 9 x 58) when the
// slab holds another band, repacks the filters of its channel block as
// [in channel][tap][out channel] only when the block changes, and per
// chunk of 28 input channels (28 x 9 x 32 filters, 32 KB: they stay in L1
// while every block of the band reads them) and block of 8 pixels keeps
// 8 x 2 vector accumulators, loaded from and stored to the band's partial
// sums: per tap 2 filter vectors, 8 broadcasts, 16 FMAs (144 per input
// channel). Each output channel's 8 pixels go through the epilogue as one
// vector. (Up to 28 input channels are one chunk: no partial sums.)

func.func @conv(%x: tensor<1x64x56x56xf32>, %w: tensor<64x64x3x3xf32>, %b: tensor<64x1x1xf32>) -> tensor<1x64x56x56xf32> {
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_direct_conv", lanes = 16, pixels = 8, vectors = 2} (%x, %w, %b) : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32>, tensor<64x1x1xf32>) -> tensor<1x64x56x56xf32> {
  ^bb0(%a: tensor<1x64x56x56xf32>, %f: tensor<64x64x3x3xf32>, %c: tensor<64x1x1xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32> -> tensor<1x64x56x56xf32>
    %s = kiln.add %y, %c : tensor<1x64x56x56xf32>, tensor<64x1x1xf32> -> tensor<1x64x56x56xf32>
    %r = kiln.relu %s : tensor<1x64x56x56xf32>
    kiln.yield %r : tensor<1x64x56x56xf32>
  }
  return %0 : tensor<1x64x56x56xf32>
}
// CHECK-LABEL: func.func @conv_kernel0
// CHECK-SAME: kiln.outer_size = 16
// The slab, the repacked filters, one block's sums, the band's partial sums
// (7 rows x 7 blocks x 8 pixels x 32 channels):
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<33408xf32>
// CHECK-NEXT: memref.alloc() {alignment = 64 : i64} : memref<18432xf32>
// CHECK-NEXT: memref.alloca() : memref<256xf32>
// CHECK-NEXT: memref.alloc() {alignment = 64 : i64} : memref<12544xf32>
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c16
// The repack, when the channel block changed:
// CHECK: %[[STALE:.*]] = arith.cmpi ne
// CHECK-NEXT: scf.if %[[STALE]]
// The slab, when the band changed:
// CHECK: %[[STALESLAB:.*]] = arith.cmpi ne
// CHECK-NEXT: scf.if %[[STALESLAB]]
// Chunks of 28 input channels, then the band's blocks:
// CHECK: scf.for %[[C0:.*]] = %c0{{.*}} to %c64{{.*}} step %c28
// CHECK: %[[C1:.*]] = arith.minui %{{.*}}, %c64
// CHECK: scf.for
// CHECK-COUNT-16: vector.load %{{.*}} : memref<12544xf32>, vector<16xf32>
// CHECK: scf.for %{{.*}} = %[[C0]] to %[[C1]] step %c1{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// Filters repacked per inference are in cache: no prefetch.
// CHECK-NOT: memref.prefetch
// CHECK-COUNT-144: vector.fma
// CHECK: scf.yield
// CHECK-COUNT-16: vector.store %{{.*}} : memref<12544xf32>, vector<16xf32>
// The epilogue on 8 pixels of one channel, the sums read back and
// transposed in registers:
// CHECK-COUNT-16: vector.load %{{.*}} : memref<12544xf32>, vector<16xf32>
// CHECK: vector.shuffle
// CHECK: vector.extract_strided_slice %{{.*}} {offsets = [0], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
// CHECK: arith.maximumf {{.*}} : vector<8xf32>
// CHECK: memref.dealloc
// LLVM: llvm.func @conv_kernel0
// LLVM: llvm.intr.fmuladd
// Without a config the host's default is the direct form (16 lanes with
// AVX-512, 8 with AVX2).
// DEFAULT: config {form = "cpu_direct_conv", lanes = {{8|16}} : i64, pixels = {{6|8}} : i64, vectors = 2 : i64}

// A program compiled ahead of time whose filter is a weight
// (`kiln.weight_filter`) stores it packed, [Cout / 32][C][tap][32]: no
// repack buffer, the filter vectors read from the operand at the channel
// block's offset (block x 32 x 64 x 9), and units run block after block of
// one band (the slab copied once per band). Rows of 14 in blocks of 7.
// Weights come from memory in a network: the filters read next are
// prefetched under the FMAs.
func.func @packed(%x: tensor<1x64x14x14xf32>, %w: tensor<64x64x3x3xf32>) -> tensor<1x64x14x14xf32> {
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_direct_conv", lanes = 16, pixels = 7, vectors = 2, packed_filter = true} (%x, %w) {kiln.weight_filter} : (tensor<1x64x14x14xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x14x14xf32> {
  ^bb0(%a: tensor<1x64x14x14xf32>, %f: tensor<64x64x3x3xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<1x64x14x14xf32>, tensor<64x64x3x3xf32> -> tensor<1x64x14x14xf32>
    kiln.yield %y : tensor<1x64x14x14xf32>
  }
  return %0 : tensor<1x64x14x14xf32>
}
// PACKED-LABEL: func.func @packed_kernel{{[0-9]+}}
// PACKED-SAME: (%[[X:.*]]: memref<12544xf32>, %[[W:.*]]: memref<36864xf32>
// PACKED-NOT: memref<18432xf32>
// PACKED: %[[BLOCK:.*]] = arith.remui %{{.*}}, %c2{{(_[0-9]+)?}} :
// PACKED: %c18432 = arith.constant 18432
// PACKED-NEXT: arith.muli %[[BLOCK]], %c18432
// Each channel of each of the band's two blocks fetches 9 of the 18 cache
// lines of the next chunk's filters into L2 (the next block of output
// channels' after the last chunk), clamped to the filter's end.
// PACKED: scf.for %{{.*}} iter_args
// PACKED-COUNT-9: memref.prefetch %[[W]][%{{.*}}], read, locality<2>, data : memref<36864xf32>
// PACKED-NOT: memref.prefetch
// PACKED: vector.load %[[W]][%{{.*}}] : memref<36864xf32>, vector<16xf32>
// By default: packed, blocks of 7 with AVX-512 (of 6 with AVX2).
// DEFAULT-LABEL: func.func @packed
// DEFAULT: config {form = "cpu_direct_conv", lanes = {{16 : i64, packed_filter = true, pixels = 7|8 : i64, packed_filter = true, pixels = 6}} : i64, vectors = 2 : i64}

// A stem (3 -> 32 channels, 3x3, stride 2): one chunk of input channels,
// so the sums stay in registers from the channel loop to the epilogue (no
// partial-sums buffer: the slab and the filters alone are allocated).
func.func @stem(%x: tensor<1x3x32x32xf32>, %w: tensor<32x3x3x3xf32>) -> tensor<1x32x16x16xf32> {
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_direct_conv", lanes = 16, pixels = 8, vectors = 2} (%x, %w) : (tensor<1x3x32x32xf32>, tensor<32x3x3x3xf32>) -> tensor<1x32x16x16xf32> {
  ^bb0(%a: tensor<1x3x32x32xf32>, %f: tensor<32x3x3x3xf32>):
    %y = kiln.conv2d %a, %f strides [2, 2] padding [1, 1] dilation [1, 1] groups 1 : tensor<1x3x32x32xf32>, tensor<32x3x3x3xf32> -> tensor<1x32x16x16xf32>
    kiln.yield %y : tensor<1x32x16x16xf32>
  }
  return %0 : tensor<1x32x16x16xf32>
}
// CHECK-LABEL: func.func @stem_kernel{{[0-9]+}}
// CHECK-COUNT-2: memref.alloc()
// CHECK-NOT: memref.alloc()
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[C3]] step %c1{{.*}} iter_args
// CHECK: scf.yield
// CHECK-NOT: vector.load
// CHECK: vector.shuffle

// More pixels than lanes (a tuning candidate of 12 pixels with AVX2's 8
// lanes): the sums go through memory to the epilogue, 12 per channel.
func.func @wide_block(%x: tensor<1x16x24x24xf32>, %w: tensor<16x16x3x3xf32>) -> tensor<1x16x24x24xf32> {
  %0 = kiln.kernel on "cpu:0" config {form = "cpu_direct_conv", lanes = 8, pixels = 12, vectors = 1} (%x, %w) : (tensor<1x16x24x24xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x24x24xf32> {
  ^bb0(%a: tensor<1x16x24x24xf32>, %f: tensor<16x16x3x3xf32>):
    %y = kiln.conv2d %a, %f strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<1x16x24x24xf32>, tensor<16x16x3x3xf32> -> tensor<1x16x24x24xf32>
    %r = kiln.relu %y : tensor<1x16x24x24xf32>
    kiln.yield %r : tensor<1x16x24x24xf32>
  }
  return %0 : tensor<1x16x24x24xf32>
}
// CHECK-LABEL: func.func @wide_block_kernel{{[0-9]+}}
// CHECK-NOT: vector.shuffle
// CHECK: vector.from_elements {{.*}} : vector<12xf32>
// CHECK: arith.maximumf {{.*}} : vector<12xf32>

// RUN: kiln-compile %s --target cpu -o %t.kiln
// RUN: kiln-run %t.kiln --device cpu:0 --describe | FileCheck %s --check-prefix=GOOD
// RUN: python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[int(sys.argv[2])] ^= 0x5a; open(sys.argv[3], 'wb').write(b)" %t.kiln 300 %t.flipped.kiln
// RUN: not kiln-run %t.flipped.kiln --describe 2>&1 | FileCheck %s --check-prefix=FLIPPED
// RUN: head -c 1000 %t.kiln > %t.cut.kiln
// RUN: not kiln-run %t.cut.kiln --describe 2>&1 | FileCheck %s --check-prefix=CUT
// RUN: kiln-run --help | FileCheck %s --check-prefix=HELP
// RUN: not kiln-run %t.kiln --device cpu:0 --output y=%t.y.npy 2>&1 | FileCheck %s --check-prefix=NAME
// A .kiln damaged anywhere is refused by kiln-run before it reads anything
// but the seal: one byte flipped, or the file cut short.

func.func @graph() -> tensor<4x8xf32> {
  %x = kiln.input 0 : tensor<4x16xf32>
  %w = kiln.input 1 : tensor<16x8xf32>
  %m = kiln.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %r = kiln.relu %m : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
// GOOD: cpu code:
// FLIPPED: kiln-run: {{.*}}flipped.kiln: the file is damaged: its SHA-256 is {{[0-9a-f]+}}, not the one it was sealed with: compile the model again
// CUT: kiln-run: {{.*}}cut.kiln: the file is truncated, damaged, or older than format 0.4, which added the seal (its SHA-256 seal is missing from the end)
// HELP: kiln-run: runs a .kiln file with the Kiln runtime alone
// HELP: usage: kiln-run model.kiln
// NAME: kiln-run: the model has no output 'y'; its outputs are: output0

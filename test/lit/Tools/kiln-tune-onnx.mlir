// RUN: rm -rf %t && mkdir -p %t
// RUN: env KILN_CACHE_DIR=%t/cache XDG_CACHE_HOME=%t/xdg kiln-tune %S/../../fuzz/corpus/onnx/gemm.onnx --device cpu:0 --budget 2 -o %t/gemm.kiln | FileCheck %s
// RUN: env XDG_CACHE_HOME=%t/xdg not kiln-run %t/gemm.kiln --device cpu:0 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not kiln-tune %S/../../fuzz/corpus/onnx/conv_truncated.onnx --device cpu:0 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not kiln-tune %s --input-shape x=1x2 2>&1 | FileCheck %s --check-prefix=SHAPE
// kiln-tune takes an ONNX model as kiln-compile does: its graph's kernels
// are tuned and -o compiles the model, input and output names kept.
// CHECK: kernels; records in {{.*}}cache
// CHECK: wrote {{.*}}gemm.kiln with the tuned configs
// MISSING: input 'a' ({{.*}}) is missing: pass --input a=FILE.npy
// BAD: kiln-tune: {{.*}}conv_truncated.onnx: not a valid ONNX model
// SHAPE: --input-shape is for .onnx models

//===- Passes.td - kiln graph and codegen passes -----------*- tablegen -*-===//

#ifndef KILN_TRANSFORMS_PASSES_TD
#define KILN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnPlaceDevices : Pass<"kiln-place-devices", "mlir::func::FuncOp"> {
  let summary = "resolve every value's device and report all conflicts";
  let description = [{
    Runs on the whole graph before fusion and lowering. Committed values
    (sources with a device, transfers) keep their device; an op's result is
    committed to the device of its committed operands; uncommitted values
    follow the committed users they meet (cloned when they meet several);
    values that meet no committed op go to `default-device`. Rank-0 tensors
    never conflict.

    An op whose committed operands are on different devices is a conflict.
    Every conflict in the function is reported in one run (error + notes on
    where each operand was committed + the fix). Under
    `transfer-policy=log|allow` explicit `kiln.transfer` ops are inserted
    instead, each reported as a remark with its direction and bytes.

    Before:
    ```mlir
    %a = kiln.input 0 on "vulkan:0" : tensor<4xf32>
    %b = kiln.constant dense<1.0> : tensor<4xf32>
    %c = kiln.add %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    After:
    ```mlir
    %a = kiln.input 0 on "vulkan:0" : tensor<4xf32>
    %b = kiln.constant on "vulkan:0" dense<1.0> : tensor<4xf32>
    %c = kiln.add %a, %b on "vulkan:0" : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
  }];
  let options = [
    Option<"defaultDevice", "default-device", "std::string", "\"vulkan:0\"",
           "where values that meet no committed op run">,
    Option<"transferPolicy", "transfer-policy", "std::string", "\"error\"",
           "error | log | allow: what to do when operands' devices differ">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnDecomposeAttention : Pass<"kiln-decompose-attention", "mlir::func::FuncOp"> {
  let summary = "rewrite kiln.attention as two matmuls and a softmax where no fused form runs";
  let description = [{
    After placement, before fusion. A `kiln.attention` placed on a device
    without a fused attention kernel (every device but the CPU, or every
    device with `all=true`), or with a head size (E or Ev) over 256, which
    the CPU kernel does not take, becomes what `scaled_dot_product_attention`
    means: `q k^T`, times the scale, the mask (added, or a select of -inf
    for a boolean one) or the causal rule (a compare of a column index with
    a row index), softmax over the last axis, times `v`. Each new op is
    placed on the attention's device; fusion then makes three kernels.
  }];
  let options = [
    Option<"all", "all", "bool", "false", "decompose on the CPU as well">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnFuseElementwise : Pass<"kiln-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "group maximal elementwise chains on one device into kiln.kernel ops";
  let description = [{
    Walks the placed graph from its results upwards. An elementwise op joins
    the kernel of its users when all of them are in one kernel on the same
    device; when its users are in a few different kernels it is recomputed
    in each (cheaper than a round trip through memory); a value needed outside a kernel (read by the host) is a kernel
    result, and must then have the kernel's iteration shape. Splat constants
    are copied into every kernel that uses them; other constants, inputs and
    transfers stay outside as kernel operands. Views (transpose, reshape,
    broadcast_to, slice) fuse too: codegen folds them into the indexing, so
    they cost no copy unless one is itself a kernel result. Fusion never
    crosses a device or a transfer.

    Before: `%1 = kiln.exp %0`, `%2 = kiln.add %1, %b`, `%3 = kiln.tanh %2`.
    After:
    ```mlir
    %3 = kiln.kernel on "vulkan:0" (%0, %b) : (...) -> tensor<...> {
    ^bb0(%x: ..., %y: ...):
      %1 = kiln.exp %x ...
      %2 = kiln.add %1, %y ...
      %3 = kiln.tanh %2 ...
      kiln.yield %3 : ...
    }
    ```

    A kernel stops growing at `max-bindings` buffers (inputs plus results,
    a device's maxPerStageDescriptorStorageBuffers) and at `max-ops` ops (so
    a 100,000-op chain compiles as many kernels of bounded size, in time
    linear in the chain); identical scalar constants are one operand. A
    concat of more parts than `max-bindings` allows is first split into
    concats that fit.
  }];
  let options = [
    Option<"maxBindings", "max-bindings", "int", "0",
           "buffers one kernel may bind (inputs plus results), 0 for no limit">,
    Option<"maxOps", "max-ops", "int", "512",
           "ops one kernel may hold, 0 for no limit">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnKernelToLinalg : Pass<"kiln-kernel-to-linalg", "mlir::ModuleOp"> {
  let summary = "turn each kiln.kernel into a func on memrefs (a linalg.generic, or loops for reductions and contractions)";
  let description = [{
    For every `kiln.kernel`, adds `func.func @<graph>_kernel<N>` to the module:
    its arguments are the kernel inputs then outputs, each a flat 1-D memref;
    its body is one `linalg.generic` over the flattened iteration space, with
    broadcasting expressed as `floordiv`/`mod` indexing maps and the scalar
    body in arith/math. The kernel op gets `kernel = @<name>`. With
    `coalesce` (the CPU form) dimensions are only merged where every operand
    broadcasts them alike, and broadcasts are projected maps. Kernels are
    built for the nearest `#kiln.target` (kiln-attach-target): a GPU
    target's workgroup-cooperative forms within its limits, the host CPU's
    where there is none.
  }];
  let options = [
    Option<"coalesce", "coalesce", "bool", "false",
           "merge only dimensions that all operands treat alike (CPU layout)">,
    Option<"vector4", "vector4", "bool", "false",
           "vector<4xf32> accesses where supported (GPU layout)">,
    ListOption<"matmulTiles", "matmul-tiles", "int",
               "GPU matmul/conv configuration instead of the default: tileM, tileN, tileK, threadM, threadN[, splitK[, stages]]">,
    Option<"rowWorkgroupSize", "row-workgroup-size", "int", "0",
           "GPU row kernels: a workgroup of this size per row (0: the default, -1: a work item per row)">,
    ListOption<"cpuMatmulBlock", "cpu-matmul-block", "int",
               "CPU matmul/conv configuration instead of the default: rows, lanes, vectors, panelColumns">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::func::FuncDialect", "mlir::vector::VectorDialect",
                           "mlir::scf::SCFDialect", "mlir::affine::AffineDialect",
                           "mlir::gpu::GPUDialect", "mlir::spirv::SPIRVDialect"];
}

def KilnMaterializeConfigs : Pass<"kiln-materialize-configs", "mlir::ModuleOp"> {
  let summary = "give every kiln.kernel its configuration (form, tiles, workgroup sizes)";
  let description = [{
    Sets the `config` attribute of every `kiln.kernel` that has none: the
    form the kernel is built in on the target (`loop`, `row`, `arg_row`,
    `gemm` on a GPU; `cpu`, `cpu_gemm` on the CPU) and that form's default
    knobs for the device's limits. The JIT and kiln-compile run the same
    step with tuned configurations from the cache's store where it has
    them. Codegen (kiln-kernel-to-linalg) reads only this attribute, so any
    tuned kernel is rebuilt from its IR. A config already present is
    checked against the kernel and the device. The device is the nearest
    `#kiln.target`, the host CPU where there is none.
  }];
}

def KilnAttachTarget : Pass<"kiln-attach-target", "mlir::ModuleOp"> {
  let summary = "put a #kiln.target on the module: the target every later pass reads";
  let description = [{
    `target` is a profile, then edits of it, in KILN_GPU_LIMITS' grammar:

    ```
    kiln-opt --kiln-attach-target="target=vulkan:nvidia-hopper,units=114"
    module attributes {kiln.target = #kiln.target<vulkan, "nvidia-hopper",
        subgroup = 32, workgroup = 1024, shared = 49152, bindings = 31,
        units = 114, groups = [65535, 65535, 65535],
        features = [f16, int64, coop_f16]>} { ... }
    ```

    The JIT and kiln-compile attach the target they compile for the same
    way (from the device's report or the profile), so their kernel modules
    can be lowered again by kiln-opt from a dump.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"\"",
           "vulkan:<profile>[,key=value...] or cpu[:<level>]">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnApproximateMath : Pass<"kiln-approximate-math"> {
  let summary = "replace math ops the targets lack (erf) with polynomials";
  let description = [{
    By default erf (SPIR-V's GLSL set lacks it), and f16 math computed in
    f32. With `all`, every math
    op the CPU would call libm for (tanh, exp, log, erf, ...) becomes a
    polynomial in arith ops, so LLVM's loop vectorizer can vectorize kernels.
  }];
  let options = [
    Option<"all", "all", "bool", "false",
           "approximate every transcendental with a polynomial (CPU)">,
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::vector::VectorDialect"];
}

def KilnSetSPIRVTarget : Pass<"kiln-set-spirv-target", "mlir::ModuleOp"> {
  let summary = "attach the device's SPIR-V target env and each kernel's entry-point ABI";
  let description = [{
    Sets `spirv.target_env` (Vulkan 1.1; the subgroup size and workgroup
    limits of the module's `#kiln.target`, which it must have; a fixed
    capability list, 8/16-bit storage and Float16 included, that the runtime
    enables where the device has them) on every gpu.module and
    `spirv.entry_point_abi` with the launch's workgroup size on every kernel
    function. (The upstream setter is a test-only pass.)
  }];
  let dependentDialects = ["mlir::spirv::SPIRVDialect", "mlir::gpu::GPUDialect"];
}

def KilnSpirvVulkanMemoryModel
    : Pass<"kiln-spirv-vulkan-memory-model", "mlir::spirv::ModuleOp"> {
  let summary = "give spirv.modules that use cooperative matrices the Vulkan memory model";
  let description = [{
    SPV_KHR_cooperative_matrix needs the Vulkan memory model, and
    convert-gpu-to-spirv always picks GLSL450 for shaders. Run before
    spirv-update-vce, which then adds the VulkanMemoryModel capability and
    extension. Modules without cooperative matrices are left as they are.
  }];
}

def KilnSpirvBF16Matrices : Pass<"kiln-spirv-bf16-matrices", "mlir::spirv::ModuleOp"> {
  let summary = "make the f16 A and B cooperative matrices of a bf16 GEMM bf16";
  let description = [{
    The GPU dialect has no bf16 fragments, so the coop_gemm form builds a
    bf16 GEMM on f16 fragments holding bf16 bits (its tiles and staging are
    bits only). Once lowered, this pass gives the A and B matrix types, and
    the values and variables of them, their real element type; the
    accumulators stay f32. Only for modules of bf16 GEMMs (the compiler runs
    it on those); runs after spirv-update-vce, and declares what that pass
    does not know bf16 matrices need: BFloat16CooperativeMatrixKHR (with
    BFloat16TypeKHR and SPV_KHR_bfloat16).
  }];
}

def KilnCpuExpandArith : Pass<"kiln-cpu-expand-arith"> {
  let summary = "expand the arith ops the CPU lowers better as compares, selects and bits";
  let description = [{
    bf16 <-> f32 casts become shifts and rounding on the bits (the CPU
    computes bf16 in f32 after arith-emulate-unsupported-floats), so no
    libcall is left for the JIT to find. maximumf and minimumf become a
    compare and selects (x86 has no NaN-propagating max; LLVM's expansion
    of llvm.maximum also orders signed zeros, about twice the
    instructions), except a scalar one folding a value an scf.for carries:
    LLVM's loop vectorizer reduces llvm.maximum, not a compare and select
    (arith-expand, which expands them all, left softmax's row maximum
    scalar). Runs before convert-scf-to-cf.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect"];
}

def KilnEmulateBF16Storage : Pass<"kiln-emulate-bf16-storage", "mlir::func::FuncOp"> {
  let summary = "keep bf16 buffers as 16-bit integers and compute bf16 in f32 (GPU kernels)";
  let description = [{
    SPIR-V has no bf16 type without VK_KHR_shader_bfloat16. Every memref of
    bf16 (arguments, workgroup tiles, views) becomes a memref of i16 with the
    same bits; loads and stores bitcast. Then bf16 arithmetic is emulated in
    f32 (arith-emulate-unsupported-floats) and the bf16 <-> f32 casts become
    shifts and rounding on the bits (arith's bf16 expansion), so no bf16
    value is left. Runs on loops (after convert-linalg-to-parallel-loops:
    a named linalg op on i16 buffers would compute in integers); functions
    without bf16 are left as they are.

    Before: `%v = memref.load %m[%i] : memref<8xbf16>`
    After: `%b = memref.load %m[%i] : memref<8xi16>`, then `%v` is
    `arith.extui %b`, shifted left by 16 and bitcast to f32 where it is used.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def KilnCpuRangeArgs : Pass<"kiln-cpu-range-args", "mlir::ModuleOp"> {
  let summary = "let each CPU kernel compute one [begin, end) slice of its elements";
  let description = [{
    On every function with `kiln.iteration_size` (after
    convert-linalg-to-loops), appends two `index` arguments, begin and end,
    and makes them the bounds of the outermost loop, so the runtime's thread
    pool can split a kernel's elements across threads.

    Before: `func.func @k(%a: memref<8xf32>) { scf.for %i = %c0 to %c8 ... }`
    After: `func.func @k(%a: memref<8xf32>, %begin: index, %end: index) { scf.for %i = %begin to %end ... }`
  }];
  let dependentDialects = ["mlir::scf::SCFDialect"];
}

#endif // KILN_TRANSFORMS_PASSES_TD

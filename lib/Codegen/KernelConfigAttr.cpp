//===- KernelConfigAttr.cpp - kernel configurations: defaults, search space, IR ===//

#include "kiln/Codegen/KernelConfigAttr.h"

#include "Gemm.h"

#include "kiln/Codegen/KernelToLinalg.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;
using namespace kiln;

/// The op the kernel's loop structure comes from: its last reduction or
/// contraction, as buildKernelFunction picks it.
static Operation *contractionRoot(KernelOp kernel) {
  Operation *root = nullptr;
  for (Operation &op : kernel.getBody().front())
    if (op.hasTrait<Reduction>() || op.hasTrait<Contraction>())
      root = &op;
  return root && isa<MatmulOp, Conv2dOp>(root) ? root : nullptr;
}

static int64_t resultElements(KernelOp kernel) {
  return cast<RankedTensorType>(kernel.getResult(0).getType()).getNumElements();
}

KernelConfig kiln::defaultKernelConfig(KernelOp kernel, const DeviceLimits *gpu) {
  KernelConfig config;
  Operation *root = contractionRoot(kernel);
  if (!gpu) {
    config.form = KernelConfig::Form::Cpu;
    if (std::optional<CpuDirectConvConfig> direct =
            !isRowKernel(kernel) ? defaultCpuDirectConv(root) : std::nullopt) {
      config.form = KernelConfig::Form::CpuDirectConv;
      config.cpuDirectConv = *direct;
      return config;
    }
    if (std::optional<Gemm> gemm = !isRowKernel(kernel) && root
                                       ? describeGemm(kernel, root, /*minRowsPerGroup=*/4)
                                       : std::nullopt) {
      config.form = KernelConfig::Form::CpuGemm;
      config.cpuGemm = CpuMatmulConfig::defaultForHost();
      // A matmul of a row-major B with AVX-512: blocks of 8 rows x 3
      // vectors (24 accumulators, 3 loads of B and 8 broadcasts per 24
      // FMAs), panels of two blocks. Measured with kiln-tune --only
      // (bench/RESULTS.md): 1.09x at 1024^3 and 1.10x at 4096^3
      // (2 threads; the panel halved to one block by the rule below), 1.20x
      // and 1.31x on the exported encoder's [128, 512] x [512, 2048] and x
      // [512, 1536] (one thread). Not for W^T (PyTorch's linear): packing
      // its wider panel, a transpose, made [128, 768] x W^T [768, 3072]
      // 1.12x slower.
      if (isa<MatmulOp>(root) && config.cpuGemm.lanes >= 16 && gemm->bAccess &&
          contiguousAlongColumns(gemm->bAccess->second)) {
        config.cpuGemm.vectors = 3;
        config.cpuGemm.panelColumns = 2 * config.cpuGemm.blockColumns();
      }
      // (A long k no longer narrows the panel: matmuls sweep k in slices
      // whose part of the panel stays in L2, cpuGemmSliceDepth.)
      // B a weight the program stores packed: its panels are read in place
      // (packing a [2048, 512] weight per inference took 0.4-0.6 ms, a
      // fifth of the product), in blocks of 6 rows x 4 vectors with AVX-512
      // (6 x 2 with AVX2's 16 registers), panels of up to 128 columns that
      // divide N. Measured on the exported encoder's four products, one
      // thread: 6 x 4 0.75-0.97x the time of packing per inference (the
      // output projection 0.72x, the MLP's down projection 0.83x), 8 x 2
      // 0.9-1.15x, 12 x 2 1.3-1.7x. Not for a single row (the
      // matrix-vector form reads B in place).
      std::optional<PackedMatrix> matrix =
          kernel->hasAttr(kWeightMatrixAttr) && gemm->m > 1 && isa<MatmulOp>(root)
              ? packedMatrixOf(kernel)
              : std::nullopt;
      if (matrix) {
        CpuMatmulConfig packed = CpuMatmulConfig::defaultForHost();
        packed.rows = 6;
        packed.vectors = packed.lanes >= 16 ? 4 : 2;
        packed.packedB = true;
        for (int64_t panel = 128; panel >= packed.blockColumns(); panel /= 2)
          if (panel % packed.blockColumns() == 0 && matrix->n % panel == 0) {
            packed.panelColumns = static_cast<int>(panel);
            config.cpuGemm = packed;
            return config;
          }
      }
      // A convolution's GEMM, swept by 12 rows at a time with AVX-512 (24
      // accumulators) where that pads no more rows than 8. Its panel: one register block where the result fits
      // in L2 and has 64 rows or more (it stays in L1 across the row
      // blocks, fewer of which reload it). Otherwise wide, up to 128 KB:
      // long runs of each input row to pack and each result row to write
      // when these stream from memory, and few rows to amortize the pack
      // over. Measured with kiln-tune --only on MobileNetV2's 1x1
      // convolutions and ResNet-18's 7x7 stage, one thread: 1.05-1.33x
      // with single blocks (10 of 14 shapes), 1.2-2.1x with wide panels
      // (16 -> 96 at 112 x 112: 0.71 -> 0.35 ms).
      if (isa<Conv2dOp>(root)) {
        CpuMatmulConfig &c = config.cpuGemm;
        c.vectors = 2; // (12 x 2 accumulators with the operands fill 32 registers)
        // (8 where 12 would pad more rows: 16 and 32 channels.)
        auto padded = [&](int64_t rows) { return (gemm->m + rows - 1) / rows * rows; };
        if (c.lanes >= 16 && padded(12) <= padded(8))
          c.rows = 12;
        int64_t resultBytes = gemm->batch * gemm->m * gemm->n * 4;
        if (gemm->m >= 64 && resultBytes <= (1 << 20)) {
          c.panelColumns = c.blockColumns();
        } else {
          c.panelColumns = c.blockColumns();
          while (c.panelColumns < 512 && gemm->k * c.panelColumns * 2 * 4 <= (128 << 10))
            c.panelColumns *= 2;
        }
      }
    }
    return config;
  }
  if (isRowKernel(kernel)) {
    config.form = KernelConfig::Form::Row;
    config.row = defaultRowKernelConfig(kernel, *gpu);
    return config;
  }
  if (isLongArgReduction(kernel, *gpu)) {
    config.form = KernelConfig::Form::ArgRow;
    return config;
  }
  if (root && gpu->cooperativeMatrix) {
    if (std::optional<GemmShape> gemm = coopGemmShape(kernel, root, gpu->cooperativeMatrixBF16)) {
      config.form = KernelConfig::Form::CoopGemm;
      config.coop = CoopMatrixConfig::defaultFor(*gpu, gemm->m, gemm->n, gemm->k, gemm->batch,
                                                 /*gathered=*/isa<Conv2dOp>(root),
                                                 /*inRows=*/gemm->gathersRows);
      return config;
    }
  }
  if (root) {
    if (std::optional<GemmShape> gemm = tiledGemmShape(kernel, root)) {
      MatmulConfig tiles = MatmulConfig::defaultFor(*gpu, gemm->m, gemm->n, gemm->k, gemm->batch);
      if (tiledGridFits(*gemm, tiles, *gpu)) {
        config.form = KernelConfig::Form::Gemm;
        config.gemm = tiles;
        return config;
      }
    }
  }
  config.form = KernelConfig::Form::Loop;
  config.loop.vectorWidth = supportsVector4(kernel) ? 4 : 1;
  config.loop.workgroupSize = LoopKernelConfig::defaultWorkgroupSize(
      *gpu, resultElements(kernel) / config.loop.vectorWidth);
  return config;
}

std::vector<KernelConfig> kiln::candidateKernelConfigs(KernelOp kernel, const DeviceLimits *gpu) {
  KernelConfig base = defaultKernelConfig(kernel, gpu);
  std::vector<KernelConfig> out{base};
  auto add = [&](const KernelConfig &c) {
    for (const KernelConfig &seen : out)
      if (seen == c)
        return;
    out.push_back(c);
  };
  switch (base.form) {
  case KernelConfig::Form::Loop: {
    int64_t maxGroups = std::max<int64_t>(1, gpu->maxWorkgroupCount[0]);
    for (int width : {1, 4}) {
      if (width == 4 && !supportsVector4(kernel))
        continue;
      int64_t iterations = resultElements(kernel) / width;
      for (int size : {64, 128, 256, 512, 1024}) {
        KernelConfig c = base;
        c.loop = {size, width};
        if (c.loop.check(*gpu).empty() && (iterations + size - 1) / size <= maxGroups)
          add(c);
      }
    }
    break;
  }
  case KernelConfig::Form::Row: {
    KernelConfig perItem = base;
    perItem.row = RowKernelConfig();
    add(perItem);
    int sg = std::max(1, gpu->subgroupSize);
    for (int64_t size = sg; size <= 1024; size *= 2) {
      KernelConfig c = base;
      c.row.workgroupPerRow = true;
      c.row.workgroupSize = static_cast<int>(size);
      if (c.row.check(*gpu).empty())
        add(c);
    }
    break;
  }
  case KernelConfig::Form::Gemm: {
    std::optional<GemmShape> gemm = tiledGemmShape(kernel, contractionRoot(kernel));
    for (int tm : {16, 32, 64, 128})
      for (int tn : {32, 64, 128})
        for (int tk : {8, 16, 32})
          for (int rm : {4, 8})
            for (int rn : {4, 8})
              for (int stages : {1, 2}) {
                KernelConfig c = base;
                c.gemm = {tm, tn, tk, rm, rn, 1, stages};
                if (c.gemm.check(*gpu).empty() && tiledGridFits(*gemm, c.gemm, *gpu))
                  add(c);
              }
    // Split k only where the grid leaves the GPU short of warps (about
    // eight per compute unit, or 1024 in all when the device does not say),
    // and only for the small tiles such grids take.
    int64_t sg = std::max(1, gpu->subgroupSize);
    int64_t wanted = gpu->computeUnits > 0 ? 8 * int64_t(gpu->computeUnits) : 1024;
    for (int tm : {16, 32})
      for (int tn : {32, 64})
        for (int tk : {8, 16, 32})
          for (int split : {2, 4, 8, 16}) {
            KernelConfig c = base;
            c.gemm = {tm, tn, tk, 4, 4, split};
            int64_t groups = ((gemm->m + tm - 1) / tm) * ((gemm->n + tn - 1) / tn) * gemm->batch;
            int64_t kTiles = (gemm->k + tk - 1) / tk;
            if (groups * ((c.gemm.groupSize() + sg - 1) / sg) < wanted && kTiles >= 2 * split &&
                c.gemm.check(*gpu).empty() && tiledGridFits(*gemm, c.gemm, *gpu))
              add(c);
          }
    break;
  }
  case KernelConfig::Form::CpuGemm: {
    // Accumulators, one vector of B per column block and a broadcast must
    // stay in the vector registers: 32 with AVX-512, else 16.
    int registers = base.cpuGemm.lanes >= 16 ? 32 : 16;
    for (int rows : {4, 6, 8, 12, 14})
      for (int vectors : {1, 2, 3, 4}) {
        if (rows * vectors + vectors + 1 > registers)
          continue;
        for (int blocks : {1, 2, 4, 8}) {
          KernelConfig c = base;
          c.cpuGemm.rows = rows;
          c.cpuGemm.vectors = vectors;
          c.cpuGemm.panelColumns = c.cpuGemm.blockColumns() * blocks;
          if (c.cpuGemm.check().empty())
            add(c);
        }
      }
    break;
  }
  case KernelConfig::Form::CpuDirectConv: {
    // pixels x vectors accumulators, the filter vectors and a broadcast in
    // the vector registers.
    int registers = base.cpuDirectConv.lanes >= 16 ? 32 : 16;
    for (int pixels : {4, 6, 7, 8, 12, 14})
      for (int vectors : {1, 2, 3, 4}) {
        KernelConfig c = base;
        c.cpuDirectConv.pixels = pixels;
        c.cpuDirectConv.vectors = vectors;
        if (pixels * vectors + vectors + 1 <= registers && c.cpuDirectConv.check().empty() &&
            fitsCpuDirectConv(contractionRoot(kernel), c.cpuDirectConv))
          add(c);
      }
    break;
  }
  case KernelConfig::Form::CoopGemm: {
    for (int tm : {32, 64, 128, 256})
      for (int tn : {32, 64, 128, 256})
        for (int tk : {16, 32, 64})
          for (auto [sm, sn] : {std::pair{1, 1}, {1, 2}, {2, 1}, {2, 2}, {2, 4}, {4, 2}}) {
            KernelConfig c = base;
            for (int stages : {1, 2}) {
              c.coop = {tm, tn, tk, sm, sn, stages};
              if (c.coop.check(*gpu).empty())
                add(c);
            }
          }
    break;
  }
  case KernelConfig::Form::ArgRow:
  case KernelConfig::Form::Cpu:
    break;
  }
  return out;
}

DictionaryAttr kiln::kernelConfigAttr(MLIRContext *ctx, const KernelConfig &config) {
  Builder b(ctx);
  SmallVector<NamedAttribute> entries;
  auto add = [&](StringRef key, Attribute value) { entries.push_back(b.getNamedAttr(key, value)); };
  add("form", b.getStringAttr(KernelConfig::formName(config.form)));
  switch (config.form) {
  case KernelConfig::Form::Loop:
    add("workgroup_size", b.getI64IntegerAttr(config.loop.workgroupSize));
    add("vector_width", b.getI64IntegerAttr(config.loop.vectorWidth));
    break;
  case KernelConfig::Form::Row:
    add("workgroup_per_row", b.getBoolAttr(config.row.workgroupPerRow));
    add("workgroup_size", b.getI64IntegerAttr(config.row.workgroupSize));
    break;
  case KernelConfig::Form::Gemm:
    add("tile", b.getDenseI64ArrayAttr({config.gemm.tileM, config.gemm.tileN, config.gemm.tileK}));
    add("thread", b.getDenseI64ArrayAttr({config.gemm.threadM, config.gemm.threadN}));
    if (config.gemm.splitK > 1)
      add("split_k", b.getI64IntegerAttr(config.gemm.splitK));
    if (config.gemm.stages > 1)
      add("stages", b.getI64IntegerAttr(config.gemm.stages));
    break;
  case KernelConfig::Form::CpuGemm:
    add("rows", b.getI64IntegerAttr(config.cpuGemm.rows));
    add("lanes", b.getI64IntegerAttr(config.cpuGemm.lanes));
    add("vectors", b.getI64IntegerAttr(config.cpuGemm.vectors));
    add("panel", b.getI64IntegerAttr(config.cpuGemm.panelColumns));
    if (config.cpuGemm.packedB)
      add("packed_b", b.getBoolAttr(true));
    break;
  case KernelConfig::Form::CpuDirectConv:
    add("pixels", b.getI64IntegerAttr(config.cpuDirectConv.pixels));
    add("lanes", b.getI64IntegerAttr(config.cpuDirectConv.lanes));
    add("vectors", b.getI64IntegerAttr(config.cpuDirectConv.vectors));
    if (config.cpuDirectConv.packedFilter)
      add("packed_filter", b.getBoolAttr(true));
    break;
  case KernelConfig::Form::CoopGemm:
    add("tile", b.getDenseI64ArrayAttr({config.coop.tileM, config.coop.tileN, config.coop.tileK}));
    add("subgroups", b.getDenseI64ArrayAttr({config.coop.subgroupsM, config.coop.subgroupsN}));
    if (config.coop.stages > 1)
      add("stages", b.getI64IntegerAttr(config.coop.stages));
    break;
  case KernelConfig::Form::ArgRow:
  case KernelConfig::Form::Cpu:
    break;
  }
  return b.getDictionaryAttr(entries);
}

namespace {
/// Reads the fields of one config dictionary, naming what is wrong.
class ConfigReader {
public:
  ConfigReader(KernelOp kernel, DictionaryAttr dict) : kernel(kernel), dict(dict) {}

  bool integer(StringRef key, int &out) {
    seen.insert(key);
    auto attr = dyn_cast_or_null<IntegerAttr>(dict.get(key));
    if (!attr || !attr.getType().isInteger() || attr.getInt() < 1 || attr.getInt() > 65536)
      return fail("'" + key.str() + "' must be an integer from 1 to 65536");
    out = static_cast<int>(attr.getInt());
    return true;
  }
  bool boolean(StringRef key, bool &out) {
    seen.insert(key);
    auto attr = dyn_cast_or_null<BoolAttr>(dict.get(key));
    if (!attr)
      return fail("'" + key.str() + "' must be true or false");
    out = attr.getValue();
    return true;
  }
  bool array(StringRef key, std::initializer_list<int *> out) {
    seen.insert(key);
    auto attr = dyn_cast_or_null<DenseI64ArrayAttr>(dict.get(key));
    if (!attr || attr.size() != static_cast<int64_t>(out.size()))
      return fail("'" + key.str() + "' must be array<i64: " + std::to_string(out.size()) +
                  " sizes>");
    int i = 0;
    for (int *slot : out) {
      int64_t v = attr[i++];
      if (v < 1 || v > 65536)
        return fail("'" + key.str() + "' sizes must be from 1 to 65536");
      *slot = static_cast<int>(v);
    }
    return true;
  }
  /// Every key was read: a misspelt one is an error, not silently the default.
  bool noOthers() {
    for (NamedAttribute entry : dict)
      if (!seen.contains(entry.getName().getValue()))
        return fail("unknown key '" + entry.getName().getValue().str() + "'");
    return true;
  }
  bool fail(const std::string &why) {
    kernel.emitOpError("config: ") << why;
    return false;
  }

private:
  KernelOp kernel;
  DictionaryAttr dict;
  llvm::StringSet<> seen{"form"};
};
} // namespace

FailureOr<std::optional<KernelConfig>> kiln::readKernelConfig(KernelOp kernel) {
  DictionaryAttr dict = kernel.getConfigAttr();
  if (!dict)
    return std::optional<KernelConfig>();
  ConfigReader read(kernel, dict);
  auto form = dyn_cast_or_null<StringAttr>(dict.get("form"));
  using Form = KernelConfig::Form;
  std::optional<Form> parsed;
  if (form)
    parsed = llvm::StringSwitch<std::optional<Form>>(form.getValue())
                 .Case("loop", Form::Loop)
                 .Case("row", Form::Row)
                 .Case("arg_row", Form::ArgRow)
                 .Case("gemm", Form::Gemm)
                 .Case("cpu", Form::Cpu)
                 .Case("cpu_gemm", Form::CpuGemm)
                 .Case("cpu_direct_conv", Form::CpuDirectConv)
                 .Case("coop_gemm", Form::CoopGemm)
                 .Default(std::nullopt);
  if (!parsed) {
    read.fail("'form' must be one of \"loop\", \"row\", \"arg_row\", \"gemm\", \"cpu\", "
              "\"cpu_gemm\", \"cpu_direct_conv\", \"coop_gemm\"");
    return failure();
  }
  KernelConfig config;
  config.form = *parsed;
  bool ok = true;
  switch (config.form) {
  case Form::Loop:
    ok = read.integer("workgroup_size", config.loop.workgroupSize) &&
         read.integer("vector_width", config.loop.vectorWidth);
    break;
  case Form::Row:
    ok = read.boolean("workgroup_per_row", config.row.workgroupPerRow) &&
         read.integer("workgroup_size", config.row.workgroupSize);
    break;
  case Form::Gemm:
    ok = read.array("tile", {&config.gemm.tileM, &config.gemm.tileN, &config.gemm.tileK}) &&
         read.array("thread", {&config.gemm.threadM, &config.gemm.threadN}) &&
         (!dict.get("split_k") || read.integer("split_k", config.gemm.splitK)) &&
         (!dict.get("stages") || read.integer("stages", config.gemm.stages));
    break;
  case Form::CpuGemm:
    ok = read.integer("rows", config.cpuGemm.rows) &&
         read.integer("lanes", config.cpuGemm.lanes) &&
         read.integer("vectors", config.cpuGemm.vectors) &&
         read.integer("panel", config.cpuGemm.panelColumns) &&
         (!dict.get("packed_b") || read.boolean("packed_b", config.cpuGemm.packedB));
    break;
  case Form::CpuDirectConv:
    ok = read.integer("pixels", config.cpuDirectConv.pixels) &&
         read.integer("lanes", config.cpuDirectConv.lanes) &&
         read.integer("vectors", config.cpuDirectConv.vectors) &&
         (!dict.get("packed_filter") ||
          read.boolean("packed_filter", config.cpuDirectConv.packedFilter));
    break;
  case Form::CoopGemm:
    ok = read.array("tile", {&config.coop.tileM, &config.coop.tileN, &config.coop.tileK}) &&
         read.array("subgroups", {&config.coop.subgroupsM, &config.coop.subgroupsN}) &&
         (!dict.get("stages") || read.integer("stages", config.coop.stages));
    break;
  case Form::ArgRow:
  case Form::Cpu:
    break;
  }
  if (!ok || !read.noOthers())
    return failure();
  return std::optional<KernelConfig>(config);
}

/// Why the device cannot run `config` for `kernel`; empty when it can.
static std::string configProblem(KernelOp kernel, const DeviceLimits *gpu,
                                 const KernelConfig &config) {
  switch (config.form) {
  case KernelConfig::Form::Loop:
    if (config.loop.vectorWidth == 4 && !supportsVector4(kernel))
      return "vector width 4 needs f32 or f16 operands and results whose innermost dimension is a "
             "multiple of 4";
    return gpu ? config.loop.check(*gpu) : "";
  case KernelConfig::Form::Row:
    return gpu ? config.row.check(*gpu) : "";
  case KernelConfig::Form::Gemm:
    return gpu ? config.gemm.check(*gpu) : "";
  case KernelConfig::Form::CpuGemm:
    if (std::string problem = config.cpuGemm.check(); !problem.empty())
      return problem;
    if (config.cpuGemm.packedB && !kernel->hasAttr(kWeightMatrixAttr))
      return "packed_b needs a right operand the program stores packed: a weight of a program "
             "compiled ahead of time (kiln.weight_matrix on the kernel)";
    if (config.cpuGemm.packedB && !fitsPackedB(kernel, contractionRoot(kernel), config.cpuGemm))
      return "packed_b needs a matmul whose right operand is one weight read as a plain or "
             "transposed matrix, the same for every batch, with N a whole number of panels";
    return "";
  case KernelConfig::Form::CpuDirectConv:
    if (std::string problem = config.cpuDirectConv.check(); !problem.empty())
      return problem;
    if (config.cpuDirectConv.packedFilter && !kernel->hasAttr(kWeightFilterAttr))
      return "packed_filter needs a filter the program stores packed: a weight of a program "
             "compiled ahead of time (kiln.weight_filter on the kernel)";
    return fitsCpuDirectConv(contractionRoot(kernel), config.cpuDirectConv)
               ? ""
               : "the direct form needs a dense f32 convolution with a window over 1x1, output "
                 "channels in whole blocks and rows of at least `pixels` pixels";
  case KernelConfig::Form::CoopGemm:
    return gpu ? config.coop.check(*gpu) : "cooperative matrices are a GPU form";
  case KernelConfig::Form::ArgRow:
  case KernelConfig::Form::Cpu:
    return "";
  }
  return "";
}

FailureOr<KernelConfig> kiln::materializeKernelConfig(KernelOp kernel, const DeviceLimits *gpu,
                                                      const TunedConfigLookup &lookup) {
  FailureOr<std::optional<KernelConfig>> present = readKernelConfig(kernel);
  if (failed(present))
    return failure();
  KernelConfig fallback = defaultKernelConfig(kernel, gpu);
  KernelConfig chosen = fallback;
  if (*present) {
    chosen = **present;
  } else if (lookup) {
    // A stale record (another form, a config this device refuses) is a miss.
    if (std::optional<KernelConfig> tuned = lookup(kernel);
        tuned && tuned->form == fallback.form && configProblem(kernel, gpu, *tuned).empty())
      chosen = *tuned;
  }
  if (chosen.form != fallback.form) {
    kernel.emitOpError("config: form '")
        << KernelConfig::formName(chosen.form) << "' does not fit this kernel on this "
        << (gpu ? "GPU" : "CPU") << ", which is built as '"
        << KernelConfig::formName(fallback.form) << "'";
    return failure();
  }
  if (std::string problem = configProblem(kernel, gpu, chosen); !problem.empty()) {
    kernel.emitOpError("config: ") << problem;
    return failure();
  }
  if (!*present)
    kernel.setConfigAttr(kernelConfigAttr(kernel.getContext(), chosen));
  return chosen;
}

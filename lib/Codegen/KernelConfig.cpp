//===- KernelConfig.cpp - default kernel configurations from device limits ===//

#include "kiln/Codegen/KernelConfig.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <iterator>

using namespace kiln;

RowKernelConfig RowKernelConfig::defaultFor(const DeviceLimits &limits, int64_t rows,
                                            int64_t columns, bool contiguous, int64_t phases) {
  RowKernelConfig config;
  int64_t sg = limits.subgroupSize;
  int64_t budget = limits.maxLoopIterations > 0 ? limits.maxLoopIterations : INT64_MAX;
  // Loop iterations of a work item that takes a whole row alone (the
  // cascade adds an outer trip per block of 256, counted generously).
  int64_t perPhase = columns + columns / 128 + 1;
  int64_t alone = perPhase > budget / std::max<int64_t>(1, phases) ? INT64_MAX : perPhase * phases;
  // A workgroup per row pays off once a row fills a subgroup, and only when
  // neighbouring work items read neighbouring elements; a column reduction
  // takes one too when its rows are long and few (one work item would loop
  // over millions of elements) or would outrun the device's loop budget.
  // (A device that reports no useful subgroup size gets a work item per row.)
  bool fewLongRows = rows < 4096 && columns >= 4096;
  if (sg < 4 || columns < sg || rows < 1 ||
      (!contiguous && !fewLongRows && alone <= budget))
    return config;
  // Two levels of subgroup reduction cover sg * sg work items; more (up to
  // sg * sg * kMaxPartialsPerLane) only when the loops would outrun the
  // device's budget.
  int64_t cap = std::min<int64_t>({limits.maxWorkgroupInvocations, sg * sg, 1024});
  int64_t budgetCap = std::min<int64_t>({limits.maxWorkgroupInvocations,
                                         sg * sg * kMaxPartialsPerLane, 1024});
  int64_t size = sg;
  // Aim at about 8 columns per work item: enough work per thread to hide
  // latency, few enough to stay in registers.
  auto loops = [&](int64_t s) { return (columns + s - 1) / s * phases; };
  while ((size * 2 <= cap && size * 8 < columns) ||
         (size * 2 <= budgetCap && loops(size) > budget / 2))
    size *= 2;
  config.workgroupPerRow = true;
  config.workgroupSize = static_cast<int>(size);
  return config;
}

std::string RowKernelConfig::check(const DeviceLimits &limits) const {
  if (!workgroupPerRow)
    return "";
  int sg = std::max(1, limits.subgroupSize);
  if (workgroupSize < 1 || workgroupSize > limits.maxWorkgroupInvocations)
    return "workgroup size " + std::to_string(workgroupSize) + " is outside 1.." +
           std::to_string(limits.maxWorkgroupInvocations);
  if (workgroupSize % sg != 0 || workgroupSize / sg > sg * kMaxPartialsPerLane)
    return "workgroup size " + std::to_string(workgroupSize) +
           " must be a multiple of the subgroup size " + std::to_string(sg) + " and at most " +
           std::to_string(sg * sg * kMaxPartialsPerLane);
  if (maxChunksInRegisters < 0)
    return "maxChunksInRegisters must not be negative";
  return "";
}

MatmulConfig MatmulConfig::defaultFor(const DeviceLimits &limits, int64_t m, int64_t n,
                                      int64_t k, int64_t batch) {
  // At least one full tile: 64x128 tiles, 8x8 results per work item (128
  // work items), the fastest of eight shapes tried on the H200 for 1024^3,
  // 4096^3 and the ResNet convolution (bench/RESULTS.md). Smaller problems
  // take smaller tiles so that more workgroups share the GPU: where the
  // device reports its compute units, tiles shrink until each unit has two
  // workgroups (on the H200 a 128x512 result took 61 us as 8 workgroups of
  // 64x128).
  const MatmulConfig candidates[] = {
      {64, 128, 16, 8, 8}, {64, 64, 16, 4, 4}, {32, 64, 16, 4, 4},
      {32, 32, 16, 4, 4},  {32, 32, 8, 4, 4},  {16, 32, 16, 4, 4},
  };
  auto groups = [&](const MatmulConfig &c) {
    return ((m + c.tileM - 1) / c.tileM) * ((n + c.tileN - 1) / c.tileN) * std::max<int64_t>(1, batch);
  };
  if (limits.computeUnits > 0) {
    const MatmulConfig *chosen = nullptr;
    for (const MatmulConfig &c : candidates) {
      if (!c.check(limits).empty())
        continue;
      chosen = &c;
      if (groups(c) >= 2 * int64_t(limits.computeUnits))
        break;
    }
    if (chosen) {
      // Still few warps per unit (a 128 x 512 result is 128 workgroups of
      // one warp on 132 SMs): split k over more work items of each
      // workgroup until every unit holds about eight warps, keeping at
      // least four k slices per group.
      MatmulConfig config = *chosen;
      int64_t sg = std::max(1, limits.subgroupSize);
      int64_t wanted = 8 * int64_t(limits.computeUnits);
      int64_t kTiles = (k + config.tileK - 1) / config.tileK;
      auto warps = [&](const MatmulConfig &c) {
        return groups(c) * ((c.workgroupSize() + sg - 1) / sg);
      };
      while (warps(config) < wanted && config.splitK < 16) {
        MatmulConfig wider = config;
        wider.splitK *= 2;
        if (kTiles < 4 * wider.splitK || !wider.check(limits).empty())
          break;
        config = wider;
      }
      return config;
    }
  }
  MatmulConfig config = candidates[0];
  if (m < 64 || n < 128 || !config.check(limits).empty())
    config = candidates[1];
  if (!config.check(limits).empty())
    config = candidates[4];
  return config;
}

int64_t CoopMatrixConfig::sharedBytes() const {
  // f16 tiles with rows padded by 8 elements (B [k][n], or [n][k] when it
  // is staged transposed: the larger), one f32 fragment per subgroup.
  int64_t b = std::max(int64_t(tileK) * (tileN + 8), int64_t(tileN) * (tileK + 8));
  return (int64_t(tileM) * (tileK + 8) * 2 + b * 2) * stages +
         int64_t(subgroupsM) * subgroupsN * kFragment * kFragment * 4;
}

CoopMatrixConfig CoopMatrixConfig::defaultFor(const DeviceLimits &limits, int64_t m, int64_t n,
                                              int64_t k, int64_t batch, bool gathered,
                                              bool inRows) {
  // A convolution gathers B element by element: fewer elements per work
  // item won on the H200 (the ResNet stage: 64 x 64 x 32, 2.5x the matmul
  // default's shape; of its layouts 2 x 4 subgroups and two stages, 1.23x
  // the 1 x 2 of one stage, bench/RESULTS.md). With the table of window
  // offsets and 16-byte groups two stages still ran 1.02x one
  // in two sets of three alternating rounds; without the groups one stage
  // had led by 1.12x.
  // Gathered in rows of 8 columns, 2 x 2 subgroups ran the
  // ResNet stage 1.14x faster than 2 x 4 (0.062 against 0.071 ms, three
  // alternating rounds on the H200).
  if (const CoopMatrixConfig gather{64, 64, 32, 2, inRows ? 2 : 4, 2};
      gathered && m >= 64 && gather.check(limits).empty())
    return gather;
  // 128 x 128 tiles of 2 x 2 subgroups (64 x 64 each, 16 fragments), k
  // slices of 32: the fastest of 69 shapes on the H200 at 4096^3
  // (bench/RESULTS.md). Smaller problems take smaller tiles until the
  // workgroups fill every compute unit once, with deeper k slices: a 128 x
  // 768 x 3072 linear layer ran fastest as 32 x 32 x 64 tiles of 2 x 2
  // subgroups (one fragment each); k slices of 16 for a short k. One wave,
  // not two, and 128 x 64 before 64 x 128 x 64: the f16 transformer block's
  // 4096 x 512 GEMMs and attention products ran 1.2-1.4x faster so, the
  // block at batch 32 0.416 -> 0.355 ms on the H200 (RESULTS).
  // (32 x 64 x 32 tiles, between 64 x 64 x 64 and 32 x 32 x 64, ran that
  // linear layer 5% slower than 32 x 32 x 64: not a default.)
  const CoopMatrixConfig candidates[] = {
      {128, 128, 32, 2, 2}, {128, 64, 32, 2, 2}, {64, 128, 32, 2, 2},
      {64, 64, 64, 1, 2},   {32, 32, 64, 2, 2},
  };
  auto groups = [&](const CoopMatrixConfig &c) {
    return ((m + c.tileM - 1) / c.tileM) * ((n + c.tileN - 1) / c.tileN) *
           std::max<int64_t>(1, batch);
  };
  int64_t wanted = limits.computeUnits > 0 ? int64_t(limits.computeUnits) : 0;
  CoopMatrixConfig chosen = candidates[std::size(candidates) - 1];
  for (const CoopMatrixConfig &c : candidates) {
    if (!c.check(limits).empty())
      continue;
    chosen = c;
    if (groups(c) >= wanted && c.tileM <= std::max<int64_t>(32, m) &&
        c.tileN <= std::max<int64_t>(32, n))
      break;
  }
  if (k <= 16 || (k <= 32 && chosen.tileK > 32))
    chosen.tileK = k <= 16 ? 16 : 32;
  // 128 x 128 and 128 x 64 tiles over k of 512 or more: slices of 64 in
  // one stage ran faster than slices of 32 in two on the H200
  // (three alternating rounds each): the 4096^3 matmul 1.06x (0.434-0.444
  // against 0.467-0.470 ms), the f16 transformer's MLP GEMMs 1.11x (128 x
  // 128, k 512, bias and GELU) and 1.17x (128 x 64, k 2048, residual).
  // Both stages of 64 do not fit 48 KB.
  if (chosen.tileM == 128 && (chosen.tileN == 128 || chosen.tileN == 64) && k >= 512) {
    CoopMatrixConfig deep = chosen;
    deep.tileK = 64;
    if (deep.check(limits).empty())
      return deep;
  }
  // Double-buffered tiles where shared memory holds them and k has more
  // than one slice.
  CoopMatrixConfig staged = chosen;
  staged.stages = 2;
  if (k > chosen.tileK && staged.check(limits).empty())
    chosen = staged;
  return chosen;
}

std::string CoopMatrixConfig::check(const DeviceLimits &limits) const {
  if (!limits.cooperativeMatrix)
    return "this device has no cooperative matrices of f16 (VK_KHR_cooperative_matrix)";
  if (tileM <= 0 || tileN <= 0 || tileK <= 0 || subgroupsM <= 0 || subgroupsN <= 0)
    return "tile sizes must be positive";
  if (stages != 1 && stages != 2)
    return "stages must be 1 or 2 (one shared buffer per tile, or two)";
  if (tileM % (kFragment * subgroupsM) || tileN % (kFragment * subgroupsN) ||
      tileK % kFragment)
    return "each subgroup's share of the tile must be whole 16 x 16 fragments and the k "
           "slice whole fragments deep";
  int64_t threads = int64_t(workgroupSize(limits));
  if (threads > limits.maxWorkgroupInvocations)
    return std::to_string(threads) + " work items exceed the device's " +
           std::to_string(limits.maxWorkgroupInvocations);
  if ((int64_t(tileM) * tileK) % threads || (int64_t(tileK) * tileN) % threads)
    return "the staged tiles do not split evenly over " + std::to_string(threads) +
           " work items";
  int64_t fragments = int64_t(tileM / subgroupsM / kFragment) * (tileN / subgroupsN / kFragment);
  if (fragments > 32)
    return std::to_string(fragments) + " accumulator fragments per subgroup are more than "
                                       "its registers hold (32 at most)";
  if (sharedBytes() > limits.sharedMemoryBytes)
    return std::to_string(sharedBytes()) + " bytes of shared memory exceed the device's " +
           std::to_string(limits.sharedMemoryBytes);
  return "";
}

std::string MatmulConfig::check(const DeviceLimits &limits) const {
  if (tileM <= 0 || tileN <= 0 || tileK <= 0 || threadM <= 0 || threadN <= 0 || splitK <= 0)
    return "tile sizes must be positive";
  if (stages != 1 && stages != 2)
    return "stages must be 1 or 2 (one shared buffer per tile, or two)";
  if (tileM % threadM || tileN % threadN)
    return "the tile must be a whole number of per-thread blocks";
  if (threadM % 4 || threadN % 4)
    return "per-thread blocks are groups of 4 rows and 4 columns (16-byte tile reads)";
  // 64-bit: tiles of 100000 would overflow int products.
  int64_t threads = int64_t(tileM / threadM) * (tileN / threadN);
  if (threads * splitK > limits.maxWorkgroupInvocations)
    return std::to_string(threads * splitK) + " work items exceed the device's " +
           std::to_string(limits.maxWorkgroupInvocations);
  // Each work item stages an equal share of both tiles, in 4-wide vectors.
  if ((int64_t(tileM) * tileK / 4) % threads || (int64_t(tileK) * tileN / 4) % threads)
    return "the staged tiles do not split evenly over " + std::to_string(threads) +
           " work items";
  int64_t shared = sharedBytes();
  if (shared > limits.sharedMemoryBytes)
    return std::to_string(shared) + " bytes of shared memory exceed the device's " +
           std::to_string(limits.sharedMemoryBytes);
  return "";
}

static thread_local int targetLanes = 0;

int kiln::cpuDefaultLanes() {
  if (targetLanes)
    return targetLanes;
  static const int host = llvm::sys::getHostCPUFeatures().lookup("avx512f") ? 16 : 8;
  return host;
}

CpuTargetLanes::CpuTargetLanes(int lanes) : previous(targetLanes) { targetLanes = lanes; }
CpuTargetLanes::~CpuTargetLanes() { targetLanes = previous; }

CpuMatmulConfig CpuMatmulConfig::defaultForHost() {
  CpuMatmulConfig config;
  if (cpuDefaultLanes() < 16) {
    // 16 vector registers: 6 x 2 accumulators, 2 for B, 1 broadcast.
    config.lanes = 8;
    config.rows = 6;
  }
  return config;
}

CpuDirectConvConfig CpuDirectConvConfig::defaultForHost() {
  CpuDirectConvConfig config;
  if (cpuDefaultLanes() < 16) {
    // 16 vector registers: 6 x 2 accumulators, 2 filter vectors, 1 input.
    config.lanes = 8;
    config.pixels = 6;
  }
  return config;
}

std::string CpuDirectConvConfig::check() const {
  if (pixels <= 0 || lanes <= 0 || vectors <= 0)
    return "sizes must be positive";
  if (pixels > 16 || vectors > 4)
    return "at most 16 pixels and 4 vectors per block";
  return "";
}

std::string CpuMatmulConfig::check() const {
  if (rows <= 0 || lanes <= 0 || vectors <= 0 || panelColumns <= 0)
    return "sizes must be positive";
  if (panelColumns % blockColumns())
    return "the panel must be a whole number of register blocks (" +
           std::to_string(blockColumns()) + " columns)";
  return "";
}

/// Every size in 1..65536: larger ones would wrap through int (4294967360
/// became 64) and fit no device anyway.
static bool plausibleSizes(const std::vector<int64_t> &sizes) {
  return llvm::all_of(sizes, [](int64_t v) { return v >= 1 && v <= 65536; });
}

std::optional<MatmulConfig> MatmulConfig::fromSizes(const std::vector<int64_t> &sizes) {
  if (sizes.size() < 5 || sizes.size() > 7 || !plausibleSizes(sizes))
    return std::nullopt;
  return MatmulConfig{int(sizes[0]),
                      int(sizes[1]),
                      int(sizes[2]),
                      int(sizes[3]),
                      int(sizes[4]),
                      sizes.size() >= 6 ? int(sizes[5]) : 1,
                      sizes.size() == 7 ? int(sizes[6]) : 1};
}

std::optional<CpuMatmulConfig> CpuMatmulConfig::fromSizes(const std::vector<int64_t> &sizes) {
  if (sizes.size() != 4 || !plausibleSizes(sizes))
    return std::nullopt;
  CpuMatmulConfig config;
  config.rows = int(sizes[0]);
  config.lanes = int(sizes[1]);
  config.vectors = int(sizes[2]);
  config.panelColumns = int(sizes[3]);
  return config;
}

int LoopKernelConfig::defaultWorkgroupSize(const DeviceLimits &limits, int64_t iterations) {
  // 256: the best of 64..1024 for the H200's elementwise chains, and no
  // worse on lavapipe; more only when the grid would outrun the device.
  // A device that allows fewer (Vulkan's minimum is 128) takes its most.
  int64_t size = std::min<int64_t>(256, std::max(1, limits.maxWorkgroupInvocations));
  int64_t maxGroups = std::max<int64_t>(1, limits.maxWorkgroupCount[0]);
  if ((iterations + size - 1) / size > maxGroups)
    size = ((iterations + maxGroups - 1) / maxGroups + 31) / 32 * 32;
  if (size > limits.maxWorkgroupInvocations)
    return 0;
  return static_cast<int>(std::min<int64_t>(size, limits.maxWorkgroupInvocations));
}

std::string LoopKernelConfig::check(const DeviceLimits &limits) const {
  if (workgroupSize < 1 || workgroupSize > limits.maxWorkgroupInvocations)
    return "workgroup size " + std::to_string(workgroupSize) + " is outside 1.." +
           std::to_string(limits.maxWorkgroupInvocations);
  if (vectorWidth != 1 && vectorWidth != 4)
    return "vector width " + std::to_string(vectorWidth) + " is not 1 or 4";
  return "";
}

const char *KernelConfig::formName(Form form) {
  switch (form) {
  case Form::Loop:
    return "loop";
  case Form::Row:
    return "row";
  case Form::ArgRow:
    return "arg_row";
  case Form::Gemm:
    return "gemm";
  case Form::Cpu:
    return "cpu";
  case Form::CpuGemm:
    return "cpu_gemm";
  case Form::CpuDirectConv:
    return "cpu_direct_conv";
  case Form::CoopGemm:
    return "coop_gemm";
  }
  return "?";
}

std::string KernelConfig::str() const {
  std::string s = formName(form);
  auto add = [&](const char *key, int64_t v) { s += std::string(" ") + key + "=" + std::to_string(v); };
  switch (form) {
  case Form::Loop:
    add("workgroup_size", loop.workgroupSize);
    add("vector_width", loop.vectorWidth);
    break;
  case Form::Row:
    add("workgroup_per_row", row.workgroupPerRow);
    add("workgroup_size", row.workgroupSize);
    break;
  case Form::Gemm:
    s += " tile=" + std::to_string(gemm.tileM) + "x" + std::to_string(gemm.tileN) + "x" +
         std::to_string(gemm.tileK) + " thread=" + std::to_string(gemm.threadM) + "x" +
         std::to_string(gemm.threadN);
    if (gemm.splitK > 1)
      add("split_k", gemm.splitK);
    if (gemm.stages > 1)
      add("stages", gemm.stages);
    break;
  case Form::CpuGemm:
    add("rows", cpuGemm.rows);
    add("lanes", cpuGemm.lanes);
    add("vectors", cpuGemm.vectors);
    add("panel", cpuGemm.panelColumns);
    if (cpuGemm.packedB)
      add("packed_b", 1);
    break;
  case Form::CpuDirectConv:
    add("pixels", cpuDirectConv.pixels);
    add("lanes", cpuDirectConv.lanes);
    add("vectors", cpuDirectConv.vectors);
    if (cpuDirectConv.packedFilter)
      add("packed_filter", 1);
    break;
  case Form::CoopGemm:
    s += " tile=" + std::to_string(coop.tileM) + "x" + std::to_string(coop.tileN) + "x" +
         std::to_string(coop.tileK) + " subgroups=" + std::to_string(coop.subgroupsM) + "x" +
         std::to_string(coop.subgroupsN);
    if (coop.stages > 1)
      s += " stages=" + std::to_string(coop.stages);
    break;
  case Form::ArgRow:
  case Form::Cpu:
    break;
  }
  return s;
}

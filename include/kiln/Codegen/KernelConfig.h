//===- KernelConfig.h - device limits and per-kernel configurations -*- C++ -*-===//
//
// One configuration object per kernel kind: the tile and workgroup sizes a
// kernel builder uses. Defaults come from the device's limits; an autotuner
// can hand a builder any other valid configuration.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_KERNELCONFIG_H
#define KILN_CODEGEN_KERNELCONFIG_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// What a GPU offers the kernel builders (VkPhysicalDeviceLimits and
/// subgroup properties): a Target's (kiln/Compiler/Target.h), where its
/// values come from, a device's report or a profile's. Zero until then.
struct DeviceLimits {
  int subgroupSize = 0;
  int maxWorkgroupInvocations = 0;
  int64_t maxWorkgroupCount[3] = {0, 0, 0};
  int64_t sharedMemoryBytes = 0;
  /// Loop iterations one kernel invocation may run in all, 0 for no limit.
  /// Vulkan does not report it; llvmpipe stops every loop of an invocation
  /// after 65535 iterations in total (Mesa's LP_MAX_TGSI_LOOP_ITERATIONS),
  /// silently, so kernels for it must stay below.
  int64_t maxLoopIterations = 0;
  /// Compute units (SMs) the device runs workgroups on, 0 when unknown:
  /// GEMM tiles shrink until every unit has a few workgroups.
  int computeUnits = 0;
  /// Cooperative matrices (VK_KHR_cooperative_matrix) of 16 x 16 x 16 f16
  /// operands with f32 accumulators at subgroup scope: half-precision
  /// GEMMs run on the tensor cores (CoopMatrixConfig).
  bool cooperativeMatrix = false;
  /// The same with bf16 operands (VK_KHR_shader_bfloat16's cooperative
  /// matrices): bf16 GEMMs take the coop_gemm form too.
  bool cooperativeMatrixBF16 = false;
  /// CUDA's driver runs the GPU too, at this compute capability (10 *
  /// major + minor; 0: it does not), with this much shared memory a CTA
  /// may opt in to: an f16 GEMM gets PTX on warpgroup MMA beside its
  /// SPIR-V where the capability is 90 (WgmmaGemm.h).
  int ptxArch = 0;
  int64_t ptxSharedBytes = 0;
};

/// A kernel of reductions sharing one iteration space (softmax, layer norm,
/// a sum with its prologue and epilogue), seen as rows x reduced columns.
struct RowKernelConfig {
  /// One workgroup per row, cooperating through subgroup reductions and
  /// shared memory; else one work item per row (columns reductions, narrow
  /// rows, the CPU).
  bool workgroupPerRow = false;
  int workgroupSize = 1;
  /// Subgroup partials a lane folds after the shared-memory step, at most:
  /// the workgroup holds up to subgroupSize^2 * this many work items.
  static constexpr int kMaxPartialsPerLane = 16;
  /// Up to this many columns per work item are kept in registers between
  /// the reductions, so each input element is read once.
  int maxChunksInRegisters = 16;

  /// `contiguous`: the reduced axes are the innermost ones; `phases`: the
  /// passes over a row (reductions, plus one to store full-shape results).
  static RowKernelConfig defaultFor(const DeviceLimits &limits, int64_t rows, int64_t columns,
                                    bool contiguous, int64_t phases = 1);
  /// Empty when the configuration fits the device; else why not.
  std::string check(const DeviceLimits &limits) const;
};

/// A tiled matmul or implicit-GEMM convolution: each workgroup computes a
/// tileM x tileN block of the result, staging tileK-deep slices of both
/// operands in shared memory; each work item accumulates a threadM x threadN
/// block in registers. With splitK > 1 the workgroup holds splitK groups of
/// work items, each taking every splitK-th k slice of the same tile; their
/// partial sums meet in shared memory, added in a fixed order (small
/// problems: more warps per SM without a second kernel or atomics).
/// With stages = 2 the shared tiles are double-buffered: slice k + 1 is
/// stored into the other buffer while slice k is read, one barrier per
/// slice instead of two.
struct MatmulConfig {
  int tileM = 64, tileN = 64, tileK = 16;
  int threadM = 4, threadN = 4;
  int splitK = 1;
  int stages = 1;

  /// Work items of one k group.
  int groupSize() const { return (tileM / threadM) * (tileN / threadN); }
  int workgroupSize() const { return groupSize() * splitK; }
  /// Bytes of workgroup memory: each group's two tiles per stage, and the
  /// partial sums of all groups but the first.
  int64_t sharedBytes() const {
    return (int64_t(tileM + tileN) * tileK * splitK * stages +
            int64_t(splitK - 1) * tileM * tileN) *
           4;
  }
  /// From "tileM, tileN, tileK, threadM, threadN[, splitK[, stages]]"; none
  /// unless 5 to 7 sizes.
  static std::optional<MatmulConfig> fromSizes(const std::vector<int64_t> &sizes);
  /// For a batch of `batch` m x n x k GEMMs (the batch is a grid dimension:
  /// its workgroups count when the tiles are sized to fill the GPU).
  static MatmulConfig defaultFor(const DeviceLimits &limits, int64_t m, int64_t n, int64_t k,
                                 int64_t batch = 1);
  std::string check(const DeviceLimits &limits) const;
};

/// A CPU matmul or implicit-GEMM convolution: each outer iteration (one
/// thread's share) packs a panelColumns-wide slice of B, then sweeps A in
/// blocks of `rows` rows; a block of rows x (vectors x lanes) results lives
/// in vector registers across the whole k loop.
/// The f32 vector width CPU configs default to: the host's (16 lanes with
/// AVX-512, else 8), or, while a CpuTargetLanes lives on this thread, the
/// width of the ISA level being compiled for (`kiln-compile --cpu-isa
/// x86-64-v3` on an AVX-512 host: 8; 16-lane blocks there were split into
/// pairs of 8 and spilled, 4.5x slower).
int cpuDefaultLanes();
class CpuTargetLanes {
public:
  explicit CpuTargetLanes(int lanes);
  ~CpuTargetLanes();
  CpuTargetLanes(const CpuTargetLanes &) = delete;
  CpuTargetLanes &operator=(const CpuTargetLanes &) = delete;

private:
  int previous;
};

/// On a kernel whose matmul's right operand B is a weight of a program
/// compiled ahead of time: the program may store B as the CPU GEMM form's
/// panels (CpuMatmulConfig::packedB).
inline constexpr char kWeightMatrixAttr[] = "kiln.weight_matrix";

struct CpuMatmulConfig {
  int rows = 8;
  int lanes = 16;  // the host's f32 vector width (AVX-512: 16, AVX2: 8)
  int vectors = 2; // vectors per row of the register block
  int panelColumns = 64;
  /// B arrives as its panels, [N / panelColumns][K][panelColumns], packed
  /// when the program was compiled: only for a B that is a weight
  /// (`kiln.weight_matrix` on the kernel), never packed per inference.
  bool packedB = false;

  int blockColumns() const { return lanes * vectors; }
  /// From "rows, lanes, vectors, panelColumns"; none unless 4 sizes.
  static std::optional<CpuMatmulConfig> fromSizes(const std::vector<int64_t> &sizes);
  /// For this host: its vector width, and a register block that fits its
  /// vector registers (rows * vectors accumulators plus operands).
  static CpuMatmulConfig defaultForHost();
  std::string check() const;
};

/// A CPU dense convolution in the direct form (CpuDirectConv.cpp): blocks
/// of `pixels` output pixels of one row by `vectors` x `lanes` output
/// channels, pixels x vectors accumulators in vector registers over the
/// input channels and taps.
/// On a kernel whose convolution filter is a weight of a program compiled
/// ahead of time: the program may store it in the CPU direct form's packed
/// layout (CpuDirectConvConfig::packedFilter).
inline constexpr char kWeightFilterAttr[] = "kiln.weight_filter";

struct CpuDirectConvConfig {
  int pixels = 8;
  int lanes = 16; // the host's f32 vector width
  int vectors = 2;
  /// The filter operand arrives as [Cout / block][C][Kh * Kw][block]
  /// (block = lanes x vectors), packed when the program was compiled:
  /// only for a filter that is a weight (`kiln.weight_filter` on the
  /// kernel), never repacked per inference.
  bool packedFilter = false;

  int blockChannels() const { return lanes * vectors; }
  /// For this host: its vector width and a block that fits its registers.
  static CpuDirectConvConfig defaultForHost();
  std::string check() const;
};

/// A half-precision GPU matmul on cooperative matrices (tensor cores): each
/// workgroup computes a tileM x tileN block of the result with subgroupsM x
/// subgroupsN subgroups, each holding its (tileM / subgroupsM) x (tileN /
/// subgroupsN) share as 16 x 16 f32 accumulator fragments. Per tileK-deep
/// slice of k the work items stage both f16 tiles in shared memory (rows
/// padded by 16 bytes against bank conflicts, zeros past the edges), then
/// every subgroup multiplies its fragments. With 2 stages the tiles are
/// double-buffered: slice k + 1 is stored into the other buffers after
/// slice k's multiplies, one barrier per slice instead of two.
struct CoopMatrixConfig {
  static constexpr int kFragment = 16; // the M, N and K of one fragment
  int tileM = 128, tileN = 128, tileK = 32;
  int subgroupsM = 2, subgroupsN = 2;
  int stages = 1;

  int workgroupSize(const DeviceLimits &limits) const {
    return subgroupsM * subgroupsN * limits.subgroupSize;
  }
  /// Both staged tiles and one 16 x 16 f32 fragment per subgroup (the
  /// epilogue reads the accumulators through it).
  int64_t sharedBytes() const;
  /// The largest tiles that still give every compute unit work; for a
  /// convolution (`gathered`: B gathered from its input, `inRows`: 8
  /// columns at a time) the shape that ran it fastest.
  static CoopMatrixConfig defaultFor(const DeviceLimits &limits, int64_t m, int64_t n,
                                     int64_t k, int64_t batch, bool gathered = false,
                                     bool inRows = false);
  std::string check(const DeviceLimits &limits) const;
};

/// A GPU kernel of one grid dimension (elementwise chains, pooling,
/// untiled contractions): `workgroupSize` work items per workgroup, each
/// taking `vectorWidth` adjacent elements (4: 16-byte accesses).
struct LoopKernelConfig {
  int workgroupSize = 256;
  int vectorWidth = 1;

  /// 256 work items, unless the device's largest grid needs more.
  /// Zero when even its largest workgroup does not cover `iterations`.
  static int defaultWorkgroupSize(const DeviceLimits &limits, int64_t iterations);
  std::string check(const DeviceLimits &limits) const;
};

/// Every kernel's configuration, as its kiln.kernel's `config` attribute
/// holds it: the form the kernel is built in and that form's knobs.
struct KernelConfig {
  enum class Form {
    Loop,    // GPU: one grid dimension
    Row,     // GPU: reductions with their prologue and epilogue
    ArgRow,  // GPU: a long arg reduction, a workgroup per result (no knobs)
    Gemm,    // GPU: tiled matmul or implicit-GEMM convolution
    Cpu,     // CPU: loops split over threads (no knobs)
    CpuGemm, // CPU: register-blocked matmul or convolution
    CpuDirectConv, // CPU: dense convolution, vectors along output channels
    CoopGemm,      // GPU: f16 matmul on cooperative matrices
  };
  Form form = Form::Cpu;
  LoopKernelConfig loop;
  RowKernelConfig row;
  MatmulConfig gemm;
  CpuMatmulConfig cpuGemm;
  CpuDirectConvConfig cpuDirectConv;
  CoopMatrixConfig coop;

  /// "loop", "row", "arg_row", "gemm", "cpu", "cpu_gemm", "cpu_direct_conv".
  static const char *formName(Form form);
  /// One line: "gemm tile=64x128x16 thread=8x8".
  std::string str() const;
  bool operator==(const KernelConfig &other) const { return str() == other.str(); }
};

} // namespace kiln

#endif // KILN_CODEGEN_KERNELCONFIG_H

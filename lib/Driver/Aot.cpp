//===- Aot.cpp - compile, save, load and run a Program ahead of time ------===//
//
// compile() goes through the same pipeline as every realize (GraphBuilder,
// placement, fusion, compileProgram), with every committed device moved to
// the target's device, once per target. The result is an rt::Artifact: the
// model inputs, the weights (every other source the graph starts from), and
// a Program per target. run() and load() use the runtime's Model only.
//
//===----------------------------------------------------------------------===//

#include "kiln/Program.h"

#include "lib/Driver/CompileGraph.h"
#include "lib/Tune/Tuner.h"
#include "lib/Target/LLVM/CpuObject.h"
#include "lib/Target/MSL/MslTarget.h"
#include "kiln/Compiler/Target.h"

#include "llvm/TargetParser/Host.h"
#include "lib/Frontend/Devices.h"
#include "lib/Frontend/FoldBatchNorm.h"
#include "lib/Frontend/GraphBuilder.h"
#include "lib/Frontend/GraphCache.h"
#include "lib/Frontend/GraphFile.h"
#include "lib/Driver/ProcessSession.h"

#include "kiln/Codegen/Pipelines.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Placement.h"
#include "kiln/runtime/Artifact.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

using namespace kiln;

namespace {
rt::ElementType elementOf(DType dtype) {
  switch (dtype) {
  case DType::f32: return rt::ElementType::f32;
  case DType::f16: return rt::ElementType::f16;
  case DType::i32: return rt::ElementType::i32;
  case DType::boolean: return rt::ElementType::i1;
  case DType::bf16: return rt::ElementType::bf16;
  }
  return rt::ElementType::f32;
}

DType dtypeOf(rt::ElementType element) {
  switch (element) {
  case rt::ElementType::f32: return DType::f32;
  case rt::ElementType::f16: return DType::f16;
  case rt::ElementType::i32: return DType::i32;
  case rt::ElementType::i1: return DType::boolean;
  case rt::ElementType::bf16: return DType::bf16;
  }
  return DType::f32;
}

rt::TensorType typeOf(const Node &node) { return {node.shape, elementOf(node.dtype)}; }

/// A source node's bytes as stored, from its buffer or its host data.
std::vector<uint8_t> bytesOf(const Node &node) {
  if (!node.realized())
    return hostBytes(node);
  std::vector<uint8_t> out(numElements(node.shape) * elementBytes(node.dtype));
  check(runtimeDevice(*node.bufferDevice).download(*node.buffer, out.data(), out.size()),
        "reading a weight");
  return out;
}

/// The device a target's graph is placed on (and a compiled program first
/// runs on). The metal target goes through the Vulkan path, with Apple's
/// limits, so it places on a Vulkan device too.
Device deviceFor(TargetApi target) {
  if (target == TargetApi::cpu)
    return Device::cpu();
  if (target == TargetApi::vulkan)
    return Device::vulkan(0); // throws DeviceError listing the devices here
  if (target == TargetApi::metal) {
    try {
      return Device::vulkan(0);
    } catch (const DeviceError &e) {
      throw Error(std::string("target 'metal' is made from the Vulkan path's SPIR-V and needs "
                              "a Vulkan device to place the graph on (lavapipe will do): ") +
                  e.what());
    }
  }
  throw Error("target '" + targetApiName(target).str() +
              "' cannot be compiled ahead of time: use vulkan, cpu or metal");
}

/// The CPU instruction set a cpu target's code is for: its profile's, else
/// the options'.
std::string cpuIsaOf(const Session &s, const Target &spec, const CompileOptions &options) {
  // "host" is the CPU device's code, the JIT's bit for bit: this CPU's, or
  // the level KILN_CPU_ISA forces on it.
  // (cpu:host with cpu_isa "portable" is the same.)
  if (spec.profile.empty())
    return options.cpu_isa == "host" || options.cpu_isa == "portable" ? cpuDeviceIsa(s.options)
                                                                       : options.cpu_isa;
  // A level that is no profile (from cpu_isa) is the emitter's to refuse.
  const TargetProfile *profile = findTargetProfile(spec.api, spec.profile);
  return profile ? profile->cpuIsa : spec.profile;
}

/// Whether this CPU runs x86-64-v4 code (AVX-512 F, BW, CD, DQ, VL).
bool hostHasX86_64_v4() {
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  for (const char *feature : {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"})
    if (!host.lookup(feature))
      return false;
  return true;
}

/// The targets to compile for, parsed, each once; the profile a cpu target
/// gets from CompileOptions::cpu_isa is its own.
std::vector<Target> targetSpecs(const std::vector<std::string> &targets,
                                const CompileOptions &options) {
  // KILN_GPU_LIMITS describes the GPU compiled for: a plain vulkan is that.
  bool gpuPinned = !session().options.gpuTargetEdits.empty();
  std::vector<Target> specs;
  // Whether the list names a Vulkan profile itself (then a plain vulkan is
  // the device here alone).
  bool vulkanProfiles = false;
  for (const std::string &text : targets) {
    std::string error;
    mlir::FailureOr<Target> parsed = parseTarget(text, error);
    vulkanProfiles |= succeeded(parsed) && parsed->api == TargetApi::vulkan && !parsed->profile.empty();
  }
  for (const std::string &text : targets) {
    std::string error;
    mlir::FailureOr<Target> parsed = parseTarget(text, error);
    if (failed(parsed))
      throw Error(error);
    Target spec = *parsed;
    if (spec.api == TargetApi::cuda)
      throw Error("target '" + text + "': PTX is compiled beside a vulkan target's SPIR-V "
                  "(vulkan:nvidia-hopper with ptx=90), not on its own");
    std::vector<Target> entries = {spec};
    if (spec.api == TargetApi::cpu && spec.profile.empty() && options.cpu_isa == "portable") {
      // Portable code: x86-64-v3 (AVX2, FMA), and beside it this CPU's
      // level where that is higher (x86-64-v4 with AVX-512); the runtime
      // runs the highest its CPU has.
      entries.front().profile = "x86-64-v3";
      if (hostHasX86_64_v4()) {
        entries.insert(entries.begin(), spec);
        entries.front().profile = "x86-64-v4";
      }
    } else if (spec.api == TargetApi::vulkan && spec.profile.empty() &&
               options.cpu_isa == "portable" && !vulkanProfiles && !gpuPinned) {
      // Portable as the cpu target is: the device here, and beside it the
      // generic profile that any Vulkan 1.1 GPU runs (the runtime picks
      // the first whose assumptions its device meets).
      entries.push_back(spec);
      entries.back().profile = "generic";
    } else if (spec.api == TargetApi::cpu && spec.profile.empty() &&
               options.cpu_isa != "host") {
      entries.front().profile = options.cpu_isa;
    }
    // cpu:host is the CPU device's code, as a plain cpu with cpu_isa "host".
    for (Target &entry : entries)
      if (entry.api == TargetApi::cpu && entry.profile == "host")
        entry.profile.clear();
    for (const Target &entry : entries) {
      for (const Target &earlier : specs)
        if (earlier.str() == entry.str())
          throw Error("target " + entry.str() + " is listed twice: list each target once");
      specs.push_back(entry);
    }
  }
  return specs;
}

/// The buffers a kernel of a GPU profile may bind (its kernels are fused
/// within them); 0 for the devices at hand.
int profileBindings(const Target &spec) {
  if (spec.api == TargetApi::cpu || spec.profile.empty())
    return spec.api == TargetApi::metal ? int(metalProfile().maxStorageBuffersPerStage) : 0;
  return spec.maxBindings;
}

/// Compiles a placed, fused graph for `target`.
template <typename Graph>
std::shared_ptr<const rt::Program> compileFor(Session &s, Graph &graph, const Target &target,
                                              const CompileOptions &options,
                                              ProgramTarget how = {}) {
  std::optional<CpuObjectEmitter> objects;
  if (target.api == TargetApi::cpu) {
    objects.emplace(cpuIsaOf(s, target, options));
    how.cpuObjects = &*objects;
  }
  if (target.api == TargetApi::metal)
    how.gpuProfile = &metalProfile();
  else if (target.api == TargetApi::vulkan && !target.profile.empty())
    how.gpuProfile = &findTargetProfile(target.api, target.profile)->gpu;
  // The Vulkan device at hand is tuned for (KILN_AUTOTUNE=on), as the JIT
  // is; a profile's device is not here to time.
  if (target.api == TargetApi::vulkan && target.profile.empty()) {
    if constexpr (std::is_same_v<Graph, GraphBuilder>)
      tuneUntunedKernels(s, graph.func);
    else
      tuneUntunedKernels(s, graph);
  }
  std::shared_ptr<const rt::Program> program;
  if constexpr (std::is_same_v<Graph, GraphBuilder>)
    program = compileProgram(s, graph, nullptr, how);
  else
    program = compileProgram(s, graph, how);
  return target.api == TargetApi::metal ? toMetalProgram(*program) : program;
}

/// An f32 filter [Cout, C, Kh, Kw] as the CPU direct convolution reads it
/// packed (CpuDirectConvConfig::packedFilter): [Cout / block][C][Kh Kw][block],
/// and where block does not divide Cout the last, narrower block after them
/// as [C][Kh Kw][Cout % block].
std::vector<uint8_t> packFilter(const std::vector<uint8_t> &bytes,
                                const std::vector<int64_t> &shape, int64_t block) {
  if (shape.size() != 4 || block <= 0)
    throw CompileError("internal error: a packed filter of an unexpected shape");
  const int64_t outs = shape[0], rest = shape[1] * shape[2] * shape[3];
  if (bytes.size() != static_cast<size_t>(outs * rest) * sizeof(float))
    throw CompileError("internal error: a packed filter of an unexpected size");
  std::vector<uint8_t> packed(bytes.size());
  const auto *from = reinterpret_cast<const float *>(bytes.data());
  auto *to = reinterpret_cast<float *>(packed.data());
  for (int64_t o = 0; o < outs; ++o) {
    const int64_t first = o / block * block, width = std::min(block, outs - first);
    for (int64_t r = 0; r < rest; ++r)
      to[first * rest + r * width + (o - first)] = from[o * rest + r];
  }
  return packed;
}

/// An f32 matrix B the CPU GEMM form reads packed (CpuMatmulConfig::
/// packedB): its panels, [N / panel][K][panel], from the weight holding
/// B[k, n] at offset + k strideK + n strideN.
std::vector<uint8_t> packMatrix(const std::vector<uint8_t> &bytes, const PackedMatrix &m,
                                int64_t panel) {
  if (m.n % panel || bytes.size() != static_cast<size_t>(m.k * m.n) * sizeof(float))
    throw CompileError("internal error: a packed matrix of an unexpected shape");
  std::vector<uint8_t> packed(bytes.size());
  const auto *from = reinterpret_cast<const float *>(bytes.data());
  auto *to = reinterpret_cast<float *>(packed.data());
  for (int64_t n = 0; n < m.n; ++n)
    for (int64_t k = 0; k < m.k; ++k)
      to[((n / panel) * m.k + k) * panel + n % panel] =
          from[m.offset + k * m.strideK + n * m.strideN];
  return packed;
}

/// A program's scalar constants never change: its CPU kernels take them as
/// literals (kInlineScalarAttr), not as operands a later realize may
/// refill. (x86 has no NaN-propagating max: ReLU6's bounds as operands cost
/// a NaN check per vector, 6-8% of MobileNetV2. GPU kernels keep them as
/// operands, which keeps their tuning records shared with the JIT's.)
void markScalarsFixed(mlir::func::FuncOp func) {
  func.walk([](ConstantOp constant) {
    if (cast<mlir::RankedTensorType>(constant.getType()).getRank() == 0)
      constant->setAttr(kInlineScalarAttr, mlir::UnitAttr::get(constant.getContext()));
  });
}

/// The devices a freshly compiled program runs on: the Vulkan devices its
/// steps name (a model split across GPUs runs split), else the target's.
std::vector<Device> compiledDevices(const rt::Artifact &artifact, TargetApi target) {
  if (target == TargetApi::vulkan)
    for (const rt::TargetProgram &program : artifact.programs)
      if (program.target == targetApiName(target) && program.program->devices.size() > 1) {
        std::vector<Device> devices;
        for (const std::string &name : program.program->devices)
          devices.push_back(Device::parse(name));
        return devices;
      }
  return {deviceFor(target)};
}

std::string nameAt(const std::vector<std::string> &names, size_t i, const char *prefix) {
  return i < names.size() ? names[i] : prefix + std::to_string(i);
}
} // namespace

Program::Program(std::shared_ptr<const rt::Artifact> artifact, std::vector<Device> devices,
                 bool mustRun)
    : artifact_(std::move(artifact)), devices_(std::move(devices)) {
  std::vector<rt::Device *> bound;
  for (const Device &d : devices_)
    bound.push_back(&runtimeDevice(d));
  rt::StatusOr<std::unique_ptr<rt::Model>> model = rt::Model::create(artifact_, bound);
  if (!model.isOk()) {
    if (mustRun)
      throw Error(model.status().message());
    unusable_ = model.status().message();
    return;
  }
  model_ = std::move(*model);
}

Program kiln::compile(const std::vector<Tensor> &outputs, const std::vector<Tensor> &inputs,
                      const CompileOptions &options) {
  std::vector<std::shared_ptr<Node>> roots;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined())
      throw Error("compile: output " + std::to_string(i) + " is an empty Tensor");
    roots.push_back(outputs[i].node());
  }
  auto artifact = std::make_shared<rt::Artifact>();
  Session &s = session();
  auto lock = lockForCompile(s);
  std::vector<std::string> targets = options.targets;
  if (targets.empty()) {
    // Where the model was put: a graph with tensors committed to Vulkan
    // devices (a model split across GPUs) compiles for Vulkan even where the
    // default device is the CPU; else the default device's kind.
    std::vector<Node *> order = topologicalOrder(roots);
    bool onVulkan = std::any_of(order.begin(), order.end(), [](Node *n) {
      return n->device && n->device->kind() == DeviceKind::vulkan;
    });
    targets.push_back(onVulkan ? targetApiName(TargetApi::vulkan).str()
                               : Device::default_device().api());
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    if (roots[i]->realized())
      throw Error("compile: output " + std::to_string(i) +
                  " was already computed and its graph freed: compile before reading it");
    artifact->outputs.push_back({nameAt(options.output_names, i, "output"), typeOf(*roots[i])});
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &input = inputs[i];
    if (!input.defined())
      throw Error("compile: input " + std::to_string(i) + " is an empty Tensor");
    const Node &node = *input.node();
    if (!node.realized() && node.kind != OpKind::Input)
      throw Error("compile: input " + std::to_string(i) + " (created at " +
                  node.loc.file_name() + ":" + std::to_string(node.loc.line()) +
                  ") is computed from other tensors: pass the tensors the model starts from "
                  "(Tensor::from, randn, ...)");
    rt::Signature signature{nameAt(options.input_names, i, "input"), typeOf(node), {}};
    if (node.valueRange)
      signature.range =
          rt::ValueRange{node.valueRange->first, node.valueRange->second, node.valueRangeUse};
    artifact->inputs.push_back(std::move(signature));
  }
  // The weights are known now: batch norms on convolutions fold into them.
  roots = foldBatchNorms(
      roots,
      [&](const Node *node) {
        return std::any_of(inputs.begin(), inputs.end(),
                           [&](const Tensor &t) { return t.node().get() == node; });
      },
      [](const Node &node) {
        std::vector<uint8_t> bytes = bytesOf(node);
        if (node.dtype == DType::f16 || node.dtype == DType::bf16) {
          std::vector<float> values(bytes.size() / 2);
          for (size_t i = 0; i < values.size(); ++i) {
            uint16_t bits;
            std::memcpy(&bits, &bytes[2 * i], 2);
            values[i] = halfBitsToFloat(bits, node.dtype);
          }
          return values;
        }
        std::vector<float> values(bytes.size() / sizeof(float));
        std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
        return values;
      });
  // A weight by node and how its bytes are packed ("": as is).
  std::vector<std::pair<std::pair<const Node *, std::string>, uint32_t>> weightOf;
  std::vector<Target> specs = targetSpecs(targets, options);
  for (const Target &spec : specs) {
    TargetApi target = spec.api;
    Device device = deviceFor(target);
    GraphBuilder graph(&s.contextForGraph());
    graph.retarget = device;
    // A model split across Vulkan devices stays split (Program::devices()).
    graph.keepOrdinals = target == TargetApi::vulkan;
    graph.build(roots);
    if (target == TargetApi::cpu)
      markScalarsFixed(graph.func);
    placeAndFuse(s, graph, RealizeOptions(), /*fuse=*/true, profileBindings(spec));
    rt::TargetProgram program;
    program.target = targetApiName(target).str();
    program.profile = spec.profile;
    auto isModelInput = [&](const Node *node) {
      return std::any_of(inputs.begin(), inputs.end(),
                         [&](const Tensor &t) { return t.node().get() == node; });
    };
    ProgramTarget how;
    std::vector<PackedWeight> packedWeights;
    how.isWeight = [&](uint32_t index) {
      return index < graph.inputs.size() && !isModelInput(graph.inputs[index]);
    };
    how.packedWeights = &packedWeights;
    program.program = compileFor(s, graph, spec, options, how);
    for (uint32_t index = 0; index < graph.inputs.size(); ++index) {
      Node *node = graph.inputs[index];
      auto input = std::find_if(inputs.begin(), inputs.end(),
                                [&](const Tensor &t) { return t.node().get() == node; });
      if (input != inputs.end()) {
        program.sources.push_back({false, static_cast<uint32_t>(input - inputs.begin())});
        continue;
      }
      const PackedWeight *packing = nullptr;
      for (const PackedWeight &packed : packedWeights)
        if (packed.input == index)
          packing = &packed;
      // Two programs (targets) share a weight's bytes when packed alike.
      std::string how;
      if (packing && packing->matrix) {
        const PackedMatrix &m = *packing->matrix;
        how = "matrix " + std::to_string(packing->block) + " " + std::to_string(m.offset) + " " +
              std::to_string(m.strideK) + " " + std::to_string(m.strideN);
      } else if (packing) {
        how = "filter " + std::to_string(packing->block);
      }
      auto known = std::find_if(weightOf.begin(), weightOf.end(), [&](const auto &entry) {
        return entry.first.first == node && entry.first.second == how;
      });
      if (known == weightOf.end()) {
        // An importer's label (an ONNX initializer's name), else where the
        // tensor was made.
        std::string name = node->label ? *node->label
                                       : std::string(node->loc.file_name()) + ":" +
                                             std::to_string(node->loc.line());
        std::vector<uint8_t> bytes = bytesOf(*node);
        if (packing && packing->matrix) {
          bytes = packMatrix(bytes, *packing->matrix, packing->block);
          name += " (packed in panels of " + std::to_string(packing->block) +
                  " columns for the cpu)";
        } else if (packing) {
          bytes = packFilter(bytes, node->shape, packing->block);
          name += " (packed by " + std::to_string(packing->block) +
                  " output channels for the cpu)";
        }
        artifact->weights.push_back({name, typeOf(*node), std::move(bytes)});
        weightOf.push_back({{node, how}, static_cast<uint32_t>(artifact->weights.size() - 1)});
        known = weightOf.end() - 1;
      }
      program.sources.push_back({true, known->second});
    }
    artifact->programs.push_back(std::move(program));
  }
  // Read before the artifact is moved (argument order is unspecified).
  std::vector<Device> devices = compiledDevices(*artifact, specs.front().api);
  return Program(std::move(artifact), std::move(devices), /*mustRun=*/false);
}

mlir::OwningOpRef<mlir::ModuleOp> kiln::parseGraphText(mlir::MLIRContext &ctx,
                                                        const std::string &text,
                                                        const std::string &name,
                                                        std::string &diagnostics) {
  using namespace mlir;
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, ParserConfig(&ctx), name);
  if (!module)
    throw CompileError(name + ": not a valid kiln graph:\n" + diagnostics);
  if (!firstFunc(*module))
    throw CompileError(name + ": no func.func to compile");
  return module;
}

mlir::func::FuncOp kiln::firstFunc(mlir::ModuleOp module) {
  mlir::func::FuncOp first;
  module.walk([&](mlir::func::FuncOp f) {
    if (!first)
      first = f;
  });
  return first;
}

void kiln::placeAndFuseFor(mlir::ModuleOp module, const Device &device, const std::string &name,
                           std::string &diagnostics, bool fixedScalars, int maxBindings) {
  using namespace mlir;
  MLIRContext *ctx = module.getContext();
  func::FuncOp func = firstFunc(module);
  DeviceAttr attr = DeviceAttr::get(ctx, device.api(), device.index(), device.adapter_uuid(),
                                    device.written());
  // Every committed source moves to the target's device, as compile() does;
  // for Vulkan, sources on Vulkan devices keep their ordinals (a model split
  // across GPUs stays split).
  bool keep = device.kind() == DeviceKind::vulkan;
  func.walk([&](PlacedOpInterface op) {
    if (!op.isPlacementSource() || !op.getPlacement())
      return;
    if (keep && op.getPlacement().getApi() == attr.getApi())
      return;
    op.setPlacement(attr);
  });
  if (fixedScalars)
    markScalarsFixed(func);
  PlacementOptions placement;
  placement.defaultDevice = attr;
  if (failed(placeDevices(func, placement)))
    throw CompileError(name + ": placement failed:\n" + diagnostics);
  PassManager pm(ctx, ModuleOp::getOperationName());
  FusionPipelineOptions fusion;
  fusion.maxBindings = maxBindings ? maxBindings : maxKernelBindings();
  populateFusionPipeline(pm, fusion);
  if (failed(pm.run(module)))
    throw CompileError(name + ": fusion failed:\n" + diagnostics);
}

std::function<mlir::LogicalResult(mlir::Diagnostic &)>
kiln::diagnosticCollector(std::string &diagnostics) {
  using namespace mlir;
  return [&diagnostics](Diagnostic &diag) {
    std::string where;
    if (auto loc = dyn_cast<FileLineColLoc>(diag.getLocation()))
      where = loc.getFilename().str() + ":" + std::to_string(loc.getLine()) + ":" +
              std::to_string(loc.getColumn()) + ": ";
    diagnostics += where + diag.str() + "\n";
    for (Diagnostic &note : diag.getNotes())
      diagnostics += "  note: " + note.str() + "\n";
    return success();
  };
}

Program kiln::compile_graph(const std::string &text, const std::string &name,
                            const CompileOptions &options) {
  using namespace mlir;
  std::vector<std::string> targets = options.targets;
  if (targets.empty())
    targets.push_back(Device::default_device().api());
  Session &s = session();
  auto lock = lockForCompile(s);
  MLIRContext &ctx = s.contextForGraph();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, diagnosticCollector(diagnostics));
  OwningOpRef<ModuleOp> module = parseGraphText(ctx, text, name, diagnostics);
  func::FuncOp graphFunc = firstFunc(*module);
  auto artifact = std::make_shared<rt::Artifact>();
  std::vector<rt::TensorType> inputs = inputTypesOf(graphFunc);
  for (size_t i = 0; i < inputs.size(); ++i)
    artifact->inputs.push_back({nameAt(options.input_names, i, "input"), inputs[i]});
  for (size_t i = 0; i < graphFunc.getNumResults(); ++i)
    artifact->outputs.push_back({nameAt(options.output_names, i, "output"),
                                 programTypeOf(graphFunc.getResultTypes()[i])});
  std::vector<Target> specs = targetSpecs(targets, options);
  for (const Target &spec : specs) {
    TargetApi target = spec.api;
    OwningOpRef<ModuleOp> copy = module->clone();
    placeAndFuseFor(*copy, deviceFor(target), name, diagnostics, target == TargetApi::cpu,
                    profileBindings(spec));
    rt::TargetProgram program;
    program.target = targetApiName(target).str();
    program.profile = spec.profile;
    func::FuncOp func = firstFunc(*copy);
    program.program = compileFor(s, func, spec, options);
    for (size_t i = 0; i < program.program->inputs.size(); ++i)
      program.sources.push_back({false, static_cast<uint32_t>(i)});
    artifact->programs.push_back(std::move(program));
  }
  // Read before the artifact is moved (argument order is unspecified).
  std::vector<Device> devices = compiledDevices(*artifact, specs.front().api);
  return Program(std::move(artifact), std::move(devices), /*mustRun=*/false);
}

std::vector<std::string> kiln::target_profiles() {
  std::vector<std::string> lines;
  for (const TargetProfile &profile : targetProfiles()) {
    std::string name = targetApiName(profile.api).str() + ":" + profile.name;
    lines.push_back(name + std::string(name.size() < 22 ? 22 - name.size() : 1, ' ') +
                    profile.about);
  }
  return lines;
}

std::string kiln::export_graph(const std::vector<Tensor> &outputs) {
  std::vector<std::shared_ptr<Node>> roots;
  for (const Tensor &t : outputs) {
    if (!t.defined())
      throw Error("export_graph: an empty Tensor");
    roots.push_back(t.node());
  }
  Session &s = session();
  auto lock = lockForCompile(s);
  GraphBuilder graph(&s.contextForGraph());
  graph.build(roots);
  std::string text;
  llvm::raw_string_ostream os(text);
  graph.module->print(os);
  return text;
}

Program kiln::load(const std::string &path, const Device &device) {
  return load(path, std::vector<Device>{device});
}

Program kiln::load(const std::string &path, const std::vector<Device> &devices) {
  if (devices.empty())
    throw Error("load: no device to run " + path + " on");
  rt::StatusOr<rt::Artifact> artifact = rt::loadArtifact(path);
  if (!artifact.isOk())
    throw Error(artifact.status().message());
  return Program(std::make_shared<const rt::Artifact>(std::move(*artifact)), devices);
}

void Program::save(const std::string &path) const {
  if (rt::Status s = rt::saveArtifact(*artifact_, path); !s.isOk())
    throw Error("saving " + path + ": " + s.message());
}

std::vector<rt::ProgramInput>
Program::bindInputs(const std::vector<Tensor> &inputs,
                    std::vector<std::vector<uint8_t>> &hostData) const {
  const rt::Artifact &a = *artifact_;
  if (inputs.size() != a.inputs.size())
    throw Error("the program takes " + std::to_string(a.inputs.size()) + " inputs, got " +
                std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw Error("input '" + a.inputs[i].name + "' is an empty Tensor");
    rt::TensorType got{inputs[i].shape(), elementOf(inputs[i].dtype())};
    if (got.shape != a.inputs[i].type.shape || got.element != a.inputs[i].type.element)
      throw Error("input '" + a.inputs[i].name + "' is " + got.str() +
                  "; the program was compiled for " + a.inputs[i].type.str());
  }
  // Computed inputs are realized first; a tensor made from host data is
  // passed as its bytes (the program uploads it): no graph is built for it.
  std::vector<Tensor> computed;
  for (const Tensor &input : inputs)
    if (!input.node()->realized() && input.node()->kind != OpKind::Input)
      computed.push_back(input);
  if (!computed.empty())
    realize(computed);
  std::vector<rt::ProgramInput> bound;
  hostData.assign(inputs.size(), {});
  Session &s = session();
  auto lock = lockForCompile(s);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node &node = *inputs[i].node();
    if (node.realized()) {
      bound.push_back({node.buffer, nullptr});
    } else {
      hostData[i] = hostBytes(node);
      bound.push_back({nullptr, hostData[i].data()});
    }
  }
  return bound;
}

std::vector<Tensor>
Program::outputsOf(const std::vector<std::shared_ptr<rt::Buffer>> &buffers) const {
  const rt::Artifact &a = *artifact_;
  std::vector<Tensor> out;
  for (size_t i = 0; i < buffers.size(); ++i) {
    auto node = std::make_shared<Node>();
    node->kind = OpKind::Input;
    node->shape = a.outputs[i].type.shape;
    node->dtype = dtypeOf(a.outputs[i].type.element);
    // A split model's outputs live where its last steps ran.
    node->device = apiDevice(buffers[i]->device());
    node->buffer = buffers[i];
    node->bufferDevice = node->device;
    out.emplace_back(std::move(node));
  }
  return out;
}

namespace {
rt::RunOptions apiRunOptions() {
  rt::RunOptions options;
  options.allocate = [](rt::Device &device, size_t bytes,
                        const char *what) -> rt::StatusOr<std::shared_ptr<rt::Buffer>> {
    return allocateOn(device, bytes, what);
  };
  return options;
}
} // namespace

std::vector<Tensor> Program::run(const std::vector<Tensor> &inputs) const {
  if (!model_)
    throw Error(unusable_);
  std::vector<std::vector<uint8_t>> hostData;
  std::vector<rt::ProgramInput> bound = bindInputs(inputs, hostData);
  rt::StatusOr<rt::RunResult> result = model_->run(bound, apiRunOptions());
  check(result.status(), "running the program");
  return outputsOf(result->outputs);
}

std::vector<std::vector<Tensor>>
Program::run_pipelined(const std::vector<std::vector<Tensor>> &batches) const {
  if (!model_)
    throw Error(unusable_);
  std::vector<std::vector<std::vector<uint8_t>>> hostData(batches.size());
  std::vector<std::vector<rt::ProgramInput>> bound;
  for (size_t b = 0; b < batches.size(); ++b)
    bound.push_back(bindInputs(batches[b], hostData[b]));
  // Allocation failures come back as statuses: the workers are threads of
  // their own, where the API's typed errors could not be thrown.
  rt::StatusOr<std::vector<rt::RunResult>> results = model_->runPipelined(bound);
  check(results.status(), "running the program's micro-batches");
  std::vector<std::vector<Tensor>> out;
  for (const rt::RunResult &result : *results)
    out.push_back(outputsOf(result.outputs));
  return out;
}

Device Program::device() const { return devices_.front(); }

std::string Program::targets() const { return artifact_->targets(); }

std::string Program::variant() const { return model_ ? model_->program().variant() : ""; }

std::string Program::signature() const {
  std::string text;
  for (const rt::Signature &s : artifact_->inputs)
    text += "input " + s.name + ": " + s.type.str() + "\n";
  for (const rt::Signature &s : artifact_->outputs)
    text += "output " + s.name + ": " + s.type.str() + "\n";
  return text;
}

/// The program `target` names: a variant as written ("vulkan:generic"),
/// else the first of an api's; with none, the one the program runs.
const rt::TargetProgram *Program::programFor(const std::string &target) const {
  for (const rt::TargetProgram &p : artifact_->programs)
    if (target.empty() ? (model_ ? &p == &model_->program() : p.target == device().api())
                       : p.variant() == target)
      return &p;
  std::string api = target.substr(0, target.find(':'));
  for (const rt::TargetProgram &p : artifact_->programs)
    if (p.target == api)
      return &p;
  return nullptr;
}

std::string Program::describe(const std::string &target) const {
  if (const rt::TargetProgram *found = programFor(target)) {
    const rt::TargetProgram &p = *found;
    // Then where each input comes from, the weights by name (the CPU's
    // packed filters say so).
    std::string text = p.program->describe();
    for (size_t i = 0; i < p.sources.size(); ++i) {
      const rt::InputSource &source = p.sources[i];
      text += "input " + std::to_string(i) + ": ";
      if (source.weight)
        text += "weight '" + artifact_->weights[source.index].name + "' " +
                artifact_->weights[source.index].type.str() + "\n";
      else
        text += "model input '" + artifact_->inputs[source.index].name + "'\n";
    }
    return text;
  }
  return {};
}

std::string Program::ptx() const {
  std::string text;
  auto dims = [](const std::array<uint32_t, 3> &d) {
    return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
  };
  for (const rt::TargetProgram &p : artifact_->programs)
    for (const rt::ProgramKernel &k : p.program->kernels) {
      if (!k.ptx)
        continue;
      const rt::PtxCode &c = *k.ptx;
      text += "// " + k.name + ": " + k.summary + "\n// entry " + c.entryPoint + ", " + c.config +
              ", sm_" + std::to_string(c.arch) + ", grid " + dims(c.grid) + ", block " +
              dims(c.block) + ", shared " + std::to_string(c.sharedBytes) + ", params";
      for (uint32_t arg : c.bindingOrder)
        text += " arg" + std::to_string(arg);
      for (uint32_t scalar : c.scalars)
        text += " " + std::to_string(scalar);
      text += "\n" + c.source + "\n";
    }
  return text;
}

std::string Program::msl() const {
  std::string text;
  for (const rt::TargetProgram &p : artifact_->programs) {
    if (parseTargetApi(p.target) != TargetApi::metal)
      continue;
    for (const rt::ProgramKernel &k : p.program->kernels) {
      if (!k.msl)
        continue;
      const rt::MslCode &m = *k.msl;
      text += "// " + k.name + ": " + k.summary + "\n// entry " + m.entryPoint +
              ", threadgroup " + std::to_string(m.threadgroup[0]) + "x" +
              std::to_string(m.threadgroup[1]) + "x" + std::to_string(m.threadgroup[2]) +
              ", grid " + std::to_string(m.groups[0]) + "x" + std::to_string(m.groups[1]) +
              "x" + std::to_string(m.groups[2]) + ", buffers";
      for (size_t i = 0; i < m.bindingOrder.size(); ++i)
        text += " " + std::to_string(i) + "=arg" + std::to_string(m.bindingOrder[i]);
      text += "\n" + m.source + "\n";
    }
  }
  return text;
}

//===- ProgramBuilder.cpp - a placed, fused graph function to a Program ---===//

#include "lib/Compiler/ProgramBuilder.h"

#include "lib/Compiler/RuntimeDevices.h"
#include "lib/Target/LLVM/CpuCompiler.h"
#include "lib/Target/LLVM/CpuObject.h"
#include "lib/Target/SPIRV/KernelCompiler.h"
#include "kiln/Compiler/Target.h"
#include "kiln/Errors.h"

#include "kiln/Codegen/KernelConfigAttr.h"
#include "kiln/Codegen/KernelCost.h"
#include "kiln/Codegen/Pipelines.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Placement.h"
#include "kiln/runtime/SpirvInterface.h"
#include "kiln/runtime/Vulkan.h"

#include "llvm/ADT/StringMap.h"

#include <cstring>

using namespace mlir;
using namespace kiln;

namespace {
rt::ElementType elementOf(Type type) {
  if (type.isF16())
    return rt::ElementType::f16;
  if (type.isBF16())
    return rt::ElementType::bf16;
  if (type.isInteger(32))
    return rt::ElementType::i32;
  if (type.isInteger(1))
    return rt::ElementType::i1;
  return rt::ElementType::f32;
}

rt::TensorType programType(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return {std::vector<int64_t>(tensor.getShape().begin(), tensor.getShape().end()),
          elementOf(tensor.getElementType())};
}

/// The recorded graph's constants are splats (full, zeros, scalars): one
/// element's bytes, which the runtime repeats. A pass's constant may hold
/// every element (attention's causal row and column indices): all bytes.
std::string typeText(Type type) {
  std::string text;
  llvm::raw_string_ostream(text) << type;
  return text;
}

std::vector<uint8_t> constantBytes(ConstantOp constant) {
  auto type = cast<RankedTensorType>(constant.getType());
  auto dense = cast<DenseElementsAttr>(constant.getValue());
  Type element = type.getElementType();
  if (!dense.isSplat()) {
    if (!element.isF32() && !element.isF16() && !element.isBF16())
      throw CompileError("constants of type " + typeText(type) + " are not supported yet");
    std::vector<uint8_t> all;
    for (APFloat v : dense.getValues<APFloat>()) {
      uint64_t raw = v.bitcastToAPInt().getZExtValue();
      for (unsigned byte = 0; byte < (element.isF32() ? 4u : 2u); ++byte)
        all.push_back(uint8_t(raw >> (8 * byte)));
    }
    return all;
  }
  if (element.isInteger(1))
    return {uint8_t(dense.getSplatValue<bool>() ? 1 : 0)};
  if (element.isF32()) {
    float v = dense.getSplatValue<float>();
    std::vector<uint8_t> one(4);
    std::memcpy(one.data(), &v, 4);
    return one;
  }
  if (element.isF16() || element.isBF16()) {
    uint16_t raw = static_cast<uint16_t>(
        dense.getSplatValue<APFloat>().bitcastToAPInt().getZExtValue());
    return {uint8_t(raw & 0xFF), uint8_t(raw >> 8)};
  }
  throw CompileError("constants of type " + typeText(type) + " are not supported yet");
}

class ProgramBuilder {
public:
  ProgramBuilder(Session &session, func::FuncOp func, std::vector<rt::TensorType> inputs,
                 std::vector<uint32_t> *constantNodes, const ProgramTarget &target)
      : session(session), func(func), constantNodes(constantNodes),
        cpuObjects(target.cpuObjects), gpuProfile(target.gpuProfile), isWeight(target.isWeight),
        packedWeights(target.packedWeights) {
    program->inputs = std::move(inputs);
  }

  std::shared_ptr<const rt::Program> build() {
    if (cpuObjects && isWeight && packedWeights)
      markWeights();
    for (Operation &op : func.getBody().front()) {
      if (auto input = dyn_cast<InputOp>(op))
        addStep(rt::ProgramStep::Kind::input, op, input.getIndex(), {});
      else if (auto constant = dyn_cast<ConstantOp>(op)) {
        program->constants.push_back(constantBytes(constant));
        if (constantNodes) {
          // A constant a pass made (no node) keeps its compiled value.
          auto node = constant->getAttrOfType<IntegerAttr>("kiln.node");
          constantNodes->push_back(node ? static_cast<uint32_t>(node.getInt())
                                        : kCompiledConstant);
        }
        addStep(rt::ProgramStep::Kind::constant, op, program->constants.size() - 1, {});
      } else if (auto transfer = dyn_cast<TransferOp>(op))
        addStep(rt::ProgramStep::Kind::transfer, op, 0, {transfer.getInput()});
      else if (auto kernel = dyn_cast<KernelOp>(op))
        addStep(rt::ProgramStep::Kind::dispatch, op, addKernel(kernel),
                SmallVector<Value>(kernel.getInputs()));
      else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (Value v : ret.getOperands())
          program->outputs.push_back(ids.at(v));
      } else
        throw CompileError("internal error: unexpected op after fusion: " +
                           op.getName().getStringRef().str());
    }
    keepPtxThatPays(*program);
    program->planBuffers();
    if (!objects.empty())
      linkCpuLibrary();
    return program;
  }

private:
  uint32_t deviceIndex(const std::string &name) {
    auto [it, inserted] = devices.try_emplace(name, program->devices.size());
    if (inserted)
      program->devices.push_back(name);
    return it->second;
  }

  void addStep(rt::ProgramStep::Kind kind, Operation &op, size_t index,
               ArrayRef<Value> operands) {
    rt::ProgramStep step;
    step.kind = kind;
    step.device = deviceIndex(placementOf(&op).getName());
    step.index = static_cast<uint32_t>(index);
    for (Value v : operands)
      step.operands.push_back(ids.at(v));
    for (Value result : op.getResults()) {
      uint32_t id = static_cast<uint32_t>(program->values.size());
      program->values.push_back({programType(result.getType()), step.device});
      ids[result] = id;
      step.results.push_back(id);
    }
    program->steps.push_back(std::move(step));
  }

  /// A CPU kernel whose convolution filter is a weight used nowhere else
  /// gets kWeightFilterAttr: its direct form reads the filter packed once
  /// when the program is compiled instead of repacking it per inference.
  /// Likewise a matmul's B (kWeightMatrixAttr): the GEMM form reads its
  /// panels in place instead of packing them per inference.
  void markWeights() {
    func.walk([&](InputOp input) {
      if (!isWeight(static_cast<uint32_t>(input.getIndex())) || !input->hasOneUse())
        return;
      OpOperand &use = *input->use_begin();
      auto kernel = dyn_cast<KernelOp>(use.getOwner());
      if (!kernel || placementOf(kernel).kind() != TargetApi::cpu)
        return;
      Value arg = kernel.getBody().front().getArgument(use.getOperandNumber());
      for (Operation *user : arg.getUsers())
        if (auto conv = dyn_cast<Conv2dOp>(user); conv && conv.getFilter() == arg)
          kernel->setAttr(kWeightFilterAttr, UnitAttr::get(kernel.getContext()));
      if (std::optional<PackedMatrix> matrix = packedMatrixOf(kernel);
          matrix && matrix->arg == use.getOperandNumber())
        kernel->setAttr(kWeightMatrixAttr, UnitAttr::get(kernel.getContext()));
    });
  }

  /// After `kernel` was built: its filter or B, when its config reads it
  /// packed.
  void notePackedWeight(KernelOp kernel) {
    FailureOr<std::optional<KernelConfig>> config = readKernelConfig(kernel);
    if (failed(config) || !*config)
      throw CompileError("internal error: a CPU kernel built without its config");
    if ((*config)->form == KernelConfig::Form::CpuGemm && (*config)->cpuGemm.packedB) {
      std::optional<PackedMatrix> matrix = packedMatrixOf(kernel);
      auto input = matrix ? kernel.getInputs()[matrix->arg].getDefiningOp<InputOp>() : nullptr;
      if (!input)
        throw CompileError("internal error: a packed matrix that is not a program input");
      packedWeights->push_back({static_cast<uint32_t>(input.getIndex()),
                                (*config)->cpuGemm.panelColumns, matrix});
      return;
    }
    if ((*config)->form != KernelConfig::Form::CpuDirectConv ||
        !(*config)->cpuDirectConv.packedFilter)
      return;
    kernel.getBody().walk([&](Conv2dOp conv) {
      auto arg = dyn_cast<BlockArgument>(conv.getFilter());
      if (!arg)
        return;
      auto input = kernel.getInputs()[arg.getArgNumber()].getDefiningOp<InputOp>();
      if (!input)
        throw CompileError("internal error: a packed filter that is not a program input");
      packedWeights->push_back({static_cast<uint32_t>(input.getIndex()),
                                (*config)->cpuDirectConv.blockChannels(), std::nullopt});
    });
  }

  /// Compiles `kernel` for the device placement gave it.
  size_t addKernel(KernelOp kernel) {
    DeviceAttr device = placementOf(kernel);
    TargetApi api = device.kind();
    rt::ProgramKernel entry;
    entry.name = "kernel " + std::to_string(program->kernels.size()) + " (" + device.getName() + ")";
    entry.elements = cast<RankedTensorType>(kernel.getResult(0).getType()).getNumElements();
    // What it computes, for profiles and listings: "matmul+add+gelu -> [128, 2048] f32".
    for (Operation &op : kernel.getBody().front().without_terminator())
      entry.summary += (entry.summary.empty() ? "" : "+") +
                       op.getName().stripDialect().str();
    entry.summary += " -> " + programType(kernel.getResult(0).getType()).str();
    KernelCost cost = kernelCost(kernel);
    entry.kind = std::move(cost.kind);
    entry.sources = std::move(cost.sources);
    entry.flops = cost.flops;
    entry.bytes = cost.bytes;
    if (entry.elements > 0) {
      if (api == TargetApi::cpu && cpuObjects) {
        auto code = std::make_shared<rt::CpuCode>();
        code->symbol = "kiln_kernel_" + std::to_string(program->kernels.size());
        CpuObjectEmitter::Object object = cpuObjects->emit(session, kernel, code->symbol);
        code->outerIterations = object.outerIterations;
        code->innerIterations = object.innerIterations;
        objects.push_back(std::move(object.bytes));
        entry.cpu = std::move(code);
        if (packedWeights &&
            (kernel->hasAttr(kWeightFilterAttr) || kernel->hasAttr(kWeightMatrixAttr)))
          notePackedWeight(kernel);
      } else if (api == TargetApi::cpu) {
        entry.cpu = cpuCodeOf(compileCpuKernel(session, kernel));
      } else {
        const rt::AdapterInfo &adapter =
            gpuProfile ? *gpuProfile : vulkanDeviceOf(device).adapter();
        const CompiledKernel &compiled = compileKernel(session, kernel, adapter);
        entry.spirv = spirvCodeOf(compiled);
        entry.ptx = compiled.ptx;
      }
    }
    program->kernels.push_back(std::move(entry));
    return program->kernels.size() - 1;
  }

  /// One shared object of every kernel's object, loaded here when this CPU
  /// can run it (kept unloaded for a file made for another ISA level).
  void linkCpuLibrary() {
    rt::CpuLibrary::Description library;
    library.isa = cpuObjects->isaName();
    library.features = cpuObjects->requiredFeatures();
    library.bytes = linkSharedObject(objects);
    library.hash = rt::libraryHash(library.bytes.data(), library.bytes.size());
    if (!rt::CpuLibrary::checkCpu(library, "").isOk()) {
      program->cpuLibrary = rt::CpuLibrary::unloaded(std::move(library));
      return;
    }
    rt::StatusOr<std::shared_ptr<rt::CpuLibrary>> loaded =
        rt::CpuLibrary::load(std::move(library), "the linked CPU kernels");
    if (!loaded.isOk())
      throw CompileError(loaded.status().message());
    program->cpuLibrary = *loaded;
    for (rt::ProgramKernel &kernel : program->kernels)
      if (kernel.cpu) {
        auto code = std::const_pointer_cast<rt::CpuCode>(kernel.cpu);
        code->fn = program->cpuLibrary->lookup(code->symbol);
        code->owner = program->cpuLibrary;
        if (!code->fn)
          throw CompileError("internal error: the linked CPU code lacks " + code->symbol);
      }
  }

  Session &session;
  func::FuncOp func;
  std::vector<uint32_t> *constantNodes;
  CpuObjectEmitter *cpuObjects;
  const rt::AdapterInfo *gpuProfile;
  std::function<bool(uint32_t)> isWeight;
  std::vector<PackedWeight> *packedWeights;
  std::vector<std::vector<uint8_t>> objects;
  std::shared_ptr<rt::Program> program = std::make_shared<rt::Program>();
  llvm::DenseMap<Value, uint32_t> ids;
  llvm::StringMap<uint32_t> devices;
};
} // namespace

void kiln::keepPtxThatPays(rt::Program &program) {
  // On the H200 a hand-over between CUDA and Vulkan work cost 0.1-0.2 ms
  // (host-ordered, and the GPU switches contexts), while PTX saved 0.21 ms
  // of 0.42 at 4096^3 and 0.03 of 0.06 at 2048^3 (bench/RESULTS.md): among
  // SPIR-V kernels a GEMM keeps its PTX from 2 * 4096^3 FLOPs on.
  constexpr uint64_t kFlopsAmongSpirv = uint64_t(2) * 4096 * 4096 * 4096;
  std::vector<bool> spirvOnly(program.devices.size(), false);
  for (const rt::ProgramStep &step : program.steps)
    if (step.kind == rt::ProgramStep::Kind::dispatch) {
      const rt::ProgramKernel &kernel = program.kernels[step.index];
      if (kernel.elements > 0 && kernel.spirv && !kernel.ptx)
        spirvOnly[step.device] = true;
    }
  for (const rt::ProgramStep &step : program.steps)
    if (step.kind == rt::ProgramStep::Kind::dispatch && spirvOnly[step.device]) {
      rt::ProgramKernel &kernel = program.kernels[step.index];
      if (kernel.ptx && kernel.flops < kFlopsAmongSpirv)
        kernel.ptx.reset();
    }
}

std::shared_ptr<rt::SpirvCode> kiln::spirvCodeOf(const CompiledKernel &compiled) {
  auto code = std::make_shared<rt::SpirvCode>();
  code->hash = compiled.hash;
  code->words = compiled.spirv;
  code->entryPoint = compiled.entryPoint;
  code->bindingOrder = compiled.bindingOrder;
  code->groups = {compiled.groups[0], compiled.groups[1], compiled.groups[2]};
  // Its assumptions, read from the module by the loader's own reader.
  rt::StatusOr<rt::SpirvInterface> interface = rt::readSpirvInterface(code->words);
  if (!interface.isOk())
    throw CompileError("generated SPIR-V has an unreadable interface (a Kiln bug): " +
                       interface.status().message());
  code->subgroupSize = interface->usesSubgroups ? compiled.subgroupSize : 0;
  code->workgroupSize = interface->workgroupSize;
  code->sharedBytes = static_cast<uint32_t>(interface->sharedBytes);
  return code;
}

std::shared_ptr<rt::CpuCode> kiln::cpuCodeOf(const CompiledCpuKernel &compiled) {
  auto code = std::make_shared<rt::CpuCode>();
  code->fn = compiled.fn;
  code->owner = compiled.owner;
  code->outerIterations = compiled.outerIterations;
  code->innerIterations = compiled.innerIterations;
  return code;
}

std::vector<rt::TensorType> kiln::inputTypesOf(func::FuncOp func) {
  std::vector<rt::TensorType> inputs;
  func.walk([&](InputOp input) {
    if (input.getIndex() >= inputs.size())
      inputs.resize(input.getIndex() + 1);
    inputs[input.getIndex()] = programType(input.getType());
  });
  return inputs;
}

rt::TensorType kiln::programTypeOf(Type type) { return programType(type); }

std::shared_ptr<const rt::Program> kiln::buildProgram(Session &session, func::FuncOp func,
                                                      std::vector<rt::TensorType> inputs,
                                                      std::vector<uint32_t> *constantNodes,
                                                      const ProgramTarget &target) {
  return ProgramBuilder(session, func, std::move(inputs), constantNodes, target).build();
}

std::shared_ptr<const rt::Program> kiln::compileProgram(Session &session, func::FuncOp func,
                                                        const ProgramTarget &target) {
  return buildProgram(session, func, inputTypesOf(func), nullptr, target);
}

//===- Artifact.cpp - the .kiln file: write, load in layers, run ----------===//

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/DeviceName.h"

#include "kiln/runtime/Vulkan.h"

#include "kiln/runtime/Sha256.h"
#include "kiln/runtime/SpirvInterface.h"

#include "FileIO.h"
#include "SpirvCheck.h"
#include "kiln_generated.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

using namespace kiln::rt;
namespace fbs = kiln::fb;

namespace {
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

Offset<fbs::TensorType> writeType(FlatBufferBuilder &b, const TensorType &type) {
  return fbs::CreateTensorType(b, b.CreateVector(type.shape),
                               static_cast<fbs::ElementType>(type.element));
}

StatusOr<Offset<fbs::Program>> writeProgram(FlatBufferBuilder &b, const TargetProgram &target) {
  const Program &p = *target.program;
  std::vector<Offset<flatbuffers::String>> devices;
  for (const std::string &d : p.devices)
    devices.push_back(b.CreateString(d));
  std::vector<Offset<fbs::TensorType>> inputs;
  for (const TensorType &t : p.inputs)
    inputs.push_back(writeType(b, t));
  std::vector<Offset<fbs::InputSource>> sources;
  for (const InputSource &s : target.sources)
    sources.push_back(fbs::CreateInputSource(b, s.weight, s.index));
  std::vector<Offset<fbs::Value>> values;
  for (const ProgramValue &v : p.values)
    values.push_back(fbs::CreateValue(b, writeType(b, v.type), v.device, v.slot));
  std::vector<Offset<fbs::Step>> steps;
  for (const ProgramStep &s : p.steps)
    steps.push_back(fbs::CreateStep(b, static_cast<fbs::StepKind>(s.kind), s.device, s.index,
                                    b.CreateVector(s.operands), b.CreateVector(s.results)));
  std::vector<Offset<fbs::Constant>> constants;
  for (const std::vector<uint8_t> &c : p.constants)
    constants.push_back(fbs::CreateConstant(b, b.CreateVector(c)));
  std::vector<Offset<fbs::Kernel>> kernels;
  for (const ProgramKernel &k : p.kernels) {
    Offset<fbs::CpuCode> cpu = 0;
    if (k.cpu) {
      if (k.cpu->symbol.empty() || !p.cpuLibrary)
        return Status::invalidArgument(
            k.name + " is CPU machine code from the JIT, which a .kiln file cannot hold: "
                     "make the program with kiln::compile (it emits a shared object)");
      cpu = fbs::CreateCpuCode(b, b.CreateString(k.cpu->symbol), k.cpu->outerIterations,
                               k.cpu->innerIterations);
    }
    Offset<fbs::SpirvCode> spirv = 0;
    if (k.spirv) {
      const SpirvCode &code = *k.spirv;
      fbs::Groups groups(code.groups[0], code.groups[1], code.groups[2]);
      fbs::Groups workgroup(code.workgroupSize[0], code.workgroupSize[1], code.workgroupSize[2]);
      spirv = fbs::CreateSpirvCode(
          b, spirvHash(code.words, code.entryPoint, code.subgroupSize),
          b.CreateVector(code.words), b.CreateString(code.entryPoint),
          b.CreateVector(code.bindingOrder), &groups, code.subgroupSize, &workgroup,
          code.sharedBytes);
    }
    Offset<fbs::MslCode> msl = 0;
    if (k.msl) {
      fbs::Groups threadgroup(k.msl->threadgroup[0], k.msl->threadgroup[1],
                              k.msl->threadgroup[2]);
      fbs::Groups groups(k.msl->groups[0], k.msl->groups[1], k.msl->groups[2]);
      msl = fbs::CreateMslCode(b, b.CreateString(k.msl->source),
                               b.CreateString(k.msl->entryPoint),
                               b.CreateVector(k.msl->bindingOrder), &threadgroup, &groups);
    }
    Offset<fbs::PtxCode> ptx = 0;
    if (k.ptx) {
      fbs::Groups grid(k.ptx->grid[0], k.ptx->grid[1], k.ptx->grid[2]);
      fbs::Groups block(k.ptx->block[0], k.ptx->block[1], k.ptx->block[2]);
      ptx = fbs::CreatePtxCode(b, k.ptx->hash, b.CreateString(k.ptx->source),
                               b.CreateString(k.ptx->entryPoint), k.ptx->arch,
                               b.CreateVector(k.ptx->bindingOrder),
                               b.CreateVector(k.ptx->scalars), &grid, &block,
                               k.ptx->sharedBytes, b.CreateString(k.ptx->config),
                               b.CreateVector(k.ptx->minBytes));
    }
    kernels.push_back(fbs::CreateKernel(b, b.CreateString(k.name), k.elements, spirv, cpu,
                                        b.CreateString(k.summary), msl, b.CreateString(k.kind),
                                        b.CreateString(k.sources), k.flops, k.bytes, ptx));
  }
  Offset<fbs::CpuLibrary> library = 0;
  if (p.cpuLibrary) {
    const CpuLibrary::Description &d = p.cpuLibrary->description();
    std::vector<Offset<flatbuffers::String>> features;
    for (const std::string &f : d.features)
      features.push_back(b.CreateString(f));
    auto isa = b.CreateString(d.isa);
    auto featureList = b.CreateVector(features);
    b.ForceVectorAlignment(d.bytes.size(), 1, 16);
    auto bytes = b.CreateVector(d.bytes);
    library = fbs::CreateCpuLibrary(b, isa, featureList, d.hash, bytes);
  }
  std::vector<Offset<fbs::Slot>> slots;
  for (const ProgramSlot &s : p.slots)
    slots.push_back(fbs::CreateSlot(b, s.device, s.bytes));
  auto profile = b.CreateString(target.profile);
  return fbs::CreateProgram(b, b.CreateString(target.target), b.CreateVector(devices),
                            b.CreateVector(inputs), b.CreateVector(sources),
                            b.CreateVector(p.outputs), b.CreateVector(values),
                            b.CreateVector(steps), b.CreateVector(constants),
                            b.CreateVector(kernels), b.CreateVector(slots), p.peakBytes,
                            p.unplannedBytes, library, profile);
}

std::vector<Offset<fbs::Signature>> writeSignatures(FlatBufferBuilder &b,
                                                    const std::vector<Signature> &list) {
  std::vector<Offset<fbs::Signature>> out;
  for (const Signature &s : list) {
    Offset<fbs::ValueRange> range;
    if (s.range)
      range = fbs::CreateValueRange(b, s.range->low, s.range->high, b.CreateString(s.range->use));
    out.push_back(fbs::CreateSignature(b, b.CreateString(s.name), writeType(b, s.type), range));
  }
  return out;
}

/// Reads with every meaning check; `at` says where in errors.
class Reader {
public:
  explicit Reader(std::string what) : what(std::move(what)) {}

  Status fail(const std::string &at, const std::string &problem) const {
    return Status::invalidArgument(what + ": " + at + ": " + problem +
                                   " (the file is corrupt or was not written by Kiln: "
                                   "compile the model again)");
  }

  Status type(const fbs::TensorType *in, const std::string &at, TensorType &out) const {
    if (!in)
      return fail(at, "no tensor type");
    if (in->element() > fbs::ElementType_MAX)
      return fail(at, "unknown element type " + std::to_string(int(in->element())));
    out.element = static_cast<ElementType>(in->element());
    out.shape.clear();
    uint64_t total = 1;
    if (in->shape())
      for (int64_t d : *in->shape()) {
        if (d < 0)
          return fail(at, "negative dimension " + std::to_string(d));
        if (d && __builtin_mul_overflow(total, uint64_t(d), &total))
          return fail(at, "a shape whose size overflows");
        out.shape.push_back(d);
      }
    if (total > (uint64_t(1) << 40))
      return fail(at, "a tensor of more than 2^40 elements");
    return Status::ok();
  }

  Status signatures(const flatbuffers::Vector<Offset<fbs::Signature>> *in, const char *kind,
                    std::vector<Signature> &out) const {
    if (!in)
      return fail(kind, "missing");
    for (size_t i = 0; i < in->size(); ++i) {
      const fbs::Signature *s = in->Get(i);
      Signature sig;
      sig.name = s->name() ? s->name()->str() : "";
      if (Status st = type(s->type(), std::string(kind) + " " + std::to_string(i), sig.type);
          !st.isOk())
        return st;
      if (const fbs::ValueRange *r = s->range()) {
        if (sig.type.element != ElementType::i32 || r->low() >= r->high())
          return fail(kind, std::to_string(i) + " has a value range that is not an integer "
                                                "interval of an i32 input");
        sig.range = ValueRange{r->low(), r->high(), r->use() ? r->use()->str() : ""};
      }
      out.push_back(std::move(sig));
    }
    return Status::ok();
  }

  Status program(const fbs::Program *in, size_t index, const Artifact &artifact,
                 TargetProgram &out) const;

private:
  std::string what;
};

template <typename T> std::vector<T> vec(const flatbuffers::Vector<T> *v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>();
}

/// Why `count` groups of `size` threads (a "threadgroup", a "block") are
/// no launch a GPU takes; empty when they are.
std::string launchProblem(const std::array<uint32_t, 3> &size, const std::array<uint32_t, 3> &count,
                          const char *group) {
  uint64_t threads = 1;
  for (int d = 0; d < 3; ++d) {
    if (size[d] == 0 || count[d] == 0)
      return std::string("a zero ") + group + " size or count";
    threads *= size[d];
  }
  if (threads > 1024)
    return std::string("a ") + group + " of " + std::to_string(threads) + " threads";
  return "";
}

/// A kernel's SPIR-V: framed, with its entry point, its hash, and a record
/// of its assumptions that agrees with its module. `bindingBytes` gets the
/// bytes each binding's type declares.
StatusOr<std::shared_ptr<SpirvCode>> readSpirv(const fbs::SpirvCode &code,
                                               std::vector<uint64_t> &bindingBytes) {
  auto spirv = std::make_shared<SpirvCode>();
  spirv->words = vec(code.words());
  spirv->entryPoint = code.entry_point() ? code.entry_point()->str() : "";
  spirv->bindingOrder = vec(code.binding_order());
  spirv->subgroupSize = code.subgroup_size();
  spirv->sharedBytes = code.shared_bytes();
  if (!code.groups() || !code.workgroup())
    return Status::invalidArgument("no workgroup counts or size");
  spirv->groups = {code.groups()->x(), code.groups()->y(), code.groups()->z()};
  spirv->workgroupSize = {code.workgroup()->x(), code.workgroup()->y(), code.workgroup()->z()};
  for (uint32_t g : spirv->groups)
    if (g == 0 || g > 65535)
      return Status::invalidArgument("a workgroup count of " + std::to_string(g));
  if (Status s = checkSpirv(spirv->words, spirv->entryPoint); !s.isOk())
    return Status::invalidArgument("its SPIR-V is malformed: " + s.message());
  spirv->hash = spirvHash(spirv->words, spirv->entryPoint, spirv->subgroupSize);
  if (spirv->hash != code.hash())
    return Status::invalidArgument("its SPIR-V, entry point or subgroup size differ from "
                                   "what was hashed when it was compiled");
  StatusOr<SpirvInterface> interface = readSpirvInterface(spirv->words);
  if (!interface.isOk())
    return interface.status();
  if (interface->workgroupSize != spirv->workgroupSize)
    return Status::invalidArgument("its recorded workgroup size differs from its module's");
  if (interface->sharedBytes != spirv->sharedBytes)
    return Status::invalidArgument("its recorded workgroup memory (" +
                                   std::to_string(spirv->sharedBytes) +
                                   " bytes) differs from its module's (" +
                                   std::to_string(interface->sharedBytes) + ")");
  uint32_t subgroup = spirv->subgroupSize;
  if (interface->usesSubgroups && subgroup == 0)
    return Status::invalidArgument("it uses subgroup operations but records no subgroup size");
  if (subgroup && (subgroup > 128 || (subgroup & (subgroup - 1))))
    return Status::invalidArgument("a subgroup size of " + std::to_string(subgroup));
  if (interface->bindingBytes.size() > spirv->bindingOrder.size())
    return Status::invalidArgument("its module declares " +
                                   std::to_string(interface->bindingBytes.size()) +
                                   " bindings; the kernel binds " +
                                   std::to_string(spirv->bindingOrder.size()));
  bindingBytes = std::move(interface->bindingBytes);
  return spirv;
}

/// A kernel's PTX, checked as far as the runtime can without CUDA (the
/// driver compiles the source when the kernel is prepared).
StatusOr<std::shared_ptr<PtxCode>> readPtx(const fbs::PtxCode &code) {
  auto ptx = std::make_shared<PtxCode>();
  ptx->hash = code.hash();
  ptx->source = code.source() ? code.source()->str() : "";
  ptx->entryPoint = code.entry_point() ? code.entry_point()->str() : "";
  ptx->arch = code.arch();
  ptx->bindingOrder = vec(code.binding_order());
  ptx->scalars = vec(code.scalars());
  ptx->sharedBytes = code.shared_bytes();
  ptx->config = code.config() ? code.config()->str() : "";
  ptx->minBytes = vec(code.min_bytes());
  if (ptx->source.empty() || ptx->entryPoint.empty() || !code.grid() || !code.block())
    return Status::invalidArgument("PTX without source, entry point or sizes");
  if (ptx->minBytes.size() != ptx->bindingOrder.size())
    return Status::invalidArgument("PTX without the bytes of each of its buffers");
  if (ptx->source.find('\0') != std::string::npos)
    return Status::invalidArgument("PTX with a NUL byte in its source");
  ptx->grid = {code.grid()->x(), code.grid()->y(), code.grid()->z()};
  ptx->block = {code.block()->x(), code.block()->y(), code.block()->z()};
  if (std::string problem = launchProblem(ptx->block, ptx->grid, "block"); !problem.empty())
    return Status::invalidArgument("PTX with " + problem);
  return ptx;
}

/// A dispatch of `code` over the step's values: each buffer at least as
/// large as its binding's type declares (a kernel never reads or writes
/// past a buffer), and no more workgroups than the largest buffer has
/// 4-byte words, plus 65536 (every kernel Kiln makes has fewer; a crafted
/// count of billions would hold the GPU for minutes).
Status checkDispatch(const SpirvCode &code, const std::vector<uint64_t> &declared,
                     const ProgramStep &step, const std::vector<ProgramValue> &values) {
  uint64_t largest = 0;
  for (size_t i = 0; i < code.bindingOrder.size(); ++i) {
    uint32_t arg = code.bindingOrder[i];
    uint32_t value = arg < step.operands.size() ? step.operands[arg]
                                                : step.results[arg - step.operands.size()];
    uint64_t bytes = values[value].type.bytes();
    largest = std::max(largest, bytes);
    if (i < declared.size() && declared[i] > bytes)
      return Status::invalidArgument("reads " + std::to_string(declared[i]) +
                                     " bytes at binding " + std::to_string(i) + ", bound to %" +
                                     std::to_string(value) + " of " + std::to_string(bytes));
  }
  uint64_t groups = uint64_t(code.groups[0]) * code.groups[1] * code.groups[2];
  if (groups > largest / 4 + 65536)
    return Status::invalidArgument("launches " + std::to_string(groups) +
                                   " workgroups over buffers of at most " +
                                   std::to_string(largest) + " bytes");
  return Status::ok();
}

bool sameType(const TensorType &a, const TensorType &b) {
  return a.element == b.element && a.shape == b.shape;
}

Status Reader::program(const fbs::Program *in, size_t index, const Artifact &artifact,
                       TargetProgram &out) const {
  std::string at = "program " + std::to_string(index);
  auto p = std::make_shared<Program>();
  out.target = in->target() ? in->target()->str() : "";
  out.profile = in->profile() ? in->profile()->str() : "";
  if (out.target != "vulkan" && out.target != "cpu" && out.target != "metal")
    return fail(at, "unknown target '" + out.target + "'");
  if (!in->devices() || in->devices()->size() == 0)
    return fail(at, "no devices");
  for (const flatbuffers::String *d : *in->devices())
    p->devices.push_back(d->str());
  uint32_t numDevices = static_cast<uint32_t>(p->devices.size());
  if (in->inputs())
    for (size_t i = 0; i < in->inputs()->size(); ++i) {
      TensorType t;
      if (Status s = type(in->inputs()->Get(i), at + " input " + std::to_string(i), t); !s.isOk())
        return s;
      p->inputs.push_back(std::move(t));
    }
  // Where each input comes from, its type checked against the source.
  if (!in->input_sources() || in->input_sources()->size() != p->inputs.size())
    return fail(at, "input sources do not match its inputs");
  for (size_t i = 0; i < p->inputs.size(); ++i) {
    const fbs::InputSource *src = in->input_sources()->Get(i);
    InputSource source{src->weight(), src->index()};
    const TensorType *expected = nullptr;
    if (source.weight && source.index < artifact.weights.size())
      expected = &artifact.weights[source.index].type;
    else if (!source.weight && source.index < artifact.inputs.size())
      expected = &artifact.inputs[source.index].type;
    if (!expected)
      return fail(at, "input " + std::to_string(i) + " comes from a " +
                          (source.weight ? "weight" : "model input") + " that does not exist");
    if (!sameType(*expected, p->inputs[i]))
      return fail(at, "input " + std::to_string(i) + " differs from its source's type");
    out.sources.push_back(source);
  }
  if (in->slots())
    for (const fbs::Slot *s : *in->slots()) {
      if (s->device() >= numDevices)
        return fail(at, "a buffer slot on device " + std::to_string(s->device()) +
                            " of " + std::to_string(numDevices));
      p->slots.push_back({s->device(), s->bytes()});
    }
  if (!in->values())
    return fail(at, "no values");
  for (size_t i = 0; i < in->values()->size(); ++i) {
    const fbs::Value *v = in->values()->Get(i);
    ProgramValue value;
    std::string vat = at + " value %" + std::to_string(i);
    if (Status s = type(v->type(), vat, value.type); !s.isOk())
      return s;
    value.device = v->device();
    value.slot = v->slot();
    if (value.device >= numDevices)
      return fail(vat, "device index out of range");
    if (value.slot != ProgramValue::kNoSlot) {
      if (value.slot >= p->slots.size())
        return fail(vat, "slot index out of range");
      const ProgramSlot &slot = p->slots[value.slot];
      if (slot.device != value.device || slot.bytes < value.type.bytes())
        return fail(vat, "its buffer slot is on another device or too small");
    }
    p->values.push_back(std::move(value));
  }
  uint32_t numValues = static_cast<uint32_t>(p->values.size());
  if (in->constants())
    for (const fbs::Constant *c : *in->constants())
      p->constants.push_back(vec(c->bytes()));
  // Per kernel, the bytes its SPIR-V declares for each binding.
  std::vector<std::vector<uint64_t>> bindingBytes(in->kernels() ? in->kernels()->size() : 0);
  if (in->kernels())
    for (size_t i = 0; i < in->kernels()->size(); ++i) {
      const fbs::Kernel *k = in->kernels()->Get(i);
      ProgramKernel kernel;
      kernel.name = k->name() ? k->name()->str() : "kernel " + std::to_string(i);
      kernel.elements = k->elements();
      kernel.summary = k->summary() ? k->summary()->str() : "";
      kernel.kind = k->kind() ? k->kind()->str() : "";
      kernel.sources = k->sources() ? k->sources()->str() : "";
      kernel.flops = k->flops();
      kernel.bytes = k->bytes();
      std::string kat = at + " " + kernel.name;
      if (kernel.elements < 0)
        return fail(kat, "a negative element count");
      if (const fbs::SpirvCode *code = k->spirv()) {
        StatusOr<std::shared_ptr<SpirvCode>> spirv = readSpirv(*code, bindingBytes[i]);
        if (!spirv.isOk())
          return fail(kat, spirv.status().message());
        kernel.spirv = std::move(*spirv);
        if (const fbs::PtxCode *code = k->ptx()) {
          StatusOr<std::shared_ptr<PtxCode>> ptx = readPtx(*code);
          if (!ptx.isOk())
            return fail(kat, ptx.status().message());
          kernel.ptx = std::move(*ptx);
        }
      } else if (const fbs::MslCode *code = k->msl()) {
        auto msl = std::make_shared<MslCode>();
        msl->source = code->source() ? code->source()->str() : "";
        msl->entryPoint = code->entry_point() ? code->entry_point()->str() : "";
        msl->bindingOrder = vec(code->binding_order());
        if (!code->threadgroup() || !code->groups() || msl->source.empty() ||
            msl->entryPoint.empty())
          return fail(kat, "MSL without source, entry point or sizes");
        msl->threadgroup = {code->threadgroup()->x(), code->threadgroup()->y(),
                            code->threadgroup()->z()};
        msl->groups = {code->groups()->x(), code->groups()->y(), code->groups()->z()};
        if (std::string problem = launchProblem(msl->threadgroup, msl->groups, "threadgroup");
            !problem.empty())
          return fail(kat, problem);
        kernel.msl = std::move(msl);
      } else if (const fbs::CpuCode *code = k->cpu()) {
        auto cpu = std::make_shared<CpuCode>();
        cpu->symbol = code->symbol() ? code->symbol()->str() : "";
        cpu->outerIterations = code->outer_iterations();
        cpu->innerIterations = code->inner_iterations();
        if (cpu->symbol.empty() || !in->cpu_library())
          return fail(kat, "CPU code without a symbol or a library");
        if (cpu->outerIterations < 0 || cpu->innerIterations < 1)
          return fail(kat, "a negative loop count");
        kernel.cpu = std::move(cpu);
      } else if (kernel.elements > 0) {
        return fail(kat, "no code for target " + out.target);
      }
      p->kernels.push_back(std::move(kernel));
    }
  // Steps: every value defined once, before any use.
  std::vector<bool> defined(numValues, false);
  if (!in->steps())
    return fail(at, "no steps");
  for (size_t i = 0; i < in->steps()->size(); ++i) {
    const fbs::Step *s = in->steps()->Get(i);
    std::string sat = at + " step " + std::to_string(i);
    if (s->kind() > fbs::StepKind_MAX)
      return fail(sat, "unknown kind");
    ProgramStep step;
    step.kind = static_cast<ProgramStep::Kind>(s->kind());
    step.device = s->device();
    step.index = s->index();
    step.operands = vec(s->operands());
    step.results = vec(s->results());
    if (step.device >= numDevices)
      return fail(sat, "device index out of range");
    for (uint32_t v : step.operands)
      if (v >= numValues || !defined[v])
        return fail(sat, "reads %" + std::to_string(v) + " before it is defined");
    for (uint32_t v : step.results) {
      if (v >= numValues || defined[v])
        return fail(sat, "defines %" + std::to_string(v) + " twice or out of range");
      if (p->values[v].device != step.device)
        return fail(sat, "a result on another device");
      defined[v] = true;
    }
    auto shape = [&](size_t operands, size_t results) {
      return step.operands.size() == operands && step.results.size() == results;
    };
    switch (step.kind) {
    case ProgramStep::Kind::input:
      if (!shape(0, 1) || step.index >= p->inputs.size() ||
          !sameType(p->inputs[step.index], p->values[step.results[0]].type))
        return fail(sat, "an input step that does not match the program's inputs");
      break;
    case ProgramStep::Kind::constant:
      // One element's bytes (a splat) or every element's (a pass's
      // constant, such as attention's causal row and column indices).
      if (!shape(0, 1) || step.index >= p->constants.size() ||
          (p->constants[step.index].size() !=
               elementBytes(p->values[step.results[0]].type.element) &&
           p->constants[step.index].size() != p->values[step.results[0]].type.bytes()))
        return fail(sat, "a constant that does not match its value");
      break;
    case ProgramStep::Kind::transfer:
      if (!shape(1, 1) ||
          !sameType(p->values[step.operands[0]].type, p->values[step.results[0]].type))
        return fail(sat, "a transfer that changes its value's type");
      break;
    case ProgramStep::Kind::dispatch: {
      if (step.index >= p->kernels.size() || step.results.empty())
        return fail(sat, "a dispatch of a kernel that does not exist");
      const ProgramKernel &kernel = p->kernels[step.index];
      const std::vector<uint32_t> *order = kernel.spirv ? &kernel.spirv->bindingOrder
                                           : kernel.msl ? &kernel.msl->bindingOrder
                                                        : nullptr;
      // The bindings (and the PTX's pointers) are a permutation of the
      // step's arguments.
      for (const std::vector<uint32_t> *binds :
           {order, kernel.ptx ? &kernel.ptx->bindingOrder : nullptr}) {
        if (!binds)
          continue;
        size_t args = step.operands.size() + step.results.size();
        std::set<uint32_t> seen(binds->begin(), binds->end());
        if (binds->size() != args || seen.size() != args ||
            (!seen.empty() && *seen.rbegin() >= args))
          return fail(sat, kernel.name + " binds " + std::to_string(binds->size()) +
                               " buffers; the step passes " + std::to_string(args));
      }
      if (kernel.spirv)
        if (Status s = checkDispatch(*kernel.spirv, bindingBytes[step.index], step, p->values);
            !s.isOk())
          return fail(sat, kernel.name + " " + s.message());
      break;
    }
    }
    p->steps.push_back(std::move(step));
  }
  p->outputs = vec(in->outputs());
  if (p->outputs.size() != artifact.outputs.size())
    return fail(at, "returns " + std::to_string(p->outputs.size()) + " values; the model has " +
                        std::to_string(artifact.outputs.size()) + " outputs");
  for (size_t i = 0; i < p->outputs.size(); ++i) {
    uint32_t v = p->outputs[i];
    if (v >= numValues || !defined[v] || !sameType(p->values[v].type, artifact.outputs[i].type))
      return fail(at, "output " + std::to_string(i) + " does not match the signature");
  }
  p->peakBytes = in->peak_bytes();
  p->unplannedBytes = in->unplanned_bytes();
  // Last, once everything else holds: the CPU code is loaded and every
  // kernel's symbol looked up in it.
  if (const fbs::CpuLibrary *lib = in->cpu_library()) {
    CpuLibrary::Description d;
    d.isa = lib->isa() ? lib->isa()->str() : "";
    if (lib->features())
      for (const flatbuffers::String *f : *lib->features())
        d.features.push_back(f->str());
    d.hash = lib->hash();
    d.bytes = vec(lib->bytes());
    if (Status s = CpuLibrary::checkBytes(d, what); !s.isOk())
      return s;
    // Code for another CPU is kept, not loaded: the file's other targets
    // still run here, and running this one says what the CPU lacks.
    if (!CpuLibrary::checkCpu(d, what).isOk()) {
      p->cpuLibrary = CpuLibrary::unloaded(std::move(d));
    } else {
      StatusOr<std::shared_ptr<CpuLibrary>> loaded = CpuLibrary::load(std::move(d), what);
      if (!loaded.isOk())
        return loaded.status();
      p->cpuLibrary = *loaded;
    }
    for (size_t i = 0; i < p->kernels.size(); ++i) {
      ProgramKernel &kernel = p->kernels[i];
      if (!kernel.cpu)
        continue;
      auto cpu = std::const_pointer_cast<CpuCode>(kernel.cpu);
      cpu->owner = p->cpuLibrary;
      if (!p->cpuLibrary->loaded())
        continue;
      std::string kat = at + " " + kernel.name;
      cpu->fn = p->cpuLibrary->lookup(cpu->symbol);
      if (!cpu->fn)
        return fail(kat, "its CPU code has no symbol '" + cpu->symbol + "'");
      // The metadata against what the code was compiled for: a loop count
      // or argument count the code does not expect would run it out of
      // its buffers.
      std::optional<int64_t> outer =
          p->cpuLibrary->lookupValue(cpu->symbol + kCpuOuterIterationsSuffix);
      std::optional<int64_t> args = p->cpuLibrary->lookupValue(cpu->symbol + kCpuArgumentsSuffix);
      if (!outer || *outer != cpu->outerIterations)
        return fail(kat, "its loop count " + std::to_string(cpu->outerIterations) +
                             " differs from its code's");
      for (const ProgramStep &step : p->steps)
        if (step.kind == ProgramStep::Kind::dispatch && step.index == i &&
            (!args || size_t(*args) != step.operands.size() + step.results.size()))
          return fail(kat, "its code takes " + (args ? std::to_string(*args) : "?") +
                               " arguments; a step passes " +
                               std::to_string(step.operands.size() + step.results.size()));
    }
  }
  out.program = std::move(p);
  return Status::ok();
}
} // namespace

std::string Artifact::targets() const {
  std::string text;
  for (const TargetProgram &p : programs)
    text += (text.empty() ? "" : ", ") + p.variant();
  return text.empty() ? "none" : text;
}

StatusOr<std::vector<uint8_t>> kiln::rt::serializeArtifact(const Artifact &artifact) {
  FlatBufferBuilder b(1 << 16);
  std::vector<Offset<fbs::Program>> programs;
  for (const TargetProgram &p : artifact.programs) {
    StatusOr<Offset<fbs::Program>> written = writeProgram(b, p);
    if (!written.isOk())
      return written.status();
    programs.push_back(*written);
  }
  std::vector<Offset<fbs::Weight>> weights;
  for (const Weight &w : artifact.weights) {
    // FlatBuffers aligns to at most FLATBUFFERS_MAX_ALIGNMENT (32 bytes):
    // enough for the widest vector loads when the file is mapped.
    b.ForceVectorAlignment(w.data.size(), 1, FLATBUFFERS_MAX_ALIGNMENT);
    auto data = b.CreateVector(w.data.data(), w.data.size());
    weights.push_back(fbs::CreateWeight(b, b.CreateString(w.name), writeType(b, w.type), data));
  }
  auto inputs = writeSignatures(b, artifact.inputs);
  auto outputs = writeSignatures(b, artifact.outputs);
  b.Finish(fbs::CreateArtifact(b, Artifact::kVersionMajor, Artifact::kVersionMinor,
                               b.CreateVector(inputs), b.CreateVector(outputs),
                               b.CreateVector(programs), b.CreateVector(weights)),
           fbs::ArtifactIdentifier());
  std::vector<uint8_t> bytes(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  sealArtifact(bytes);
  return bytes;
}

void kiln::rt::sealArtifact(std::vector<uint8_t> &bytes) {
  uint64_t body = bytes.size();
  Sha256Digest digest = sha256(bytes.data(), bytes.size());
  bytes.insert(bytes.end(), digest.begin(), digest.end());
  for (int i = 0; i < 8; ++i)
    bytes.push_back(uint8_t(body >> (8 * i)));
  bytes.insert(bytes.end(), kSealMagic, kSealMagic + 8);
}

StatusOr<size_t> kiln::rt::checkSeal(const uint8_t *data, size_t size, const std::string &what) {
  const std::string advice = ": compile the model again, or copy the file again if it was "
                             "copied or downloaded";
  if (size < kSealBytes || std::memcmp(data + size - 8, kSealMagic, 8) != 0)
    return Status::invalidArgument(
        what + ": the file is truncated, damaged, or older than format 0.4, which added the seal "
               "(its SHA-256 seal is missing from the end)" +
        advice);
  uint64_t body = 0;
  for (int i = 0; i < 8; ++i)
    body |= uint64_t(data[size - 16 + i]) << (8 * i);
  if (body != size - kSealBytes)
    return Status::invalidArgument(what + ": the file is " + std::to_string(size) +
                                   " bytes; its seal says " +
                                   std::to_string(body + kSealBytes) +
                                   " (bytes were cut out or added)" + advice);
  Sha256Digest digest = sha256(data, body);
  if (std::memcmp(digest.data(), data + body, digest.size()) != 0)
    return Status::invalidArgument(what + ": the file is damaged: its SHA-256 is " +
                                   toHex(digest) + ", not the one it was sealed with" + advice);
  return size_t(body);
}

StatusOr<Artifact> kiln::rt::parseArtifact(const uint8_t *data, size_t size,
                                           const std::string &what,
                                           std::shared_ptr<const void> keepAlive) {
  if (size < 8 || !flatbuffers::BufferHasIdentifier(data, fbs::ArtifactIdentifier()))
    return Status::invalidArgument(what + ": not a .kiln file (no KILN identifier)");
  // Every byte is checked before any is read as meaning.
  StatusOr<size_t> body = checkSeal(data, size, what);
  if (!body.isOk())
    return body.status();
  size = *body;
  flatbuffers::Verifier verifier(data, size, /*max_depth=*/64, /*max_tables=*/10000000);
  if (!fbs::VerifyArtifactBuffer(verifier))
    return Status::invalidArgument(what + ": the file is truncated or corrupt (its structure "
                                          "does not verify): compile the model again");
  const fbs::Artifact *in = fbs::GetArtifact(data);
  if (in->version_major() != Artifact::kVersionMajor ||
      in->version_minor() > Artifact::kVersionMinor)
    return Status::invalidArgument(
        what + ": format version " + std::to_string(in->version_major()) + "." +
        std::to_string(in->version_minor()) + "; this runtime reads " +
        std::to_string(Artifact::kVersionMajor) + ".0 to " +
        std::to_string(Artifact::kVersionMajor) + "." + std::to_string(Artifact::kVersionMinor) +
        ": compile the model with this Kiln");
  Reader reader(what);
  Artifact artifact;
  if (Status s = reader.signatures(in->inputs(), "inputs", artifact.inputs); !s.isOk())
    return s;
  if (Status s = reader.signatures(in->outputs(), "outputs", artifact.outputs); !s.isOk())
    return s;
  if (in->weights())
    for (size_t i = 0; i < in->weights()->size(); ++i) {
      const fbs::Weight *w = in->weights()->Get(i);
      Weight weight;
      weight.name = w->name() ? w->name()->str() : "";
      std::string at = "weight " + std::to_string(i);
      if (Status s = reader.type(w->type(), at, weight.type); !s.isOk())
        return s;
      if (!w->data()) {
        weight.data = Bytes();
      } else if (keepAlive) {
        weight.data = Bytes(w->data()->data(), w->data()->size(), keepAlive);
      } else {
        weight.data = Bytes(vec(w->data()));
      }
      if (weight.data.size() != weight.type.bytes())
        return reader.fail(at, "holds " + std::to_string(weight.data.size()) +
                                   " bytes; its shape needs " +
                                   std::to_string(weight.type.bytes()));
      artifact.weights.push_back(std::move(weight));
    }
  if (!in->programs() || in->programs()->size() == 0)
    return reader.fail("programs", "none");
  for (size_t i = 0; i < in->programs()->size(); ++i) {
    TargetProgram program;
    if (Status s = reader.program(in->programs()->Get(i), i, artifact, program); !s.isOk())
      return s;
    artifact.programs.push_back(std::move(program));
  }
  return artifact;
}

Status kiln::rt::saveArtifact(const Artifact &artifact, const std::string &path) {
  StatusOr<std::vector<uint8_t>> bytes = serializeArtifact(artifact);
  if (!bytes.isOk())
    return bytes.status();
  return writeFile(path, *bytes);
}

StatusOr<Artifact> kiln::rt::loadArtifact(const std::string &path) {
  StatusOr<std::shared_ptr<const MappedFile>> mapped = mapFile(path);
  if (!mapped.isOk())
    return mapped.status();
  const MappedFile &file = **mapped;
  return parseArtifact(file.data(), file.size(), path, *mapped);
}

namespace {
/// How specific a variant is: code for the device at hand (no profile)
/// first, then named profiles, then the generic ones; among CPU levels, the
/// highest.
int variantRank(const TargetProgram &program) {
  const std::string &p = program.profile;
  if (p.empty() || p == "host")
    return 100;
  if (p == "generic")
    return 0;
  if (p.rfind("x86-64", 0) == 0)
    return p == "x86-64-v4" ? 40 : p == "x86-64-v3" ? 30 : p == "x86-64-v2" ? 20 : 10;
  return 50;
}

/// The devices `program`'s steps run on, when they run it: its CPU code
/// loaded, and every kernel's assumptions met by the device that runs it.
/// Else the error that says why not (a device count it does not take, what
/// the device lacks).
StatusOr<std::vector<Device *>> bindVariant(const TargetProgram &program,
                                            const std::vector<Device *> &devices) {
  Device &device = *devices[0];
  const std::shared_ptr<const CpuLibrary> &library = program.program->cpuLibrary;
  if (library && !library->loaded()) {
    Status usable = CpuLibrary::checkCpu(library->description(), "the model");
    return usable.isOk() ? Status::internal("the model's CPU code is not loaded") : usable;
  }
  const std::vector<std::string> &named = program.program->devices;
  std::vector<Device *> bound(named.size(), &device);
  if (devices.size() > 1) {
    if (devices.size() != named.size()) {
      std::string list;
      for (const std::string &n : named)
        list += (list.empty() ? "" : ", ") + n;
      return Status::invalidArgument(
          "the model's steps run on " + std::to_string(named.size()) + " device" +
          (named.size() == 1 ? "" : "s") + " (" + list + " when compiled), got " +
          std::to_string(devices.size()) + ": pass one device, or " +
          std::to_string(named.size()) + " in that order");
    }
    bound = devices;
  }
  // Every kernel's assumptions against the device that runs it, before
  // anything runs.
  for (const ProgramStep &step : program.program->steps)
    if (step.kind == ProgramStep::Kind::dispatch)
      if (Status s = bound[step.device]->checkKernel(program.program->kernels[step.index]);
          !s.isOk())
        return s;
  return bound;
}
} // namespace

StatusOr<std::unique_ptr<Model>> Model::create(std::shared_ptr<const Artifact> artifact,
                                               Device &device) {
  return create(std::move(artifact), std::vector<Device *>{&device});
}

StatusOr<std::unique_ptr<Model>> Model::create(std::shared_ptr<const Artifact> artifact,
                                               const std::vector<Device *> &devices) {
  if (devices.empty())
    return Status::invalidArgument("a model needs a device to run on");
  Device &device = *devices[0];
  for (Device *other : devices)
    if (other->api() != device.api())
      return Status::invalidArgument("a model runs on devices of one api: " + device.name() +
                                     " and " + other->name() + " are not");
  // The file's programs for this api are its variants: each is tried,
  // most specific first, and the first that this device runs is taken.
  std::vector<const TargetProgram *> candidates;
  for (const TargetProgram &program : artifact->programs)
    if (program.target == device.api())
      candidates.push_back(&program);
  if (candidates.empty())
    return Status::notFound("the model has no code for " + device.name() + " (" +
                            device.api() + "); it was compiled for: " + artifact->targets() +
                            ". Run it on one of those, or compile it with --target " +
                            device.api());
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const TargetProgram *a, const TargetProgram *b) {
                     return variantRank(*a) > variantRank(*b);
                   });
  std::string reasons;
  for (const TargetProgram *candidate : candidates) {
    StatusOr<std::vector<Device *>> bound = bindVariant(*candidate, devices);
    if (!bound.isOk()) {
      if (candidates.size() == 1)
        return bound.status();
      reasons += "\n  " + candidate->variant() + ": " + bound.status().message();
      continue;
    }
    auto model = std::unique_ptr<Model>(new Model(artifact, *candidate, std::move(*bound)));
    model->weights_.resize(artifact->weights.size());
    model->weightsElsewhere_.resize(artifact->weights.size());
    return model;
  }
  std::string portable = parseDeviceApi(device.api()) == DeviceApi::cpu ? "cpu:x86-64-v2"
                                                                         : device.api() + ":generic";
  return Status::unavailable("none of the model's variants for " + device.api() + " runs on " +
                             device.name() + ":" + reasons +
                             "\ncompile it for this device (--target " + device.api() +
                             " on it), or for a profile it meets (--target " + portable + ")");
}

Status kiln::rt::checkValueRange(const Signature &s, const void *data) {
  if (!s.range || !data || s.type.element != ElementType::i32)
    return Status::ok();
  const auto *values = static_cast<const int32_t *>(data);
  uint64_t n = s.type.bytes() / sizeof(int32_t);
  for (uint64_t k = 0; k < n; ++k)
    if (values[k] < s.range->low || values[k] >= s.range->high)
      return Status::invalidArgument(
          "input '" + s.name + "' holds " + std::to_string(values[k]) + " at element " +
          std::to_string(k) + ", outside " + std::to_string(s.range->low) + " <= v < " +
          std::to_string(s.range->high) + ": it indexes " + s.range->use +
          ", as PyTorch refuses an index outside its table; pass values inside the range");
  return Status::ok();
}

Status Model::checkInputs(const std::vector<ProgramInput> &inputs) const {
  const Artifact &a = *artifact_;
  if (inputs.size() != a.inputs.size())
    return Status::invalidArgument("the model takes " + std::to_string(a.inputs.size()) +
                                   " inputs, got " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].buffer && inputs[i].buffer->size() < a.inputs[i].type.bytes())
      return Status::invalidArgument("input '" + a.inputs[i].name + "' needs " +
                                     std::to_string(a.inputs[i].type.bytes()) + " bytes, got " +
                                     std::to_string(inputs[i].buffer->size()));
    // Host bytes are read here; a buffer already on a device is not (its
    // indices are clamped in the kernel: docs/onnx.md).
    if (Status s = checkValueRange(a.inputs[i], inputs[i].host); !s.isOk())
      return s;
  }
  return Status::ok();
}

std::vector<ProgramInput> Model::bind(const std::vector<ProgramInput> &inputs) {
  std::vector<ProgramInput> bound;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const InputSource &source : program_->sources) {
    if (!source.weight) {
      bound.push_back(inputs[source.index]);
      continue;
    }
    ProgramInput weight;
    if (weights_[source.index]) {
      weight.buffer = weights_[source.index];
      weight.elsewhere = weightsElsewhere_[source.index];
    } else {
      weight.host = artifact_->weights[source.index].data.data();
    }
    bound.push_back(std::move(weight));
  }
  return bound;
}

StatusOr<std::vector<RunResult>>
Model::runPipelined(const std::vector<std::vector<ProgramInput>> &batches,
                    const RunOptions &options) {
  for (const std::vector<ProgramInput> &inputs : batches)
    if (Status s = checkInputs(inputs); !s.isOk())
      return s;
  if (!split()) {
    // Nothing to overlap: each batch as run() does it (replayed).
    std::vector<RunResult> results;
    for (const std::vector<ProgramInput> &inputs : batches) {
      StatusOr<RunResult> result = run(inputs, options);
      if (!result.isOk())
        return result.status();
      results.push_back(std::move(*result));
    }
    return results;
  }
  // Weights first, each on its device, so batches share them.
  if (Status s = uploadWeights(options); !s.isOk())
    return s;
  std::vector<std::vector<ProgramInput>> bound;
  for (const std::vector<ProgramInput> &inputs : batches)
    bound.push_back(bind(inputs));
  return kiln::rt::runPipelined(*program_->program, devices_, bound, options);
}

StatusOr<RunResult> Model::run(const std::vector<ProgramInput> &inputs, const RunOptions &options) {
  if (Status s = checkInputs(inputs); !s.isOk())
    return s;
  const Program &program = *program_->program;
  // Read once: a run is a hot path.
  static const bool replayOff = [] {
    const char *text = std::getenv("KILN_REPLAY");
    return text && std::string(text) == "0";
  }();
  VulkanDevice *replayDevice = device().replayDevice();
  bool replayable =
      replayDevice && !split() && !options.poisonResults && !options.constants && !replayOff;
  if (replayable) {
    std::lock_guard<std::mutex> lock(replayMutex_);
    if (!replayTried_) {
      if (Status s = uploadWeights(options); !s.isOk())
        return s;
      std::vector<std::shared_ptr<Buffer>> fixed;
      for (const InputSource &source : program_->sources)
        fixed.push_back(source.weight ? weights_[source.index] : nullptr);
      StatusOr<std::unique_ptr<ProgramReplay>> replay =
          ProgramReplay::create(program, *replayDevice, fixed, options);
      if (!replay.isOk())
        return replay.status();
      replay_ = std::move(*replay);
      replayTried_ = true;
      // Its pipelines, for the next process that loads a model here.
      replayDevice->savePipelineCache();
    }
    if (replay_) {
      std::vector<ProgramInput> bound;
      for (const InputSource &source : program_->sources)
        bound.push_back(source.weight ? ProgramInput{} : inputs[source.index]);
      return replay_->run(bound, options);
    }
  }
  // A split model's weights go to each device that reads them, once.
  if (split())
    if (Status s = uploadWeights(options); !s.isOk())
      return s;
  std::vector<ProgramInput> bound = bind(inputs);
  StatusOr<RunResult> result = kiln::rt::run(program, devices_, bound, options);
  if (!result.isOk())
    return result;
  // Weights stay on the device for the next run.
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < program_->sources.size(); ++i)
    if (program_->sources[i].weight && result->uploaded[i])
      weights_[program_->sources[i].index] = result->uploaded[i];
  return result;
}

StatusOr<ProgramProfile> Model::profile(const std::vector<ProgramInput> &inputs, int runs) {
  if (Status s = checkInputs(inputs); !s.isOk())
    return s;
  if (Status s = uploadWeights({}); !s.isOk())
    return s;
  const Program &program = *program_->program;
  std::vector<std::shared_ptr<Buffer>> fixed;
  std::vector<ProgramInput> bound;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const InputSource &source : program_->sources) {
      fixed.push_back(source.weight ? weights_[source.index] : nullptr);
      bound.push_back(source.weight ? ProgramInput{weights_[source.index], nullptr, {}}
                                    : inputs.at(source.index));
    }
  }
  return kiln::rt::profile(program, devices_, bound, runs, {}, nullptr, fixed);
}

Status Model::uploadWeights(const RunOptions &options) {
  const Program &program = *program_->program;
  std::lock_guard<std::mutex> lock(mutex_);
  // A split model calls this before every run: after the first, nothing is
  // uploaded and nothing needs flushing.
  bool uploaded = false;
  for (const ProgramStep &step : program.steps) {
    if (step.kind != ProgramStep::Kind::input)
      continue;
    const InputSource &source = program_->sources[step.index];
    if (!source.weight)
      continue;
    Device &device = *devices_[step.device];
    // Once on each device that reads it.
    std::vector<std::shared_ptr<Buffer>> &copies = weightsElsewhere_[source.index];
    std::shared_ptr<Buffer> &first = weights_[source.index];
    if ((first && &first->device() == &device) ||
        std::any_of(copies.begin(), copies.end(),
                    [&](const std::shared_ptr<Buffer> &c) { return &c->device() == &device; }))
      continue;
    const Weight &weight = artifact_->weights[source.index];
    StatusOr<std::shared_ptr<Buffer>> buffer =
        options.allocate ? options.allocate(device, weight.data.size(), "uploading a weight")
                         : device.allocate(weight.data.size());
    if (!buffer.isOk())
      return buffer.status();
    if (!weight.data.empty())
      if (Status s = device.upload(**buffer, weight.data.data(), weight.data.size()); !s.isOk())
        return s;
    (first ? copies.emplace_back() : first) = *buffer;
    uploaded = true;
  }
  if (!uploaded)
    return Status::ok();
  for (Device *device : devices_)
    if (Status s = device->flush(); !s.isOk())
      return s;
  return Status::ok();
}

//===- Program.h - compile a model once, save it, load and run it -*- C++ -*-===//
//
// Ahead of time, in the shape of torch.export and IREE's runtime API:
//
//   kiln::Tensor x = kiln::Tensor::randn({1, 64});        // an example input
//   kiln::Tensor y = model(x);                            // recorded, not run
//   kiln::Program p = kiln::compile({y}, {x});            // weights included
//   p.save("model.kiln");
//   ...
//   kiln::Program q = kiln::load("model.kiln", kiln::Device::vulkan());
//   std::vector<kiln::Tensor> out = q.run({input});
//
// compile() takes the outputs of a recorded graph and the tensors that are
// its inputs; every other tensor the graph starts from (the weights) is
// stored in the program. The code is generated for each target ("vulkan":
// SPIR-V; "cpu": machine code, which runs in this process but cannot be
// saved yet). load() uses the runtime only: no graph is built and nothing
// is compiled. Docs: docs/aot.md.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PROGRAM_H
#define KILN_PROGRAM_H

#include "kiln/Device.h"
#include "kiln/Tensor.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln {
namespace rt {
struct Artifact;
struct TargetProgram;
class Buffer;
class Model;
struct ProgramInput;
} // namespace rt

struct CompileOptions {
  /// "vulkan", "cpu", "metal" (MSL, for Apple GPUs: written, not run here),
  /// each optionally with a named profile of the device to compile for
  /// ("vulkan:generic", "vulkan:nvidia-hopper", "vulkan:amd-rdna",
  /// "cpu:x86-64-v3", "cpu:x86-64-v4"; docs/aot.md): several of one api are
  /// variants, and a runtime runs the most specific its device meets.
  /// Empty: "vulkan" when a tensor of the graph is committed to a Vulkan
  /// device, else the default device's kind.
  std::vector<std::string> targets;
  /// Names in the file (kiln-run --input name=file.npy); default input0,
  /// input1, ... and output0, ...
  std::vector<std::string> input_names, output_names;
  /// The cpu target's instruction set: "host" (the CPU device's: the JIT's
  /// code, bit for bit; this CPU's, unless KILN_CPU_ISA names a level),
  /// "x86-64-v2", "x86-64-v3" or "x86-64-v4", or "portable" (kiln-compile's
  /// default: x86-64-v3, plus x86-64-v4 beside it where this CPU has
  /// AVX-512; the runtime runs the highest its CPU has). Code for a level
  /// this CPU lacks is written but cannot run here. "portable" also puts
  /// vulkan:generic beside a plain "vulkan" target (the Vulkan device
  /// here), so the file runs on any Vulkan GPU, unless the targets name a
  /// Vulkan profile themselves or KILN_GPU_LIMITS describes the GPU.
  std::string cpu_isa = "host";
};

class Program {
public:
  /// Writes the .kiln file. Throws Error when the file cannot be written.
  void save(const std::string &path) const;
  /// Runs on the device it was loaded for (compile: the first target's
  /// device). Inputs in order, of the shapes and dtypes it was compiled for,
  /// on any device; outputs are committed to the program's device.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs) const;
  /// Runs once per micro-batch (each a list of inputs as run() takes them),
  /// pipelined across the devices a split model runs on: while the second
  /// device works on batch b the first starts batch b + 1. Outputs per
  /// batch, each the same as run() would give (bit for bit).
  std::vector<std::vector<Tensor>>
  run_pipelined(const std::vector<std::vector<Tensor>> &batches) const;

  /// The first device it runs on.
  Device device() const;
  /// Every device it runs on: one per device its steps name (a model
  /// compiled split across GPUs, or loaded onto several), else one.
  std::vector<Device> devices() const { return devices_; }
  /// "vulkan, cpu", each variant with its profile ("cpu:x86-64-v3").
  std::string targets() const;
  /// The variant that runs on device(): "vulkan:generic"; empty when none.
  std::string variant() const;
  /// Input and output names, shapes and dtypes, one per line.
  std::string signature() const;
  /// The steps, values and buffer plan of the program for `target`, a
  /// variant as compiled ("vulkan:generic") or an api (its first variant);
  /// empty: the one run on device().
  std::string describe(const std::string &target = "") const;
  /// The metal target's kernels as MSL, each after a comment line with its
  /// threadgroup size, grid and buffer map; empty without a metal target.
  std::string msl() const;
  /// The kernels that carry PTX beside their SPIR-V (compiled for a GPU
  /// CUDA runs, as KILN_GPU_LIMITS=...,ptx=90 says for the H200), each
  /// after a comment line with its configuration, grid, block, shared
  /// memory and parameters; empty when none do.
  std::string ptx() const;

private:
  friend Program compile(const std::vector<Tensor> &, const std::vector<Tensor> &,
                         const CompileOptions &);
  friend Program load(const std::string &, const Device &);
  friend Program compile_graph(const std::string &, const std::string &, const CompileOptions &);
  /// With `mustRun`, a device the artifact cannot run on throws; else
  /// (a compile for another ISA level) run() does.
  friend Program load(const std::string &, const std::vector<Device> &);
  Program(std::shared_ptr<const rt::Artifact> artifact, std::vector<Device> devices,
          bool mustRun = true);
  const rt::TargetProgram *programFor(const std::string &target) const;
  /// The program inputs of one run, checked against the signature; host
  /// bytes kept in `hostData`.
  std::vector<rt::ProgramInput> bindInputs(const std::vector<Tensor> &inputs,
                                           std::vector<std::vector<uint8_t>> &hostData) const;
  std::vector<Tensor> outputsOf(const std::vector<std::shared_ptr<rt::Buffer>> &buffers) const;

  std::shared_ptr<const rt::Artifact> artifact_;
  std::shared_ptr<rt::Model> model_;
  std::string unusable_; // why model_ is null
  std::vector<Device> devices_; // never empty
};

/// Compiles the graph that computes `outputs` from `inputs`. Throws
/// DeviceMismatchError, CompileError, or Error for an input that is
/// computed (pass the tensors the model starts from) or an output already
/// read (compile before reading).
Program compile(const std::vector<Tensor> &outputs, const std::vector<Tensor> &inputs,
                const CompileOptions &options = {});

/// Compiles a graph written in the kiln graph dialect (a func.func of kiln
/// ops whose inputs are kiln.input ops, as kiln-opt reads them; `name` names
/// it in diagnostics). Every kiln.input is a model input, in index order.
/// Throws CompileError with the parser's or placement's diagnostics.
Program compile_graph(const std::string &mlir, const std::string &name,
                      const CompileOptions &options = {});

/// The named targets CompileOptions::targets takes besides a bare api, one
/// line each: "vulkan:nvidia-hopper  NVIDIA H100/H200: subgroup 32, ...".
std::vector<std::string> target_profiles();

/// The recorded graph that computes `outputs`, as kiln graph dialect text
/// (what compile_graph and kiln-compile read): every tensor it starts from
/// is a kiln.input, numbered in the order the graph first uses them (the
/// signature of the compiled graph lists them), committed ones with their
/// device.
std::string export_graph(const std::vector<Tensor> &outputs);

/// Loads a .kiln file for `device`. Throws Error naming the problem for a
/// malformed file, and the targets present when it has no code for
/// `device`.
Program load(const std::string &path, const Device &device);
/// Loads a model compiled split across devices onto `devices`, in the
/// order its steps name them (one device runs it whole). Throws Error
/// naming the devices it was compiled for when the count differs.
Program load(const std::string &path, const std::vector<Device> &devices);

} // namespace kiln

#endif // KILN_PROGRAM_H

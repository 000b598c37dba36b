//===- kiln-compile.cpp - a kiln graph (.mlir) or ONNX model to a .kiln file ===//
//
//   kiln-compile graph.mlir -o model.kiln [--target vulkan,cpu,metal] [--cpu-isa host]
//   kiln-compile graph.mlir -o model.kiln --target vulkan:generic,vulkan:nvidia-hopper,cpu
//                [--describe]
//   kiln-compile model.onnx -o model.kiln [--input-shape x=1x3x224x224]...
//
// The graph is a func.func of kiln ops whose inputs are kiln.input ops (what
// kiln-opt reads), or an ONNX model (opsets 11 to 28, docs/onnx.md) whose
// inputs keep their names; it goes through the pipeline every realize uses.
// --input-shape fixes an ONNX input's symbolic dimensions.
// --describe prints each target's program: steps, values, buffer plan.
// --msl prints the metal target's kernels as MSL.
// --ptx prints the kernels that carry PTX for a GPU CUDA runs (WgmmaGemm.h).
// --target lists apis, each optionally with a profile (kiln/Compiler/Target.h):
// one program per entry, variants of one model. A plain `cpu` is portable
// code: x86-64-v3, plus x86-64-v4 where this CPU has it.
// --cpu-isa names the instruction set of the cpu target's code instead: host
// (this CPU), x86-64-v2, x86-64-v3 or x86-64-v4.
//
//===----------------------------------------------------------------------===//

#include "tools/common/Version.h"
#include "kiln/Import.h"
#include "kiln/kiln.h"
#include "tools/common/ModelInput.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <fstream>
#include <iterator>
#include <filesystem>
#include <sstream>

namespace {
int help() {
  std::printf("kiln-compile: compiles a kiln graph (.mlir) or an ONNX model to a .kiln file\n"
              "usage: kiln-compile graph.mlir|model.onnx [-o model.kiln] [--target LIST]\n"
              "         [--cpu-isa host|x86-64-v2|x86-64-v3|x86-64-v4]\n"
              "         [--input-shape NAME=1x3x224x224]... [--describe] [--msl] [--ptx]\n"
              "--target takes apis (vulkan: the Vulkan device here, plus vulkan:generic for\n"
              "any other GPU; cpu: x86-64-v3, plus x86-64-v4 where this CPU has AVX-512;\n"
              "metal) or these profiles, comma-separated;\n"
              "several of one api are variants, and a runtime runs the one its device fits:\n");
  for (const std::string &line : kiln::target_profiles())
    std::printf("  %s\n", line.c_str());
  return 0;
}

int usage(const char *why) {
  std::fprintf(stderr,
               "kiln-compile: %s\n"
               "usage: kiln-compile graph.mlir|model.onnx [-o model.kiln] "
               "[--target vulkan,cpu,metal,vulkan:generic,cpu:x86-64-v3,...] "
               "[--cpu-isa host|x86-64-v3|x86-64-v4] "
               "[--input-shape NAME=1x3x224x224]... [--describe] [--msl] [--ptx]\n",
               why);
  return 2;
}
} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (kiln::tools::printedVersion(argv[i], "kiln-compile"))
      return 0;
  std::string input, output;
  bool describe = false, msl = false, ptx = false, cpuIsaGiven = false;
  kiln::CompileOptions options;
  std::map<std::string, kiln::Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h")
      return help();
    if (arg == "--input-shape") {
      if (i + 1 >= argc)
        return usage("--input-shape needs NAME=DxDx...");
      if (auto why = kiln::tools::parseInputShape(argv[++i], shapes))
        return usage(why->c_str());
    } else if (arg == "-o" || arg == "--target" || arg == "--cpu-isa") {
      if (i + 1 >= argc)
        return usage((arg + " needs a value").c_str());
      std::string value = argv[++i];
      if (arg == "-o") {
        output = value;
      } else if (arg == "--cpu-isa") {
        options.cpu_isa = value;
        cpuIsaGiven = true;
      } else {
        std::stringstream list(value);
        for (std::string item; std::getline(list, item, ',');)
          options.targets.push_back(item);
      }
    } else if (arg == "--describe") {
      describe = true;
    } else if (arg == "--msl") {
      msl = true;
    } else if (arg == "--ptx") {
      ptx = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return usage(("unknown option " + arg).c_str());
    } else if (input.empty()) {
      input = arg;
    } else {
      return usage(("a second input: " + arg).c_str());
    }
  }
  if (input.empty())
    return usage("no graph file");
  // A plain cpu target is portable code (CompileOptions::cpu_isa):
  // --cpu-isa, or cpu:host, names one level instead.
  if (!cpuIsaGiven)
    options.cpu_isa = "portable";
  bool onnx = kiln::tools::isOnnx(input);
  if (!onnx && !shapes.empty())
    return usage("--input-shape is for .onnx models");
  std::error_code folderCheck;
  if (std::filesystem::is_directory(input, folderCheck)) {
    std::fprintf(stderr, "kiln-compile: %s: is a folder; give a .mlir or .onnx file\n",
                 input.c_str());
    return 1;
  }
  std::ifstream file(input, std::ios::binary);
  if (!file) {
    std::fprintf(stderr, "kiln-compile: %s: cannot open it for reading\n", input.c_str());
    return 1;
  }
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  try {
    std::optional<kiln::Program> compiled;
    if (onnx) {
      // From the path: external data files are read next to the model.
      kiln::OnnxModel model = kiln::import_onnx(input, shapes);
      options.input_names = model.input_names;
      options.output_names = model.output_names;
      compiled = kiln::compile(model.outputs, model.inputs, options);
    } else {
      compiled = kiln::compile_graph(text, input, options);
    }
    kiln::Program &program = *compiled;
    if (describe) {
      std::printf("%s", program.signature().c_str());
      bool several = options.targets.size() > 1;
      for (const std::string &target : options.targets.empty() ? std::vector<std::string>{""}
                                                               : options.targets) {
        if (several)
          std::printf("target %s:\n", target.c_str());
        std::printf("%s", program.describe(target).c_str());
      }
    }
    if (msl)
      std::printf("%s", program.msl().c_str());
    if (ptx)
      std::printf("%s", program.ptx().c_str());
    if (output.empty() && !describe && !msl && !ptx) {
      // As a compiler does: model.onnx -> model.kiln beside it.
      std::filesystem::path path(input);
      output = path.replace_extension(".kiln").string();
    }
    if (!output.empty()) {
      program.save(output);
      if (!describe && !msl && !ptx)
        std::printf("wrote %s\n", output.c_str());
    }
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "kiln-compile: %s\n", e.what());
    return 1;
  }
  return 0;
}

//===- kiln-compile.cpp - a kiln graph (.mlir) to a .kiln file ------------===//
//
//   kiln-compile graph.mlir -o model.kiln [--target vulkan,cpu,metal] [--cpu-isa host]
//                [--describe]
//
// The graph is a func.func of kiln ops whose inputs are kiln.input ops (what
// kiln-opt reads); it goes through the pipeline every realize uses.
// --describe prints each target's program: steps, values, buffer plan.
// --msl prints the metal target's kernels as MSL.
// --cpu-isa names the instruction set of the cpu target's code: host (this
// CPU), x86-64-v2, x86-64-v3 or x86-64-v4.
//
//===----------------------------------------------------------------------===//

#include "kiln/kiln.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

namespace {
int usage(const char *why) {
  std::fprintf(stderr,
               "kiln-compile: %s\n"
               "usage: kiln-compile graph.mlir [-o model.kiln] [--target vulkan,cpu,metal] "
               "[--cpu-isa host|x86-64-v3|x86-64-v4] [--describe] [--msl]\n",
               why);
  return 2;
}
} // namespace

int main(int argc, char **argv) {
  std::string input, output;
  bool describe = false, msl = false;
  kiln::CompileOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-o" || arg == "--target" || arg == "--cpu-isa") {
      if (i + 1 >= argc)
        return usage((arg + " needs a value").c_str());
      std::string value = argv[++i];
      if (arg == "-o") {
        output = value;
      } else if (arg == "--cpu-isa") {
        options.cpu_isa = value;
      } else {
        std::stringstream list(value);
        for (std::string item; std::getline(list, item, ',');)
          options.targets.push_back(item);
      }
    } else if (arg == "--describe") {
      describe = true;
    } else if (arg == "--msl") {
      msl = true;
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
  std::ifstream file(input);
  if (!file) {
    std::fprintf(stderr, "kiln-compile: %s: cannot open it for reading\n", input.c_str());
    return 1;
  }
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  try {
    kiln::Program program = kiln::compile_graph(text, input, options);
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
    if (!output.empty())
      program.save(output);
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "kiln-compile: %s\n", e.what());
    return 1;
  }
  return 0;
}

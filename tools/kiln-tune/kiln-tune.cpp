//===- kiln-tune.cpp - tune a graph's kernels ahead of time ---------------===//
//
//   kiln-tune graph.mlir|model.onnx --device vulkan:0 [--budget SECONDS] [-o model.kiln]
//             [--input-shape NAME=1x3x224x224]...
//             [--record timings.json] [--only "WORDS [| WORDS...]"]
//   kiln-tune graph.mlir --device vulkan:0 --emit-candidates DIR
//   kiln-tune --import timings.json
//
// --emit-candidates compiles every candidate for a GPU without the compiler
// to time (scripts/tune-gpu.sh); --import stores the winners of those
// timings (docs/tuning.md, "Tuning for another machine").
//
// An ONNX model is imported as kiln-compile imports it; its graph is tuned,
// and -o compiles the model itself (its input and output names kept).
//
// Tunes every kernel the cache's store (docs/tuning.md) has no record for,
// on the device, showing kernel i of n, candidates tried, the best against
// the default and an ETA; the winners go into the store and, with -o, into
// a .kiln compiled for that device with them.
//
//===----------------------------------------------------------------------===//

#include "tools/common/Version.h"
#include "kiln/Import.h"
#include "kiln/kiln.h"
#include "tools/common/ModelInput.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

namespace {
int usage(const char *why) {
  std::fprintf(stderr,
               "kiln-tune: %s\n"
               "usage: kiln-tune graph.mlir|model.onnx [--device vulkan:0|cpu:0] "
               "[--budget SECONDS] [-o model.kiln] [--record timings.json] "
               "[--only \"stages=2 ...\"] [--input-shape NAME=1x3x224x224]...\n"
               "       kiln-tune graph.mlir --device vulkan:0 --emit-candidates DIR [--only ...]\n"
               "       kiln-tune --import timings.json\n"
               "(a .kiln file holds no graph: tune the .mlir it was compiled from)\n",
               why);
  return 2;
}

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f ms", seconds * 1e3);
  return text;
}
} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (kiln::tools::printedVersion(argv[i], "kiln-tune"))
      return 0;
  std::string input, output, importPath;
  kiln::TuneGraphOptions options;
  std::map<std::string, kiln::Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help")
      return usage("tunes kernels ahead of time"), 0;
    if (arg == "--input-shape") {
      if (i + 1 >= argc)
        return usage("--input-shape needs NAME=DxDx...");
      if (auto why = kiln::tools::parseInputShape(argv[++i], shapes))
        return usage(why->c_str());
      continue;
    }
    if (arg == "--device" || arg == "--budget" || arg == "-o" || arg == "--record" ||
        arg == "--emit-candidates" || arg == "--import" || arg == "--only") {
      if (i + 1 >= argc)
        return usage((arg + " needs a value").c_str());
      std::string value = argv[++i];
      if (arg == "--device") {
        options.device = value;
      } else if (arg == "-o") {
        output = value;
      } else if (arg == "--record") {
        options.record_path = value;
      } else if (arg == "--emit-candidates") {
        options.emit_candidates_dir = value;
      } else if (arg == "--import") {
        importPath = value;
      } else if (arg == "--only") {
        options.only = value; // config words: "stages=2", "thread=8x8 tile=64x128x8"

      } else {
        char *end = nullptr;
        options.budget_seconds = std::strtod(value.c_str(), &end);
        if (value.empty() || *end || !(options.budget_seconds > 0))
          return usage(("--budget takes a positive number of seconds, not '" + value + "'").c_str());
      }
    } else if (!arg.empty() && arg[0] == '-') {
      return usage(("unknown option " + arg).c_str());
    } else if (input.empty()) {
      input = arg;
    } else {
      return usage("one graph at a time");
    }
  }
  if (!importPath.empty()) {
    if (!input.empty())
      return usage("--import takes no graph");
    try {
      int stored = kiln::import_tuning(importPath);
      std::printf("stored %d tuning records from %s\n", stored, importPath.c_str());
    } catch (const std::exception &e) {
      std::fprintf(stderr, "kiln-tune: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (input.empty())
    return usage("no graph given");
  if (input.size() > 5 && input.compare(input.size() - 5, 5, ".kiln") == 0)
    return usage((input + " is a compiled program").c_str());
  bool onnx = kiln::tools::isOnnx(input);
  if (!onnx && !shapes.empty())
    return usage("--input-shape is for .onnx models");
  std::ifstream file(input);
  std::error_code folderCheck;
  if (!file || std::filesystem::is_directory(input, folderCheck))
    return usage(("cannot read " + input + " (a file is needed)").c_str());
  std::string text;
  std::optional<kiln::OnnxModel> model;
  if (onnx) {
    try {
      model = kiln::import_onnx(input, shapes);
      text = kiln::export_graph(model->outputs);
    } catch (const std::exception &e) {
      std::fprintf(stderr, "kiln-tune: %s\n", e.what());
      return 1;
    }
  } else {
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }

  bool tty = isatty(STDERR_FILENO);
  options.progress = [&](const kiln::TuneProgress &p) {
    // Speed-up over the default, as the summary line prints it.
    std::fprintf(stderr, "%skiln-tune: kernel %d/%d %s: %d/%d candidates, best %s (%.2fx the "
                         "default's speed), ETA %.0f s%s",
                 tty ? "\r\033[K" : "", p.kernel, p.kernels, p.summary.c_str(), p.tried,
                 p.candidates, milliseconds(p.best_seconds).c_str(),
                 p.best_seconds > 0 ? p.default_seconds / p.best_seconds : 1.0, p.eta_seconds,
                 tty ? "" : "\n");
  };
  try {
    kiln::TuneReport report = kiln::tune_graph(text, input, options);
    if (!options.emit_candidates_dir.empty()) {
      int total = 0;
      for (const kiln::TunedKernel &k : report.kernels)
        total += k.candidates;
      std::printf("%zu kernels, %d candidates in %s\n", report.kernels.size(), total,
                  options.emit_candidates_dir.c_str());
      return 0;
    }
    if (tty)
      std::fprintf(stderr, "\n");
    for (const kiln::TunedKernel &k : report.kernels)
      std::printf("%-48s %-40s %s -> %s (%.2fx)%s\n", k.summary.c_str(), k.best.c_str(),
                  milliseconds(k.default_seconds).c_str(), milliseconds(k.best_seconds).c_str(),
                  k.best_seconds > 0 ? k.default_seconds / k.best_seconds : 1.0,
                  k.from_cache ? " [cached]" : "");
    std::printf("%zu kernels; records in %s\n", report.kernels.size(),
                report.store_path.empty() ? "(no cache directory: set KILN_CACHE_DIR)"
                                          : report.store_path.c_str());
    if (!output.empty()) {
      kiln::CompileOptions compile;
      std::string device = options.device.empty() ? kiln::Device::default_device().name()
                                                   : options.device;
      compile.targets = {device.substr(0, device.find(':'))};
      if (model) {
        compile.input_names = model->input_names;
        compile.output_names = model->output_names;
        kiln::compile(model->outputs, model->inputs, compile).save(output);
      } else {
        kiln::compile_graph(text, input, compile).save(output);
      }
      std::printf("wrote %s with the tuned configs\n", output.c_str());
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kiln-tune: %s\n", e.what());
    return 1;
  }
  return 0;
}

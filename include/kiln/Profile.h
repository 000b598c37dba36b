//===- Profile.h - where the time of a graph goes ---------------*- C++ -*-===//
//
//   kiln::Tensor y = model(x);                    // recorded, not run
//   kiln::Profile p = kiln::profile({y}, 20);     // runs it 20 times, timed
//   std::cout << p.table();                       // one line per kernel
//   p.write_chrome_trace("trace.json");           // chrome://tracing, Perfetto
//
// Every kernel is listed with the user-level ops it fused and their source
// lines, its form, its median time, and the GFLOP/s and GB/s it reached
// (from the FLOPs it computes and the bytes it must read and write). Vulkan
// kernels are timed by GPU timestamps, CPU kernels by the host clock, each
// run alone. KILN_PROFILE=1 prints the table of every realize to stderr;
// KILN_PROFILE_TRACE=trace.json also writes every profiled realize, end to
// end, as one Chrome trace. Docs: docs/profiling.md.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PROFILE_H
#define KILN_PROFILE_H

#include "kiln/Tensor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {
namespace rt {
struct Program;
struct ProgramProfile;
} // namespace rt

struct KernelProfile {
  std::string kernel;  ///< "kernel 3 (cpu:0)"
  std::string device;  ///< "cpu:0"
  std::string kind;    ///< "conv", "matmul", "reduction", "elementwise"
  std::string ops;     ///< "conv2d+add+relu -> [1, 64, 56, 56] f32"
  std::string sources; ///< "resnet.cpp:41 conv2d; resnet.cpp:42 add+relu"
  double microseconds = 0; ///< median over the runs
  uint64_t flops = 0;
  uint64_t bytes = 0; ///< read and written at least
  double gflops_per_second() const;
  double gigabytes_per_second() const;
};

class Profile {
public:
  /// In program order.
  std::vector<KernelProfile> kernels;
  int runs = 0;
  /// "GPU timestamps" or "host clock, one dispatch at a time".
  std::string clock;

  double total_microseconds() const;
  /// The profiler's table, as KILN_PROFILE prints it.
  std::string table() const;
  /// A Chrome trace (JSON) of one run.
  std::string chrome_trace() const;
  /// Throws Error when the file cannot be written.
  void write_chrome_trace(const std::string &path) const;

private:
  friend Profile profile(const std::vector<Tensor> &, int);
  std::shared_ptr<const rt::Program> program_;
  std::shared_ptr<const rt::ProgramProfile> profile_;
};

/// Computes `outputs` (as realize) by running their graph `runs` times with
/// every kernel timed. Throws Error when they are all computed already:
/// profile a tensor before reading it.
Profile profile(const std::vector<Tensor> &outputs, int runs = 10);

} // namespace kiln

#endif // KILN_PROFILE_H

//===- Profile.cpp - kiln::profile, the JIT's kernel profile --------------===//

#include "kiln/Profile.h"

#include "lib/Frontend/Graph.h"

#include "kiln/Errors.h"
#include "kiln/runtime/Profile.h"

#include <cerrno>
#include <cstring>
#include <fstream>

using namespace kiln;

double KernelProfile::gflops_per_second() const {
  return microseconds > 0 ? flops / (microseconds * 1e3) : 0;
}

double KernelProfile::gigabytes_per_second() const {
  return microseconds > 0 ? bytes / (microseconds * 1e3) : 0;
}

double Profile::total_microseconds() const {
  double total = 0;
  for (const KernelProfile &k : kernels)
    total += k.microseconds;
  return total;
}

std::string Profile::table() const {
  return program_ ? rt::profileTable(*program_, *profile_) : std::string();
}

std::string Profile::chrome_trace() const {
  return program_ ? rt::chromeTrace(*program_, *profile_) : std::string();
}

void Profile::write_chrome_trace(const std::string &path) const {
  std::ofstream out(path, std::ios::trunc);
  out << chrome_trace();
  out.close();
  if (!out)
    throw Error("cannot write the Chrome trace to '" + path + "': " + std::strerror(errno) +
                "; choose a writable path");
}

Profile kiln::profile(const std::vector<Tensor> &outputs, int runs) {
  if (runs < 1)
    throw Error("profile needs at least one run, got " + std::to_string(runs));
  std::vector<std::shared_ptr<Node>> roots;
  for (const Tensor &t : outputs) {
    if (!t.node())
      throw Error("profile of an empty Tensor: give it the tensors a model returned");
    roots.push_back(t.node());
  }
  ProfileRequest request;
  request.runs = runs;
  realizeNodes(roots, RealizeOptions(), &request);
  if (!request.program)
    throw Error("profile: every tensor given is computed already, so there is nothing to "
                "time; call profile before reading them (or build the graph again)");
  Profile out;
  out.program_ = request.program;
  out.profile_ = request.profile;
  out.runs = request.profile->runs;
  out.clock = request.profile->clock;
  const rt::Program &program = *request.program;
  for (const rt::DispatchTime &d : request.profile->dispatches) {
    const rt::ProgramKernel &k = program.kernels[d.kernel];
    KernelProfile row;
    row.kernel = k.name;
    row.device = program.devices[program.steps[d.step].device];
    row.kind = k.kind;
    row.ops = k.summary;
    row.sources = k.sources;
    row.microseconds = d.nanoseconds / 1e3;
    row.flops = k.flops;
    row.bytes = k.bytes;
    out.kernels.push_back(std::move(row));
  }
  return out;
}

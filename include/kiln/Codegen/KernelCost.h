//===- KernelCost.h - what a fused kernel computes and moves ----*- C++ -*-===//
//
// The work and traffic of one kiln.kernel, for profiles: FLOPs by op
// (a multiply-add counts two), the bytes it must read and write at least
// (each operand and result once), the form it is built in, and the user's
// source lines of the ops it fused.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_KERNELCOST_H
#define KILN_CODEGEN_KERNELCOST_H

#include "dialects/Kiln/KilnDialect.h"

#include <cstdint>
#include <string>

namespace kiln {

struct KernelCost {
  uint64_t flops = 0;
  uint64_t bytes = 0;
  /// "conv", "matmul", "reduction" or "elementwise".
  std::string kind;
  /// "resnet.cpp:41 conv2d; resnet.cpp:42 add+relu": the ops by source
  /// line, in kernel order; ops without a file location are left out.
  std::string sources;
};

KernelCost kernelCost(KernelOp kernel);

} // namespace kiln

#endif // KILN_CODEGEN_KERNELCOST_H

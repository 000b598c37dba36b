//===- Import.h - ONNX models into Kiln graphs ------------------*- C++ -*-===//
//
//   kiln::OnnxModel m = kiln::import_onnx("resnet18.onnx", {{"x", {1, 3, 224, 224}}});
//   kiln::Program p = kiln::compile(m.outputs, m.inputs, {.input_names = m.input_names,
//                                                         .output_names = m.output_names});
//
// The model's graph is recorded with the Tensor API (nothing runs): its
// inputs become example inputs of the given shapes, its initializers
// weights (tensors the program stores), its outputs the recorded results.
// Shape-only subgraphs (Shape -> Gather -> Concat -> Reshape) are folded
// while importing. ONNX opsets 11 to 28 (ONNX 1.23) of the default domain.
// kiln-compile model.onnx --input-shape x=1x3x224x224 does this and
// compiles. Docs: docs/onnx.md.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IMPORT_H
#define KILN_IMPORT_H

#include "kiln/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace kiln {

struct OnnxModel {
  /// One per graph input that is not an initializer, in the graph's order.
  std::vector<Tensor> inputs;
  std::vector<std::string> input_names;
  std::vector<Tensor> outputs;
  std::vector<std::string> output_names;
  int64_t opset = 0;
  /// Nodes imported, and those folded away at import (shape arithmetic,
  /// Identity, Dropout).
  int64_t nodes = 0, folded = 0;
};

/// Reads an ONNX model. `input_shapes` gives the shape of an input by name;
/// it is required where the model leaves a dimension symbolic or unknown,
/// and must agree with the model's fixed dimensions. Throws Error naming the
/// node (name, op type, index) and what to do for an unsupported operator
/// or attribute, a dimension left unknown, a malformed or truncated file, an
/// initializer whose byte size is not its shape times its dtype, and
/// external data whose location leaves the model's folder. External data
/// inside the folder is read.
OnnxModel import_onnx(const std::string &path,
                      const std::map<std::string, Shape> &input_shapes = {});

/// The same, from the bytes of a model in memory (`name` names it in
/// errors); a model with external data must be imported from its path.
OnnxModel import_onnx_bytes(const std::string &bytes, const std::string &name,
                            const std::map<std::string, Shape> &input_shapes = {});

/// The ONNX operators the importer converts, sorted.
std::vector<std::string> onnx_operators();

} // namespace kiln

#endif // KILN_IMPORT_H

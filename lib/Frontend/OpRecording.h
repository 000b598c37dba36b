//===- OpRecording.h - helpers shared by the files that record ops -*- C++ -*-===//
//
// Tensor.cpp records the primitive ops; the composite ops (activations,
// shape helpers, attention, adaptive pooling) are built from them in their
// own files with the same checks and the same error style.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_OPRECORDING_H
#define KILN_LIB_FRONTEND_OPRECORDING_H

#include "kiln/Tensor.h"

#include <initializer_list>
#include <source_location>
#include <string>
#include <utility>

namespace kiln::detail {

std::string shapeText(const Shape &shape);
/// "file:line: ", the start of every error about a call.
std::string sitePrefix(std::source_location loc);
/// The node of `t`; throws for an empty (default-constructed) Tensor.
const Node &nodeOf(const Tensor &t, std::source_location loc);
/// A rank-0 literal in `other`'s floating dtype (f16 stays f16).
Tensor scalarLike(float value, const Tensor &other, std::source_location loc);
/// `dim` in [0, rank), negative counting from the end; throws when outside.
int64_t normalizeDim(int64_t dim, size_t rank, std::source_location loc, const char *op);
bool isFloat(DType dtype);
/// Indices `t` must hold low <= v < high, since they index `use`. Traced
/// back through reshapes, broadcasts and integer casts to the input they
/// come from: data known now is checked now (an Error naming the element);
/// an input without data (a compiled program's) keeps the range, which
/// Program::run and kiln-run check before each run. False where `t` is
/// computed (its values are known only on the device, which clamps them).
bool restrictValues(const Tensor &t, int64_t low, int64_t high, const std::string &use,
                    std::source_location loc);
/// The tensor of a new op node, its shape checked and its call recorded.
Tensor recordNode(std::shared_ptr<Node> node);

/// While alive, the nodes made on this thread belong to one API call (the
/// outermost: layer_norm's inner mean is layer_norm's), so profiles and
/// errors name the call the user wrote.
class CallScope {
public:
  CallScope(const char *name, std::source_location loc,
            std::initializer_list<std::pair<const char *, const Tensor *>> args);
  ~CallScope();
  CallScope(const CallScope &) = delete;
  CallScope &operator=(const CallScope &) = delete;

private:
  bool owner = false;
};

} // namespace kiln::detail

#endif // KILN_LIB_FRONTEND_OPRECORDING_H

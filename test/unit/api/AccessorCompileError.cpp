// Must fail to compile (a ctest checks the message): no accessor converts
// an element to another type.
#include "kiln/Tensor.h"

double readAsDouble(const kiln::Tensor &t) { return t.to_vector<double>().front(); }

//===- KilnDialect.cpp - kiln dialect registration ------------------------===//

#include "dialects/Kiln/KilnDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;

#include "dialects/Kiln/KilnDialect.cpp.inc"
#include "dialects/Kiln/KilnEnums.cpp.inc"
#include "dialects/Kiln/KilnInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Kiln/KilnAttrs.cpp.inc"

void KilnDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Kiln/KilnAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/Kiln/KilnOps.cpp.inc"
      >();
}

//===- AttachTarget.cpp - the kiln-attach-target pass ---------------------===//

#include "kiln/Compiler/Target.h"
#include "kiln/Transforms/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNATTACHTARGET
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {
struct AttachTargetPass : public kiln::impl::KilnAttachTargetBase<AttachTargetPass> {
  using KilnAttachTargetBase::KilnAttachTargetBase;

  void runOnOperation() override {
    std::string error;
    FailureOr<Target> parsed = parseTarget(target, error);
    if (failed(parsed)) {
      getOperation().emitError("kiln-attach-target: ") << error;
      return signalPassFailure();
    }
    if (parsed->isGpu() && parsed->profile.empty()) {
      getOperation().emitError("kiln-attach-target: '")
          << target << "' names no device; name a profile: " << profileNames(parsed->api);
      return signalPassFailure();
    }
    getOperation()->setAttr(kTargetAttrName, parsed->toAttr(&getContext()));
  }
};
} // namespace

//===- PlaceDevices.cpp - the device-consistency pass ---------------------===//

#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Placement.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPLACEDEVICES
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {
struct PlaceDevicesPass
    : public kiln::impl::KilnPlaceDevicesBase<PlaceDevicesPass> {
  using KilnPlaceDevicesBase::KilnPlaceDevicesBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    PlacementOptions options;
    FailureOr<DeviceAttr> device =
        parseDeviceName(&getContext(), defaultDevice);
    if (failed(device)) {
      func.emitError("invalid default-device '")
          << defaultDevice << "': expected e.g. \"vulkan:0\" or \"cpu\"";
      return signalPassFailure();
    }
    std::optional<PlacementPolicy> policy = parsePlacementPolicy(transferPolicy);
    if (!policy) {
      func.emitError("invalid transfer-policy '")
          << transferPolicy << "': expected error, log or allow";
      return signalPassFailure();
    }
    options.defaultDevice = *device;
    options.policy = *policy;
    if (failed(placeDevices(func, options)))
      signalPassFailure();
  }
};
} // namespace

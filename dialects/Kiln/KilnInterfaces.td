//===- KilnInterfaces.td - placement interface -------------*- tablegen -*-===//

#ifndef KILN_INTERFACES_TD
#define KILN_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Kiln_PlacedOpInterface : OpInterface<"PlacedOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    Every kiln op records where its results live. Source ops (constants,
    inputs, transfers) may be committed by the user; all others are filled in
    by the placement pass. Ops added later get the device check for free by
    implementing this interface.
  }];
  let methods = [
    InterfaceMethod<"the device of the results, null when not yet placed",
      "::kiln::DeviceAttr", "getPlacement", (ins), [{}],
      [{ return $_op.getDeviceAttr(); }]>,
    InterfaceMethod<"set the device of the results", "void", "setPlacement",
      (ins "::kiln::DeviceAttr":$device), [{}],
      [{ $_op.setDeviceAttr(device); }]>,
    InterfaceMethod<"whether a placement on this op is a user commitment",
      "bool", "isPlacementSource", (ins), [{}], [{ return false; }]>,
  ];
}

def Kiln_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::kiln";
}

def Kiln_Reduction : NativeOpTrait<"Reduction"> {
  let cppNamespace = "::kiln";
}

def Kiln_Contraction : NativeOpTrait<"Contraction"> {
  let cppNamespace = "::kiln";
}

def Kiln_GuardedView : NativeOpTrait<"GuardedView"> {
  let cppNamespace = "::kiln";
}

def Kiln_View : NativeOpTrait<"View"> {
  let cppNamespace = "::kiln";
}

#endif // KILN_INTERFACES_TD

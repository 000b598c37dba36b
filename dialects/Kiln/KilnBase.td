//===- KilnBase.td - the kiln dialect and its attributes ---*- tablegen -*-===//
//
// The kiln dialect holds the lazy tensor graph: tensor-valued ops whose
// results carry a placement (an optional #kiln.device attribute on the
// defining op), plus the fused `kiln.kernel` regions made by fusion.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_BASE_TD
#define KILN_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::kiln";
  let summary = "Lazy tensor graphs with device placement";
  let description = [{
    Values are builtin ranked tensors. Where a value lives is recorded on the
    op that defines it: a `#kiln.device` attribute when committed, none when
    uncommitted. The placement pass fills in every op's device before fusion.
  }];
  let useDefaultAttributePrinterParser = 1;
}

def Kiln_DeviceAttr : AttrDef<Kiln_Dialect, "Device"> {
  let mnemonic = "device";
  let summary = "a resolved device: execution context, ordinal and adapter";
  let description = [{
    `#kiln.device<"vulkan:1">` names logical device 1 of the Vulkan context.
    Optional fields: `adapter` is the physical adapter identity (a Vulkan
    deviceUUID, "host" for the CPU) and `written` is the spelling the user
    wrote (for diagnostics only). Identity is (context, ordinal): use
    `isSameDevice`, never attribute equality, to compare placements.

    ```mlir
    #kiln.device<"vulkan:0", adapter = "6d65...", written = "default">
    ```
  }];
  let parameters = (ins
    StringRefParameter<"execution API: vulkan, cpu or metal">:$api,
    "int64_t":$ordinal,
    StringRefParameter<"physical adapter identity", "\"\"">:$adapter,
    StringRefParameter<"the device as the user wrote it", "\"\"">:$written);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    /// "vulkan:0", "cpu:0".
    std::string getName() const;
    /// Same execution context and ordinal: the only notion of identity.
    bool isSameDevice(DeviceAttr other) const;
  }];
}

def Kiln_CmpPredicate : I64EnumAttr<"CmpPredicate", "comparison predicate", [
  I64EnumAttrCase<"eq", 0>, I64EnumAttrCase<"ne", 1>, I64EnumAttrCase<"lt", 2>,
  I64EnumAttrCase<"le", 3>, I64EnumAttrCase<"gt", 4>, I64EnumAttrCase<"ge", 5>
]> {
  let cppNamespace = "::kiln";
}

def Kiln_ReduceKind : I64EnumAttr<"ReduceKind", "reduction", [
  I64EnumAttrCase<"sum", 0>, I64EnumAttrCase<"mean", 1>, I64EnumAttrCase<"max", 2>,
  I64EnumAttrCase<"min", 3>, I64EnumAttrCase<"prod", 4>
]> {
  let cppNamespace = "::kiln";
}

#endif // KILN_BASE_TD

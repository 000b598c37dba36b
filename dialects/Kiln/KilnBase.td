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
    /// The API, typed (parseDeviceName admits only these).
    TargetApi kind() const;
  }];
}

def Kiln_TargetApi : I32EnumAttr<"TargetApi", "what runs a target's code", [
  I32EnumAttrCase<"cpu", 0>, I32EnumAttrCase<"vulkan", 1>, I32EnumAttrCase<"metal", 2>,
  I32EnumAttrCase<"cuda", 3>
]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_TargetFeatures : I32BitEnumAttr<"TargetFeatures", "what a target offers beyond its API", [
  I32BitEnumAttrCaseNone<"none">,
  I32BitEnumAttrCaseBit<"f16", 0>, I32BitEnumAttrCaseBit<"int64", 1>,
  I32BitEnumAttrCaseBit<"coop_f16", 2>, I32BitEnumAttrCaseBit<"coop_bf16", 3>
]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
  let separator = ", ";
}

def Kiln_TargetAttr : AttrDef<Kiln_Dialect, "Target"> {
  let mnemonic = "target";
  let summary = "what code is compiled for: an API, its limits and features";
  let description = [{
    The one description of a target, built from a live device or a named
    profile (`vulkan:nvidia-hopper`, `cpu:x86-64-v3`) and put on a module
    (`kiln.target`) or a kernel; passes read it from the nearest op that
    has one, as MLIR's SPIR-V passes read `spirv.target_env`. Fields left
    out are 0 (no such limit, none assumed): `subgroup` is the subgroup size
    kernels may assume, `workgroup` the most invocations of one workgroup,
    `shared` its workgroup memory in bytes, `bindings` the storage buffers a
    kernel may bind, `loops` the loop iterations one invocation may run in
    all, `units` the compute units, `groups` the most workgroups along x, y, z,
    `ptx` the CUDA compute capability PTX may be compiled for and
    `ptx_shared` the shared memory a CTA may opt in to there, `cpu` the x86-64
    level of CPU code.

    ```mlir
    module attributes {kiln.target = #kiln.target<vulkan, "nvidia-hopper", subgroup = 32,
        workgroup = 1024, shared = 49152, bindings = 31, units = 132, groups = [2147483647, 65535, 65535],
        features = [f16, int64, coop_f16]>} { ... }
    ```
  }];
  let parameters = (ins
    "TargetApi":$api,
    StringRefParameter<"the profile's name, empty for a live device", "\"\"">:$profile,
    "int64_t":$subgroup, "int64_t":$workgroup, "int64_t":$shared, "int64_t":$bindings,
    "int64_t":$loops, "int64_t":$units,
    "int64_t":$groupsX, "int64_t":$groupsY, "int64_t":$groupsZ,
    "TargetFeatures":$features, "int64_t":$ptx, "int64_t":$ptxShared,
    StringRefParameter<"the CPU's x86-64 level", "\"\"">:$cpu);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    /// Vulkan, Metal or CUDA: kernels run as workgroups.
    bool isGpu() const { return getApi() != TargetApi::cpu; }
    bool has(TargetFeatures feature) const {
      return (getFeatures() & feature) == feature;
    }
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

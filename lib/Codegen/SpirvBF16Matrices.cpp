//===- SpirvBF16Matrices.cpp - bf16 fragments of a lowered coop_gemm ------===//

#include "kiln/Transforms/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSPIRVBF16MATRICES
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
/// `type` with its f16 A or B cooperative matrix made bf16 (directly, or as
/// a pointer's pointee: a loop variable); null when it has none.
Type asBF16(Type type) {
  if (auto matrix = dyn_cast<spirv::CooperativeMatrixType>(type)) {
    if (!matrix.getElementType().isF16() ||
        matrix.getUse() == spirv::CooperativeMatrixUseKHR::MatrixAcc)
      return nullptr;
    return spirv::CooperativeMatrixType::get(BFloat16Type::get(type.getContext()),
                                             matrix.getRows(), matrix.getColumns(),
                                             matrix.getScope(), matrix.getUse());
  }
  if (auto pointer = dyn_cast<spirv::PointerType>(type))
    if (Type pointee = asBF16(pointer.getPointeeType()))
      return spirv::PointerType::get(pointee, pointer.getStorageClass());
  return nullptr;
}

struct SpirvBF16MatricesPass
    : public kiln::impl::KilnSpirvBF16MatricesBase<SpirvBF16MatricesPass> {
  void runOnOperation() override {
    spirv::ModuleOp module = getOperation();
    // Loads keep their f16 pointers: a cooperative-matrix load reads its
    // elements' bits whatever the pointer's type.
    bool changed = false;
    module.walk([&](Operation *op) {
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            if (Type type = asBF16(arg.getType()))
              arg.setType(type), changed = true;
      for (Value result : op->getResults())
        if (Type type = asBF16(result.getType()))
          result.setType(type), changed = true;
    });
    // spirv-update-vce (before this pass) does not know that bf16 matrices
    // need BFloat16CooperativeMatrixKHR: declare it, with the bf16 type's.
    std::optional<spirv::VerCapExtAttr> vce = module.getVceTriple();
    if (!changed || !vce)
      return;
    SmallVector<spirv::Capability> caps(vce->getCapabilities());
    SmallVector<spirv::Extension> exts(vce->getExtensions());
    for (spirv::Capability c :
         {spirv::Capability::BFloat16TypeKHR, spirv::Capability::BFloat16CooperativeMatrixKHR})
      if (!llvm::is_contained(caps, c))
        caps.push_back(c);
    if (!llvm::is_contained(exts, spirv::Extension::SPV_KHR_bfloat16))
      exts.push_back(spirv::Extension::SPV_KHR_bfloat16);
    module.setVceTripleAttr(
        spirv::VerCapExtAttr::get(vce->getVersion(), caps, exts, module.getContext()));
  }
};
} // namespace

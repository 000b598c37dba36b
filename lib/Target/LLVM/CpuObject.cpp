//===- CpuObject.cpp - CPU kernels as a shared object, ahead of time ------===//
//
// The object of a kernel is made from the same LLVM dialect module as the
// JIT's (lowerCpuKernel), optimized by the same O3 pipeline for a target
// machine configured as the JIT's (JITTargetMachineBuilder), so the code for
// "host" computes exactly what the JIT's does. The kernel and its helpers
// become internal; the only export is the packed entry the runtime calls,
// which unpacks args[i] as MLIR's ExecutionEngine wrapper does.
//
//===----------------------------------------------------------------------===//

#include "lib/Target/LLVM/CpuObject.h"
#include "kiln/Compiler/Target.h"
#include "lib/Target/LLVM/CpuCompiler.h"
#include "lib/Compiler/Tuning.h"

#include "kiln/Errors.h"
#include "kiln/runtime/CpuLibrary.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <fstream>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

using namespace kiln;

extern char **environ;

namespace {
const char *const kIsaLevels[] = {"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"};

/// The packed entry `symbol` calling `impl`: args[i] points at argument i.
void addPackedEntry(llvm::Module &module, llvm::Function &impl, const std::string &symbol) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  auto *type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr}, false);
  auto *entry = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, symbol, module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", entry));
  llvm::SmallVector<llvm::Value *> args;
  for (auto [i, arg] : llvm::enumerate(impl.args())) {
    llvm::Value *slot = b.CreateConstGEP1_64(ptr, entry->getArg(0), i);
    llvm::Value *at = b.CreateLoad(ptr, slot);
    args.push_back(b.CreateLoad(arg.getType(), at));
  }
  b.CreateCall(&impl, args);
  b.CreateRetVoid();
}
} // namespace

CpuObjectEmitter::CpuObjectEmitter(const std::string &isa) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Expected<llvm::orc::JITTargetMachineBuilder> builder =
      llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    throw CompileError("cannot describe this CPU to LLVM: " +
                       llvm::toString(builder.takeError()));
  if (isa == "host") {
    name_ = "host (" + llvm::sys::getHostCPUName().str() + ")";
  } else if (std::find(std::begin(kIsaLevels), std::end(kIsaLevels), isa) != std::end(kIsaLevels)) {
    if (builder->getTargetTriple().getArch() != llvm::Triple::x86_64)
      throw Error("--cpu-isa " + isa + " is an x86-64 level; this machine is " +
                  builder->getTargetTriple().str() + ": use host");
    builder->setCPU(isa);
    builder->getFeatures() = llvm::SubtargetFeatures();
    name_ = isa;
  } else {
    std::string known = "host";
    for (const char *level : kIsaLevels)
      known += std::string(", ") + level;
    throw Error("unknown CPU ISA level '" + isa + "': use one of " + known);
  }
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  builder->setRelocationModel(llvm::Reloc::PIC_);
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> machine = builder->createTargetMachine();
  if (!machine)
    throw CompileError("cannot create a target machine for " + name_ + ": " +
                       llvm::toString(machine.takeError()));
  machine_ = std::move(*machine);
}

CpuObjectEmitter::~CpuObjectEmitter() = default;

const std::string &kiln::cpuDeviceIsa(const CompilerOptions &options) {
  // Each level is checked once, for the process.
  static std::mutex mutex;
  static std::map<std::string, std::string> checked;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = checked.find(options.cpuIsa); it != checked.end())
    return it->second;
  std::string isa = [&] {
    const std::string &level = options.cpuIsa;
    if (level == "host")
      return level;
    // The level must run here: the JIT's code runs in this process.
    CpuObjectEmitter probe(level);
    llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
    std::string missing;
    for (const std::string &feature : probe.requiredFeatures())
      if (!host.lookup(feature))
        missing += (missing.empty() ? "" : ", ") + feature;
    if (!missing.empty())
      throw Error("KILN_CPU_ISA=" + level + " needs " + missing +
                  ", which this CPU lacks: name a lower level, or unset it for this CPU's own");
    return level;
  }();
  return checked.emplace(options.cpuIsa, isa).first->second;
}

int kiln::cpuDeviceLanes(const CompilerOptions &options) {
  const std::string &isa = cpuDeviceIsa(options);
  if (isa == "x86-64-v4")
    return 16;
  if (isa != "host")
    return 8; // SSE-only levels too: LLVM splits the 8-lane vectors
  static const int hostLanes = llvm::sys::getHostCPUFeatures().lookup("avx512f") ? 16 : 8;
  return hostLanes;
}

std::vector<std::string> CpuObjectEmitter::requiredFeatures() const {
  std::vector<std::string> out;
  const llvm::MCSubtargetInfo *info = machine_->getMCSubtargetInfo();
  for (const std::string &feature : rt::checkableCpuFeatures())
    if (info->checkFeatures("+" + feature))
      out.push_back(feature);
  return out;
}

CpuObjectEmitter::Object CpuObjectEmitter::emit(Session &session, KernelOp kernel,
                                                const std::string &symbol) {
  // The CPU device's own code (this CPU's, or the level KILN_CPU_ISA
  // names) takes its tuned configs, as the JIT's does; tuning records are
  // per CPU, so another ISA level keeps the defaults.
  const CompilerOptions &options = session.options;
  if (name_.rfind("host", 0) == 0 || name_ == cpuDeviceIsa(options))
    configureKernel(session, kernel, nullptr, cpuFingerprint(options));
  return emitConfigured(kernel, symbol);
}

CpuObjectEmitter::Object CpuObjectEmitter::emitConfigured(KernelOp kernel,
                                                          const std::string &symbol,
                                                          std::string *optimizedIR) {
  // Configs sized for the ISA compiled for, not the host's.
  const llvm::MCSubtargetInfo *info = machine_->getMCSubtargetInfo();
  CpuTargetLanes lanes(info->checkFeatures("+avx512f") ? 16 : 8);
  KernelModule km = buildKernelModule(kernel, KernelLayout::Coalesced);
  // The module says what it is compiled for, as a GPU kernel's does.
  Target target;
  target.cpuIsa = name_.rfind("host", 0) == 0 ? "host" : name_;
  target.profile = target.cpuIsa == "host" ? "" : target.cpuIsa;
  (*km.module)->setAttr(kTargetAttrName, target.toAttr(kernel.getContext()));
  Object object;
  object.numBindings = km.fn.getNumArguments();
  object.outerIterations = km.outerIterations;
  object.innerIterations = km.outerIterations ? km.iterations / km.outerIterations : 1;
  lowerCpuKernel(km);

  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> module = mlir::translateModuleToLLVMIR(*km.module, ctx, symbol);
  if (!module)
    throw CompileError("translating a CPU kernel to LLVM IR failed");
  module->setDataLayout(machine_->createDataLayout());
  module->setTargetTriple(machine_->getTargetTriple());
  llvm::Function *impl = module->getFunction("kiln_kernel");
  if (!impl)
    throw CompileError("internal error: a CPU kernel module without kiln_kernel");
  // One export per object: everything else is internal, so objects of
  // several kernels link without clashing.
  for (llvm::Function &fn : *module)
    if (!fn.isDeclaration())
      fn.setLinkage(llvm::GlobalValue::InternalLinkage);
  for (llvm::GlobalVariable &global : module->globals())
    if (!global.isDeclaration())
      global.setLinkage(llvm::GlobalValue::InternalLinkage);
  impl->setName(symbol + "_impl");
  addPackedEntry(*module, *impl, symbol);
  // What the code was compiled for, beside it, so a loader holds a file's
  // metadata against the code itself (CpuLibrary::lookupValue).
  llvm::Type *i64 = llvm::Type::getInt64Ty(ctx);
  for (auto [suffix, value] :
       {std::pair{rt::kCpuOuterIterationsSuffix, object.outerIterations},
        std::pair{rt::kCpuArgumentsSuffix, int64_t(object.numBindings)}})
    new llvm::GlobalVariable(*module, i64, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                             llvm::ConstantInt::get(i64, value), symbol + suffix);
  // LLVM vectorizes loops 256 bits wide on AVX-512 CPUs unless told
  // otherwise; the kernels' own vectors are 512 already, and the row and
  // elementwise loops it vectorizes ran up to 1.6x faster at 512 here.
  if (info->checkFeatures("+avx512f"))
    for (llvm::Function &fn : *module)
      if (!fn.isDeclaration())
        fn.addFnAttr("prefer-vector-width", "512");

  if (llvm::Error error = mlir::makeOptimizingTransformer(3, 0, machine_.get())(module.get()))
    throw CompileError("optimizing a CPU kernel failed: " + llvm::toString(std::move(error)));
  object.instructions = module->getInstructionCount();
  if (optimizedIR) {
    llvm::raw_string_ostream os(*optimizedIR);
    module->print(os, nullptr);
  }
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (machine_->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    throw CompileError("LLVM cannot emit objects for " + name_);
  pm.run(*module);
  object.bytes.assign(buffer.begin(), buffer.end());
  return object;
}

namespace {
/// ld.lld: the one CMake found, else the first on PATH.
std::string lldPath() {
#ifdef KILN_LLD_PATH
  if (access(KILN_LLD_PATH, X_OK) == 0)
    return KILN_LLD_PATH;
#endif
  for (const char *name : {"ld.lld-22", "ld.lld"})
    if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(name))
      return *found;
  return "";
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    // $TMPDIR, else /tmp.
    llvm::SmallString<128> base;
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, base);
    std::string pattern = std::string(base) + "/kiln-link-XXXXXX";
    if (!mkdtemp(pattern.data()))
      throw CompileError("cannot make a temporary folder for linking CPU code in " + pattern);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};
} // namespace

std::vector<uint8_t> kiln::linkSharedObject(const std::vector<std::vector<uint8_t>> &objects) {
  std::string lld = lldPath();
  if (lld.empty())
    throw CompileError("the cpu target links its kernels with ld.lld, which is not installed: "
                       "apt install lld-22 (or compile for --target vulkan)");
  TempDir dir;
  std::vector<std::string> args = {lld,           "-shared",           "--hash-style=gnu",
                                   "-z",          "noexecstack",       "-z",
                                   "now",         "--no-undefined-version", "-o",
                                   (dir.path / "kernels.so").string()};
  for (size_t i = 0; i < objects.size(); ++i) {
    std::string file = (dir.path / ("k" + std::to_string(i) + ".o")).string();
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char *>(objects[i].data()),
              static_cast<std::streamsize>(objects[i].size()));
    if (!out)
      throw CompileError("cannot write " + file + " for linking");
    args.push_back(file);
  }
#ifdef KILN_COMPILER_RT_BUILTINS
  // What LLVM calls where the CPU lacks an instruction: the object holds
  // its own copy (the runtime has no compiler-rt).
  if (access(KILN_COMPILER_RT_BUILTINS, R_OK) == 0)
    args.push_back(KILN_COMPILER_RT_BUILTINS);
#endif
  std::string log = (dir.path / "ld.log").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int spawned = posix_spawn(&pid, lld.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    throw CompileError("cannot run " + lld + ": " + std::strerror(spawned));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  auto slurp = [](const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
  };
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::vector<uint8_t> text = slurp(log);
    throw CompileError(lld + " failed linking the CPU kernels: " +
                       std::string(text.begin(), text.end()));
  }
  std::vector<uint8_t> library = slurp((dir.path / "kernels.so").string());
  if (library.empty())
    throw CompileError(lld + " wrote no shared object");
  return library;
}

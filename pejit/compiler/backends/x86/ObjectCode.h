// Machine code for a kernel: the LLVM module -> object file step, and
// loading an object file into the process (LLVM ORC) so its entry points can
// be called. The same loader serves a fresh compile and a disk-cache hit, so
// a kernel read back from disk runs exactly the code that was compiled.
#ifndef PEJIT_RUNTIME_OBJECTCODE_H
#define PEJIT_RUNTIME_OBJECTCODE_H

#include "pejit/core/Types.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class Module;
class TargetMachine;
namespace orc {
class LLJIT;
}
} // namespace llvm

namespace pejit {

/// A TargetMachine for the host CPU and all its features (AVX-512 where
/// present), optimization level Aggressive; null if the host is unsupported.
std::unique_ptr<llvm::TargetMachine> hostTargetMachine();

/// Sets the module's triple and data layout for `machine` and runs the light
/// LLVM pass pipeline template kernels need (see ObjectCode.cpp).
Status optimizeKernel(llvm::Module &module, llvm::TargetMachine &machine);

/// Whether the backend runs loop strength reduction. Skip serves code that
/// runs once per call: LSR is a third of the backend's time on a kernel, and
/// on the template's prepare loop nest alone it takes ~20 ms.
enum class LoopStrengthReduction { Run, Skip };

/// What the backend emits: an ELF relocatable object, or its assembly text.
enum class CodeKind { Object, Assembly };

/// Compiles an optimized module to machine code, in memory.
Expected<std::string> emitCode(llvm::Module &module, llvm::TargetMachine &machine,
                               LoopStrengthReduction lsr = LoopStrengthReduction::Run,
                               CodeKind kind = CodeKind::Object);

/// An object file linked into this process. Symbols of the C library and libm
/// resolve against the process; the code lives as long as this object.
class LoadedObject {
public:
  /// Links the objects together (one kernel's codegen parts).
  static Expected<std::unique_ptr<LoadedObject>> load(const std::vector<std::string> &objects);
  ~LoadedObject();
  /// The address of a function the object defines, or an error naming it.
  Expected<void *> lookup(const std::string &symbol) const;

private:
  LoadedObject() = default;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
};

} // namespace pejit

#endif // PEJIT_RUNTIME_OBJECTCODE_H

// The host's CPU features and the x86 ISA families (HostIsa.h).
#include "pejit/compiler/backends/x86/HostIsa.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>

namespace pejit {

bool hostHasCpuFeature(const std::string &feature) {
  static const llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  auto it = features.find(feature);
  return it != features.end() && it->second;
}

std::string x86IsaProblemOnHost(X86Isa isa) {
  std::string missing = x86IsaMissingFlag(isa, hostHasCpuFeature);
  if (missing.empty())
    return "";
  return std::string("the x86 ISA family ") + x86IsaName(isa) + " needs the CPU flag " + missing +
         ", which this host (" + llvm::sys::getHostCPUName().str() + ") lacks";
}

Expected<X86Isa> resolveX86Isa(std::optional<X86Isa> requested) {
  if (!requested) {
    const char *env = std::getenv("PEJIT_X86_ISA");
    if (!env || !*env)
      return bestX86Isa(hostHasCpuFeature);
    std::string error;
    requested = parseX86Isa(env, &error);
    if (!requested)
      return Expected<X86Isa>::error("PEJIT_X86_ISA: " + error);
  }
  if (!x86IsaBuilt(*requested))
    return Expected<X86Isa>::error(std::string("the x86 ISA family ") + x86IsaName(*requested) +
                                   " has no kernels yet (docs/status.md)");
  if (std::string problem = x86IsaProblemOnHost(*requested); !problem.empty())
    return Expected<X86Isa>::error(problem);
  return *requested;
}

void applyX86Isa(mlir::ModuleOp source, llvm::Module &module, const llvm::TargetMachine &machine) {
  auto name = source->getAttrOfType<mlir::StringAttr>(kX86IsaAttr);
  std::optional<X86Isa> isa = name ? parseX86Isa(name.getValue().str()) : std::nullopt;
  if (!isa)
    return;
  for (llvm::Function &function : module) {
    if (function.isDeclaration())
      continue;
    if (*isa == X86Isa::Avx2) {
      // The machine's features, then AVX-512 and AMX off (each clears the
      // features that imply it): no instruction past AVX2 on any host.
      std::string features = machine.getTargetFeatureString().str();
      features += std::string(features.empty() ? "" : ",") + "-avx512f,-amx-tile";
      function.addFnAttr("target-features", features);
      continue;
    }
    // Without these, a host tuned to prefer 256-bit vectors (Sapphire
    // Rapids, Zen 4) splits every 16-lane vector into two ymm halves.
    function.addFnAttr("prefer-vector-width", "512");
    function.addFnAttr("min-legal-vector-width", "512");
  }
}

} // namespace pejit

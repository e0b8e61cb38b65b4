// pejit's compiler passes (Passes.td), one per file.
#ifndef PEJIT_COMPILER_PASSES_H
#define PEJIT_COMPILER_PASSES_H

#include "dialects/attn/AttnDialect.h"
#include "dialects/pe/PEDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace pejit {

#define GEN_PASS_DECL
#include "compiler/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Passes.h.inc"

} // namespace pejit

#endif // PEJIT_COMPILER_PASSES_H

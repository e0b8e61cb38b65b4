// pejit's compiler passes (Passes.td), one per file.
#ifndef PEJIT_COMPILER_PASSES_H
#define PEJIT_COMPILER_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "pejit/dialects/attn/AttnDialect.h"
#include "pejit/dialects/pe/PEDialect.h"

namespace pejit {

#define GEN_PASS_DECL
#include "pejit/compiler/passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pejit/compiler/passes/Passes.h.inc"

} // namespace pejit

#endif // PEJIT_COMPILER_PASSES_H

// Ops of the attn dialect (AttnOps.td).
#ifndef PEJIT_DIALECTS_ATTN_ATTNOPS_H
#define PEJIT_DIALECTS_ATTN_ATTNOPS_H

#include "dialects/attn/AttnDialect.h"
#include "dialects/pe/PEInterfaces.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/attn/AttnOps.h.inc"

#endif // PEJIT_DIALECTS_ATTN_ATTNOPS_H

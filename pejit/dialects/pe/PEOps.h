// Ops of the pe dialect (PEOps.td).
#ifndef PEJIT_DIALECTS_PE_PEOPS_H
#define PEJIT_DIALECTS_PE_PEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/dialects/pe/PEDialect.h"

#define GET_OP_CLASSES
#include "pejit/dialects/pe/PEOps.h.inc"

#endif // PEJIT_DIALECTS_PE_PEOPS_H

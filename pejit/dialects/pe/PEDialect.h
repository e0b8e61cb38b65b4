// The pe dialect: positional encodings as attributes and ops on tensors.
#ifndef PEJIT_DIALECTS_PE_PEDIALECT_H
#define PEJIT_DIALECTS_PE_PEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "pejit/dialects/pe/PEDialect.h.inc"

#endif // PEJIT_DIALECTS_PE_PEDIALECT_H

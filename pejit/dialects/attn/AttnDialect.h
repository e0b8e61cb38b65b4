// The attn dialect: attention with masks, GQA and positional terms.
#ifndef PEJIT_DIALECTS_ATTN_ATTNDIALECT_H
#define PEJIT_DIALECTS_ATTN_ATTNDIALECT_H

#include "mlir/IR/Dialect.h"

#include "pejit/dialects/attn/AttnDialect.h.inc"

#endif // PEJIT_DIALECTS_ATTN_ATTNDIALECT_H

#include "pejit/dialects/attn/AttnDialect.h"
#include "pejit/dialects/attn/AttnOps.h"

using namespace mlir;
using namespace pejit::attn;

#include "pejit/dialects/attn/AttnDialect.cpp.inc"

void AttnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "pejit/dialects/attn/AttnOps.cpp.inc"
      >();
}

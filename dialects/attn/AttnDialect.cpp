#include "dialects/attn/AttnDialect.h"
#include "dialects/attn/AttnOps.h"

using namespace mlir;
using namespace pejit::attn;

#include "dialects/attn/AttnDialect.cpp.inc"

void AttnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/attn/AttnOps.cpp.inc"
      >();
}

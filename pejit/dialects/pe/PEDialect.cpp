#include "pejit/dialects/pe/PEDialect.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pejit::pe;

#include "pejit/dialects/pe/PEDialect.cpp.inc"

void PEDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "pejit/dialects/pe/PEOps.cpp.inc"
      >();
}

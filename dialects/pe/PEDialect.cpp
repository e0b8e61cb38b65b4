#include "dialects/pe/PEDialect.h"
#include "dialects/pe/PEOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pejit::pe;

#include "dialects/pe/PEDialect.cpp.inc"

void PEDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "dialects/pe/PEOps.cpp.inc"
      >();
}

// The source function's signature for the float64 interpreter: parsing a
// source, and each argument's role ("query", "key_pages", "t5_table", ...)
// from how the function uses it (ReferenceInterpreter.h).
#ifndef PEJIT_REFERENCE_INTERPRETER_SIGNATURE_H
#define PEJIT_REFERENCE_INTERPRETER_SIGNATURE_H

#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEOps.h"
#include "pejit/interpreter/ReferenceInterpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

namespace pejit::interp {

/// Printed MLIR (a type, an attribute, a location).
template <typename T> std::string str(const T &printable) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << printable;
  return text;
}

/// A parsed, verified module and its one function.
struct Parsed {
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
};

/// Parses and verifies `source` (its name in messages: `name`); one
/// function with a body and one result.
Expected<Parsed> parse(const std::string &source, const std::string &name);

/// The attention that consumes a QK transform's result (pe.rope), and as
/// which operand (key: true); null for other pe ops.
std::pair<attn::AttentionOp, bool> transformTarget(pe::PositionalEncodingOpInterface op);

/// The function's signature: each argument's role, shape and type.
Expected<FunctionSignature> signatureOf(mlir::func::FuncOp func);

} // namespace pejit::interp

#endif // PEJIT_REFERENCE_INTERPRETER_SIGNATURE_H

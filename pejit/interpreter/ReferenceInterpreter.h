// A float64 interpreter of pejit's *source* IR: the test oracle for whole
// .mlir files (pejit run --check), at the tensor level and unfused.
//
//   std::vector<pejit::ReferenceArgument> args = {q, k, v, positions};
//   pejit::Expected<pejit::ref::Tensor> out =
//       pejit::interpretReference(mlirText, args);
//
// It walks the module's one function: every pe op (through
// PositionalEncodingOpInterface::evaluateReference, which each encoding
// implements in its own files) and attn.attention (with bias / key_term /
// value_term / scale / causal / window / softcap, and fused `encodings`,
// each through PositionalEncodingAttrInterface's reference methods, and
// `segments`: a packed batch runs once per sequence, PackedBatch.h), all
// with the float64 reference in reference/. It names no encoding. Any
// other op is an error that names it. Element types are ignored:
// everything is computed in float64.
//
// Position ids follow docs/semantics.md: trailing integer arguments may be
// omitted, and an omitted id tensor takes the default of the role it is used
// in (keys 0..skv-1, queries skv-sq..skv-1). RoPE's seqLen (dynamic_ntk,
// longrope) is max(position)+1 over every query and key position id that a
// RoPE of the function reads, as the kernel's prologue computes it.
#ifndef PEJIT_REFERENCE_INTERPRETER_REFERENCEINTERPRETER_H
#define PEJIT_REFERENCE_INTERPRETER_REFERENCEINTERPRETER_H

#include "pejit/core/Types.h"
#include "pejit/reference/Tensor.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace pejit {

/// One argument of the interpreted function: a float tensor (for float
/// tensor arguments) or integer position ids (for integer arguments).
using ReferenceArgument = std::variant<ref::Tensor, ref::PositionIds>;

/// One argument of a source function, for binding inputs and for messages.
struct ArgumentInfo {
  /// What the argument is used as: "query", "key", "value",
  /// "query_positions", "key_positions", "positions" (both), "bias",
  /// "key_term", "value_term", or "<op> <operand>" (e.g. "pe.t5_bias table").
  std::string role;
  std::vector<int64_t> shape; ///< -1 for a `?` dim (a length each call gives)
  bool isInteger = false;     ///< position ids (i32/i64); else a float tensor
  std::string elementType;    ///< "f32", "f16", "i64", ...
  std::string type;           ///< "tensor<1x4x64x64xf32>"
  /// Its rows add to the output through the probabilities (a value term's
  /// table [m, dv]): the output's range widens by its values'.
  bool valueTerm = false;
};

/// The signature of the module's one function.
struct FunctionSignature {
  std::string name; ///< without '@'
  std::vector<ArgumentInfo> arguments;
  /// How many leading arguments must be given: trailing integer arguments
  /// (position ids) may be omitted.
  size_t requiredArguments = 0;
  std::vector<int64_t> resultShape;
  std::string resultType;
  /// The attn.attention's mask (for FLOP counts).
  bool causal = false;
};

/// Parses `mlirSource` (pe + attn, verified) and describes its one function.
/// `name` is the source's name in diagnostics (e.g. the file's path).
Expected<FunctionSignature> describeFunction(const std::string &mlirSource,
                                             const std::string &name = "<source>");

/// Evaluates the module's one function on `arguments` (in the order of the
/// function's arguments; trailing position ids may be omitted) and returns
/// its result. Errors (parse/verify diagnostics, argument mismatches,
/// unsupported ops) come back as messages, never as aborts.
Expected<ref::Tensor> interpretReference(const std::string &mlirSource,
                                         const std::vector<ReferenceArgument> &arguments,
                                         const std::string &name = "<source>");

} // namespace pejit

#endif // PEJIT_REFERENCE_INTERPRETER_REFERENCEINTERPRETER_H

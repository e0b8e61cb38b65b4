// sin and cos of a vector of float64 angles, emitted as IR (no libm calls),
// for RoPE's per-call tables.
#ifndef PEJIT_DIALECTS_PE_VECTORSINCOS_H
#define PEJIT_DIALECTS_PE_VECTORSINCOS_H

#include "mlir/IR/Builders.h"
#include <utility>

namespace pejit::pe {

/// Returns {sin(x), cos(x)} for x a vector<N x f64>, |error| < 1e-9 for
/// |x| < 2^36 (docs/limits.md: positions below 2^31 times inverse
/// frequencies of at most 32).
std::pair<mlir::Value, mlir::Value> emitSinCos(mlir::OpBuilder &b, mlir::Location loc,
                                               mlir::Value angles);

/// {sin(x), cos(x)} as vector<2N x f32> for x the concatenation of `low`
/// and `high` (each vector<N x f64>): the range reduction in float64 as
/// emitSinCos's, then the polynomials on the reduced angle (|r| <= pi/4) in
/// f32, twice the lanes per instruction. |error| < 2e-7 for |x| < 2^36.
std::pair<mlir::Value, mlir::Value> emitSinCosF32(mlir::OpBuilder &b, mlir::Location loc,
                                                  mlir::Value low, mlir::Value high);

} // namespace pejit::pe

#endif // PEJIT_DIALECTS_PE_VECTORSINCOS_H

// pejit-unroll-annotated-loops: unrolling of the scf.for loops a template
// marks: `pejit.unroll` (unit) unrolls fully, `pejit.unroll_factor = N`
// unrolls by N (a remainder loop takes the last trips).
#include "pejit/compiler/passes/Passes.h"

#include "mlir/Dialect/SCF/Utils/Utils.h"

namespace pejit {
#define GEN_PASS_DEF_UNROLLANNOTATEDLOOPS
#include "pejit/compiler/passes/Passes.h.inc"
} // namespace pejit

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kUnrollAttr = "pejit.unroll";
constexpr llvm::StringLiteral kUnrollFactorAttr = "pejit.unroll_factor";

struct UnrollAnnotatedLoops : public pejit::impl::UnrollAnnotatedLoopsBase<UnrollAnnotatedLoops> {
  void runOnOperation() override {
    // Post-order walk: inner loops first, so an outer loop unrolls copies of
    // bodies that are already straight-line code (whichever way each of
    // them is marked).
    SmallVector<scf::ForOp> loops;
    getOperation()->walk<WalkOrder::PostOrder>([&](scf::ForOp loop) {
      if (loop->hasAttr(kUnrollAttr) || loop->hasAttr(kUnrollFactorAttr))
        loops.push_back(loop);
    });
    for (scf::ForOp loop : loops)
      if (failed(loop->hasAttr(kUnrollAttr) ? unrollFully(loop) : unrollByFactor(loop)))
        return signalPassFailure();
  }

  static LogicalResult unrollFully(scf::ForOp loop) {
    if (!loop.getStaticTripCount())
      return loop.emitError("loop marked pejit.unroll has no constant trip count "
                            "(its bounds and step must fold to constants)");
    if (failed(loopUnrollFull(loop)))
      return loop.emitError("loop marked pejit.unroll could not be unrolled");
    return success();
  }

  static LogicalResult unrollByFactor(scf::ForOp loop) {
    auto factor = loop->getAttrOfType<IntegerAttr>(kUnrollFactorAttr);
    if (!factor || factor.getInt() < 1)
      return loop.emitError("pejit.unroll_factor must be a positive integer");
    loop->removeAttr(kUnrollFactorAttr);
    if (failed(loopUnrollByFactor(loop, factor.getInt())))
      return loop.emitError("loop marked pejit.unroll_factor could not be unrolled");
    return success();
  }
};

} // namespace

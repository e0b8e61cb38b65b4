// Named pass pipelines of pejit, registered with pejit-opt (and later used by
// the runtime's stage list).
#ifndef PEJIT_COMPILER_PIPELINES_H
#define PEJIT_COMPILER_PIPELINES_H

namespace pejit {

/// Registers `pejit-simplify` (canonicalize, then cse): the clean-up run
/// between pejit's own stages.
void registerPipelines();

} // namespace pejit

#endif // PEJIT_COMPILER_PIPELINES_H

// The backward of a forward source (docs/backward.md): the text a backward
// kernel is compiled from, derived by the compiler so users write only the
// forward.
#ifndef PEJIT_COMPILER_BACKWARD_H
#define PEJIT_COMPILER_BACKWARD_H

#include "pejit/core/Types.h"

#include <string>

namespace pejit {

/// Parses `source` (one function computing one attn.attention), fuses its
/// pe ops (pe-fuse-into-attention) and derives its backward
/// (attn-derive-backward); returns the module with the backward function
/// alone, as text. Without `operandGradients`, it returns dq, dk, dv only
/// (the encodings' tensors held fixed). An error carries the compiler's
/// diagnostics.
Expected<std::string> deriveBackwardSource(const std::string &source, const std::string &name,
                                           bool operandGradients = true,
                                           bool scoreShapedGradients = true);

} // namespace pejit

#endif // PEJIT_COMPILER_BACKWARD_H

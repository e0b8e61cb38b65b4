#include "pejit/dialects/pe/PEInterfaces.h"

namespace pejit::pe {

llvm::StringRef stringifyEncodingKind(EncodingKind kind) {
  switch (kind) {
  case EncodingKind::QKTransform:
    return "qk_transform";
  case EncodingKind::ScoreBias:
    return "score_bias";
  case EncodingKind::ValueTerm:
    return "value_term";
  case EncodingKind::Additive:
    return "additive";
  }
  return "unknown";
}

} // namespace pejit::pe

#include "pejit/dialects/pe/PEAttrInterfaces.cpp.inc"
#include "pejit/dialects/pe/PEOpInterfaces.cpp.inc"

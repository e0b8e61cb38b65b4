// The consumer's own runtime/Pejit.h, on its include path: pejit's headers, all
// included with the pejit/ prefix, must never reach it.
#error "a pejit header reached the consumer's own runtime/Pejit.h"

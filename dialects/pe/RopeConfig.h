// #pe.rope -> the float64 reference's RopeConfig: one source of truth for
// RoPE frequencies, shared by the kernel hooks and the tests.
#ifndef PEJIT_DIALECTS_PE_ROPECONFIG_H
#define PEJIT_DIALECTS_PE_ROPECONFIG_H

#include "dialects/pe/PEAttrs.h"
#include "runtime/reference/Rope.h"

namespace pejit::pe {

ref::RopeConfig toReferenceConfig(RopeAttr rope);

} // namespace pejit::pe

#endif // PEJIT_DIALECTS_PE_ROPECONFIG_H

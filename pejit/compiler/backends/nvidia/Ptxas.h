// ptxas, when the machine has it: the nvidia backend's last stage turns the
// PTX into a cubin and keeps ptxas -v's resource report. Without ptxas the
// kernel is PTX only, which the CUDA driver JIT-compiles at load.
#ifndef PEJIT_COMPILER_BACKENDS_NVIDIA_PTXAS_H
#define PEJIT_COMPILER_BACKENDS_NVIDIA_PTXAS_H

#include "pejit/core/Types.h"

#include <string>

namespace pejit {

/// $PEJIT_PTXAS, $CUDA_HOME/bin/ptxas, /usr/local/cuda/bin/ptxas or the first
/// ptxas on PATH that is executable; empty when there is none.
std::string ptxasPath();

/// ptxas -arch=`arch` -v on `ptx`: the cubin and its report. An error
/// carries ptxas's messages (a rejected kernel is a compiler bug).
Status assembleWithPtxas(const std::string &ptxas, const std::string &arch, const std::string &ptx,
                         std::string &cubin, std::string &log);

} // namespace pejit

#endif // PEJIT_COMPILER_BACKENDS_NVIDIA_PTXAS_H

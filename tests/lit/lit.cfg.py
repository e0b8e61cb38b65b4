# lit configuration for pejit: FileCheck tests of dialects, passes and tools.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "pejit"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.pejit_obj_root
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["pejit-opt"], [config.pejit_tools_dir])
# The pejit CLI, with no disk cache (tests must not write to ~/.cache).
config.substitutions.append(("%pejit_build_dir", config.pejit_build_dir))
config.substitutions.append(("%pejit_source_dir", config.pejit_source_dir))
config.substitutions.append(("%cmake", config.cmake))
config.substitutions.append(("%cxx_flags", config.cxx_flags))
config.substitutions.append(("%cxx", config.cxx))
config.substitutions.append(("%pejit", config.pejit_cli))
config.environment["PEJIT_DISABLE_CACHE"] = "1"
if os.access("/usr/local/cuda/bin/ptxas", os.X_OK):
    config.available_features.add("ptxas")
# PTX needs the CUDA toolkit's libdevice (found as pejit finds it).
toolkits = [os.environ[v] for v in ("CUDA_ROOT", "CUDA_HOME", "CUDA_PATH") if v in os.environ]
if not toolkits:
    toolkits = ["/usr/local/cuda"]
if any(os.path.isdir(os.path.join(t, "nvvm", "libdevice")) for t in toolkits):
    config.available_features.add("libdevice")
# The host's x86 ISA families (docs/isa.md): tests of their instructions.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        cpu_flags = set(cpuinfo.read().split())
except OSError:
    cpu_flags = set()
if "avx512f" in cpu_flags:
    config.available_features.add("x86-avx512")
if "avx512_bf16" in cpu_flags:
    config.available_features.add("x86-avx512-bf16")
# Kernels in the avx2 family unless a test asks for another: the checks do
# not depend on the host's CPU (tests/lit/compiler/instantiate-x86-isa.mlir
# and tools/compile-isa-asm.mlir check the other families).
config.environment["PEJIT_X86_ISA"] = "avx2"

# lit configuration for pejit: FileCheck tests of dialects, passes and tools.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "pejit"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.pejit_obj_root
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["pejit-opt"], [config.pejit_tools_dir])

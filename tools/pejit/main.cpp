// pejit: compile position-aware attention written in the pe + attn dialects
// and run it on .npy tensors (like iree-compile / iree-run-module).
#include "bench/AttentionBench.h"
#include "tools/pejit/Commands.h"

#include "llvm/Support/InitLLVM.h"

#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char **argv) {
  // A crash (there should be none) prints LLVM's stack dump, not nothing.
  llvm::InitLLVM init(argc, argv);
  using namespace pejit::cli;
  if (argc < 2)
    return usageError("no command given");
  std::string command = argv[1];
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(usageText().c_str(), stdout);
    return kExitOk;
  }
  // Every command answers --help (anywhere after it) with its own usage.
  std::string usage = commandUsage(command);
  for (int i = 2; i < argc && !usage.empty(); ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("usage: pejit %s", usage.c_str() + 2); // the section, unindented
      return kExitOk;
    }
  if (command == "compile")
    return compileCommand(argc, argv);
  if (command == "run")
    return runCommand(argc, argv);
  if (command == "bench")
    return pejit::bench::runAttentionBench(argc - 2, argv + 2);
  if (command == "tune")
    return tuneCommand(argc, argv);
  if (command == "cache")
    return cacheCommand(argc, argv);
  if (command == "import-hf" || command == "diagnose" || command == "lab")
    return pythonCommand(argc, argv);
  return usageError("unknown command '" + command + "'");
}

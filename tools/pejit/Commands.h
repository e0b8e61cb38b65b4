// The pejit subcommands. Each returns the process exit code: 0 success,
// 1 an error (compile, input files, --check above tolerance), 2 a usage error.
#ifndef PEJIT_TOOLS_PEJIT_COMMANDS_H
#define PEJIT_TOOLS_PEJIT_COMMANDS_H

#include <string>

namespace pejit::cli {

constexpr int kExitOk = 0, kExitError = 1, kExitUsage = 2;

/// The full usage text.
const std::string &usageText();
/// One command's section of it ("" for an unknown command).
std::string commandUsage(const std::string &command);
/// Prints "pejit: <message>" and the usage text to stderr; returns kExitUsage.
int usageError(const std::string &message);

/// pejit compile FILE.mlir [--emit=STAGE] [--tile=MxN]
int compileCommand(int argc, char **argv);
/// pejit run FILE.mlir --input=@FILE.npy ... [--output=@FILE.npy] [...]
int runCommand(int argc, char **argv);
int tuneCommand(int argc, char **argv);
int cacheCommand(int argc, char **argv);
/// import-hf and diagnose: `python -m pejit` (PythonCommands.cpp).
int pythonCommand(int argc, char **argv);

} // namespace pejit::cli

#endif // PEJIT_TOOLS_PEJIT_COMMANDS_H

// `pejit import-hf`, `pejit diagnose` and `pejit lab`: commands written in
// Python (the pejit package reads HF config.json files; the lab trains with
// torch), run through `python -m pejit` so that the one CLI has them. $PEJIT_PYTHON names the
// interpreter (a venv's python); the default is python3 on PATH.
#include "tools/pejit/Commands.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace pejit::cli {

namespace {

// Imports the package's command module, or says what to install.
const char *kLauncher = R"py(import sys
try:
    from pejit.__main__ import main
except ImportError as e:
    sys.exit(f"pejit: {sys.argv[1]} needs the pejit Python package in this python "
             f"({sys.executable}): pip install ./python (docs/python.md), or set PEJIT_PYTHON "
             f"to a python that has it ({e})")
sys.exit(main(sys.argv[1:], prog="pejit")))py";

} // namespace

int pythonCommand(int argc, char **argv) {
  const char *python = std::getenv("PEJIT_PYTHON");
  if (!python || !*python)
    python = "python3";
  std::vector<char *> args = {const_cast<char *>(python), const_cast<char *>("-c"),
                              const_cast<char *>(kLauncher)};
  for (int i = 1; i < argc; ++i)
    args.push_back(argv[i]);
  args.push_back(nullptr);
  std::fflush(stdout);
  ::execvp(python, args.data());
  std::fprintf(stderr,
               "pejit: %s: cannot run '%s' (%s); set PEJIT_PYTHON to a python with the "
               "pejit package (docs/python.md)\n",
               argv[1], python, std::strerror(errno));
  return kExitError;
}

} // namespace pejit::cli

#include "pejit/compiler/backends/nvidia/Ptxas.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace pejit {

std::string ptxasPath() {
  std::vector<std::string> candidates;
  if (const char *env = std::getenv("PEJIT_PTXAS"))
    candidates.push_back(env);
  if (const char *home = std::getenv("CUDA_HOME"))
    candidates.push_back(std::string(home) + "/bin/ptxas");
  candidates.push_back("/usr/local/cuda/bin/ptxas");
  if (const char *path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');)
      candidates.push_back(dir + "/ptxas");
  }
  for (const std::string &candidate : candidates)
    if (!candidate.empty() && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  return "";
}

namespace {

std::string shellQuoted(const std::string &text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

} // namespace

Status assembleWithPtxas(const std::string &ptxas, const std::string &arch, const std::string &ptx,
                         std::string &cubin, std::string &log) {
  char dirTemplate[] = "/tmp/pejit-ptxas-XXXXXX";
  if (!mkdtemp(dirTemplate))
    return Status::error("ptxas: cannot create a temporary directory");
  fs::path dir = dirTemplate;
  std::ofstream(dir / "kernel.ptx", std::ios::binary) << ptx;
  std::string command = shellQuoted(ptxas) + " -arch=" + arch + " -v " +
                        shellQuoted((dir / "kernel.ptx").string()) + " -o " +
                        shellQuoted((dir / "kernel.cubin").string()) + " > " +
                        shellQuoted((dir / "log").string()) + " 2>&1";
  int status = std::system(command.c_str());
  std::ifstream logFile(dir / "log");
  log.assign(std::istreambuf_iterator<char>(logFile), {});
  std::ifstream cubinFile(dir / "kernel.cubin", std::ios::binary);
  cubin.assign(std::istreambuf_iterator<char>(cubinFile), {});
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  if (status != 0 || cubin.empty())
    return Status::error("ptxas (" + ptxas + ") rejected the kernel for " + arch + ":\n" + log);
  return Status();
}

} // namespace pejit

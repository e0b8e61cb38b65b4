// pejit compile: compile a .mlir file and print one stage's IR (or all);
// with --backward, the backward derived from it (docs/backward.md).
#include "tools/pejit/Args.h"
#include "tools/pejit/Commands.h"

#include "pejit/runtime/Pejit.h"

#include <algorithm>
#include <cstdio>

namespace pejit::cli {

namespace {

void printStage(const std::string &stage, const std::string &text, bool header) {
  if (header)
    std::printf("// ----- stage: %s -----\n", stage.c_str());
  std::fputs(text.c_str(), stdout);
  if (!text.empty() && text.back() != '\n')
    std::fputc('\n', stdout);
}

/// The nvidia stages (PTX and before), with ptxas's resource report on
/// stderr when ptxas was found.
int printNvidiaStages(Runtime &runtime, const Spec &spec, const std::string &arch,
                      NvidiaTileConfig tiles, const std::vector<std::string> &wanted) {
  Expected<NvidiaKernel> kernel = runtime.getNvidia(spec, arch, tiles);
  if (!kernel) {
    std::fprintf(stderr, "pejit: %s\n", kernel.error().c_str());
    return kExitError;
  }
  for (const std::string &stage : wanted) {
    Expected<std::string> text = kernel->ir(stage);
    if (!text) {
      std::fprintf(stderr, "pejit: %s\n", text.error().c_str());
      return kExitError;
    }
    printStage(stage, *text, wanted.size() > 1);
  }
  if (!kernel->ptxasLog().empty())
    std::fprintf(stderr, "%s", kernel->ptxasLog().c_str());
  else
    std::fprintf(stderr, "pejit: ptxas not found; PTX not assembled\n");
  return kExitOk;
}

} // namespace

int compileCommand(int argc, char **argv) {
  Args args;
  if (std::string error =
          parseArgs(argc, argv, 2, {{"emit"}, {"tile"}, {"target"}, {"backward", false}}, args);
      !error.empty())
    return usageError("compile: " + error);
  if (args.has("help")) {
    std::fputs(usageText().c_str(), stdout);
    return kExitOk;
  }
  if (args.positional.size() != 1)
    return usageError("compile: expected one FILE.mlir, got " +
                      std::to_string(args.positional.size()) + " positional arguments");
  std::string emit = args.value("emit").value_or("fused");
  std::string targetError;
  std::optional<Target> target = Target::parse(args.value("target").value_or("host"), &targetError);
  if (!target)
    return usageError("compile: --target: " + targetError);
  bool nvidia = target->kind == Target::Kind::Nvidia;
  std::vector<std::string> stages;
  for (const StageInfo &stage : Runtime::stages(*target))
    stages.push_back(stage.name);
  if (emit != "all" && std::find(stages.begin(), stages.end(), emit) == stages.end()) {
    std::string known;
    for (const std::string &stage : stages)
      known += stage + ", ";
    return usageError("compile: unknown stage '" + emit + "' (stages: " + known + "all)");
  }
  std::optional<X86TileConfig> tiles; // none: the tuned config, else the default
  if (std::optional<std::string> tile = args.value("tile")) {
    std::optional<X86TileConfig> parsed = parseTile(*tile);
    if (!parsed)
      return usageError("compile: --tile=" + *tile + " is not MxN (e.g. 96x72)");
    tiles = *parsed;
  }

  Expected<Spec> spec = Spec::fromFile(args.positional[0]);
  if (!spec) {
    std::fprintf(stderr, "pejit: %s\n", spec.error().c_str());
    return kExitError;
  }
  // --backward: the kernel of the backward derived from the forward, its
  // stages from its own (derived) source on.
  if (args.has("backward")) {
    Expected<Spec> backward = Spec::backwardOf(*spec);
    if (!backward) {
      std::fprintf(stderr, "pejit: %s: --backward: %s\n", args.positional[0].c_str(),
                   backward.error().c_str());
      return kExitError;
    }
    spec = std::move(backward);
  }
  Runtime runtime(RuntimeOptions{1});
  if (nvidia)
    return printNvidiaStages(runtime, *spec, target->arch,
                             tiles ? NvidiaTileConfig{tiles->queryTile, tiles->keyTile}
                                   : NvidiaTileConfig{},
                             emit == "all" ? stages : std::vector<std::string>{emit});
  Expected<X86Kernel> kernel = runtime.getX86(*spec, tiles);
  if (!kernel) {
    std::fprintf(stderr, "pejit: %s\n", kernel.error().c_str());
    return kExitError;
  }
  std::vector<std::string> wanted = emit == "all" ? stages : std::vector<std::string>{emit};
  for (const std::string &stage : wanted) {
    Expected<std::string> text = kernel->ir(stage);
    if (!text) {
      std::fprintf(stderr, "pejit: %s\n", text.error().c_str());
      return kExitError;
    }
    printStage(stage, *text, emit == "all");
  }
  return kExitOk;
}

} // namespace pejit::cli

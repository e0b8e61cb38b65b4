// Prints the IR of every compilation stage of one fused kernel (RoPE + ALiBi
// attention): what the user wrote, the fused op, the instantiated template,
// the LLVM dialect, LLVM IR and the x86 assembly. A stage name as argument
// prints only that stage.
//
//   print_stages [source|fused|tiled|llvm|llvm-ir|asm]
#include "pejit/runtime/Pejit.h"

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
  pejit::AttentionSpec spec;
  spec.rope = pejit::ref::RopeConfig{};
  spec.alibi = pejit::AlibiSpec{/*numHeads=*/4, /*headOffset=*/0, /*symmetric=*/false};
  spec.causal = true;
  pejit::Shape shape{1, 4, 4, 64, 64, 64, 64};
  pejit::Runtime runtime;
  pejit::Expected<pejit::X86Kernel> kernel = runtime.getX86(pejit::Spec::fromBuilder(spec, shape));
  if (!kernel) {
    std::fprintf(stderr, "%s\n", kernel.error().c_str());
    return 1;
  }
  for (const std::string &stage : pejit::X86Kernel::stageNames()) {
    if (argc > 1 && stage != argv[1])
      continue;
    pejit::Expected<std::string> text = kernel->ir(stage);
    std::printf("// ===== stage: %s =====\n%s\n", stage.c_str(),
                text ? text->c_str() : text.error().c_str());
  }
  return 0;
}

// The usage text of pejit and of each subcommand. The compile and run
// stage lists come from the backends' stage tables (Runtime::stages).
#include "tools/pejit/Commands.h"

#include "pejit/runtime/Pejit.h"

#include <cstdio>
#include <vector>

namespace pejit::cli {

namespace {

const char *kHeader = R"(usage: pejit <command> [options]

JIT-compiles attention with positional encodings, written in the pe + attn
MLIR dialects (one func.func), for the host CPU or an NVIDIA GPU.
`pejit <command> --help` prints one command's usage.

commands:
)";

/// "source, fused, tiled, ..." of a target's stage table.
std::string stageList(const Target &target) {
  std::string names;
  for (const StageInfo &stage : Runtime::stages(target))
    names += (names.empty() ? "" : ", ") + stage.name;
  return names;
}

std::string compileUsage() {
  return R"(  compile FILE.mlir [--emit=STAGE] [--tile=MxN] [--target=TARGET] [--backward]
      Compile FILE.mlir and print the IR of one stage. With --backward, the
      backward derived from it (attn.attention_backward, docs/backward.md):
      its stages from its derived source on, each of which compiles again.
      --emit=STAGE         a stage (default: fused), or all (every stage,
                           each after a header line). host: )" +
         stageList(Target::host()) + R"(
                           nvidia: )" +
         stageList(Target::nvidia()) + R"(
      --target=TARGET      host (default), nvidia (sm_80) or nvidia:sm_XX
                           (sm_80, sm_86, sm_89, sm_90): f16/bf16 tensor-core
                           kernel as PTX, assembled by ptxas when found
                           (its register/spill report goes to stderr)
      --tile=MxN           query x key tile: x86 default 144x96 (M a multiple
                           of 48, N of 6); nvidia default 64x64 (M = 16 x
                           warps: 16, 32, 64, 128; N a multiple of 16 <= 128)
)";
}

const char *kRunUsage = R"(  run FILE.mlir --input=@FILE.npy ... [--output=@FILE.npy] [options]
      Compile FILE.mlir and run it on .npy tensors.
      --input=@FILE.npy    one per function argument, in order (trailing
                           position ids may be omitted: docs/semantics.md
                           defaults). float32 for tensors (float16, and
                           bfloat16 stored as uint16, are converted to
                           float32); int32 or int64 for position ids
      --output=@FILE.npy   write the result (float32)
      --tile=MxN           as for compile
      --threads=N          worker threads (default: all cores, or
                           PEJIT_NUM_THREADS)
      --check              also evaluate the float64 reference interpreter
                           on the same inputs, print the max relative error
                           and fail (exit 1) above 1e-4
      --repeat=N           run N more times; print the median time and
                           GFLOP/s (4*b*hq*sq*skv*d FLOPs, half if causal),
                           or for a standalone kernel the GB/s of output
                           written
      --target=nvidia[:sm_XX]  run on an NVIDIA GPU through the CUDA driver:
                           f16 .npy, or bf16 stored as uint16; output
                           float32; --check at tolerance 1e-2
      --backward --grad-output=@dO.npy [--grads=DIR]
                           run the forward, then its backward
                           (docs/backward.md) for the output's gradient dO:
                           writes DIR/dq.npy, dk.npy, dv.npy and d_<operand>
                           .npy for each differentiable encoding operand.
                           With --check, each gradient's directional
                           derivative along a random direction must match
                           the float64 reference's central difference to
                           1e-4
      Compile and run times go to stderr.
)";

const char *kBenchUsage = R"(  bench [--json] [--repeats=N] [--quick] [--cases=NAME,...]
      Fused RoPE attention vs a separate RoPE pass + attention vs naive
      attention (b=1, hq=hkv=16, d=128, s=512/2048/4096 causal and not,
      decode over 4096 keys): ms, GFLOP/s, fraction of this machine's
      measured fp32 FMA peak, JIT cold compile and cache-hit time.
  bench --encodings [--repeats=N]
      Fused T5, ALiBi and Shaw (a^K + a^V, clip 16) against plain attention
      and a materialized bias tensor at the same shape (s=2048, 16 heads,
      d=64 and 128, causal and not): ms, GFLOP/s, % of peak.
  bench --shape-classes [--repeats=N] [--rounds=R]
      One kernel per shape class: the kernel for `?` lengths against the one
      for the exact lengths (LLaMA 32/8 heads, d=128, RoPE, causal prefill
      s=2048 and 512, decode over 4096 keys), alternating rounds; and a
      256-step decode loop (2048 -> 2304 keys) through one kernel: compiles,
      compile ms, median step, and the step against reading K and V once at
      the measured read bandwidth.
  bench --varlen [--repeats=N]
      A packed batch (segments) of 8 sequences of mixed lengths summing to
      4096 (LLaMA 32/8 heads, d=128, RoPE, causal) in one call, against 8
      calls and a batch padded to the longest: compiles, ms, GFLOP/s of the
      useful work, % of peak.
  bench --linear [--repeats=N]
      Linear attention (elu+1, RoPE on the numerator, causal) against
      softmax attention with fused RoPE (b=1, 4 heads, d=64 and 128,
      s=512 to 32768): ms, GFLOP/s of each one's own work, % of peak,
      and the speed ratio (where linear attention wins).
  bench --rope [--repeats=N]
      The standalone pe.rope kernel (LLaMA-3 RoPE, d=128): Q [1, 32, 4096]
      in f32 and bf16, in place, and a decode step's KV-append of one K row
      into a cache: ms, GB/s moved (read + written), % of the measured read
      bandwidth.
  bench --standalone [--repeats=N]
      The other memory-bound standalone kernels: BERT embeddings (gather +
      learned positions), Transformer embeddings (gather + sinusoidal), and
      ALiBi and T5 biases materialized as [1, 16, 2048, 2048] f32: ms, GB/s
      moved, % of the measured read bandwidth.
  bench --backward [--repeats=N]
      The attention backward (docs/backward.md) and its forward, causal,
      f32, b=1, 16 heads, d=128, s=512 to 2048: ms, GFLOP/s (the backward
      counted as 2.5x the forward's FLOPs) and % of the FMA peak.
  bench --isa [--repeats=N]
      The forward in every x86 ISA family the host has (docs/isa.md), f32
      and bf16: causal prefill s=2048 and 4096 (16 heads), decode over 2k
      and 32k keys (32/8 heads), d=128, RoPE: ms, GFLOP/s, GB/s, % of the
      family's measured peak (prefill) or read bandwidth (decode).
)";

const char *kTuneUsage =
    R"(  tune FILE.mlir [--repeats=N] [--candidates=MxN,...] [--lengths=SQxSKV,...]
      Compile and time tile configs for FILE.mlir's shape on this CPU (a
      progress bar on a terminal), print the table and store the fastest in
      the disk cache: later `run` and Runtime::getX86 without --tile use it.
      A shape class (`?` lengths) is timed at --lengths (b = 1 where `?`),
      or at a prefill of 512 and of 2048 and a decode step over 2048 keys;
      the table names them.
)";

const char *kCacheUsage = R"(  cache ls | stats | verify | clear
      The disk cache (PEJIT_CACHE_DIR): entries with size, age and shape;
      hits, misses and bytes; every entry's checksums (exit 1 if one is
      damaged); remove everything.
)";

const char *kImportHfUsage =
    R"(  import-hf CONFIG.json [--layer=N] [--stack=encoder|decoder] [--dtype=T]
      Print the .mlir of a model's attention layer from its HF config.json
      (RoPE and its scaling, heads, window, softcap, ALiBi, T5). A field
      pejit cannot honour is an error naming it. Runs `python -m pejit`
      ($PEJIT_PYTHON, default python3; the pejit package, docs/python.md).
)";

const char *kDiagnoseUsage =
    R"(  diagnose CONFIG.json [--layer=N] [--max-position=N] [--dtype=T] [--plot=OUT.png]
      A report on the model's positional encoding: its convention, the
      wavelengths before and after scaling, the angle error in f32 and bf16
      at the longest position, rotation in the model dtype, what pejit
      fuses. Python, like import-hf.
  diagnose CHECKPOINT.pt [--steps=N]
      A lab checkpoint (docs/lab.md): where perplexity climbs past the
      training length; for RoPE, the angle error at the longest evaluated
      position and pre-rotated against rotate-at-read KV-cached decoding
      over N steps (default 1000).
)";

const char *kLabUsage = R"(  lab [--quick] [--encodings=all|quick|A,B] [--out=DIR] [...]
      The PE lab (docs/lab.md): a small byte-level model per positional
      encoding, trained through pejit, evaluated at 1x-16x its training
      length; writes results.json, table.md, perplexity.png. `python -m
      pejit.lab --help` lists every option. Python, with torch.
)";

const char *kFooter = R"(
  help, --help         print this text

environment: PEJIT_CACHE_DIR, PEJIT_CACHE_MAX_MB (default 1024),
  PEJIT_DISABLE_CACHE=1, PEJIT_DUMP_IR=DIR, PEJIT_NUM_THREADS,
  PEJIT_TEMPLATE_DIR, PEJIT_TIMING=1, PEJIT_PERF=1,
  PEJIT_X86_ISA=avx2|avx512|avx512_bf16 (docs/isa.md; README has the list)

exit codes: 0 success, 1 error (compile, inputs, --check failed), 2 usage
)";

} // namespace

std::string commandUsage(const std::string &command) {
  if (command == "compile")
    return compileUsage();
  if (command == "run")
    return kRunUsage;
  if (command == "bench")
    return kBenchUsage;
  if (command == "tune")
    return kTuneUsage;
  if (command == "cache")
    return kCacheUsage;
  if (command == "import-hf")
    return kImportHfUsage;
  if (command == "diagnose")
    return kDiagnoseUsage;
  if (command == "lab")
    return kLabUsage;
  return "";
}

const std::string &usageText() {
  static const std::string text = [] {
    std::string all = kHeader;
    for (const char *command :
         {"compile", "run", "bench", "tune", "cache", "import-hf", "diagnose", "lab"})
      all += commandUsage(command) + "\n";
    all.pop_back();
    return all + kFooter;
  }();
  return text;
}

// One line for the mistake and one pointing to the help: the whole usage
// (over a hundred lines) would bury the message.
int usageError(const std::string &message) {
  std::fprintf(stderr,
               "pejit: %s\nusage: pejit <command> [options]; 'pejit --help' lists the commands, "
               "'pejit <command> --help' one command's options\n",
               message.c_str());
  return kExitUsage;
}

} // namespace pejit::cli

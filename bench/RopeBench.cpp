// `pejit bench --rope`: the standalone pe.rope kernel
// (docs/standalone-kernels.md), which is memory-bound: it reads x once and
// writes the rotated x once. LLaMA-3's RoPE (theta 500000), d = 128:
//   - prefill Q:  [1, 32, 4096, 128], f32 and bf16, out of place;
//   - in place:   the same f32 tensor rotated over itself;
//   - KV-append:  a decode step's new K row [1, 8, 1, 128] rotated into row
//                 t of a [1, 8, 4096, 128] cache (a strided view).
// Per case: the median ms, the bytes moved (read + written) per second,
// and that against this machine's measured read bandwidth (a write costs
// at least a read, so 100% is out of reach; the target is 70%).
// bench/compare_rope.py times PyTorch's HF rotate_half on the same shapes.
#include "bench/AttentionBench.h"
#include "bench/Bandwidth.h"
#include "bench/Timing.h"
#include "pejit/runtime/Pejit.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pejit::bench {

namespace {

ref::RopeConfig llama3Rope() {
  ref::RopeConfig rope;
  rope.theta = 500000.0;
  return rope;
}

} // namespace

int runRopeBench(int argc, char **argv) {
  const int repeats = repeatsOption(argc, argv, 21);
  const int threads = benchThreads();
  // The read bandwidth is sampled just before each case: on a shared host
  // it moves by a third within a minute, and one sample at the start
  // misstated later rows by as much.
  std::printf("pejit bench --rope: %d threads\n\n"
              "| case | dtype | shape | compile ms | median ms | GB/s moved | read BW GB/s "
              "(just before) | of read BW |\n"
              "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n",
              threads);
  Runtime runtime({threads});
  const int64_t heads = 32, kvHeads = 8, seq = 4096, dim = 128;
  std::mt19937 engine(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  struct Case {
    const char *name;
    DType dtype;
    bool inPlace, append;
  };
  for (Case c :
       {Case{"prefill Q", DType::F32, false, false}, Case{"prefill Q", DType::BF16, false, false},
        Case{"prefill Q in place", DType::F32, true, false},
        Case{"KV-append (decode row)", DType::F32, false, true},
        Case{"KV-append (decode row)", DType::BF16, false, true}}) {
    int64_t h = c.append ? kvHeads : heads, rows = c.append ? 1 : seq;
    int64_t unit = c.dtype == DType::F32 ? 4 : 2;
    Expected<X86Kernel> kernel =
        runtime.getX86(Spec::standaloneRope(llama3Rope(), 1, h, kDynamicDim, dim, c.dtype));
    if (!kernel) {
      std::fprintf(stderr, "rope: %s\n", kernel.error().c_str());
      return 1;
    }
    // bf16 inputs: the top half of random f32s (the values need not be
    // exact here).
    std::vector<uint16_t> x(h * rows * dim * unit / 2);
    for (uint16_t &e : x)
      e = unit == 4 ? static_cast<uint16_t>(engine())
                    : static_cast<uint16_t>(0x3f00 | (engine() & 0x7f));
    if (unit == 4) // f32 values in [-1, 1]
      for (size_t i = 0; i < x.size() / 2; ++i) {
        float f = dist(engine);
        std::memcpy(&x[2 * i], &f, 4);
      }
    int64_t capacity = c.append ? seq : rows;
    std::vector<uint16_t> out(c.append ? kvHeads * capacity * dim * unit / 2 : x.size());
    std::vector<int64_t> positions(rows);
    for (int64_t r = 0; r < rows; ++r)
      positions[r] = c.append ? seq - 1 : r;
    std::vector<int64_t> outStrides = {h * capacity * dim, capacity * dim, dim, 1};
    void *outData =
        c.inPlace ? static_cast<void *>(x.data())
        : c.append
            ? static_cast<void *>(reinterpret_cast<char *>(out.data()) + (seq - 1) * dim * unit)
            : static_cast<void *>(out.data());
    std::vector<TensorView> inputs = {{x.data(), c.dtype, {1, h, rows, dim}, {}},
                                      {positions.data(), DType::I64, {rows}, {}}};
    TensorView outView{outData, c.dtype, {1, h, rows, dim}, outStrides};
    Status status;
    double bandwidth = measureReadBandwidthGBs(threads);
    double median = medianMs(repeats, [&] { status = kernel->run(inputs, outView); });
    if (!status) {
      std::fprintf(stderr, "rope: %s\n", status.message().c_str());
      return 1;
    }
    double moved = 2.0 * h * rows * dim * unit; // read once, written once
    double gbs = moved / (median * 1e-3) / 1e9;
    std::printf("| %s | %s | [1, %lld, %lld, %lld] | %.0f | %.4f | %.1f | %.1f | %.0f%% |\n",
                c.name, c.dtype == DType::F32 ? "f32" : "bf16", (long long)h, (long long)rows,
                (long long)dim, kernel->compileMilliseconds(), median, gbs, bandwidth,
                100.0 * gbs / bandwidth);
  }
  std::printf("\n");
  return 0;
}

} // namespace pejit::bench

// The nvidia target without a GPU: `pejit compile --target=nvidia:sm_XX
// --emit=ptx` for every fused-encoding variant x {sm_80, sm_90} x {f16,
// bf16}; the PTX targets the arch and uses mma.sync m16n8k16 for the dtype,
// and ptxas (when installed) assembles it with no stack frame and no spills
// in the attention kernel. Then a run without a CUDA driver is a clear error.
#include "tests/cli/CliTestSupport.h"

#include "pejit/compiler/backends/nvidia/NvidiaLowering.h"
#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/cuda/CudaDriver.h"
#include "pejit/runtime/npy/Npy.h"
#include "tools/pejit/RunNvidia.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <unistd.h>

using namespace pejit;
using namespace pejit::clitest;

namespace {

struct Variant {
  const char *name;
  std::string mlir; // with @T@ for the element type
};

/// attn.attention with RoPE (`rope` = the attribute's extra fields) on
/// [b, hq|hkv, sq|skv, 64] tensors, causal, f32 output; `more` appends
/// encodings.
std::string ropeWith(const std::string &rope, int b, int hq, int hkv, int sq, int skv,
                     const std::string &more = "") {
  auto t = [&](int h, int s) {
    return "tensor<" + std::to_string(b) + "x" + std::to_string(h) + "x" + std::to_string(s) +
           "x64x@T@>";
  };
  std::string out = "tensor<" + std::to_string(b) + "x" + std::to_string(hq) + "x" +
                    std::to_string(sq) + "x64xf32>";
  return "func.func @f(%q: " + t(hq, sq) + ", %k: " + t(hkv, skv) + ", %v: " + t(hkv, skv) +
         ") -> " + out +
         " {\n  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout "
         "= half, theta = 10000.0, " +
         rope + ">" + more + "]) : " + t(hq, sq) + ", " + t(hkv, skv) + ", " + t(hkv, skv) +
         " -> " + out + "\n  return %o : " + out + "\n}\n";
}

std::vector<Variant> variants() {
  return {
      {"rope_gqa_causal",
       "func.func @f(%q: tensor<1x4x100x64x@T@>, %k: tensor<1x2x100x64x@T@>, "
       "%v: tensor<1x2x100x64x@T@>, %pos: tensor<100xi32>) -> tensor<1x4x100x64xf32> {\n"
       "  %qr = pe.rope %q, %pos <layout = half, theta = 500000.0> : tensor<1x4x100x64x@T@>, "
       "tensor<100xi32>\n"
       "  %kr = pe.rope %k, %pos <layout = half, theta = 500000.0> : tensor<1x2x100x64x@T@>, "
       "tensor<100xi32>\n"
       "  %o = attn.attention %qr, %kr, %v causal : tensor<1x4x100x64x@T@>, "
       "tensor<1x2x100x64x@T@>, tensor<1x2x100x64x@T@> -> tensor<1x4x100x64xf32>\n"
       "  return %o : tensor<1x4x100x64xf32>\n}\n"},
      {"rope_interleaved_partial_llama3",
       "func.func @f(%q: tensor<2x2x7x128x@T@>, %k: tensor<2x2x65x128x@T@>, "
       "%v: tensor<2x2x65x128x@T@>) -> tensor<2x2x7x128x@T@> {\n"
       "  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout = interleaved, "
       "theta = 10000.0, rotary_dim = 64, scaling = #pe.llama3<factor = 8.0, low_freq_factor "
       "= 1.0, high_freq_factor = 4.0, original_max_position = 8192>>]) : "
       "tensor<2x2x7x128x@T@>, tensor<2x2x65x128x@T@>, tensor<2x2x65x128x@T@> -> "
       "tensor<2x2x7x128x@T@>\n"
       "  return %o : tensor<2x2x7x128x@T@>\n}\n"},
      {"alibi_12_heads",
       "func.func @f(%q: tensor<1x12x63x64x@T@>, %k: tensor<1x12x257x64x@T@>, "
       "%v: tensor<1x12x257x64x@T@>) -> tensor<1x12x63x64xf32> {\n"
       "  %b = pe.alibi <num_heads = 12, form = causal> : tensor<1x12x63x257xf32>\n"
       "  %o = attn.attention %q, %k, %v bias(%b : tensor<1x12x63x257xf32>) causal : "
       "tensor<1x12x63x64x@T@>, tensor<1x12x257x64x@T@>, tensor<1x12x257x64x@T@> -> "
       "tensor<1x12x63x64xf32>\n"
       "  return %o : tensor<1x12x63x64xf32>\n}\n"},
      {"decode_gqa_split_kv",
       "func.func @f(%q: tensor<1x32x1x128x@T@>, %k: tensor<1x8x4096x128x@T@>, "
       "%v: tensor<1x8x4096x128x@T@>, %qpos: tensor<1xi64>, %kpos: tensor<4096xi64>) -> "
       "tensor<1x32x1x128x@T@> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%qpos : tensor<1xi64>) "
       "key_positions(%kpos : tensor<4096xi64>) causal encodings([#pe.rope<layout = half, "
       "theta = 500000.0>]) : tensor<1x32x1x128x@T@>, tensor<1x8x4096x128x@T@>, "
       "tensor<1x8x4096x128x@T@> -> tensor<1x32x1x128x@T@>\n"
       "  return %o : tensor<1x32x1x128x@T@>\n}\n"},
      // The other RoPE scalings (they change only the prologue's tables and
      // yarn/longrope's magnitude): prefill and decode shapes.
      {"rope_linear_alibi", ropeWith("scaling = #pe.linear<factor = 2.0>", 1, 16, 16, 33, 77,
                                     ", #pe.alibi<num_heads = 16, form = causal>")},
      {"rope_ntk_decode", ropeWith("scaling = #pe.ntk<factor = 4.0>", 1, 8, 2, 1, 300)},
      {"rope_dynamic_ntk", ropeWith("scaling = #pe.dynamic_ntk<factor = 2.0, "
                                    "original_max_position = 32>",
                                    2, 4, 4, 90, 90)},
      {"rope_yarn_decode", ropeWith("scaling = #pe.yarn<factor = 4.0, original_max_position = "
                                    "64>",
                                    1, 4, 1, 1, 129)},
      {"rope_longrope", ropeWith("rotary_dim = 8, scaling = #pe.longrope<short_factor = [1.0, "
                                 "1.5, 2.0, 3.25], long_factor = [1.0, 4.0, 8.0, 16.0], "
                                 "original_max_position = 64, factor = 32.0>",
                                 1, 2, 2, 70, 70)},
      {"decode_window",
       "func.func @f(%q: tensor<1x8x1x128x@T@>, %k: tensor<1x8x1000x128x@T@>, "
       "%v: tensor<1x8x1000x128x@T@>) -> tensor<1x8x1x128xf32> {\n"
       "  %o = attn.attention %q, %k, %v causal window(256) : tensor<1x8x1x128x@T@>, "
       "tensor<1x8x1000x128x@T@>, tensor<1x8x1000x128x@T@> -> tensor<1x8x1x128xf32>\n"
       "  return %o : tensor<1x8x1x128xf32>\n}\n"},
      // T5: the table is an encoding operand (a bare pointer after the fixed
      // kernel arguments); bidirectional, and one-sided under a causal mask
      // with a cache (sq < skv, split-KV).
      {"t5_bidirectional",
       "func.func @f(%q: tensor<1x4x90x64x@T@>, %k: tensor<1x4x90x64x@T@>, "
       "%v: tensor<1x4x90x64x@T@>, %t: tensor<32x4x@T@>) -> tensor<1x4x90x64xf32> {\n"
       "  %b = pe.t5_bias %t <num_buckets = 32, max_distance = 128> : tensor<32x4x@T@> -> "
       "tensor<1x4x90x90x@T@>\n"
       "  %o = attn.attention %q, %k, %v bias(%b : tensor<1x4x90x90x@T@>) scale(1.0) : "
       "tensor<1x4x90x64x@T@>, tensor<1x4x90x64x@T@>, tensor<1x4x90x64x@T@> -> "
       "tensor<1x4x90x64xf32>\n"
       "  return %o : tensor<1x4x90x64xf32>\n}\n"},
      {"t5_causal_decode",
       "func.func @f(%q: tensor<1x8x1x64x@T@>, %k: tensor<1x8x700x64x@T@>, "
       "%v: tensor<1x8x700x64x@T@>, %t: tensor<32x8xf32>) -> tensor<1x8x1x64x@T@> {\n"
       "  %o = attn.attention %q, %k, %v causal scale(1.0) encodings([#pe.t5_bias<num_buckets = "
       "32, max_distance = 128, bidirectional = false>]) encoding_operands(%t : "
       "tensor<32x8xf32>) : tensor<1x8x1x64x@T@>, tensor<1x8x700x64x@T@>, "
       "tensor<1x8x700x64x@T@> -> tensor<1x8x1x64x@T@>\n"
       "  return %o : tensor<1x8x1x64x@T@>\n}\n"},
      // The fallback: a user's bias tensor (f32, shared by the batch) read by
      // the kernel, with a two-sided window and RoPE on Q only.
      {"bias_tensor_window_query_rope",
       "func.func @f(%q: tensor<1x4x80x64x@T@>, %k: tensor<1x4x96x64x@T@>, "
       "%v: tensor<1x4x96x64x@T@>, %b: tensor<1x4x80x96xf32>, %p: tensor<80xi64>) -> "
       "tensor<1x4x80x64xf32> {\n"
       "  %qr = pe.rope %q, %p <layout = half, theta = 10000.0> : tensor<1x4x80x64x@T@>, "
       "tensor<80xi64>\n"
       "  %o = attn.attention %qr, %k, %v bias(%b : tensor<1x4x80x96xf32>) window(20) "
       "window_right(10) : tensor<1x4x80x64x@T@>, tensor<1x4x96x64x@T@>, "
       "tensor<1x4x96x64x@T@> -> tensor<1x4x80x64xf32>\n"
       "  return %o : tensor<1x4x80x64xf32>\n}\n"},
      // M-RoPE (Qwen2-VL sections) over [3, s] ids, GQA.
      {"mrope_sections",
       "func.func @f(%q: tensor<1x8x48x128x@T@>, %k: tensor<1x2x48x128x@T@>, "
       "%v: tensor<1x2x48x128x@T@>, %p: tensor<3x48xi64>) -> tensor<1x8x48x128x@T@> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%p : tensor<3x48xi64>) "
       "key_positions(%p : tensor<3x48xi64>) causal encodings([#pe.rope<layout = half, "
       "theta = 1000000.0, sections = [16, 24, 24]>]) : tensor<1x8x48x128x@T@>, "
       "tensor<1x2x48x128x@T@>, tensor<1x2x48x128x@T@> -> tensor<1x8x48x128x@T@>\n"
       "  return %o : tensor<1x8x48x128x@T@>\n}\n"},
      // Qwen3-VL interleaved sections, and 2-D axial RoPE over [2, s] ids.
      {"mrope_interleaved",
       "func.func @f(%q: tensor<1x4x48x128x@T@>, %k: tensor<1x4x48x128x@T@>, "
       "%v: tensor<1x4x48x128x@T@>, %p: tensor<3x48xi64>) -> tensor<1x4x48x128x@T@> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%p : tensor<3x48xi64>) "
       "key_positions(%p : tensor<3x48xi64>) causal encodings([#pe.rope<layout = half, "
       "theta = 5000000.0, sections = [24, 20, 20], interleaved_sections = true>]) : "
       "tensor<1x4x48x128x@T@>, tensor<1x4x48x128x@T@>, tensor<1x4x48x128x@T@> -> "
       "tensor<1x4x48x128x@T@>\n"
       "  return %o : tensor<1x4x48x128x@T@>\n}\n"},
      {"axial_rope",
       "func.func @f(%q: tensor<1x4x64x64x@T@>, %k: tensor<1x4x64x64x@T@>, "
       "%v: tensor<1x4x64x64x@T@>, %p: tensor<2x64xi64>) -> tensor<1x4x64x64x@T@> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%p : tensor<2x64xi64>) "
       "key_positions(%p : tensor<2x64xi64>) encodings([#pe.rope<layout = interleaved, "
       "theta = 100.0, axial = true>]) : tensor<1x4x64x64x@T@>, tensor<1x4x64x64x@T@>, "
       "tensor<1x4x64x64x@T@> -> tensor<1x4x64x64x@T@>\n"
       "  return %o : tensor<1x4x64x64x@T@>\n}\n"},
      // T5 and ALiBi measured by per-batch position ids (packed sequences).
      {"t5_alibi_by_position",
       "func.func @f(%q: tensor<2x4x64x64x@T@>, %k: tensor<2x4x64x64x@T@>, "
       "%v: tensor<2x4x64x64x@T@>, %t: tensor<32x4xf32>, %p: tensor<2x64xi64>) -> "
       "tensor<2x4x64x64x@T@> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%p : tensor<2x64xi64>) "
       "key_positions(%p : tensor<2x64xi64>) causal encodings([#pe.t5_bias<num_buckets = 32, "
       "max_distance = 128, bidirectional = false, relative_to = position>, #pe.alibi<num_heads "
       "= 4, form = causal, relative_to = position>]) encoding_operands(%t : tensor<32x4xf32>) : "
       "tensor<2x4x64x64x@T@>, tensor<2x4x64x64x@T@>, tensor<2x4x64x64x@T@> -> "
       "tensor<2x4x64x64x@T@>\n"
       "  return %o : tensor<2x4x64x64x@T@>\n}\n"},
      // Shaw a^K and a^V (shared tables, GQA, causal): Q_tile . a^K^T and
      // the value term's accumulator in shared memory.
      {"shaw_key_value",
       "func.func @f(%q: tensor<1x8x100x64x@T@>, %k: tensor<1x2x100x64x@T@>, "
       "%v: tensor<1x2x100x64x@T@>, %ak: tensor<33x64x@T@>, %av: tensor<33x64xf32>) -> "
       "tensor<1x8x100x64xf32> {\n"
       "  %o = attn.attention %q, %k, %v causal encodings([#pe.relative_key<clip = 16>, "
       "#pe.relative_value<clip = 16>]) encoding_operands(%ak, %av : tensor<33x64x@T@>, "
       "tensor<33x64xf32>) : tensor<1x8x100x64x@T@>, tensor<1x2x100x64x@T@>, "
       "tensor<1x2x100x64x@T@> -> tensor<1x8x100x64xf32>\n"
       "  return %o : tensor<1x8x100x64xf32>\n}\n"},
      // Per-head tables at d = 128 (the key tile shrinks to fit), measured
      // by position, after RoPE.
      {"shaw_per_head_rope_by_position",
       "func.func @f(%q: tensor<2x4x70x128x@T@>, %k: tensor<2x4x70x128x@T@>, "
       "%v: tensor<2x4x70x128x@T@>, %ak: tensor<4x33x128x@T@>, %av: tensor<4x33x128x@T@>, "
       "%p: tensor<2x70xi64>) -> tensor<2x4x70x128x@T@> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%p : tensor<2x70xi64>) "
       "key_positions(%p : tensor<2x70xi64>) encodings([#pe.rope<layout = half, theta = "
       "10000.0>, #pe.relative_key<clip = 16, relative_to = position>, #pe.relative_value<clip "
       "= 16, relative_to = position>]) encoding_operands(%ak, %av : tensor<4x33x128x@T@>, "
       "tensor<4x33x128x@T@>) : tensor<2x4x70x128x@T@>, tensor<2x4x70x128x@T@>, "
       "tensor<2x4x70x128x@T@> -> tensor<2x4x70x128x@T@>\n"
       "  return %o : tensor<2x4x70x128x@T@>\n}\n"},
      // Decode over a cache with a^V alone: split-KV partials carry the
      // value term in their own scale.
      {"shaw_value_decode",
       "func.func @f(%q: tensor<1x4x1x64x@T@>, %k: tensor<1x4x600x64x@T@>, "
       "%v: tensor<1x4x600x64x@T@>, %av: tensor<9x64x@T@>) -> tensor<1x4x1x64xf32> {\n"
       "  %o = attn.attention %q, %k, %v causal encodings([#pe.relative_value<clip = 4>]) "
       "encoding_operands(%av : tensor<9x64x@T@>) : tensor<1x4x1x64x@T@>, "
       "tensor<1x4x600x64x@T@>, tensor<1x4x600x64x@T@> -> tensor<1x4x1x64xf32>\n"
       "  return %o : tensor<1x4x1x64xf32>\n}\n"},
      // Softcap (tanh, from libdevice) before a T5 bias.
      {"softcap_t5",
       "func.func @f(%q: tensor<1x4x64x64x@T@>, %k: tensor<1x4x64x64x@T@>, "
       "%v: tensor<1x4x64x64x@T@>, %t: tensor<32x4xf32>) -> tensor<1x4x64x64xf32> {\n"
       "  %o = attn.attention %q, %k, %v softcap(20.0) encodings([#pe.t5_bias<num_buckets = "
       "32, max_distance = 128>]) encoding_operands(%t : tensor<32x4xf32>) : "
       "tensor<1x4x64x64x@T@>, tensor<1x4x64x64x@T@>, tensor<1x4x64x64x@T@> -> "
       "tensor<1x4x64x64xf32>\n"
       "  return %o : tensor<1x4x64x64xf32>\n}\n"},
  };
}

std::string withType(std::string text, const std::string &type) {
  for (size_t at; (at = text.find("@T@")) != std::string::npos;)
    text.replace(at, 3, type);
  return text;
}

// The GPU lowering links the CUDA toolkit's libdevice into every kernel;
// without a toolkit the compile is an error (tested below), so the tests
// that need PTX skip, saying why.
#define PEJIT_REQUIRE_LIBDEVICE()                                                                  \
  if (findCudaToolkit().empty())                                                                   \
  GTEST_SKIP() << "no CUDA toolkit with nvvm/libdevice here (CUDA_HOME, /usr/local/cuda): "        \
                  "the GPU lowering links libdevice"

bool hasPtxas() {
  for (const char *path : {"/usr/local/cuda/bin/ptxas"})
    if (::access(path, X_OK) == 0)
      return true;
  return false;
}

TEST(PejitNvidia, EveryVariantGivesPtxThatPtxasAcceptsWithoutSpills) {
  PEJIT_REQUIRE_LIBDEVICE();
  bool ptxas = hasPtxas();
  for (const Variant &variant : variants())
    for (const char *type : {"f16", "bf16"})
      for (const char *arch : {"sm_80", "sm_90"}) {
        SCOPED_TRACE(std::string(variant.name) + " " + type + " " + arch);
        TempDir dir;
        writeText(dir.file("k.mlir"), withType(variant.mlir, type));
        Result r = runPejit(dir, {"compile", dir.file("k.mlir"),
                                  std::string("--target=nvidia:") + arch, "--emit=ptx"});
        ASSERT_EQ(r.exitCode, 0) << r.err;
        EXPECT_NE(r.out.find(std::string(".target ") + arch), std::string::npos);
        EXPECT_NE(r.out.find(std::string("mma.sync.aligned.m16n8k16.row.col.f32.") + type + "." +
                             type + ".f32"),
                  std::string::npos);
        if (!ptxas) {
          EXPECT_NE(r.err.find("ptxas not found"), std::string::npos) << r.err;
          continue;
        }
        size_t entry = r.err.find("entry function 'pejit_attention' for '" + std::string(arch));
        ASSERT_NE(entry, std::string::npos) << r.err;
        size_t props = r.err.find("bytes stack frame", entry);
        ASSERT_NE(props, std::string::npos) << r.err;
        std::string line = r.err.substr(r.err.rfind('\n', props) + 1,
                                        r.err.find('\n', props) - r.err.rfind('\n', props) - 1);
        EXPECT_NE(line.find(" 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"),
                  std::string::npos)
            << line;
      }
}

TEST(PejitNvidia, DecodeSplitsTheKeysAcrossBlocksAndCombines) {
  PEJIT_REQUIRE_LIBDEVICE();
  Runtime runtime;
  Expected<Spec> spec = Spec::fromText(withType(variants()[3].mlir, "bf16"));
  ASSERT_TRUE(spec) << spec.error();
  // 1 query tile x 32 heads = 32 blocks for 64 KV tiles: split 9 ways.
  Expected<NvidiaKernel> kernel = runtime.getNvidia(*spec, "sm_90", {16, 64, 0});
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->splits(), 9);
  EXPECT_EQ(kernel->grid(), (std::vector<int64_t>{9, 32, 1}));
  EXPECT_EQ(kernel->combineGrid(), (std::vector<int64_t>{1, 32, 1}));
  EXPECT_EQ(kernel->partialRowFloats(), 32 * 9);
  EXPECT_EQ(kernel->partialOutputFloats(), 32 * 9 * 128);
  EXPECT_NE(kernel->ptx().find(".entry pejit_combine"), std::string::npos);
  // splits = 1: no combine kernel at all.
  Expected<NvidiaKernel> whole = runtime.getNvidia(*spec, "sm_90", {16, 64, 1});
  ASSERT_TRUE(whole) << whole.error();
  EXPECT_EQ(whole->splits(), 1);
  EXPECT_EQ(whole->ptx().find("pejit_combine"), std::string::npos);
}

TEST(PejitNvidia, TileConfigsSetWarpsAndKeyTile) {
  PEJIT_REQUIRE_LIBDEVICE();
  bool ptxas = hasPtxas();
  Runtime runtime;
  Expected<Spec> spec = Spec::fromText(withType(variants()[0].mlir, "bf16")); // d = 64
  ASSERT_TRUE(spec) << spec.error();
  for (NvidiaTileConfig tiles : {NvidiaTileConfig{16, 16}, NvidiaTileConfig{32, 64},
                                 NvidiaTileConfig{128, 128}, NvidiaTileConfig{64, 48}}) {
    SCOPED_TRACE(std::to_string(tiles.queryTile) + "x" + std::to_string(tiles.keyTile));
    Expected<NvidiaKernel> kernel = runtime.getNvidia(*spec, "sm_80", tiles);
    ASSERT_TRUE(kernel) << kernel.error();
    EXPECT_EQ(kernel->block()[0], 2 * tiles.queryTile); // 32 threads per 16 rows
    EXPECT_EQ(kernel->grid()[0], (100 + tiles.queryTile - 1) / tiles.queryTile * kernel->splits());
    if (ptxas)
      EXPECT_NE(kernel->ptxasLog().find("0 bytes stack frame, 0 bytes spill stores"),
                std::string::npos)
          << kernel->ptxasLog();
  }
  // Too much shared memory, or not a multiple of 16: named, not compiled.
  Expected<NvidiaKernel> big = runtime.getNvidia(
      *Spec::fromText(withType(variants()[3].mlir, "f16")), "sm_80", {128, 128}); // d = 128
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().find("bytes of shared memory for d = 128"), std::string::npos)
      << big.error();
  // The default key tile (64) halves while the block's shared memory does
  // not fit: Shaw's tables at d = 128 take 32 keys per tile.
  auto variantNamed = [](const std::string &name) {
    for (const Variant &variant : variants())
      if (variant.name == name)
        return variant;
    ADD_FAILURE() << "no variant " << name;
    return variants()[0];
  };
  Expected<Spec> shaw =
      Spec::fromText(withType(variantNamed("shaw_per_head_rope_by_position").mlir, "bf16"));
  ASSERT_TRUE(shaw) << shaw.error();
  Expected<NvidiaKernel> fitted = runtime.getNvidia(*shaw, "sm_80");
  ASSERT_TRUE(fitted) << fitted.error();
  ASSERT_TRUE(fitted->ir("tiled"));
  EXPECT_NE(fitted->ir("tiled")->find("tile_n = 32 : i64"), std::string::npos);
  Expected<NvidiaKernel> odd = runtime.getNvidia(*spec, "sm_80", {48, 64});
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().find("nvidia tile config (48, 64) is invalid"), std::string::npos)
      << odd.error();
}

TEST(PejitNvidia, UnknownArchOrStageIsAClearError) {
  PEJIT_REQUIRE_LIBDEVICE();
  TempDir dir;
  writeText(dir.file("k.mlir"), withType(variants()[0].mlir, "f16"));
  Result arch = runPejit(dir, {"compile", dir.file("k.mlir"), "--target=nvidia:sm_61"});
  EXPECT_EQ(arch.exitCode, 1);
  EXPECT_NE(arch.err.find("architecture 'sm_61' is not supported"), std::string::npos) << arch.err;
  Result stage = runPejit(dir, {"compile", dir.file("k.mlir"), "--target=nvidia", "--emit=asm"});
  EXPECT_EQ(stage.exitCode, 2);
  EXPECT_NE(stage.err.find("unknown stage 'asm' (stages: source, fused, tiled, unrolled, ptx"),
            std::string::npos)
      << stage.err;
}

TEST(PejitNvidia, CliRunChecksDtypesThenNeedsADriver) {
  PEJIT_REQUIRE_LIBDEVICE();
  TempDir dir;
  writeText(dir.file("k.mlir"), withType(variants()[2].mlir, "f16")); // ALiBi, 3 inputs
  std::vector<std::vector<int64_t>> shapes = {{1, 12, 63, 64}, {1, 12, 257, 64}, {1, 12, 257, 64}};
  const char *names[] = {"q.npy", "k.npy", "v.npy"};
  for (int i = 0; i < 3; ++i) {
    ref::Tensor t = randomTensor(shapes[i]);
    std::vector<float> values(t.data.begin(), t.data.end());
    ASSERT_EQ(
        npy::writeNpy(dir.file(names[i]), npy::fromFloat32(values, shapes[i], npy::DType::F16)),
        "");
  }
  std::vector<std::string> args = {"run",
                                   dir.file("k.mlir"),
                                   "--target=nvidia:sm_90",
                                   "--input=@" + dir.file("q.npy"),
                                   "--input=@" + dir.file("k.npy"),
                                   "--input=@" + dir.file("v.npy"),
                                   "--output=@" + dir.file("o.npy")};
  Result r = runPejit(dir, args);
  if (r.exitCode == 0)
    GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("CUDA driver"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.npy")));
  // A float32 .npy for an f16 kernel names the file and the dtype it needs.
  writeTensor(dir.file("q.npy"), randomTensor(shapes[0]));
  Result wrong = runPejit(dir, args);
  EXPECT_EQ(wrong.exitCode, 1);
  EXPECT_NE(wrong.err.find("q.npy: dtype float32 does not match query: the nvidia kernel takes "
                           "float16"),
            std::string::npos)
      << wrong.err;
}

TEST(PejitNvidia, RunWithoutADriverSaysSoAndWritesNothing) {
  PEJIT_REQUIRE_LIBDEVICE();
  Runtime runtime;
  Expected<Spec> spec = Spec::fromText(withType(variants()[0].mlir, "f16"));
  ASSERT_TRUE(spec) << spec.error();
  Expected<NvidiaKernel> kernel = runtime.getNvidia(*spec, "sm_80");
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->grid(), (std::vector<int64_t>{2, 4, 1}));
  EXPECT_EQ(kernel->block(), (std::vector<int64_t>{128, 1, 1}));
  std::vector<uint16_t> q(4 * 100 * 64), k(2 * 100 * 64), v(k.size());
  std::vector<float> out(4 * 100 * 64, -7.0f);
  Status status = kernel->run({{q.data(), DType::F16, {1, 4, 100, 64}, {}},
                               {k.data(), DType::F16, {1, 2, 100, 64}, {}},
                               {v.data(), DType::F16, {1, 2, 100, 64}, {}}},
                              {out.data(), DType::F32, {1, 4, 100, 64}, {}});
  if (status) // a machine with a GPU: covered by the GPU check, not here
    GTEST_SKIP() << "a CUDA device is present";
  EXPECT_NE(status.message().find("CUDA driver"), std::string::npos) << status.message();
  for (float x : out)
    ASSERT_EQ(x, -7.0f);
  // Wrong dtype is caught before the driver is needed.
  Status wrong = kernel->run({{q.data(), DType::F32, {1, 4, 100, 64}, {}},
                              {k.data(), DType::F16, {1, 2, 100, 64}, {}},
                              {v.data(), DType::F16, {1, 2, 100, 64}, {}}},
                             {out.data(), DType::F32, {1, 4, 100, 64}, {}});
  EXPECT_NE(wrong.message().find("input 0 (query): dtype float32 is not supported here (expected "
                                 "float16)"),
            std::string::npos)
      << wrong.message();
}

TEST(PejitNvidia, SecondRuntimeLoadsPtxAndCubinFromTheDiskCache) {
  PEJIT_REQUIRE_LIBDEVICE();
  TempDir dir;
  Expected<Spec> spec = Spec::fromText(withType(variants()[2].mlir, "bf16"));
  ASSERT_TRUE(spec) << spec.error();
  RuntimeOptions options;
  options.cacheDir = dir.file("cache");
  std::string ptx, cubin, tiled;
  {
    Runtime first(options);
    Expected<NvidiaKernel> kernel = first.getNvidia(*spec, "sm_90");
    ASSERT_TRUE(kernel) << kernel.error();
    EXPECT_EQ(first.stats().compiles, 1);
    ptx = kernel->ptx();
    cubin = kernel->cubin();
    tiled = *kernel->ir("tiled");
  }
  Runtime second(options);
  Expected<NvidiaKernel> kernel = second.getNvidia(*spec, "sm_90");
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(second.stats().compiles, 0);
  EXPECT_EQ(second.stats().diskHits, 1);
  EXPECT_EQ(kernel->ptx(), ptx);
  EXPECT_EQ(kernel->cubin(), cubin);
  EXPECT_EQ(*kernel->ir("tiled"), tiled);
  EXPECT_EQ(kernel->arch(), "sm_90");
  EXPECT_EQ(kernel->dtype(), DType::BF16);
  // 12 blocks, 5 KV tiles: split 2 ways (decode-like occupancy rule).
  EXPECT_EQ(kernel->splits(), 2);
  EXPECT_EQ(kernel->grid(), (std::vector<int64_t>{2, 12, 1}));
  // Another architecture is another key.
  Expected<NvidiaKernel> other = second.getNvidia(*spec, "sm_80");
  ASSERT_TRUE(other) << other.error();
  EXPECT_EQ(second.stats().compiles, 1);
  EXPECT_NE(other->ptx(), ptx);
}

/// One variant's GPU numerics check, as `pejit run --target=nvidia --check`
/// does it (tools/pejit/RunNvidia.cpp, in process): fresh random inputs
/// written as .npy, queries at the bottom-right of the keys (decode
/// offsets), the output poisoned with NaN before the launch, the max error
/// relative to the reference's max |value| compared with 1e-2. The kernel
/// runs through the CUDA driver, or through the launcher `fake` makes from
/// the float64 reference of the drawn inputs.
struct NumericsOutcome {
  int exitCode = -1;
  double maxRelativeError = -1; ///< -1: the comparison did not run
  ref::Tensor expected;         ///< the float64 reference on the same inputs
};

using FakeLauncherFactory = std::function<cli::NvidiaLauncher(const ref::Tensor &expected)>;

NumericsOutcome checkVariantNumerics(const Variant &variant, const std::string &type,
                                     const std::string &arch,
                                     const FakeLauncherFactory &fake = {}) {
  NumericsOutcome outcome;
  TempDir dir;
  std::string text = withType(variant.mlir, type);
  Expected<FunctionSignature> signature = describeFunction(text);
  Expected<Spec> spec = Spec::fromText(text, "k.mlir");
  EXPECT_TRUE(signature && spec);
  if (!signature || !spec)
    return outcome;
  int64_t sq = signature->resultShape[2], skv = 0;
  for (const ArgumentInfo &arg : signature->arguments)
    if (arg.role == "key")
      skv = arg.shape[2];
  std::vector<std::string> paths;
  std::vector<ReferenceArgument> referenceInputs;
  for (size_t i = 0; i < signature->arguments.size(); ++i) {
    const ArgumentInfo &arg = signature->arguments[i];
    std::string path = dir.file("arg" + std::to_string(i) + ".npy");
    if (arg.isInteger) {
      // Keys at 0 .. skv-1; queries at skv-sq .. skv-1 (the bottom-right).
      int64_t first = arg.role == "query_positions" ? skv - sq : 0, count = 1;
      for (int64_t extent : arg.shape)
        count *= extent;
      std::vector<int64_t> values(count);
      for (int64_t e = 0; e < count; ++e)
        values[e] = first + e % arg.shape.back();
      ref::PositionIds ids(arg.shape, values);
      writeIds(path, ids, arg.elementType == "i32" ? npy::DType::I32 : npy::DType::I64);
      referenceInputs.push_back(ids);
    } else {
      // Each in the dtype the IR gives it (Q, K, V 16-bit; a table maybe f32).
      npy::DType dtype = arg.elementType == "bf16"  ? npy::DType::BF16
                         : arg.elementType == "f16" ? npy::DType::F16
                                                    : npy::DType::F32;
      writeTensor(path, randomTensor(arg.shape), dtype);
      // The reference sees the values the GPU sees: rounded to 16 bits.
      npy::Expected<npy::Array> stored = npy::readNpy(path);
      std::vector<float> values = npy::toFloat32(*stored);
      referenceInputs.push_back(
          ref::Tensor(arg.shape, std::vector<double>(values.begin(), values.end())));
    }
    paths.push_back(path);
  }
  Expected<ref::Tensor> expected = interpretReference(text, referenceInputs);
  EXPECT_TRUE(expected) << expected.error();
  if (expected)
    outcome.expected = *expected;
  cli::NvidiaRunRequest request{"k.mlir", arch, *spec, *signature, paths};
  request.check = true;
  request.maxRelativeError = &outcome.maxRelativeError;
  outcome.exitCode = cli::runNvidia(request, fake ? fake(outcome.expected) : nullptr);
  return outcome;
}

/// A fake launcher: writes `values` (the reference, or a corruption of it)
/// into the output in the kernel's output dtype; with no values it leaves
/// the output untouched (its NaN poison stays).
cli::NvidiaLauncher writesOutput(std::optional<std::vector<float>> values) {
  return [values](const NvidiaKernel &, const std::vector<TensorView> &,
                  const TensorView &out) -> Status {
    if (!values)
      return Status();
    if (out.dtype == DType::F32) {
      std::copy(values->begin(), values->end(), static_cast<float *>(out.data));
      return Status();
    }
    npy::Array narrow = npy::fromFloat32(
        *values, out.shape, out.dtype == DType::BF16 ? npy::DType::BF16 : npy::DType::F16);
    std::copy(narrow.bytes.begin(), narrow.bytes.end(), static_cast<uint8_t *>(out.data));
    return Status();
  };
}

std::vector<float> asFloats(const ref::Tensor &tensor) {
  return std::vector<float>(tensor.data.begin(), tensor.data.end());
}

/// The GPU numerics of every variant, f16 and bf16, against the float64
/// reference (checkVariantNumerics). Without a CUDA driver each run must
/// fail only for the driver (so the inputs were accepted), and the test is
/// skipped; the comparison itself is tested below with fake launchers.
TEST(PejitNvidia, EveryVariantMatchesTheFloat64ReferenceOnTheGpu) {
  PEJIT_REQUIRE_LIBDEVICE();
  std::string noDriver;
  const cuda::Driver *driver = cuda::Driver::get(&noDriver);
  std::string arch = driver ? driver->device().arch() : "sm_80";
  if (driver && arch != "sm_80" && arch != "sm_86" && arch != "sm_89" && arch != "sm_90")
    GTEST_SKIP() << "the GPU is " << arch << "; pejit targets sm_80, sm_86, sm_89 and sm_90";
  for (const Variant &variant : variants())
    for (const char *type : {"f16", "bf16"}) {
      SCOPED_TRACE(std::string(variant.name) + " " + type + " " + arch);
      NumericsOutcome outcome = checkVariantNumerics(variant, type, arch);
      if (!driver) {
        EXPECT_EQ(outcome.exitCode, 1);
        EXPECT_EQ(outcome.maxRelativeError, -1); // failed at the launch, not the check
        continue;
      }
      EXPECT_EQ(outcome.exitCode, 0);
      EXPECT_GE(outcome.maxRelativeError, 0);
      EXPECT_LE(outcome.maxRelativeError, 1e-2);
    }
  if (!driver)
    GTEST_SKIP() << noDriver << " (every variant's inputs were accepted; the numerics need a GPU)";
}

/// The numerics path of the test above, with fake launchers in place of the
/// GPU: the reference's own values (rounded to the output dtype) pass; one
/// element off by 5% of the output's range, the rows of two queries
/// swapped, an output left as NaN and a launch error all fail.
TEST(PejitNvidia, GpuNumericsCheckCatchesWrongOutputsWithAFakeLauncher) {
  PEJIT_REQUIRE_LIBDEVICE();
  std::vector<Variant> all = variants();
  ASSERT_GE(all.size(), 2u);
  for (const Variant *variant : {&all.front(), &all.back()})
    for (const char *type : {"f16", "bf16"}) {
      SCOPED_TRACE(std::string(variant->name) + " " + type);
      NumericsOutcome exact = checkVariantNumerics(
          *variant, type, "sm_90", [](auto &expected) { return writesOutput(asFloats(expected)); });
      EXPECT_EQ(exact.exitCode, 0);
      EXPECT_GE(exact.maxRelativeError, 0);
      EXPECT_LE(exact.maxRelativeError, 1e-2);

      NumericsOutcome offByFivePercent =
          checkVariantNumerics(*variant, type, "sm_90", [](auto &expected) {
            std::vector<float> values = asFloats(expected);
            float range = 0;
            for (float v : values)
              range = std::max(range, std::fabs(v));
            values[values.size() / 2] += 0.05f * range;
            return writesOutput(values);
          });
      EXPECT_EQ(offByFivePercent.exitCode, 1);
      EXPECT_GT(offByFivePercent.maxRelativeError, 0.03);

      NumericsOutcome swappedRows =
          checkVariantNumerics(*variant, type, "sm_90", [](auto &expected) {
            std::vector<float> values = asFloats(expected);
            int64_t dv = expected.shape.back();
            std::swap_ranges(values.begin(), values.begin() + dv, values.begin() + dv);
            return writesOutput(values);
          });
      EXPECT_EQ(swappedRows.exitCode, 1);
      EXPECT_GT(swappedRows.maxRelativeError, 1e-2);

      NumericsOutcome untouched = checkVariantNumerics(
          *variant, type, "sm_90", [](auto &) { return writesOutput(std::nullopt); });
      EXPECT_EQ(untouched.exitCode, 1);
      EXPECT_TRUE(std::isinf(untouched.maxRelativeError)) << untouched.maxRelativeError;

      NumericsOutcome launchFails = checkVariantNumerics(*variant, type, "sm_90", [](auto &) {
        return [](const NvidiaKernel &, const std::vector<TensorView> &, const TensorView &) {
          return Status::error("fake launch failure");
        };
      });
      EXPECT_EQ(launchFails.exitCode, 1);
      EXPECT_EQ(launchFails.maxRelativeError, -1);
    }
}

/// The GPU lowering calls libdevice for math (softmax exp2, RoPE's rounding):
/// with a CUDA_HOME that has no nvvm/libdevice the compile fails naming the
/// function and the fix, and writes no PTX; without CUDA_HOME the toolkit of
/// ptxas (or /usr/local/cuda) is found by itself.
TEST(PejitNvidia, ALibdeviceCallWithoutAToolkitIsAClearError) {
  TempDir dir, emptyToolkit;
  std::map<std::string, std::optional<std::string>> saved;
  for (const char *name : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH", "PEJIT_DISABLE_CACHE"}) {
    const char *value = std::getenv(name);
    saved[name] = value ? std::optional<std::string>(value) : std::nullopt;
    ::unsetenv(name);
  }
  ::setenv("CUDA_HOME", emptyToolkit.file("").c_str(), 1);
  ::setenv("PEJIT_DISABLE_CACHE", "1", 1);
  writeText(dir.file("rope.mlir"), withType(variants()[0].mlir, "f16"));
  writeText(dir.file("alibi.mlir"), withType(variants()[2].mlir, "f16"));
  Result rope =
      runPejit(dir, {"compile", dir.file("rope.mlir"), "--target=nvidia:sm_80", "--emit=ptx"});
  Result alibi =
      runPejit(dir, {"compile", dir.file("alibi.mlir"), "--target=nvidia:sm_80", "--emit=ptx"});
  ::unsetenv("CUDA_HOME");
  bool toolkitHere = !findCudaToolkit().empty();
  Result found =
      runPejit(dir, {"compile", dir.file("rope.mlir"), "--target=nvidia:sm_80", "--emit=ptx"});
  for (const auto &[name, value] : saved)
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  EXPECT_EQ(rope.exitCode, 1);
  // Every libdevice function is named, sorted: the softmax's exp2 and RoPE's
  // rounding among them.
  EXPECT_NE(rope.err.find("the kernel calls __nv_exp2f, "), std::string::npos) << rope.err;
  EXPECT_NE(rope.err.find(", __nv_rint from libdevice, but no CUDA toolkit with "
                          "nvvm/libdevice was found: set CUDA_HOME"),
            std::string::npos)
      << rope.err;
  EXPECT_TRUE(rope.out.empty()) << rope.out;
  EXPECT_EQ(alibi.exitCode, 1);
  EXPECT_NE(alibi.err.find("from libdevice, but no CUDA toolkit"), std::string::npos) << alibi.err;
  if (!toolkitHere)
    GTEST_SKIP() << "no CUDA toolkit with nvvm/libdevice on this machine";
  EXPECT_EQ(found.exitCode, 0) << found.err;
  EXPECT_NE(found.out.find(".target sm_80"), std::string::npos);
  EXPECT_EQ(found.out.find(".extern .func"), std::string::npos);
}

} // namespace

// Standalone token-embedding kernels (docs/standalone-kernels.md
// "pe.embed"): rows of a [vocab, d] table at token ids, scaled, plus the
// absolute position embeddings on the result (sinusoidal, learned, both or
// none), in one pass; and chains of pe ops on an input x. Checked against
// the float64 interpreter on the same source, fresh random tables, tokens
// and ids each run, the output poisoned with NaN (f32: max |out - ref| <=
// 1e-4 max |ref|; f16/bf16 1e-2 against the reference on the rounded
// tables). A token outside the table is an error at run naming it.
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

struct EmbedForm {
  std::string name;
  int64_t batch, seq, vocab, dim;
  DType dtype = DType::F32;
  double scale = 1.0;
  bool sinusoidal = false;
  int64_t learnedRows = 0; ///< 0: no pe.learned
  bool dynamicShape = true;
};

/// The source of a form: pe.embed, then its pe ops, all on arguments.
std::string embedSource(const EmbedForm &f) {
  std::string t = elementName(f.dtype), d = std::to_string(f.dim);
  std::string b = f.dynamicShape ? "?" : std::to_string(f.batch);
  std::string s = f.dynamicShape ? "?" : std::to_string(f.seq);
  std::string rows = "tensor<" + b + "x" + s + "x" + d + "x" + t + ">";
  std::string words = "tensor<" + std::to_string(f.vocab) + "x" + d + "x" + t + ">";
  std::string ids = "tensor<" + s + "xi64>";
  std::string table = "tensor<" + std::to_string(f.learnedRows) + "x" + d + "x" + t + ">";
  bool anyPe = f.sinusoidal || f.learnedRows > 0;
  std::string text = "func.func @embed(%tok: tensor<" + b + "x" + s + "xi64>, %words: " + words +
                     (anyPe ? ", %pos: " + ids : "") +
                     (f.learnedRows > 0 ? ", %table: " + table : "") + ") -> " + rows + " {\n";
  char scale[64];
  std::snprintf(scale, sizeof(scale), "%.17e", f.scale);
  text += "  %v0 = pe.embed %tok, %words {scale = " + std::string(scale) + " : f64} : tensor<" + b +
          "x" + s + "xi64>, " + words + " -> " + rows + "\n";
  std::string last = "%v0";
  if (f.sinusoidal) {
    text +=
        "  %v1 = pe.sinusoidal " + last + ", %pos <base = 10000.0> : " + rows + ", " + ids + "\n";
    last = "%v1";
  }
  if (f.learnedRows > 0) {
    text += "  %v2 = pe.learned " + last +
            ", %pos, %table <max_positions = " + std::to_string(f.learnedRows) + "> : " + rows +
            ", " + ids + ", " + table + "\n";
    last = "%v2";
  }
  return text + "  return " + last + " : " + rows + "\n}\n";
}

/// Runs a form once at its lengths; returns max |out - ref| / max |ref|.
double runEmbedForm(const X86Kernel &kernel, const EmbedForm &f, std::string &error) {
  std::mt19937 &engine = rng(nullptr);
  std::uniform_int_distribution<int64_t> token(0, f.vocab - 1);
  std::vector<int64_t> tokens(f.batch * f.seq);
  for (int64_t &id : tokens)
    id = token(engine);
  auto [words, wordsRef] = randomInput({f.vocab, f.dim}, f.dtype);
  std::vector<ReferenceArgument> reference = {ref::PositionIds({f.batch, f.seq}, tokens), wordsRef};
  std::vector<TensorView> inputs = {{tokens.data(), DType::I64, {f.batch, f.seq}, {}},
                                    {words.bytes.data(), f.dtype, {f.vocab, f.dim}, {}}};
  // Positions anywhere in a learned table (or up to 1e5), in any order.
  std::uniform_int_distribution<int64_t> position(0, f.learnedRows > 0 ? f.learnedRows - 1 : 99999);
  std::vector<int64_t> ids(f.seq);
  for (int64_t &p : ids)
    p = position(engine);
  std::optional<std::pair<npy::Array, ref::Tensor>> table;
  if (f.sinusoidal || f.learnedRows > 0) {
    reference.push_back(ref::PositionIds({f.seq}, ids));
    inputs.push_back({ids.data(), DType::I64, {f.seq}, {}});
  }
  if (f.learnedRows > 0) {
    table = randomInput({f.learnedRows, f.dim}, f.dtype);
    reference.push_back(table->second);
    inputs.push_back({table->first.bytes.data(), f.dtype, {f.learnedRows, f.dim}, {}});
  }
  Expected<ref::Tensor> expected = interpretReference(embedSource(f), reference);
  if (!expected) {
    error = expected.error();
    return 0;
  }
  std::vector<int64_t> shape = {f.batch, f.seq, f.dim};
  npy::Array out = poisonedOutput(shape, f.dtype);
  if (Status status = kernel.run(inputs, {out.bytes.data(), f.dtype, shape, {}}); !status) {
    error = status.message();
    return 0;
  }
  return maxRelativeError(npy::toFloat32(out), *expected);
}

TEST(StandaloneEmbed, EveryFormMatchesTheReference) {
  const EmbedForm forms[] = {
      {"gather alone", 2, 33, 100, 64},
      {"Transformer: sqrt(d) scale + sinusoidal", 2, 40, 500, 128, DType::F32, std::sqrt(128.0),
       true},
      {"BERT-base width: learned", 1, 50, 1000, 768, DType::F32, 1.0, false, 512},
      {"both, f16", 2, 17, 300, 64, DType::F16, 2.5, true, 64},
      {"both, bf16, static shape", 3, 9, 77, 64, DType::BF16, 1.0, true, 16, false},
  };
  for (const EmbedForm &f : forms) {
    SCOPED_TRACE(f.name);
    Expected<Spec> spec = Spec::fromText(embedSource(f));
    ASSERT_TRUE(spec) << spec.error();
    Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    std::string error;
    double rel = runEmbedForm(*kernel, f, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, f.dtype == DType::F32 ? 1e-4 : 1e-2);
  }
}

TEST(StandaloneEmbed, OneKernelServesEveryLength) {
  EmbedForm f{"both", 1, 1, 200, 64, DType::F32, 3.0, true, 400};
  Expected<Spec> spec = Spec::fromText(embedSource(f));
  ASSERT_TRUE(spec) << spec.error();
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  for (int64_t s : {1, 7, 64, 65, 300}) {
    SCOPED_TRACE("s = " + std::to_string(s));
    f.seq = s;
    f.batch = s == 1 ? 3 : 2;
    Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    std::string error;
    double rel = runEmbedForm(*kernel, f, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
  EXPECT_LE(suiteRuntime().stats().compiles - compilesBefore, 1);
}

TEST(StandaloneEmbed, TokensOutsideTheTableAreErrorsThatNameThem) {
  EmbedForm f{"gather alone", 2, 5, 100, 64};
  Expected<Spec> spec = Spec::fromText(embedSource(f));
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> words(100 * 64, 0.5f), out(2 * 5 * 64, -7.0f);
  struct Bad {
    std::string name;
    std::vector<int32_t> tokens;
    std::string message;
  };
  const Bad cases[] = {
      {"one past the last row",
       {0, 1, 2, 3, 4, 5, 6, 7, 8, 100},
       "input 0 (tokens): token 100 at [1, 4] is outside the table's 100 rows [0, 100)"},
      {"negative", {0, -3, 2, 3, 4, 5, 6, 7, 8, 9}, "token -3 at [0, 1]"},
  };
  for (const Bad &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<int32_t> tokens = c.tokens; // i32 tokens are accepted as well
    Status status = kernel->run(
        {{tokens.data(), DType::I32, {2, 5}, {}}, {words.data(), DType::F32, {100, 64}, {}}},
        {out.data(), DType::F32, {2, 5, 64}, {}});
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status.message();
    for (float v : out)
      ASSERT_EQ(v, -7.0f);
  }
  // A table of other rows is named.
  std::vector<int64_t> tokens(10, 1);
  Status status = kernel->run(
      {{tokens.data(), DType::I64, {2, 5}, {}}, {words.data(), DType::F32, {99, 64}, {}}},
      {out.data(), DType::F32, {2, 5, 64}, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("token_table"), std::string::npos) << status.message();
}

TEST(StandaloneChain, SeveralPeOpsOnAnInputRunInOnePass) {
  struct Chain {
    std::string name, source;
    std::vector<int64_t> shape, tableShape;
    int64_t maxPosition;
  };
  const Chain chains[] = {
      {"sinusoidal then learned on x",
       "func.func @f(%x: tensor<?x?x64xf32>, %pos: tensor<?xi64>, %t: tensor<32x64xf32>) -> "
       "tensor<?x?x64xf32> {\n"
       "  %a = pe.sinusoidal %x, %pos <base = 10000.0> : tensor<?x?x64xf32>, tensor<?xi64>\n"
       "  %b = pe.learned %a, %pos, %t <max_positions = 32> : tensor<?x?x64xf32>, tensor<?xi64>, "
       "tensor<32x64xf32>\n  return %b : tensor<?x?x64xf32>\n}\n",
       {2, 20, 64},
       {32, 64},
       32},
      {"two RoPEs (the second reads its tables from a later part of the scratch)",
       "func.func @f(%x: tensor<?x4x?x64xf32>, %pos: tensor<?xi64>) -> tensor<?x4x?x64xf32> {\n"
       "  %a = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<?x4x?x64xf32>, "
       "tensor<?xi64>\n"
       "  %b = pe.rope %a, %pos <layout = interleaved, theta = 500.0> : tensor<?x4x?x64xf32>, "
       "tensor<?xi64>\n  return %b : tensor<?x4x?x64xf32>\n}\n",
       {2, 4, 21, 64},
       {},
       4096},
  };
  for (const Chain &c : chains) {
    SCOPED_TRACE(c.name);
    Expected<Spec> spec = Spec::fromText(c.source);
    ASSERT_TRUE(spec) << spec.error();
    Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    std::string error;
    int64_t seq = c.shape[c.shape.size() - 2];
    double rel = runAndCompare(*kernel, c.source, c.shape, {seq}, DType::F32, c.maxPosition, false,
                               error, c.tableShape);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
}

} // namespace

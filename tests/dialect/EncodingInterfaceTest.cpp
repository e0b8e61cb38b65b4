// The PE interfaces as the compiler will use them: every pe op reports its
// encoding and kind through PositionalEncodingOpInterface, attributes built
// from C++ are checked like parsed ones, and the fused attribute is the op's.
#include "pejit/dialects/attn/AttnDialect.h"
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/dialects/pe/PEDialect.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "gtest/gtest.h"

#include <map>
#include <set>
#include <string>

using namespace mlir;
using namespace pejit::pe;

namespace {

class EncodingInterfaceTest : public ::testing::Test {
protected:
  EncodingInterfaceTest() {
    context.loadDialect<PEDialect, pejit::attn::AttnDialect, func::FuncDialect>();
  }
  MLIRContext context;
};

constexpr const char *kEveryEncoding = R"mlir(
func.func @all(%q: tensor<1x4x8x16xf32>, %pos: tensor<8xi32>, %t5: tensor<32x4xf32>,
               %ak: tensor<5x16xf32>, %x: tensor<2x8x16xf32>, %emb: tensor<64x16xf32>,
               %tok: tensor<2x8xi64>) {
  %0 = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x8x16xf32>, tensor<8xi32>
  %1 = pe.alibi <num_heads = 4, form = causal> : tensor<1x4x8x8xf32>
  %2 = pe.t5_bias %t5 <num_buckets = 32, max_distance = 128> : tensor<32x4xf32> -> tensor<1x4x8x8xf32>
  %3 = pe.relative_key %q, %ak <clip = 2> : tensor<1x4x8x16xf32>, tensor<5x16xf32> -> tensor<1x4x8x8xf32>
  %4 = pe.relative_value %ak <clip = 2> : tensor<5x16xf32> -> tensor<8x8x16xf32>
  %5 = pe.sinusoidal %x, %pos <> : tensor<2x8x16xf32>, tensor<8xi32>
  %6 = pe.learned %x, %pos, %emb <max_positions = 64> : tensor<2x8x16xf32>, tensor<8xi32>, tensor<64x16xf32>
  // The token gather: a pe op that is not a positional encoding.
  %8 = pe.embed %tok, %emb : tensor<2x8xi64>, tensor<64x16xf32> -> tensor<2x8x16xf32>
  // Encodings that exist only in the fused form (no pe op makes them).
  %7 = attn.attention %q, %q, %q encodings([#pe.bias_tensor]) encoding_operands(%1 : tensor<1x4x8x8xf32>) : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return
}
)mlir";

/// (mnemonic, TypeID) of each attribute in the dialect's generated list: the
/// list PEDialect::initialize() registers.
template <typename... Attrs> std::vector<std::pair<std::string, TypeID>> attributeList() {
  return {{Attrs::getMnemonic().str(), TypeID::get<Attrs>()}...};
}

std::vector<std::pair<std::string, TypeID>> registeredPeAttributes() {
  return attributeList<
#define GET_ATTRDEF_LIST
#include "pejit/dialects/pe/PEAttrs.cpp.inc"
      >();
}

// Walks what the dialect registers, not a list written here: every pe op
// implements PositionalEncodingOpInterface and appears in kEveryEncoding
// (so its kind is checked), and every pe attribute is either an encoding
// (PositionalEncodingAttrInterface, the attribute of one of those ops) or a
// RoPE scaling (RopeScalingAttrInterface). A new op or attribute that skips
// the interfaces, or the program above, fails here.
TEST_F(EncodingInterfaceTest, EveryPeOpReportsItsKindThroughTheInterface) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kEveryEncoding, &context);
  ASSERT_TRUE(module);
  std::map<std::string, EncodingKind> kinds;
  std::set<const void *> encodingsSeen;
  module->walk([&](PositionalEncodingOpInterface op) {
    // The op's kind is its attribute's kind: fusion moves only the attribute.
    EXPECT_EQ(op.getEncodingKind(), op.getPositionalEncoding().getEncodingKind());
    kinds[op->getName().getStringRef().str()] = op.getEncodingKind();
    encodingsSeen.insert(op.getPositionalEncoding().getTypeID().getAsOpaquePointer());
  });
  module->walk([&](pejit::attn::AttentionOp op) {
    for (Attribute attr : op.getEncodingsAttr())
      encodingsSeen.insert(attr.getTypeID().getAsOpaquePointer());
  });

  // pe ops that are not encodings: the token gather (pe.embed), which the
  // absolute embeddings add to, and the gradients of a table
  // (pe.embed_grad), of a RoPE's position scale (pe.rope_scale_grad), of
  // a materialized bias's tensor (pe.score_bias_grad) and of a materialized
  // Shaw term (pe.relative_term_grad). They must not claim the interface.
  const std::set<std::string> notEncodings = {"pe.embed", "pe.embed_grad", "pe.rope_scale_grad",
                                              "pe.score_bias_grad", "pe.relative_term_grad"};
  std::set<std::string> registeredOps, walkedOps;
  for (RegisteredOperationName op : context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "pe")
      continue;
    if (notEncodings.count(op.getStringRef().str())) {
      EXPECT_FALSE(op.hasInterface<PositionalEncodingOpInterface>()) << op.getStringRef().str();
      continue;
    }
    registeredOps.insert(op.getStringRef().str());
    EXPECT_TRUE(op.hasInterface<PositionalEncodingOpInterface>())
        << op.getStringRef().str() << " does not implement PositionalEncodingOpInterface";
  }
  for (const auto &[name, kind] : kinds)
    walkedOps.insert(name);
  EXPECT_FALSE(registeredOps.empty());
  EXPECT_EQ(registeredOps, walkedOps) << "kEveryEncoding must use every registered pe op";

  std::vector<std::pair<std::string, TypeID>> attributes = registeredPeAttributes();
  EXPECT_GE(attributes.size(), registeredOps.size());
  for (const auto &[mnemonic, typeID] : attributes) {
    const AbstractAttribute &abstract = AbstractAttribute::lookup(typeID, &context);
    bool encoding = abstract.hasInterface(PositionalEncodingAttrInterface::getInterfaceID());
    bool scaling = abstract.hasInterface(RopeScalingAttrInterface::getInterfaceID());
    EXPECT_NE(encoding, scaling) << "#pe." << mnemonic
                                 << " must be an encoding or a RoPE scaling, exactly one";
    if (encoding)
      EXPECT_TRUE(encodingsSeen.count(typeID.getAsOpaquePointer()))
          << "#pe." << mnemonic
          << " is the encoding of no op and no fused attention in kEveryEncoding";
  }

  // The kinds the design gives each op (ARCHITECTURE: the encoding kinds).
  std::map<std::string, EncodingKind> expected = {
      {"pe.rope", EncodingKind::QKTransform},         {"pe.alibi", EncodingKind::ScoreBias},
      {"pe.t5_bias", EncodingKind::ScoreBias},        {"pe.relative_key", EncodingKind::ScoreBias},
      {"pe.relative_value", EncodingKind::ValueTerm}, {"pe.sinusoidal", EncodingKind::Additive},
      {"pe.learned", EncodingKind::Additive}};
  EXPECT_EQ(kinds, expected);
}

TEST_F(EncodingInterfaceTest, BuilderAttributesAreUniquedAndPrintLikeParsedOnes) {
  auto scaling = Llama3ScalingAttr::get(&context, 8.0, 1.0, 4.0, 8192);
  auto rope = RopeAttr::get(&context, RopeLayout::Half, 500000.0, std::nullopt, scaling, {}, false,
                            false, RopeSides::Both, false, false);
  auto parsed = parseAttribute(
      "#pe.rope<layout = half, theta = 500000.0, scaling = #pe.llama3<factor = 8.0, "
      "low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>>",
      &context);
  EXPECT_EQ(Attribute(rope), parsed);
  // A different theta is a different encoding.
  auto other = RopeAttr::get(&context, RopeLayout::Half, 10000.0, std::nullopt, scaling, {}, false,
                             false, RopeSides::Both, false, false);
  EXPECT_NE(Attribute(rope), Attribute(other));
}

TEST_F(EncodingInterfaceTest, CheckedBuilderRejectsBadParametersWithAMessage) {
  std::string message;
  context.getDiagEngine().registerHandler([&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  auto emitError = [&]() { return mlir::emitError(UnknownLoc::get(&context)); };
  // Arguments of the exact parameter types select the generated, verifying
  // getChecked (a near match would pick the generic template instead).
  std::optional<F64> none;
  auto bad = YarnScalingAttr::getChecked(emitError, &context, F64(4.0), int64_t(4096), F64(1.0),
                                         F64(32.0), none, none, none, true);
  EXPECT_FALSE(bad);
  EXPECT_EQ(message, "yarn beta_fast (1.0) must be greater than beta_slow (32.0)");

  auto odd =
      RopeAttr::getChecked(emitError, &context, RopeLayout::Interleaved, F64(10000.0),
                           std::optional<int64_t>(7), RopeScalingAttrInterface(),
                           llvm::ArrayRef<int64_t>(), false, false, RopeSides::Both, false, false);
  EXPECT_FALSE(odd);
  EXPECT_EQ(message, "rope rotary_dim must be even, got 7");
}

TEST_F(EncodingInterfaceTest, FloatParametersRoundTripExactly) {
  // 0.1 + 0.2 is not 0.3: the printer must keep every bit.
  double awkward = 0.1 + 0.2;
  auto attr = LinearScalingAttr::get(&context, awkward);
  std::string text;
  llvm::raw_string_ostream os(text);
  Attribute(attr).print(os);
  auto reparsed = parseAttribute(text, &context);
  ASSERT_TRUE(reparsed) << text;
  EXPECT_EQ(cast<LinearScalingAttr>(reparsed).getFactor().value, awkward) << text;
}

} // namespace

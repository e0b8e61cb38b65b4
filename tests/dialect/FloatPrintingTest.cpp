// Every float a pe attribute prints parses back to the same bits: finite
// values in the shortest decimal that does, inf and NaN as hex (the form
// MLIR's float literals read). Before, theta = 0x7FF0000000000000 printed as
// "theta = inf", which the parser rejected.
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/dialects/pe/PEDialect.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/bit.h"
#include "gtest/gtest.h"

#include <cmath>
#include <limits>
#include <random>

using namespace mlir;
using namespace pejit::pe;

namespace {

/// Parses "#pe.sinusoidal<base = TEXT>" (a verifier that accepts any
/// positive finite base) and returns the base's bits; for non-finite values
/// the verifier's message must carry the same hex text.
TEST(FloatPrinting, NonFiniteValuesPrintAsHexThatParses) {
  MLIRContext context;
  context.loadDialect<PEDialect>();
  for (double value :
       {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
        std::numeric_limits<double>::quiet_NaN()}) {
    std::string text = formatF64(value);
    ASSERT_EQ(text.rfind("0x", 0), 0u) << text;
    std::string error;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      error = diag.str();
      return success();
    });
    Attribute attr = parseAttribute("#pe.sinusoidal<base = " + text + ">", &context);
    EXPECT_FALSE(attr) << "non-finite base verified";
    EXPECT_NE(error.find("got " + text), std::string::npos) << error;
  }
}

TEST(FloatPrinting, FiniteValuesRoundtripExactly) {
  MLIRContext context;
  context.loadDialect<PEDialect>();
  std::mt19937_64 rng(std::random_device{}());
  std::vector<double> values = {
      1.0,    0.1,           1e-6, 500000.0, 1e300, 5e-324, 1.7976931348623157e308,
      3.0e-5, 123456789.125, 1e15, 1e16};
  for (int i = 0; i < 2000; ++i) {
    double x;
    do
      x = llvm::bit_cast<double>(rng());
    while (!std::isfinite(x) || x <= 0);
    values.push_back(x);
  }
  for (double value : values) {
    std::string text = formatF64(value);
    auto attr = mlir::dyn_cast_or_null<SinusoidalAttr>(
        parseAttribute("#pe.sinusoidal<base = " + text + ">", &context));
    ASSERT_TRUE(attr) << text;
    EXPECT_EQ(llvm::bit_cast<uint64_t>(static_cast<double>(attr.getBase())),
              llvm::bit_cast<uint64_t>(value))
        << text;
  }
}

} // namespace

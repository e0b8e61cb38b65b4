// Splitting a module by function for concurrent codegen, and linking the
// parts' objects back together (runtime/ParallelCodegen.h, ObjectCode.h).
#include "compiler/Registration.h"
#include "runtime/CompiledKernel.h"
#include "runtime/ObjectCode.h"
#include "runtime/ParallelCodegen.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <random>

namespace pejit {
namespace {

// big(x) = small(x) + helper(x) + 1, small(x) = helper(x) * x, helper(x) = 3x:
// big calls into another part once split in two, and both parts call helper.
constexpr const char *kModule = R"mlir(
llvm.func @helper(%x: i64) -> i64 attributes {sym_visibility = "private"} {
  %c3 = llvm.mlir.constant(3 : i64) : i64
  %r = llvm.mul %x, %c3 : i64
  llvm.return %r : i64
}
llvm.func @small(%x: i64) -> i64 {
  %h = llvm.call @helper(%x) : (i64) -> i64
  %r = llvm.mul %h, %x : i64
  llvm.return %r : i64
}
llvm.func @big(%x: i64) -> i64 {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %s = llvm.call @small(%x) : (i64) -> i64
  %h = llvm.call @helper(%x) : (i64) -> i64
  %a = llvm.add %s, %h : i64
  %b = llvm.add %a, %c1 : i64
  %t = llvm.add %b, %c1 : i64
  %u = llvm.sub %t, %c1 : i64
  llvm.return %u : i64
}
llvm.func @unused_helper(%x: i64) -> i64 attributes {sym_visibility = "private"} {
  llvm.return %x : i64
}
)mlir";

class ParallelCodegenTest : public ::testing::Test {
protected:
  void SetUp() override {
    initializeCompilerOnce();
    mlir::DialectRegistry registry;
    registerDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    module = mlir::parseSourceString<mlir::ModuleOp>(kModule, &context);
    ASSERT_TRUE(module);
  }

  static mlir::LLVM::LLVMFuncOp function(mlir::ModuleOp part, llvm::StringRef name) {
    return part.lookupSymbol<mlir::LLVM::LLVMFuncOp>(name);
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

TEST_F(ParallelCodegenTest, EachPublicFunctionIsDefinedInExactlyOnePart) {
  auto parts = partitionByFunction(*module, 2);
  ASSERT_EQ(parts.size(), 2u);
  int bigDefinitions = 0, smallDefinitions = 0;
  for (auto &part : parts) {
    mlir::LLVM::LLVMFuncOp big = function(*part, "big"), small = function(*part, "small");
    ASSERT_TRUE(big && small) << "a part lost a declaration";
    bigDefinitions += !big.isExternal();
    smallDefinitions += !small.isExternal();
    // big is the larger, so it has a part of its own; small goes to the other.
    EXPECT_NE(big.isExternal(), small.isExternal());
    // helper: an internal copy wherever it is called; never the unused one.
    mlir::LLVM::LLVMFuncOp helper = function(*part, "helper");
    ASSERT_TRUE(helper);
    EXPECT_FALSE(helper.isExternal());
    EXPECT_EQ(helper.getLinkage(), mlir::LLVM::Linkage::Internal);
    EXPECT_FALSE(function(*part, "unused_helper"));
  }
  EXPECT_EQ(bigDefinitions, 1);
  EXPECT_EQ(smallDefinitions, 1);
}

TEST_F(ParallelCodegenTest, NoMorePartsThanPublicFunctions) {
  EXPECT_EQ(partitionByFunction(*module, 8).size(), 2u);
  auto single = partitionByFunction(*module, 1);
  ASSERT_EQ(single.size(), 1u);
  EXPECT_FALSE(function(*single[0], "big").isExternal());
  EXPECT_FALSE(function(*single[0], "small").isExternal());
}

TEST_F(ParallelCodegenTest, PartsLinkedTogetherComputeWhatTheModuleSays) {
  for (int parts : {1, 2}) {
    Expected<std::vector<std::string>> objects = compileObjects(*module, parts);
    ASSERT_TRUE(objects) << objects.error();
    ASSERT_EQ(objects->size(), static_cast<size_t>(parts));
    Expected<std::unique_ptr<LoadedObject>> loaded = LoadedObject::load(*objects);
    ASSERT_TRUE(loaded) << loaded.error();
    Expected<void *> big = (*loaded)->lookup("big");
    ASSERT_TRUE(big) << big.error();
    auto call = reinterpret_cast<int64_t (*)(int64_t)>(*big);
    std::mt19937_64 engine(std::random_device{}());
    for (int i = 0; i < 8; ++i) {
      int64_t x = static_cast<int64_t>(engine() % 100000) - 50000;
      EXPECT_EQ(call(x), 3 * x * x + 3 * x + 1) << "x = " << x << ", parts = " << parts;
    }
  }
}

TEST_F(ParallelCodegenTest, LoadingNoObjectIsAnError) {
  Expected<std::unique_ptr<LoadedObject>> loaded = LoadedObject::load({});
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().find("no object code"), std::string::npos) << loaded.error();
}

TEST_F(ParallelCodegenTest, AnObjectThatIsNotElfIsAnErrorNamingIt) {
  Expected<std::vector<std::string>> objects = compileObjects(*module, 2);
  ASSERT_TRUE(objects) << objects.error();
  (*objects)[1] = "not an object file";
  Expected<std::unique_ptr<LoadedObject>> loaded = LoadedObject::load(*objects);
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().find("kernel object 1"), std::string::npos) << loaded.error();
}

} // namespace
} // namespace pejit

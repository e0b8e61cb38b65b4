// Splitting a module by function for concurrent codegen, and linking the
// parts' objects back together (pejit/compiler/backends/x86/ParallelCodegen.h, ObjectCode.h).
#include "pejit/compiler/backends/x86/ParallelCodegen.h"
#include "pejit/compiler/Registration.h"
#include "pejit/compiler/Stages.h"
#include "pejit/compiler/backends/x86/CodegenParts.h"
#include "pejit/compiler/backends/x86/ObjectCode.h"
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/X86KernelImpl.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/OptBisect.h"
#include "llvm/Target/TargetMachine.h"

#include <gtest/gtest.h>

#include <map>
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
  std::vector<CodegenPart> parts = partitionForCodegen(*module);
  ASSERT_EQ(parts.size(), 2u);
  int bigDefinitions = 0, smallDefinitions = 0;
  for (CodegenPart &codegenPart : parts) {
    EXPECT_FALSE(codegenPart.cold);
    mlir::ModuleOp part = *codegenPart.module;
    mlir::LLVM::LLVMFuncOp big = function(part, "big"), small = function(part, "small");
    ASSERT_TRUE(big && small) << "a part lost a declaration";
    bigDefinitions += !big.isExternal();
    smallDefinitions += !small.isExternal();
    // Each function has a part of its own.
    EXPECT_NE(big.isExternal(), small.isExternal());
    // helper: an internal copy wherever it is called; never the unused one.
    internalizeForLinking(part, codegenPart.wrappedOnly);
    mlir::LLVM::LLVMFuncOp helper = function(part, "helper");
    ASSERT_TRUE(helper);
    EXPECT_FALSE(helper.isExternal());
    EXPECT_EQ(helper.getLinkage(), mlir::LLVM::Linkage::Internal);
    EXPECT_FALSE(function(part, "unused_helper"));
  }
  // Largest first: big's part, then small's.
  EXPECT_FALSE(function(*parts[0].module, "big").isExternal());
  EXPECT_GT(parts[0].size, parts[1].size);
  EXPECT_EQ(bigDefinitions, 1);
  EXPECT_EQ(smallDefinitions, 1);
}

// Two functions that run once per call (pejit.cold) and the C-interface
// wrapper of one of them, next to a function that runs per item.
constexpr const char *kColdModule = R"mlir(
llvm.func @per_item(%x: i64) -> i64 {
  %c2 = llvm.mlir.constant(2 : i64) : i64
  %r = llvm.mul %x, %c2 : i64
  llvm.return %r : i64
}
llvm.func @once_a(%x: i64) -> i64 attributes {pejit.cold} {
  llvm.return %x : i64
}
llvm.func @_mlir_ciface_once_a(%x: i64) -> i64 {
  %r = llvm.call @once_a(%x) : (i64) -> i64
  llvm.return %r : i64
}
llvm.func @once_b(%x: i64) -> i64 attributes {pejit.cold} {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %r = llvm.add %x, %c1 : i64
  llvm.return %r : i64
}
)mlir";

TEST_F(ParallelCodegenTest, ColdFunctionsAndTheirWrappersShareOnePart) {
  mlir::OwningOpRef<mlir::ModuleOp> cold =
      mlir::parseSourceString<mlir::ModuleOp>(kColdModule, &context);
  ASSERT_TRUE(cold);
  std::vector<CodegenPart> parts = partitionForCodegen(*cold);
  ASSERT_EQ(parts.size(), 2u);
  int coldParts = 0;
  for (CodegenPart &part : parts) {
    bool definesPerItem = !function(*part.module, "per_item").isExternal();
    EXPECT_EQ(part.cold, !definesPerItem);
    for (const char *name : {"once_a", "_mlir_ciface_once_a", "once_b"})
      EXPECT_EQ(function(*part.module, name).isExternal(), definesPerItem) << name;
    coldParts += part.cold;
  }
  EXPECT_EQ(coldParts, 1);
}

// wrapped(x) = x + 5 has only its C-interface wrapper as a caller; shared
// has a wrapper and another caller (user(x) = 2 shared(x), shared(x) = x - 1).
constexpr const char *kWrappedModule = R"mlir(
llvm.func @wrapped(%x: i64) -> i64 attributes {llvm.emit_c_interface} {
  %c5 = llvm.mlir.constant(5 : i64) : i64
  %r = llvm.add %x, %c5 : i64
  llvm.return %r : i64
}
llvm.func @_mlir_ciface_wrapped(%x: i64) -> i64 {
  %r = llvm.call @wrapped(%x) : (i64) -> i64
  llvm.return %r : i64
}
llvm.func @shared(%x: i64) -> i64 attributes {llvm.emit_c_interface} {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %r = llvm.sub %x, %c1 : i64
  llvm.return %r : i64
}
llvm.func @_mlir_ciface_shared(%x: i64) -> i64 {
  %r = llvm.call @shared(%x) : (i64) -> i64
  llvm.return %r : i64
}
llvm.func @user(%x: i64) -> i64 {
  %s = llvm.call @shared(%x) : (i64) -> i64
  %r = llvm.add %s, %s : i64
  llvm.return %r : i64
}
)mlir";

TEST_F(ParallelCodegenTest, AFunctionOnlyItsWrapperCallsIsInternalToItsPart) {
  mlir::OwningOpRef<mlir::ModuleOp> wrapped =
      mlir::parseSourceString<mlir::ModuleOp>(kWrappedModule, &context);
  ASSERT_TRUE(wrapped);
  std::vector<CodegenPart> parts = partitionForCodegen(*wrapped);
  ASSERT_EQ(parts.size(), 3u); // wrapped, shared (each with its wrapper), user
  int wrappedDefinitions = 0;
  for (CodegenPart &part : parts) {
    internalizeForLinking(*part.module, part.wrappedOnly);
    mlir::LLVM::LLVMFuncOp fn = function(*part.module, "wrapped");
    if (fn && !fn.isExternal()) {
      ++wrappedDefinitions;
      EXPECT_TRUE(part.wrappedOnly.contains("wrapped"));
      EXPECT_EQ(fn.getLinkage(), mlir::LLVM::Linkage::Internal);
      EXPECT_FALSE(function(*part.module, "_mlir_ciface_wrapped").isExternal());
    }
    mlir::LLVM::LLVMFuncOp shared = function(*part.module, "shared");
    ASSERT_TRUE(shared);
    EXPECT_EQ(shared.getLinkage(), mlir::LLVM::Linkage::External); // user calls it
  }
  EXPECT_EQ(wrappedDefinitions, 1);
  Expected<std::vector<std::string>> objects = compileParts(partitionForCodegen(*wrapped), 2);
  ASSERT_TRUE(objects) << objects.error();
  Expected<std::unique_ptr<LoadedObject>> loaded = LoadedObject::load(*objects);
  ASSERT_TRUE(loaded) << loaded.error();
  Expected<void *> wrapper = (*loaded)->lookup("_mlir_ciface_wrapped");
  Expected<void *> user = (*loaded)->lookup("user");
  ASSERT_TRUE(wrapper && user);
  std::mt19937_64 engine(std::random_device{}());
  int64_t x = static_cast<int64_t>(engine() % 100000) - 50000;
  EXPECT_EQ(reinterpret_cast<int64_t (*)(int64_t)>(*wrapper)(x), x + 5);
  EXPECT_EQ(reinterpret_cast<int64_t (*)(int64_t)>(*user)(x), 2 * (x - 1));
}

TEST_F(ParallelCodegenTest, PartsLinkedTogetherComputeWhatTheModuleSays) {
  for (int threads : {1, 2, 8}) {
    Expected<std::vector<std::string>> objects =
        compileParts(partitionForCodegen(*module), threads);
    ASSERT_TRUE(objects) << objects.error();
    ASSERT_EQ(objects->size(), 2u); // one per part, whatever the threads
    Expected<std::unique_ptr<LoadedObject>> loaded = LoadedObject::load(*objects);
    ASSERT_TRUE(loaded) << loaded.error();
    Expected<void *> big = (*loaded)->lookup("big");
    ASSERT_TRUE(big) << big.error();
    auto call = reinterpret_cast<int64_t (*)(int64_t)>(*big);
    std::mt19937_64 engine(std::random_device{}());
    for (int i = 0; i < 8; ++i) {
      int64_t x = static_cast<int64_t>(engine() % 100000) - 50000;
      EXPECT_EQ(call(x), 3 * x * x + 3 * x + 1) << "x = " << x << ", threads = " << threads;
    }
  }
}

// The kernel's machine code is compiled from its tiled stage split into
// parts, each lowered on its own; the llvm stage is the whole tiled module
// lowered. Every public function must come out the same both ways.
TEST_F(ParallelCodegenTest, LoweredPartsDefineWhatTheLlvmStageHas) {
  Runtime runtime;
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = true;
  // Three Q tiles: K is rotated once per call too (pejit_prepare).
  Expected<X86Kernel> kernel =
      runtime.getX86(Spec::fromBuilder(spec, Shape{1, 2, 2, 300, 300, 64, 64}));
  ASSERT_TRUE(kernel) << kernel.error();
  Expected<std::string> tiledText = kernel->ir("tiled"), llvmText = kernel->ir("llvm");
  ASSERT_TRUE(tiledText && llvmText);
  mlir::OwningOpRef<mlir::ModuleOp> tiled =
      mlir::parseSourceString<mlir::ModuleOp>(*tiledText, &context);
  mlir::OwningOpRef<mlir::ModuleOp> whole =
      mlir::parseSourceString<mlir::ModuleOp>(*llvmText, &context);
  ASSERT_TRUE(tiled && whole);
  (*tiled)->removeAttr(kKernelInfoAttr); // as the compile does
  Expected<std::vector<CodegenPart>> parts = lowerForCodegen(*tiled);
  ASSERT_TRUE(parts) << parts.error();
  std::map<std::string, int> definitions;
  for (CodegenPart &part : *parts) {
    for (mlir::LLVM::LLVMFuncOp fn : part.module->getOps<mlir::LLVM::LLVMFuncOp>()) {
      if (fn.isExternal() || fn.isPrivate())
        continue;
      ++definitions[fn.getName().str()];
      mlir::LLVM::LLVMFuncOp same = function(*whole, fn.getName());
      ASSERT_TRUE(same) << fn.getName().str() << " is not in the llvm stage";
      EXPECT_EQ(printOperation(fn), printOperation(same)) << fn.getName().str();
    }
  }
  for (mlir::LLVM::LLVMFuncOp fn : whole->getOps<mlir::LLVM::LLVMFuncOp>())
    if (!fn.isExternal() && !fn.isPrivate())
      EXPECT_EQ(definitions[fn.getName().str()], 1) << fn.getName().str();
  for (const char *name : {"pejit_item", "_mlir_ciface_pejit_item", "pejit_s_tile", "pejit_pv_tile",
                           "pejit_prologue", "pejit_prepare"})
    EXPECT_EQ(definitions[name], 1) << name;
}

TEST_F(ParallelCodegenTest, LoadingNoObjectIsAnError) {
  Expected<std::unique_ptr<LoadedObject>> loaded = LoadedObject::load({});
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().find("no object code"), std::string::npos) << loaded.error();
}

TEST_F(ParallelCodegenTest, AnObjectThatIsNotElfIsAnErrorNamingIt) {
  Expected<std::vector<std::string>> objects = compileParts(partitionForCodegen(*module), 2);
  ASSERT_TRUE(objects) << objects.error();
  (*objects)[1] = "not an object file";
  Expected<std::unique_ptr<LoadedObject>> loaded = LoadedObject::load(*objects);
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().find("kernel object 1"), std::string::npos) << loaded.error();
}

// a[i * stride] *= 2 for i < n: without strength reduction the backend
// multiplies i * stride on every trip; with it, a pointer steps by stride.
constexpr const char *kStridedLoop = R"mlir(
llvm.func @double_strided(%a: !llvm.ptr, %n: i64, %stride: i64) {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %two = llvm.mlir.constant(2.0 : f32) : f32
  llvm.br ^header(%c0 : i64)
^header(%i: i64):
  %done = llvm.icmp "sge" %i, %n : i64
  llvm.cond_br %done, ^exit, ^body
^body:
  %index = llvm.mul %i, %stride : i64
  %p = llvm.getelementptr %a[%index] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %x = llvm.load %p : !llvm.ptr -> f32
  %y = llvm.fmul %x, %two : f32
  llvm.store %y, %p : f32, !llvm.ptr
  %next = llvm.add %i, %c1 : i64
  llvm.br ^header(%next : i64)
^exit:
  llvm.return
}
)mlir";

TEST_F(ParallelCodegenTest, SkippingStrengthReductionChangesTheCodeNotWhatItComputes) {
  mlir::OwningOpRef<mlir::ModuleOp> loop =
      mlir::parseSourceString<mlir::ModuleOp>(kStridedLoop, &context);
  ASSERT_TRUE(loop);
  std::string objects[2];
  for (LoopStrengthReduction lsr : {LoopStrengthReduction::Run, LoopStrengthReduction::Skip}) {
    llvm::LLVMContext llvmContext;
    std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(*loop, llvmContext);
    ASSERT_TRUE(llvmModule);
    std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine();
    ASSERT_TRUE(machine);
    ASSERT_TRUE(optimizeKernel(*llvmModule, *machine));
    Expected<std::string> object = emitCode(*llvmModule, *machine, lsr);
    ASSERT_TRUE(object) << object.error();
    // The gate is the part's own: the context lets LSR run again afterwards.
    EXPECT_TRUE(!llvmContext.getOptPassGate().isEnabled() ||
                llvmContext.getOptPassGate().shouldRunPass("Loop Strength Reduction", "loop"));
    objects[lsr == LoopStrengthReduction::Skip] = *object;
  }
  EXPECT_NE(objects[0], objects[1]) << "LSR was not skipped (or did nothing to the loop)";

  Expected<std::unique_ptr<LoadedObject>> loaded = LoadedObject::load({objects[1]});
  ASSERT_TRUE(loaded) << loaded.error();
  Expected<void *> entry = (*loaded)->lookup("double_strided");
  ASSERT_TRUE(entry) << entry.error();
  auto call = reinterpret_cast<void (*)(float *, int64_t, int64_t)>(*entry);
  std::mt19937 engine(std::random_device{}());
  std::uniform_real_distribution<float> values(-1, 1);
  std::vector<float> data(64), expected(64);
  for (float &x : data)
    x = values(engine);
  expected = data;
  for (int i = 0; i < 21; ++i)
    expected[i * 3] *= 2;
  call(data.data(), 21, 3);
  EXPECT_EQ(data, expected);
}

} // namespace
} // namespace pejit

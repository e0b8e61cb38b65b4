// Bare-pointer kernel arguments viewed as memrefs (KernelViews.h).
#include "pejit/compiler/passes/KernelViews.h"

#include "mlir/IR/BuiltinTypeInterfaces.h"

#include <cctype>

namespace pejit {

namespace {

bool isNumber(const std::string &text) {
  return !text.empty() && std::isdigit(static_cast<unsigned char>(text[0]));
}

} // namespace

std::string lengthsText(llvm::ArrayRef<KernelLength> lengths) {
  std::string text;
  for (const KernelLength &length : lengths)
    text += length.value == mlir::ShapedType::kDynamic
                ? "  %" + std::string(length.name) + " = arith.index_cast %" + length.arg +
                      " : i64 to index\n"
                : "  %" + std::string(length.name) + " = arith.constant " +
                      std::to_string(length.value) + " : index\n";
  return text;
}

std::string viewDimsText(const KernelView &view) {
  std::string text;
  for (const std::string &size : view.sizes)
    text += (text.empty() ? "" : "x") + (isNumber(size) ? size : std::string("?"));
  return text;
}

std::string viewTypeText(const KernelView &view) {
  return "memref<" + viewDimsText(view) + "x" + view.element + ">";
}

std::string viewsText(llvm::ArrayRef<KernelView> views) {
  std::string text;
  for (const KernelView &view : views) {
    // Innermost first: stride[n-1] = 1, stride[i] = stride[i+1] * size[i+1].
    size_t rank = view.sizes.size();
    std::vector<std::string> strides(rank);
    std::string stride = "1";
    for (size_t i = rank; i-- > 0;) {
      strides[i] = stride;
      if (i == 0)
        break;
      const std::string &size = view.sizes[i];
      if (isNumber(stride) && isNumber(size)) {
        stride = std::to_string(std::stoll(stride) * std::stoll(size));
        continue;
      }
      auto value = [&](const std::string &operand, const char *tag) {
        if (!isNumber(operand))
          return operand;
        std::string name = "%view_" + view.name + "_" + tag + std::to_string(i);
        text += "  " + name + " = arith.constant " + operand + " : index\n";
        return name;
      };
      std::string lhs = value(stride, "k"), rhs = value(size, "n");
      std::string product = "%view_" + view.name + "_s" + std::to_string(i - 1);
      text += "  " + product + " = arith.muli " + lhs + ", " + rhs + " : index\n";
      stride = product;
    }
    auto list = [](const std::vector<std::string> &items) {
      std::string out;
      for (const std::string &item : items)
        out += (out.empty() ? "" : ", ") + item;
      return "[" + out + "]";
    };
    text += "  %" + view.name + " = memref.reinterpret_cast %" + view.name +
            "_arg to offset: [0], sizes: " + list(view.sizes) + ", strides: " + list(strides) +
            " : memref<1x" + view.element + "> to " + viewTypeText(view) + "\n";
  }
  return text;
}

} // namespace pejit

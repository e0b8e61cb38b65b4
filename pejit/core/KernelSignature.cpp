// KernelSignature's one serializer (KernelSignature.h).
#include "pejit/core/KernelSignature.h"

#include <algorithm>
#include <sstream>

namespace pejit {

namespace {

constexpr ArgumentRole kRoles[] = {ArgumentRole::Query,
                                   ArgumentRole::Key,
                                   ArgumentRole::Value,
                                   ArgumentRole::QueryPositions,
                                   ArgumentRole::KeyPositions,
                                   ArgumentRole::Positions,
                                   ArgumentRole::EncodingOperand,
                                   ArgumentRole::QuerySegments,
                                   ArgumentRole::KeySegments,
                                   ArgumentRole::KeyLengths,
                                   ArgumentRole::KeyPages,
                                   ArgumentRole::ValuePages,
                                   ArgumentRole::BlockTable,
                                   ArgumentRole::TransformInput,
                                   ArgumentRole::TransformPositions,
                                   ArgumentRole::EmbedTokens,
                                   ArgumentRole::EmbedTable,
                                   ArgumentRole::LinearState,
                                   ArgumentRole::Output,
                                   ArgumentRole::OutputGradient,
                                   ArgumentRole::LogSumExp,
                                   ArgumentRole::GradRows,
                                   ArgumentRole::GradIds};

const char *shortDtype(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

} // namespace

const char *argumentRoleName(ArgumentRole role) {
  switch (role) {
  case ArgumentRole::Query:
    return "query";
  case ArgumentRole::Key:
    return "key";
  case ArgumentRole::Value:
    return "value";
  case ArgumentRole::QueryPositions:
    return "query_positions";
  case ArgumentRole::KeyPositions:
    return "key_positions";
  case ArgumentRole::Positions:
    return "positions";
  case ArgumentRole::EncodingOperand:
    return "encoding_operand";
  case ArgumentRole::QuerySegments:
    return "query_segments";
  case ArgumentRole::KeySegments:
    return "key_segments";
  case ArgumentRole::KeyLengths:
    return "key_lengths";
  case ArgumentRole::KeyPages:
    return "key_pages";
  case ArgumentRole::ValuePages:
    return "value_pages";
  case ArgumentRole::BlockTable:
    return "block_table";
  case ArgumentRole::TransformInput:
    return "transform_input";
  case ArgumentRole::TransformPositions:
    return "transform_positions";
  case ArgumentRole::EmbedTokens:
    return "tokens";
  case ArgumentRole::EmbedTable:
    return "token_table";
  case ArgumentRole::LinearState:
    return "linear_state";
  case ArgumentRole::Output:
    return "output";
  case ArgumentRole::OutputGradient:
    return "output_grad";
  case ArgumentRole::LogSumExp:
    return "lse";
  case ArgumentRole::GradRows:
    return "grad_rows";
  case ArgumentRole::GradIds:
    return "grad_ids";
  }
  return "?";
}

std::string KernelArgument::label() const {
  return role == ArgumentRole::EncodingOperand ? name : argumentRoleName(role);
}

bool KernelArgument::optional() const { return readsQueryPositions() || readsKeyPositions(); }

bool KernelArgument::readsQueryPositions() const {
  return role == ArgumentRole::QueryPositions || role == ArgumentRole::Positions;
}

bool KernelArgument::readsKeyPositions() const {
  return role == ArgumentRole::KeyPositions || role == ArgumentRole::Positions;
}

size_t KernelSignature::requiredInputs() const {
  size_t required = 0;
  for (size_t i = 0; i < arguments.size(); ++i)
    if (!arguments[i].optional())
      required = i + 1;
  return required;
}

std::vector<size_t> KernelSignature::encodingOperandArguments() const {
  std::vector<size_t> indices;
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].role == ArgumentRole::EncodingOperand)
      indices.push_back(i);
  return indices;
}

size_t KernelSignature::encodingOperandSlotCount() const {
  size_t count = 0;
  for (const KernelArgument &argument : arguments)
    for (unsigned slot : argument.slots)
      count = std::max<size_t>(count, slot + 1);
  return count;
}

bool KernelSignature::declaresQueryPositions() const {
  for (const KernelArgument &argument : arguments)
    if (argument.readsQueryPositions())
      return true;
  return false;
}

bool KernelSignature::declaresKeyPositions() const {
  for (const KernelArgument &argument : arguments)
    if (argument.readsKeyPositions())
      return true;
  return false;
}

bool KernelSignature::segmented() const {
  for (const KernelArgument &argument : arguments)
    if (argument.role == ArgumentRole::QuerySegments)
      return true;
  return false;
}

bool KernelSignature::keyLengths() const {
  for (const KernelArgument &argument : arguments)
    if (argument.role == ArgumentRole::KeyLengths)
      return true;
  return false;
}

bool KernelSignature::paged() const {
  for (const KernelArgument &argument : arguments)
    if (argument.role == ArgumentRole::BlockTable)
      return true;
  return false;
}

bool KernelSignature::standaloneTransform() const {
  for (const KernelArgument &argument : arguments)
    if (argument.role == ArgumentRole::TransformInput || argument.role == ArgumentRole::EmbedTokens)
      return true;
  return false;
}

bool KernelSignature::embeddingTransform() const {
  for (const KernelArgument &argument : arguments) {
    if (argument.role == ArgumentRole::TransformInput)
      return argument.shape.size() == 3;
    if (argument.role == ArgumentRole::EmbedTokens)
      return true;
  }
  return false;
}

bool KernelSignature::tokenEmbedding() const {
  for (const KernelArgument &argument : arguments)
    if (argument.role == ArgumentRole::EmbedTokens)
      return true;
  return false;
}

bool KernelSignature::ropeScaleGradient() const {
  bool input = false, grad = false;
  for (const KernelArgument &argument : arguments) {
    input |= argument.role == ArgumentRole::TransformInput;
    grad |= argument.role == ArgumentRole::OutputGradient;
  }
  return input && grad;
}

bool KernelSignature::scoreBiasGradient() const {
  bool grad = false, attention = false;
  for (const KernelArgument &argument : arguments) {
    grad |= argument.role == ArgumentRole::OutputGradient;
    attention |= argument.role == ArgumentRole::Query || argument.role == ArgumentRole::Key ||
                 argument.role == ArgumentRole::TransformInput;
  }
  return grad && !attention;
}

bool KernelSignature::embeddingGradient() const {
  for (const KernelArgument &argument : arguments)
    if (argument.role == ArgumentRole::GradRows)
      return true;
  return false;
}

bool KernelSignature::backward() const {
  for (const KernelArgument &argument : arguments)
    if (argument.role == ArgumentRole::OutputGradient)
      return true;
  return false;
}

std::vector<std::string> KernelSignature::labels() const {
  std::vector<std::string> labels;
  for (const KernelArgument &argument : arguments)
    labels.push_back(argument.label());
  return labels;
}

std::string KernelSignature::str() const {
  std::string text = materializedBias ? "materialized_bias" : "";
  if (writesLse)
    text += std::string(text.empty() ? "" : " ") + "lse";
  if (linearBackward)
    text += std::string(text.empty() ? "" : " ") + "linear_backward";
  if (shawTermGradient)
    text += std::string(text.empty() ? "" : " ") + "shaw_term_grad";
  if (scoreShapedGradient)
    text +=
        std::string(text.empty() ? "" : " ") + "score_grad=" + std::to_string(*scoreShapedGradient);
  if (!operandGradients.empty()) {
    text += std::string(text.empty() ? "" : " ") + "operand_grads=";
    for (size_t n = 0; n < operandGradients.size(); ++n)
      text += (n ? "," : "") + std::to_string(operandGradients[n]);
  }
  unsigned ordinal = 0;
  for (const KernelArgument &argument : arguments) {
    if (!text.empty())
      text += " ";
    text += argumentRoleName(argument.role);
    if (argument.role == ArgumentRole::EncodingOperand) {
      text += "=" + argument.name;
      if (argument.slots != std::vector<unsigned>{ordinal})
        for (size_t n = 0; n < argument.slots.size(); ++n)
          text += (n ? "," : "@") + std::to_string(argument.slots[n]);
      ++ordinal;
    }
    text += std::string(":") + shortDtype(argument.dtype) + ":";
    for (size_t d = 0; d < argument.shape.size(); ++d)
      text += (d ? "x" : "") + dimText(argument.shape[d]);
  }
  return text;
}

Expected<KernelSignature> KernelSignature::parse(const std::string &text) {
  using Result = Expected<KernelSignature>;
  KernelSignature signature;
  std::istringstream tokens(text);
  unsigned ordinal = 0; // the default slot of the next encoding operand
  for (std::string token; tokens >> token;) {
    if (token == "materialized_bias") {
      signature.materializedBias = true;
      continue;
    }
    if (token == "lse") {
      signature.writesLse = true;
      continue;
    }
    if (token == "shaw_term_grad") {
      signature.shawTermGradient = true;
      continue;
    }
    if (token == "linear_backward") {
      signature.linearBackward = true;
      continue;
    }
    if (token.rfind("score_grad=", 0) == 0) {
      std::string slot = token.substr(11);
      if (slot.empty() || slot.size() > 6 ||
          slot.find_first_not_of("0123456789") != std::string::npos)
        return Result::error("kernel signature token '" + token +
                             "': malformed encoding operand slot '" + slot + "'");
      signature.scoreShapedGradient = static_cast<unsigned>(std::stoul(slot));
      continue;
    }
    if (token.rfind("operand_grads=", 0) == 0) {
      std::istringstream slots(token.substr(14));
      for (std::string slot; std::getline(slots, slot, ',');) {
        if (slot.empty() || slot.size() > 6 ||
            slot.find_first_not_of("0123456789") != std::string::npos)
          return Result::error("kernel signature token '" + token +
                               "': malformed encoding operand slot '" + slot + "'");
        signature.operandGradients.push_back(static_cast<unsigned>(std::stoul(slot)));
      }
      continue;
    }
    auto bad = [&](const std::string &why) {
      return Result::error("kernel signature token '" + token + "': " + why);
    };
    size_t colon = token.find(':'), second = token.find(':', colon + 1);
    if (colon == std::string::npos || second == std::string::npos)
      return bad("expected ROLE:DTYPE:SHAPE");
    std::string role = token.substr(0, colon), name;
    if (size_t eq = role.find('='); eq != std::string::npos) {
      name = role.substr(eq + 1);
      role = role.substr(0, eq);
    }
    KernelArgument argument;
    bool known = false;
    for (ArgumentRole candidate : kRoles)
      if (role == argumentRoleName(candidate)) {
        argument.role = candidate;
        known = true;
      }
    if (!known)
      return bad("unknown role '" + role + "'");
    if ((argument.role == ArgumentRole::EncodingOperand) == name.empty())
      return bad("an encoding operand, and only one, has a =NAME");
    if (size_t at = name.find('@'); at != std::string::npos) {
      std::istringstream slots(name.substr(at + 1));
      for (std::string slot; std::getline(slots, slot, ',');) {
        if (slot.empty() || slot.size() > 6 ||
            slot.find_first_not_of("0123456789") != std::string::npos)
          return bad("malformed encoding operand slot '" + slot + "'");
        argument.slots.push_back(static_cast<unsigned>(std::stoul(slot)));
      }
      if (argument.slots.empty())
        return bad("'@' with no encoding operand slot");
      name = name.substr(0, at);
    } else if (argument.role == ArgumentRole::EncodingOperand) {
      argument.slots = {ordinal};
    }
    if (argument.role == ArgumentRole::EncodingOperand)
      ++ordinal;
    argument.name = name;
    std::string dtype = token.substr(colon + 1, second - colon - 1);
    bool dtypeKnown = false;
    for (DType candidate : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64})
      if (dtype == shortDtype(candidate)) {
        argument.dtype = candidate;
        dtypeKnown = true;
      }
    if (!dtypeKnown)
      return bad("unknown dtype '" + dtype + "'");
    std::istringstream dims(token.substr(second + 1));
    for (std::string dim; std::getline(dims, dim, 'x');) {
      if (dim == "?") { // a length the call gives (a shape class)
        argument.shape.push_back(kDynamicDim);
        continue;
      }
      if (dim.empty() || dim.find_first_not_of("0123456789") != std::string::npos ||
          dim.size() > 18)
        return bad("malformed shape");
      argument.shape.push_back(std::stoll(dim));
    }
    if (argument.shape.empty())
      return bad("malformed shape");
    signature.arguments.push_back(std::move(argument));
  }
  if (signature.arguments.empty() && !signature.materializedBias)
    return Result::error("kernel signature is empty");
  // Every slot the kernel reads is filled by exactly one argument.
  std::vector<int> filledBy(signature.encodingOperandSlotCount(), -1);
  for (size_t i = 0; i < signature.arguments.size(); ++i)
    for (unsigned slot : signature.arguments[i].slots) {
      if (filledBy[slot] >= 0)
        return Result::error("kernel signature: encoding operand slot " + std::to_string(slot) +
                             " is filled by two arguments");
      filledBy[slot] = static_cast<int>(i);
    }
  for (size_t slot = 0; slot < filledBy.size(); ++slot)
    if (filledBy[slot] < 0)
      return Result::error("kernel signature: no argument fills encoding operand slot " +
                           std::to_string(slot));
  return signature;
}

} // namespace pejit

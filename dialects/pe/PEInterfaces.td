#ifndef PEJIT_PE_INTERFACES_TD
#define PEJIT_PE_INTERFACES_TD

include "mlir/IR/OpBase.td"

def PE_PositionalEncodingAttrInterface
    : AttrInterface<"PositionalEncodingAttrInterface"> {
  let cppNamespace = "::pejit::pe";
  let description = [{
    The parameters of one positional encoding. Its kind says where it enters
    attention: QKTransform (rotates Q and K), ScoreBias (adds f(b, h, i, j) to
    the scores), ValueTerm (adds to the output through the probabilities), or
    Additive (added to embeddings, outside attention). Code emission hooks are
    added here as the compiler grows; nothing else may switch on the concrete
    encoding type.
  }];
  let methods = [
    InterfaceMethod<"Where this encoding enters attention.",
                    "::pejit::pe::EncodingKind", "getEncodingKind">,
  ];
}

def PE_RopeScalingAttrInterface : AttrInterface<"RopeScalingAttrInterface"> {
  let cppNamespace = "::pejit::pe";
  let description = [{
    A RoPE frequency scaling (linear, ntk, dynamic_ntk, yarn, llama3,
    longrope). Scalings change only the inverse frequencies and, for yarn and
    longrope, the magnitude of cos and sin.
  }];
  let methods = [
    InterfaceMethod<[{
        Checks the parameters that depend on the rotary dimension (e.g.
        longrope's per-frequency factor lists have rotary_dim/2 entries).
      }],
      "::llvm::LogicalResult", "verifyRotaryDim",
      (ins "int64_t":$rotaryDim,
           "::llvm::function_ref<::mlir::InFlightDiagnostic()>":$emitError),
      /*methodBody=*/"", /*defaultImplementation=*/"return ::mlir::success();">,
  ];
}

def PE_PositionalEncodingOpInterface
    : OpInterface<"PositionalEncodingOpInterface"> {
  let cppNamespace = "::pejit::pe";
  let description = [{
    An op that applies one positional encoding on tensors. Its `encoding`
    attribute carries the parameters, so fusion can move it onto attention.
  }];
  let methods = [
    InterfaceMethod<"The encoding's parameters.",
      "::pejit::pe::PositionalEncodingAttrInterface", "getPositionalEncoding",
      (ins), /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::llvm::cast<::pejit::pe::PositionalEncodingAttrInterface>(
            $_op.getEncodingAttr());
      }]>,
    InterfaceMethod<"Where this encoding enters attention.",
      "::pejit::pe::EncodingKind", "getEncodingKind", (ins), "",
      [{ return getPositionalEncoding().getEncodingKind(); }]>,
  ];
}

#endif // PEJIT_PE_INTERFACES_TD

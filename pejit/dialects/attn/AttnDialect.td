#ifndef PEJIT_ATTN_DIALECT_TD
#define PEJIT_ATTN_DIALECT_TD

include "mlir/IR/OpBase.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let cppNamespace = "::pejit::attn";
  let summary = "Scaled dot-product attention with masks, GQA and score terms";
  let description = [{
    `attn.attention` is the one op the compiler fuses positional encodings
    into and lowers through a kernel template. Its semantics (score order,
    bottom-right causal alignment, windows, empty rows) are fixed in
    docs/semantics.md.
  }];
}

class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits>;

#endif // PEJIT_ATTN_DIALECT_TD

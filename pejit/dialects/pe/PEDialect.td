#ifndef PEJIT_PE_DIALECT_TD
#define PEJIT_PE_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def PE_Dialect : Dialect {
  let name = "pe";
  let cppNamespace = "::pejit::pe";
  let summary = "Positional encodings for attention (RoPE, ALiBi, T5, Shaw, absolute)";
  let description = [{
    Every positional encoding (PE) exists twice: as an attribute (`#pe.rope<...>`,
    `#pe.alibi<...>`, ...) that holds its parameters and implements
    `PositionalEncodingAttrInterface`, and as an op on tensors (`pe.rope`,
    `pe.alibi`, ...) that applies it. The op form is what users write; the
    fusion pass moves the attribute onto `attn.attention`, so the attention
    lowering calls the interface and never switches on concrete PE types.
    The exact semantics are fixed in docs/semantics.md.
  }];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    // Defined in PEAttrs.cpp, where the attribute storage classes are.
    void registerAttributes();
  }];
}

class PE_Op<string mnemonic, list<Trait> traits = []>
    : Op<PE_Dialect, mnemonic, traits>;

class PE_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<PE_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// Parameters that ODS has no parser for. Floats print in the shortest form
// that round-trips exactly (see PEAttrs.cpp).
class PE_F64Parameter<string desc> : AttrParameter<"::pejit::pe::F64", desc> {
  let parser = [{ ::pejit::pe::parseF64($_parser) }];
  let printer = [{ ::pejit::pe::printF64($_printer, $_self) }];
}
class PE_DefaultF64Parameter<string desc, string value>
    : PE_F64Parameter<desc> {
  let defaultValue = value;
}
class PE_OptionalF64Parameter<string desc>
    : AttrParameter<"std::optional<::pejit::pe::F64>", desc> {
  let defaultValue = "std::nullopt";
  let parser = [{ ::pejit::pe::parseOptionalF64($_parser) }];
  let printer = [{ ::pejit::pe::printF64($_printer, *$_self) }];
}
class PE_F64ArrayParameter<string desc>
    : AttrParameter<"::llvm::ArrayRef<::pejit::pe::F64>", desc> {
  let allocator = [{$_dst = $_allocator.copyInto($_self);}];
  let cppStorageType = "::llvm::SmallVector<::pejit::pe::F64>";
  let parser = [{ ::pejit::pe::parseF64Array($_parser) }];
  let printer = [{ ::pejit::pe::printF64Array($_printer, $_self) }];
}
class PE_OptionalF64ArrayParameter<string desc> : PE_F64ArrayParameter<desc> {
  let defaultValue = "::llvm::SmallVector<::pejit::pe::F64>()";
  let comparator = "::llvm::ArrayRef<::pejit::pe::F64>($_lhs) == "
                   "::llvm::ArrayRef<::pejit::pe::F64>($_rhs)";
}
class PE_OptionalI64ArrayParameter<string desc>
    : OptionalArrayRefParameter<"int64_t", desc> {
  let parser = [{ ::pejit::pe::parseI64Array($_parser) }];
  let printer = [{ $_printer << '[' << $_self << ']' }];
}
class PE_DefaultEnumParameter<EnumAttrInfo info, string value, string desc>
    : EnumParameter<info> {
  let summary = desc;
  let defaultValue = value;
}
class PE_BoolParameter<string desc, string value> : AttrParameter<"bool", desc> {
  let defaultValue = value;
  let parser = [{ ::pejit::pe::parseBool($_parser) }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
}

#endif // PEJIT_PE_DIALECT_TD

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
    InterfaceMethod<[{
        Checks the encoding against the attention it is fused into (query
        heads hq, head dim d); used by the pe op verifiers and by
        attn.attention's verifier for its fused `encodings`.
      }],
      "::llvm::LogicalResult", "verifyForAttention",
      (ins "int64_t":$queryHeads, "int64_t":$headDim,
           "::llvm::function_ref<::mlir::InFlightDiagnostic()>":$emitError),
      /*methodBody=*/"", /*defaultImplementation=*/"return ::mlir::success();">,
    InterfaceMethod<[{
        Whether attn.attention can apply this encoding itself (its kernels
        implement the hooks for it).
      }],
      "bool", "isFusable", (ins), "", "return false;">,
    InterfaceMethod<[{
        How many tensors the encoding reads at run time (a T5 table, a Shaw
        table, a bias tensor). On a fused attn.attention they are its
        `encoding_operands`, in the order of `encodings`.
      }],
      "unsigned", "getNumEncodingOperands", (ins), "", "return 0;">,
    InterfaceMethod<[{
        The name of encoding operand `index` in messages and kernel
        signatures (e.g. "t5_table"): lower case, no spaces.
      }],
      "std::string", "getEncodingOperandName", (ins "unsigned":$index), "",
      [{ return "operand_" + std::to_string(index); }]>,
    InterfaceMethod<[{
        Whether encoding operand `index` has a gradient (docs/backward.md): a
        trained table, learnable slopes or frequencies, a position scale, a
        bias tensor. attn.attention_backward's grad_operands may name only
        these.
      }],
      "bool", "isDifferentiableOperand", (ins "unsigned":$index), "", "return false;">,
    InterfaceMethod<[{
        Checks encoding operand `index` (a ranked float tensor) against the
        attention it is fused into (its sizes in `shape`; a dynamic size is
        ShapedType::kDynamic).
      }],
      "::llvm::LogicalResult", "verifyEncodingOperand",
      (ins "unsigned":$index, "::mlir::RankedTensorType":$type,
           "const ::pejit::pe::AttentionShape &":$shape,
           "::llvm::function_ref<::mlir::InFlightDiagnostic()>":$emitError),
      "", "return ::mlir::success();">,
    InterfaceMethod<[{
        The float64 reference of a score bias: [1|b, hq, sq, skv], added to
        the scores after the scale and softcap (docs/semantics.md). An
        empty tensor when the encoding adds none.
      }],
      "::pejit::ref::Tensor", "referenceScoreBias",
      (ins "const ::pejit::pe::ReferenceAttention &":$attention), "",
      "return ::pejit::ref::Tensor();">,
    InterfaceMethod<[{
        The float64 reference of a score bias's operand gradient: encoding
        operand `index`'s gradient (its shape) from the bias's gradient
        `biasGrad` ([b, hq, sq, skv]), the adjoint of referenceScoreBias.
        An empty tensor when the encoding has none (pe.score_bias_grad's
        reference).
      }],
      "::pejit::ref::Tensor", "referenceScoreBiasGradient",
      (ins "const ::pejit::pe::ReferenceAttention &":$attention,
           "const ::pejit::ref::Tensor &":$biasGrad, "unsigned":$index), "",
      "return ::pejit::ref::Tensor();">,
    InterfaceMethod<[{
        The float64 reference of a QK transform: `x` ([b, h, s, d], Q or K)
        transformed at `positions` (`omitted`: the defaults), reading its
        encoding operands (`operands`, getNumEncodingOperands of them).
        Returns false with `error` set when it cannot (e.g. M-RoPE without
        explicit ids).
      }],
      "bool", "applyReferenceQKTransform",
      (ins "::pejit::ref::Tensor &":$x, "const ::pejit::ref::PositionIds &":$positions,
           "bool":$omitted, "int64_t":$seqLen,
           "::llvm::ArrayRef<const ::pejit::ref::Tensor *>":$operands, "std::string &":$error), "",
      "return true;">,
    InterfaceMethod<[{
        f32 scratch entries the encoding's hooks share across one call (e.g.
        RoPE's cos/sin tables), per position of Q (`isKey` false) or of K:
        a call takes this times the (batch row, sequence index) pairs of
        its position ids, so the size follows the call's lengths
        (docs/shape-classes.md). Laid out by the encoding itself.
      }],
      "int64_t", "getScratchFloatsPerPosition",
      (ins "const ::pejit::pe::AttentionShape &":$shape, "bool":$isKey), "", "return 0;">,
    InterfaceMethod<[{
        Axes of the position ids a QK transform reads: 0 for [s] or [b, s]
        ids; A for [A, s] or [A, b, s] (M-RoPE: one row of ids per section).
      }],
      "int64_t", "getPositionAxes", (ins), "", "return 0;">,
    InterfaceMethod<"A QK transform: whether it transforms Q.",
      "bool", "transformsQuery", (ins), "", "return true;">,
    InterfaceMethod<"A QK transform: whether it transforms K.",
      "bool", "transformsKey", (ins), "", "return true;">,
    InterfaceMethod<[{
        A QK transform applied to one side only (query = true: Q, else K),
        for a fused attention whose other side is already transformed; null
        if the encoding has no one-sided form.
      }],
      "::mlir::Attribute", "onOneSide", (ins "bool":$query), "", "return {};">,
    InterfaceMethod<[{
        Whether a standalone kernel (a function of pe ops and no attention,
        docs/standalone-kernels.md) can apply this encoding to its input
        tensor through the QK transform hooks: the prologue's per-position
        tables for the ids as Q's, then the tile transform from the input's
        rows (RoPE's rotation; an absolute embedding's x + PE(position)).
      }],
      "bool", "hasStandaloneKernel", (ins), "", "return false;">,
    InterfaceMethod<[{
        Positions the encoding can take: an id outside [0, n) is the
        caller's error, reported by `run` with the id and n before the
        kernel reads anything (a learned table's rows). 0: any id.
      }],
      "int64_t", "getPositionLimit", (ins), "", "return 0;">,
    InterfaceMethod<"Emits the once-per-call prologue (attn.qk_prologue).",
      "void", "emitQKPrologue",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::QKPrologueArgs &":$args), "", "return;">,
    InterfaceMethod<"Emits the in-place Q/K tile transform (attn.qk_transform).",
      "void", "emitQKTileTransform",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::QKTileArgs &":$args), "", "return;">,
    InterfaceMethod<[{
        The QK transform's operand gradients (attn.qk_transform_grad,
        docs/backward.md) from rows [0, rows) of a tile: `grad` holds the
        gradient of the transformed rows, `transformed` the rows after the
        transform. Returns contributions to the encoding's operands that
        args.wanted asks for (RoPE's position scale); the template adds
        them in a fixed order. Empty: none (the default).
      }],
      "::llvm::SmallVector<::pejit::pe::GradContribution>", "emitQKTransformOperandAdjoint",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::QKGradArgs &":$args), "", "return {};">,
    InterfaceMethod<[{
        Whether emitQKTileTransformAdjoint gives the transform's adjoint (a
        backward kernel refuses a QK transform without one).
      }],
      "bool", "hasQKTransformAdjoint", (ins), "", "return false;">,
    InterfaceMethod<[{
        The QK transform's adjoint (attn.qk_transform adjoint,
        docs/backward.md): rows [0, rows) of `tile` hold the gradient of the
        transformed rows, and become, in place, the gradient of the rows
        before it (RoPE: the inverse rotation with the same attention
        factor). Same tables, same arguments; with a source (a standalone
        backward's dy rows, `from`), the gradient rows are read there, as
        emitQKTileTransform reads its rows.
      }],
      "void", "emitQKTileTransformAdjoint",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::QKTileArgs &":$args), "", "return;">,
    InterfaceMethod<[{
        Whether the hooks read the attention's position ids
        (ScorePoint::queryPosition / keyPosition; relative_to = position).
        The ids must be plain ([s] or [b, s]): no position axes.
      }],
      "bool", "readsPositions", (ins), "", "return false;">,
    InterfaceMethod<[{
        A score term added to q . k before the scale and softcap (Shaw's
        a^K): its score hook runs first and adds scale * term to the scaled
        score (shape.scale).
      }],
      "bool", "isKeyTerm", (ins), "", "return false;">,
    InterfaceMethod<[{
        Whether the score bias depends on the head and the index distance
        j - (i + skv - sq) alone (not on i or j apart, nor on positions): a
        materialized bias may then copy one row of distances per head
        (templates/x86/score_bias.mlir) instead of calling the score hook
        per element.
      }],
      "bool", "isDistanceOnly", (ins), "", "return false;">,
    InterfaceMethod<[{
        Whether the hooks need the query-tile scratch (a template without
        one must refuse the encoding).
      }],
      "bool", "requiresQueryTileScratch", (ins), "", "return false;">,
    InterfaceMethod<[{
        The float64 reference of a key term: [b, hq, sq, skv], added to
        q . k before the scale (attention.query is Q after the QK transform).
      }],
      "::pejit::ref::Tensor", "referenceKeyTerm",
      (ins "const ::pejit::pe::ReferenceAttention &":$attention), "",
      "return ::pejit::ref::Tensor();">,
    InterfaceMethod<[{
        f32 entries of scratch the encoding wants per query tile (0: none),
        when the template has one (shape.hasQueryTileScratch): filled by
        emitQueryTilePrologue, read by emitScoreMod (ScorePoint::tileScratch).
      }],
      "int64_t", "getQueryTileScratchFloats",
      (ins "const ::pejit::pe::AttentionShape &":$shape), "", "return 0;">,
    InterfaceMethod<[{
        Once per query tile (attn.query_tile_prologue): fills the encoding's
        query-tile scratch, e.g. a table of its bias by distance.
      }],
      "void", "emitQueryTilePrologue",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::QueryTileArgs &":$args), "", "return;">,
    InterfaceMethod<[{
        A value term (Shaw's a^V) adds sum_j p_ij row(bucket(i, j)) to each
        output row: the number of buckets B, 0 for encodings without one.
        The template keeps sum_j p_ij per bucket and query row, rescaled by
        the online softmax as O is (docs/hooks.md "Value term").
      }],
      "int64_t", "getValueTermBuckets", (ins), "", "return 0;">,
    InterfaceMethod<[{
        The value term's bucket of (queryIndex, keyIndex) at `point` (i32 of
        the indices' shape, in [0, B)); point.score is null. Pointwise.
      }],
      "::mlir::Value", "emitValueTermBucket",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::ScorePoint &":$point), "", "return {};">,
    InterfaceMethod<[{
        Channels [channel, channel + lanes) of the value term's row for
        `bucket` (attn.value_term_row), as f32 (a scalar for lanes = 1).
      }],
      "::mlir::Value", "emitValueTermRow",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::ValueTermRowArgs &":$args), "", "return {};">,
    InterfaceMethod<[{
        A key term by buckets (Shaw's a^K) seen as a backward sees it:
        term_ij = q_i . row(bucket(i, j)). The number of buckets B, 0 for
        encodings without one. The forward fuses the term through its
        query-tile prologue and score hook instead; the backward
        (docs/backward.md) keeps q_i . row(m) per row and bucket in scratch.
      }],
      "int64_t", "getKeyTermBuckets", (ins), "", "return 0;">,
    InterfaceMethod<[{
        The key term's bucket of (queryIndex, keyIndex) at `point` (i32 of
        the indices' shape, in [0, B)); point.score is null. Pointwise.
      }],
      "::mlir::Value", "emitKeyTermBucket",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::ScorePoint &":$point), "", "return {};">,
    InterfaceMethod<[{
        Channels [channel, channel + lanes) of the key term's row for
        `bucket` (attn.value_term_row key), as f32 (a scalar for lanes = 1).
      }],
      "::mlir::Value", "emitKeyTermRow",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::ValueTermRowArgs &":$args), "", "return {};">,
    InterfaceMethod<[{
        The adjoint of a bucketed term's row (attn.term_row_grad, a key or a
        value term): `rowGrad` (f32 of args.lanes lanes) is the gradient of
        channels [channel, channel + lanes) of row `bucket` for `head`; the
        contributions to the encoding's operands it reads that row from. A
        contribution may give a scalar index with a vector value: the lanes
        are then consecutive elements from that index.
      }],
      "::llvm::SmallVector<::pejit::pe::GradContribution>", "emitTermRowAdjoint",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::ValueTermRowArgs &":$args, "::mlir::Value":$rowGrad), "",
      "return {};">,
    InterfaceMethod<[{
        The float64 reference of a value term: its bucket function and rows
        (docs/semantics.md); an empty term when the encoding has none.
      }],
      "::pejit::ref::BucketedValueTerm", "referenceValueTerm",
      (ins "const ::pejit::pe::ReferenceAttention &":$attention), "",
      "return {};">,
    InterfaceMethod<[{
        Whether the encoding's adjoints give the gradient of its operand
        `index` (emitScoreModAdjoint or emitQKTransformOperandAdjoint; a
        backward kernel refuses to compute one they do not).
      }],
      "bool", "hasOperandAdjoint", (ins "unsigned":$index), "", "return false;">,
    InterfaceMethod<[{
        Whether operand `index`'s gradient is the score gradient dS itself,
        summed over the operand's broadcast dims (a bias tensor [1|b, 1|hq,
        sq, skv]): s x s by nature, so the template writes dS once per
        score into a buffer of the scores' shape and the runtime sums it
        over the broadcast dims, instead of per-item partial buffers
        (docs/backward.md). Implies hasOperandAdjoint(index).
      }],
      "bool", "hasScoreShapedGradient", (ins "unsigned":$index), "", "return false;">,
    InterfaceMethod<[{
        The score hook's adjoint (attn.score_grad, docs/backward.md): given
        dScore, the gradient of the hook's output score at `point` (scalars),
        the contributions to the encoding's differentiable operands, which
        the template adds in a fixed order. A score bias is additive, so the
        gradient of the hook's input score is dScore itself. Empty: no
        operand gradient (the default).
      }],
      "::llvm::SmallVector<::pejit::pe::GradContribution>", "emitScoreModAdjoint",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::ScorePoint &":$point, "::mlir::Value":$dScore), "",
      "return {};">,
    InterfaceMethod<[{
        The pointwise score hook (attn.score_mod): returns the new score at
        `point` (scalars, or vectors of lanes the template chose). It must
        be elementwise: no loops, and no assumption about which index varies
        across lanes (docs/hooks.md). The default leaves the score as is.
      }],
      "::mlir::Value", "emitScoreMod",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "const ::pejit::pe::AttentionShape &":$shape,
           "const ::pejit::pe::ScorePoint &":$point), "", "return point.score;">,
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
    InterfaceMethod<[{
        Whether the frequencies follow the call's length (max(position) + 1):
        then a side rotated in an earlier call (a pre-rotated K cache) was
        rotated with other frequencies, and RoPE must rotate both sides at
        read time.
      }],
      "bool", "followsCallLength", (ins),
      /*methodBody=*/"", /*defaultImplementation=*/"return false;">,
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
      [{ return $_op.getPositionalEncoding().getEncodingKind(); }]>,
    InterfaceMethod<[{
        For a QK transform: the tensor it transforms (Q or K), which the
        fused attention reads instead. Null for other kinds.
      }],
      "::mlir::Value", "getTransformedInput", (ins), "",
      [{ return nullptr; }]>,
    InterfaceMethod<[{
        The op's operands that become the fused attention's
        encoding_operands (getNumEncodingOperands of them, in order). Empty
        for ops whose encoding reads no tensor of its own.
      }],
      "::llvm::SmallVector<::mlir::Value>", "getEncodingOperands", (ins), "",
      [{ return {}; }]>,
    InterfaceMethod<[{
        The position ids the encoding reads ([s] or [b, s]), which become the
        fused attention's query or key positions. Null if it reads none.
      }],
      "::mlir::Value", "getPositionIds", (ins), "",
      [{ return nullptr; }]>,
    InterfaceMethod<[{
        The op's float64 reference, its unfused semantics
        (docs/semantics.md): the result from `args` (its operands as
        tensors, or as position ids with the defaults filled in). False with
        `error` set when it cannot (e.g. a position past a learned table).
      }],
      "bool", "evaluateReference",
      (ins "const ::pejit::pe::ReferenceOpArgs &":$args, "::pejit::ref::Tensor &":$result,
           "std::string &":$error)>,
    InterfaceMethod<[{
        Whether the op computes its input's gradient (the transpose of its
        transform: `pe.rope adjoint`) instead of the forward. Such an op
        is a backward: it does not fuse into attention.
      }],
      "bool", "isAdjoint", (ins), "", [{ return false; }]>,
    InterfaceMethod<[{
        Makes the op its adjoint form (`adjoint`) or its forward: for ops
        with one (a QK transform whose encoding hasQKTransformAdjoint).
        The derived backward of a standalone chain clones each such op and
        flips it (attn-derive-backward).
      }],
      "void", "makeAdjoint", (ins "bool":$adjoint), "", [{ (void)adjoint; }]>,
    InterfaceMethod<[{
        What operand `index` is, for messages and argument roles ("table").
      }],
      "std::string", "getOperandRoleName", (ins "unsigned":$index), "",
      [{ return "operand #" + std::to_string(index); }]>,
  ];
}

#endif // PEJIT_PE_INTERFACES_TD

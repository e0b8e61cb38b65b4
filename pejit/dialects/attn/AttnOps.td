#ifndef PEJIT_ATTN_OPS_TD
#define PEJIT_ATTN_OPS_TD

include "pejit/dialects/attn/AttnDialect.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Attn_FloatTensor : RankedTensorOf<[AnyFloat]>;

def Attn_AttentionOp : Attn_Op<"attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "softmax(scale * Q K^T + terms, masked) V";
  let description = [{
    Q is [b, hq, sq, d], K is [b, hkv, skv, d], V is [b, hkv, skv, dv] and the
    result [b, hq, sq, dv]; hq is a multiple of hkv (GQA/MQA: query head h
    reads KV head h / (hq / hkv)). For query row i and key j, with
    off = skv - sq (bottom-right alignment, FlashAttention >= 2.1):

    ```
    s_ij = scale * (q_i . k_j + key_term_ij)      scale defaults to 1/sqrt(d)
    s_ij = softcap * tanh(s_ij / softcap)         if softcap
    s_ij = s_ij + bias_ij                         bias is [1|b, 1|hq, sq, skv]
    visible(i, j) = (!causal || j <= i + off) && (!window || j >= i + off - window)
                    && (!window_right || j <= i + off + window_right)
    p_i = softmax over visible j;  o_i = sum_j p_ij (v_j + value_term_ij)
    ```
    A row that sees no key outputs zeros. The training forward has a second
    result, `lse` (f32 [b, hq, sq]): lse_i = log sum_j exp(s_ij) over the
    visible j, natural log, -inf for a row that sees no key; the backward
    (attn.attention_backward, docs/backward.md) reads it instead of
    recomputing it. `key_term` ([b, hq, sq, skv], Shaw
    key) comes from pe.relative_key and `value_term` ([sq, skv, dv], Shaw
    value) from pe.relative_value. Position ids ([s] or [b, s], i32/i64) are
    used by encodings fused into the op; masks never read them.

    Fused form: `encodings` lists positional encodings (pe attributes) that
    the op applies itself, so no rotated Q/K and no bias tensor exist: a QK
    transform (at most one, e.g. #pe.rope) rotates Q at `query_positions` and
    K at `key_positions` (defaults: keys 0..skv-1, queries skv-sq..skv-1) and
    a score bias (e.g. #pe.alibi) is added where `bias` would be.
    `encoding_operands` are the tensors the fused encodings read (a T5
    table [num_buckets, hq], Shaw tables [2k+1, d]): each encoding takes
    getNumEncodingOperands() of them, in the order of `encodings`.

    Packed variable-length batches: `segments(%cu_q, %cu_k)` are
    FlashAttention's cu_seqlens_q and cu_seqlens_k (i32 [n + 1], 0 first,
    non-decreasing, the last the packed length). Q is [1, hq, total_q, d]
    and K, V [1, hkv, total_k, d], with `?` for both lengths. Sequence i is
    query rows [cu_q[i], cu_q[i+1]) against key rows [cu_k[i], cu_k[i+1]):
    the op means the same attention run on each sequence alone (its own
    causal offset len_k(i) - len_q(i), its own default positions), the
    outputs packed in the query's order. Explicit position ids are packed
    the same way ([total]).

    Per-row key lengths: `key_lengths(%lens)` (i32 [b], FlashAttention's
    cache_seqlens) gives batch row n only the keys j < lens[n] of a K and V
    of capacity skv (a KV cache with room to grow): the op means the
    attention run on row n alone with K and V truncated to lens[n] keys
    (its causal offset lens[n] - sq, its default positions). Position ids,
    if given, are shared by the batch ([s]); row n reads the first lens[n]
    key ids.

    ```mlir
    %o = attn.attention %q, %k, %v bias(%alibi : tensor<1x12x64x64xf32>)
        causal scale(0.125)
        : tensor<1x12x64x64xf32>, tensor<1x4x64x64xf32>, tensor<1x4x64x64xf32>
        -> tensor<1x12x64x64xf32>
    ```
  }];
  let arguments = (ins
    Attn_FloatTensor:$query, Attn_FloatTensor:$key, Attn_FloatTensor:$value,
    Optional<AnyRankedTensor>:$query_positions,
    Optional<AnyRankedTensor>:$key_positions,
    Optional<Attn_FloatTensor>:$bias,
    Optional<Attn_FloatTensor>:$key_term,
    Optional<Attn_FloatTensor>:$value_term,
    Optional<TensorRankOf<[I32], [1]>>:$query_segments,
    Optional<TensorRankOf<[I32], [1]>>:$key_segments,
    Optional<TensorRankOf<[I32], [1]>>:$key_lengths,
    OptionalAttr<F64Attr>:$scale,
    UnitAttr:$causal,
    OptionalAttr<I64Attr>:$window,
    OptionalAttr<I64Attr>:$window_right,
    OptionalAttr<F64Attr>:$softcap,
    OptionalAttr<ArrayAttr>:$encodings,
    Variadic<Attn_FloatTensor>:$encoding_operands);
  let results = (outs Attn_FloatTensor:$result, Optional<TensorOf<[F32]>>:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value
    (`query_positions` `(` $query_positions^ `:` type($query_positions) `)`)?
    (`key_positions` `(` $key_positions^ `:` type($key_positions) `)`)?
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`key_term` `(` $key_term^ `:` type($key_term) `)`)?
    (`value_term` `(` $value_term^ `:` type($value_term) `)`)?
    (`segments` `(` $query_segments^ `,` $key_segments `:` type($query_segments) `,`
       type($key_segments) `)`)?
    (`key_lengths` `(` $key_lengths^ `:` type($key_lengths) `)`)?
    (`causal` $causal^)?
    (`window` `(` $window^ `)`)?
    (`window_right` `(` $window_right^ `)`)?
    (`softcap` `(` $softcap^ `)`)?
    (`scale` `(` $scale^ `)`)?
    (`encodings` `(` $encodings^ `)`)?
    (`encoding_operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    attr-dict `:` type($query) `,` type($key) `,` type($value) `->` type($result)
    (`,` type($lse)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `scale` if given, else 1/sqrt(d) (d static; the verifier ensures it
    /// whenever scale is absent).
    double getEffectiveScale();
    /// Checks the fused `encodings` (part of the verifier).
    ::llvm::LogicalResult verifyEncodings();
    /// The fused QK transform among `encodings` (at most one), or null.
    ::pejit::pe::PositionalEncodingAttrInterface getFusedQKTransform();
    /// Checks `segments(...)` and `key_lengths(...)` (part of the verifier).
    ::llvm::LogicalResult verifySegments();
  }];
}

include "pejit/dialects/attn/LinearAttention.td"
include "pejit/dialects/attn/AttentionBackward.td"

def Attn_PagedKvOp : Attn_Op<"paged_kv", [Pure]> {
  let summary = "a logical K or V [b, h, max_pages * page_size, d] read from a paged cache";
  let description = [{
    A paged KV cache as vLLM and FlashInfer store it: `pages` is
    [num_pages, page_size, h, d] and `block_table` (i32 [b, max_pages])
    lists each batch row's pages in order. The result is the row's keys (or
    values) in pejit's layout, [b, h, max_pages * page_size, d]:

    ```
    result[n, h, j, :] = pages[block_table[n, j / page_size], j % page_size, h, :]
    ```

    Every table entry a row reads must be in [0, num_pages): with an
    attention's `key_lengths(lens)`, row n reads entries
    [0, ceil(lens[n] / page_size)); without, all of them. The kernel
    checks them at run (the error names the row and the index); the x86
    kernel gathers the rows it reads, the op itself is never materialized
    in full. It feeds attn.attention's key or value directly.

    ```mlir
    %k = attn.paged_kv %k_pages, %table : tensor<?x16x8x128xf32>, tensor<?x?xi32>
        -> tensor<?x8x?x128xf32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$pages, TensorRankOf<[I32], [2]>:$block_table);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $pages `,` $block_table attr-dict `:` type($pages) `,` type($block_table) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Template hook ops: where a kernel template lets the fused encodings in.
// attn-instantiate-x86-template (and -nvidia-) replace each with the code that the encodings'
// PositionalEncodingAttrInterface hooks emit (nothing, if no encoding of that
// kind is fused). Templates hold loop structure only; these are the seams.
//===----------------------------------------------------------------------===//

def Attn_QKPrologueOp : Attn_Op<"qk_prologue", [AttrSizedOperandSegments]> {
  let summary = "once per call: the QK transform's per-position tables";
  let description = [{
    Runs once per kernel call, before any tile. A QK transform (RoPE) fills
    its tables in `scratch` from the position ids: `query_positions` is
    [1|b, sq] and `key_positions` [1|b, skv] (i64).

    With `rows(%begin, %step)`, this instance fills only the flattened
    position rows begin, begin + step, ...: GPU templates spread the tables
    over their threads this way.

    `operands(...)` are the encoding's own tensors (a learned table), for a
    prologue that builds its tables from them: a standalone kernel passes
    them (docs/standalone-kernels.md); attention templates pass none.

    `{encoding = k}`: this hook is the k-th encoding's (a standalone
    kernel's chain of pe ops, each with its own hooks and scratch part);
    without it, the one QK transform's.
  }];
  let arguments = (ins AnyMemRef:$query_positions, AnyMemRef:$key_positions,
                       AnyMemRef:$scratch, Optional<Index>:$row_begin,
                       Optional<Index>:$row_step, Variadic<AnyMemRef>:$encoding_operands,
                       OptionalAttr<I64Attr>:$encoding);
  let assemblyFormat = [{
    $query_positions `,` $key_positions `,` $scratch
    (`rows` `(` $row_begin^ `,` $row_step `)`)?
    (`operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)? attr-dict `:`
    type($query_positions) `,` type($key_positions) `,` type($scratch)
  }];
  let hasVerifier = 1;
}

def Attn_QKTransformOp : Attn_Op<"qk_transform", [AttrSizedOperandSegments]> {
  let summary = "transform rows of a Q or K tile, in place or from a source";
  let description = [{
    Rows [0, rows) of `tile` ([R, d], f32) are sequence indices
    seq_start + r of batch `batch` of the query (`is_key` unset) or the key
    operand. A QK transform (RoPE) rotates them using the tables its prologue
    left in `scratch`.

    In place by default. With `from %source` ([>= rows, d], f32, f16 or
    bf16: rows of the Q or K operand itself), the rows are read from
    `source`, widened to the tile's type and transformed on the way into
    `tile`: one pass instead of a copy and a rotation. Without a QK
    transform the `from` form is that copy alone, and the in-place form
    nothing.

    `lengths(%sq, %skv)` are the call's query and key lengths, for kernels
    compiled for a shape class with `?` lengths (docs/shape-classes.md): the
    transform's tables are laid out by them. Without it the attention's
    static lengths are used.

    `{encoding = k}`: as for attn.qk_prologue, the k-th encoding's hook.

    `adjoint` (a backward kernel's, docs/backward.md): `tile` holds the
    gradient of transformed rows and becomes, in place, the gradient of the
    rows before the transform (RoPE: the inverse rotation). With `from`,
    the source rows (gradients) are first copied into the tile, widened.
    Without a QK transform, nothing (or that copy alone).
  }];
  let arguments = (ins AnyMemRef:$tile, Optional<AnyMemRef>:$source, Index:$rows,
                       Index:$seq_start, Index:$batch, AnyMemRef:$scratch,
                       Optional<Index>:$query_length, Optional<Index>:$key_length,
                       UnitAttr:$is_key, UnitAttr:$adjoint, OptionalAttr<I64Attr>:$encoding);
  let assemblyFormat = [{
    (`adjoint` $adjoint^)? $tile (`from` $source^)? `,` $rows `,` $seq_start `,` $batch `,` $scratch
    (`key` $is_key^)? (`lengths` `(` $query_length^ `,` $key_length `)`)?
    attr-dict `:` type($tile) (`from` type($source)^)? `,` type($scratch)
  }];
  let hasVerifier = 1;
}

def Attn_QKTransformGradOp : Attn_Op<"qk_transform_grad", [AttrSizedOperandSegments]> {
  let summary = "a QK transform's operand gradients from rows of a backward's dQ' or dK'";
  let description = [{
    A backward kernel's hook (docs/backward.md). Rows [0, rows) of `grad`
    ([R, d], f32: the gradient of the transformed rows, dQ' or dK' before
    the transform's adjoint) and of `transformed` ([R, d], f32: Q' or K')
    are sequence indices seq_start + r of batch `batch`, of the query
    (`key` unset) or the key side; `positions` are that side's ids.

    Expands to the QK transform's operand adjoint
    (PositionalEncodingAttrInterface::emitQKTransformOperandAdjoint): RoPE's
    runtime position scale s gets sum over the rows and rotated pairs of
    pos * inv_freq[c] * (g_b x'_a - g_a x'_b). Each contribution is added
    to `partial` at partial_start + offsets[slot] + index, as for
    attn.score_grad; slots with offset -1 are not asked for. Without a QK
    transform, or one with no such gradient asked for, nothing.
  }];
  let arguments = (ins AnyMemRef:$grad, AnyMemRef:$transformed, Index:$rows, Index:$seq_start,
                       Index:$batch, AnyMemRef:$positions,
                       Variadic<AnyMemRef>:$encoding_operands,
                       MemRefRankOf<[F32], [1]>:$partial, Index:$partial_start,
                       Optional<Index>:$query_length, Optional<Index>:$key_length,
                       UnitAttr:$is_key, DenseI64ArrayAttr:$offsets);
  let assemblyFormat = [{
    $grad `,` $transformed `,` $rows `,` $seq_start `,` $batch (`key` $is_key^)?
    `positions` `(` $positions `:` type($positions) `)`
    (`operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    `partial` `(` $partial `:` type($partial) `,` $partial_start `)`
    `offsets` $offsets
    (`lengths` `(` $query_length^ `,` $key_length `)`)?
    attr-dict `:` type($grad) `,` type($transformed)
  }];
  let hasVerifier = 1;
}

def Attn_ScoreModOp : Attn_Op<"score_mod", [Pure, AttrSizedOperandSegments,
                                            AllTypesMatch<["score", "result"]>,
                                            AllTypesMatch<["query_index", "key_index"]>]> {
  let summary = "the pointwise score modifier: softcap, then the fused score biases";
  let description = [{
    One score, or a vector of N scores (f32), of query head `head` in batch
    `batch`: lane l is the score of query row `query_index[l]` and key row
    `key_index[l]` (i32 sequence indices, of the same shape as `score`). The
    template owns the loops and picks the lanes; the op says nothing about
    which axis varies across them.

    Expands (attn-instantiate-*-template) to the attention's softcap, if it
    has one, then each fused score bias's pointwise hook
    (PositionalEncodingAttrInterface::emitScoreMod), in docs/semantics.md's
    order; with neither, to its `score` operand. Masking stays in the
    template. `operands(...)` are the encodings' own tensors (the fused
    attention's encoding_operands, as memrefs), which the hooks read;
    `tile(%scratch, %start)` the query tile's scratch (filled by
    attn.query_tile_prologue) and its first query row. With
    `consecutive_queries` the template states that lane l is query
    queryIndex[0] + l, all of one key: hooks may then read contiguously.
    `positions(%qpos, %kpos)` are the attention's position ids ([rows, sq]
    and [rows, skv] i64, rows 1 or b), which the expansion reads only for
    encodings that measure distance by position (relative_to = position).
    `lengths(%sq, %skv)` are the call's lengths where the kernel takes them
    at run time (the offset skv - sq of distances by index); without it, the
    attention's static lengths.

    ```mlir
    %s1 = attn.score_mod %s, batch %b, head %h, query %qi, key %kj
        : vector<8xf32>, vector<8xi32>
    ```
  }];
  let arguments = (ins AnyTypeOf<[F32, VectorOfRankAndType<[1], [F32]>]>:$score,
                       Index:$batch, Index:$head,
                       AnyTypeOf<[I32, VectorOfRankAndType<[1], [I32]>]>:$query_index,
                       AnyTypeOf<[I32, VectorOfRankAndType<[1], [I32]>]>:$key_index,
                       Variadic<AnyMemRef>:$encoding_operands,
                       Optional<MemRefRankOf<[F32], [1]>>:$tile_scratch,
                       Optional<Index>:$tile_start,
                       Optional<MemRefRankOf<[I64], [2]>>:$query_positions,
                       Optional<MemRefRankOf<[I64], [2]>>:$key_positions,
                       Optional<Index>:$query_length, Optional<Index>:$key_length,
                       UnitAttr:$consecutive_queries);
  let results = (outs AnyTypeOf<[F32, VectorOfRankAndType<[1], [F32]>]>:$result);
  let assemblyFormat = [{
    $score `,` `batch` $batch `,` `head` $head `,` `query` $query_index `,` `key` $key_index
    (`consecutive_queries` $consecutive_queries^)?
    (`operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    (`tile` `(` $tile_scratch^ `:` type($tile_scratch) `,` $tile_start `)`)?
    (`positions` `(` $query_positions^ `,` $key_positions `:` type($query_positions) `,`
       type($key_positions) `)`)?
    (`lengths` `(` $query_length^ `,` $key_length `)`)?
    attr-dict `:` type($score) `,` type($query_index)
  }];
  let hasVerifier = 1;
}

def Attn_ScoreGradOp : Attn_Op<"score_grad", [AttrSizedOperandSegments]> {
  let summary = "template hook: the score biases' adjoint, into a partial gradient buffer";
  let description = [{
    A backward template's seam for the encodings' parameter gradients
    (docs/backward.md). `score_grad` is dL/ds at (batch, head, query index,
    key index), one score. attn-instantiate-*-template replaces it with each
    fused score bias's emitScoreModAdjoint contributions, each added to
    `partial[start + offsets[operand] + index]`, where `offsets` gives each
    encoding operand's place in the partial buffer (-1: no gradient asked).
    The template owns the buffer: one per work item, summed in a fixed order.
    `positions(%qpos, %kpos)`: the attention's position ids, as for
    attn.score_mod (encodings with relative_to = position read them).

    ```mlir
    attn.score_grad %ds, batch %b, head %h, query %qi, key %kj
        operands(%e0 : memref<32x4xf32>) partial(%scratch : memref<?xf32>, %base)
        offsets [0]
    ```
  }];
  let arguments = (ins F32:$score_grad, Index:$batch, Index:$head, I32:$query_index,
                       I32:$key_index, Variadic<AnyMemRef>:$encoding_operands,
                       MemRefRankOf<[F32], [1]>:$partial, Index:$partial_start,
                       Optional<MemRefRankOf<[I64], [2]>>:$query_positions,
                       Optional<MemRefRankOf<[I64], [2]>>:$key_positions,
                       Optional<Index>:$query_length, Optional<Index>:$key_length,
                       DenseI64ArrayAttr:$offsets);
  let assemblyFormat = [{
    $score_grad `,` `batch` $batch `,` `head` $head `,` `query` $query_index `,` `key` $key_index
    (`operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    `partial` `(` $partial `:` type($partial) `,` $partial_start `)`
    `offsets` $offsets
    (`positions` `(` $query_positions^ `,` $key_positions `:` type($query_positions) `,`
       type($key_positions) `)`)?
    (`lengths` `(` $query_length^ `,` $key_length `)`)?
    attr-dict
  }];
}

def Attn_ValueTermBucketOp : Attn_Op<"value_term_bucket", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["query_index", "key_index", "result"]>]> {
  let summary = "the value term's bucket of (query, key), pointwise";
  let description = [{
    The bucket (i32, in [0, B)) whose row of the fused value term (Shaw's
    a^V, docs/hooks.md "Value term") score (query_index, key_index) of
    `head` in `batch` weights, lane by lane as attn.score_mod. The template
    adds each probability into its bucket's accumulator. Expands
    (attn-instantiate-x86-template) to the value-term encoding's
    emitValueTermBucket, or to 0 when the attention has none.
    `positions(...)` and `lengths(...)` as for attn.score_mod.

    With `key`, the key term's bucket instead (Shaw's a^K as a backward
    kernel reads it: q_i . row(bucket), docs/backward.md): the key-term
    encoding's emitKeyTermBucket, or 0 without one.

    ```mlir
    %m = attn.value_term_bucket batch %b, head %h, query %qi, key %kj : vector<8xi32>
    ```
  }];
  let arguments = (ins Index:$batch, Index:$head,
                       AnyTypeOf<[I32, VectorOfRankAndType<[1], [I32]>]>:$query_index,
                       AnyTypeOf<[I32, VectorOfRankAndType<[1], [I32]>]>:$key_index,
                       Variadic<AnyMemRef>:$encoding_operands,
                       Optional<MemRefRankOf<[I64], [2]>>:$query_positions,
                       Optional<MemRefRankOf<[I64], [2]>>:$key_positions,
                       Optional<Index>:$query_length, Optional<Index>:$key_length,
                       UnitAttr:$key);
  let results = (outs AnyTypeOf<[I32, VectorOfRankAndType<[1], [I32]>]>:$result);
  let assemblyFormat = [{
    (`key` $key^)? `batch` $batch `,` `head` $head `,` `query` $query_index `,` `key` $key_index
    (`operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    (`positions` `(` $query_positions^ `,` $key_positions `:` type($query_positions) `,`
       type($key_positions) `)`)?
    (`lengths` `(` $query_length^ `,` $key_length `)`)?
    attr-dict `:` type($query_index)
  }];
}

def Attn_ValueTermRowOp : Attn_Op<"value_term_row", [Pure]> {
  let summary = "channels of the value term's row of one bucket";
  let description = [{
    Channels [channel, channel + N) of the fused value term's row `bucket`
    for `head` in `batch`, as f32 (`vector<N x f32>`, or f32 for N = 1).
    The template adds acc[bucket] times it to the output row once per query
    tile, before dividing by the softmax sum. Expands to the value-term
    encoding's emitValueTermRow, or to zeros when the attention has none.
    With `key`, the key term's row (emitKeyTermRow), as a backward reads it.

    ```mlir
    %r = attn.value_term_row batch %b, head %h, bucket %m, channel %c : vector<8xf32>
    ```
  }];
  let arguments = (ins Index:$batch, Index:$head, Index:$bucket, Index:$channel,
                       Variadic<AnyMemRef>:$encoding_operands, UnitAttr:$key);
  let results = (outs AnyTypeOf<[F32, VectorOfRankAndType<[1], [F32]>]>:$result);
  let assemblyFormat = [{
    (`key` $key^)? `batch` $batch `,` `head` $head `,` `bucket` $bucket `,` `channel` $channel
    (`operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    attr-dict `:` type($result)
  }];
}

def Attn_TermRowGradOp : Attn_Op<"term_row_grad"> {
  let summary = "a bucketed term's row gradient, into a partial gradient buffer";
  let description = [{
    A backward template's seam for the gradient of a bucketed term's table
    (docs/backward.md): `grad` is dL/d row(bucket)[channel, channel + N)
    for query head `head` in `batch`, of the value term (Shaw's a^V) or,
    with `key`, of the key term (a^K). Expands to that encoding's
    emitTermRowAdjoint contributions, each added to
    `partial[start + offsets[operand] + index]` as for attn.score_grad
    (-1: not asked for); to nothing without such a term.

    ```mlir
    attn.term_row_grad key %g, batch %b, head %h, bucket %m, channel %c
        operands(%e0 : memref<9x64xf32>) partial(%scratch : memref<?xf32>, %base)
        offsets [0] : vector<8xf32>
    ```
  }];
  let arguments = (ins AnyTypeOf<[F32, VectorOfRankAndType<[1], [F32]>]>:$grad, Index:$batch,
                       Index:$head, Index:$bucket, Index:$channel,
                       Variadic<AnyMemRef>:$encoding_operands,
                       MemRefRankOf<[F32], [1]>:$partial, Index:$partial_start,
                       DenseI64ArrayAttr:$offsets, UnitAttr:$key);
  let assemblyFormat = [{
    (`key` $key^)? $grad `,` `batch` $batch `,` `head` $head `,` `bucket` $bucket `,`
    `channel` $channel
    (`operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    `partial` `(` $partial `:` type($partial) `,` $partial_start `)`
    `offsets` $offsets attr-dict `:` type($grad)
  }];
}

def Attn_QueryTilePrologueOp : Attn_Op<"query_tile_prologue", [AttrSizedOperandSegments]> {
  let summary = "once per query tile: the encodings' per-tile tables";
  let description = [{
    Runs once per query tile, before its first key tile: each fused
    encoding that asked for query-tile scratch fills its part of
    `tile_scratch` (1-D f32) for query rows [start, start + rows) of `head`
    in `batch` (e.g. T5's bias by distance, read by its score hook).
    `query(%Qs)` is the tile's Q rows ([BM, d] f32, f16 or bf16, after the
    QK transform, unscaled), for terms that need them (Shaw's q . a^K).
    `share(%first, %step)` says this thread fills only rows first + k step
    (a GPU block's threads split the tile; without it, every row).
    Expands to nothing when no encoding asked for any.

    ```mlir
    attn.query_tile_prologue %ts, batch %b, head %h, start %i0, rows %nq
        operands(%t : memref<32x16xf32>) : memref<2240xf32>
    ```
  }];
  let arguments = (ins MemRefRankOf<[F32], [1]>:$tile_scratch, Index:$batch, Index:$head,
                       Index:$start, Index:$rows, Optional<Index>:$row_first,
                       Optional<Index>:$row_step, Variadic<AnyMemRef>:$encoding_operands,
                       Optional<MemRefRankOf<[F32, F16, BF16], [2]>>:$query_tile);
  let assemblyFormat = [{
    $tile_scratch `,` `batch` $batch `,` `head` $head `,` `start` $start `,` `rows` $rows
    (`share` `(` $row_first^ `,` $row_step `)`)?
    (`operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    (`query` `(` $query_tile^ `:` type($query_tile) `)`)?
    attr-dict `:` type($tile_scratch)
  }];
}

#endif // PEJIT_ATTN_OPS_TD

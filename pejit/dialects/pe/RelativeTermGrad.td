// pe.relative_term_grad: the backward of Shaw's terms written out on their
// own (a materialized pe.relative_key or pe.relative_value). Included by
// PEOps.td; its verifier is RelativeTermGrad.cpp.
#ifndef PEJIT_PE_RELATIVETERMGRAD_TD
#define PEJIT_PE_RELATIVETERMGRAD_TD

def PE_RelativeTermGradOp : PE_Op<"relative_term_grad", [Pure]> {
  let summary = "a materialized Shaw term's gradients from the term's gradient";
  let description = [{
    The backward of a Shaw term pe op written out on its own
    (docs/backward.md), derived by `attn-derive-backward`. With r(i, j) =
    clip(j - (i + skv - sq), -k, k) + k, the bucket of (i, j):

    - the key term (`#pe.relative_key`, E[b, h, i, j] = q_i . a^K[r]):
      `term_grad` is dE [b, h, sq, skv], `query` q [b, h, sq, d], `table`
      a^K [2k+1, d] or [h, 2k+1, d]; the results are
      ```
      dq[b, h, i]  = sum_j dE[b, h, i, j] a^K[(h,) r(i, j)]   (q's type)
      d a^K[(h,) m] = sum over (b, (h,) i, j) with r(i, j) = m of dE q_i  (f32)
      ```
    - the value term (`#pe.relative_value`, R[(h,) i, j] = a^V[(h,) r]):
      `term_grad` is dR [sq, skv, dv] or [h, sq, skv, dv], no `query`;
      the result is d a^V[(h,) m] = sum over i, j with r(i, j) = m of
      dR[(h,) i, j] (f32, the table's shape).

    The kernel reads the bucket and the table's rows through the encoding's
    hooks and adds into partial tables per work item, summed in item order
    in f64: deterministic at any thread count.

    ```mlir
    %dq, %dk = pe.relative_term_grad %de query(%q : tensor<1x8x64x64xf32>)
        table(%ak : tensor<9x64xf32>) encoding(#pe.relative_key<clip = 4>)
        : tensor<1x8x64x64xf32> -> tensor<1x8x64x64xf32>, tensor<9x64xf32>
    %dv = pe.relative_term_grad %dr table(%av : tensor<9x64xf32>)
        encoding(#pe.relative_value<clip = 4>)
        : tensor<64x64x64xf32> -> tensor<9x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$term_grad, Optional<PE_FloatTensor>:$query,
                       PE_FloatTensor:$table, AnyAttr:$encoding);
  let results = (outs Variadic<PE_FloatTensor>:$results);
  let assemblyFormat = [{
    $term_grad (`query` `(` $query^ `:` type($query) `)`)?
    `table` `(` $table `:` type($table) `)` `encoding` `(` $encoding `)` attr-dict `:`
    type($term_grad) `->` type($results)
  }];
  let hasVerifier = 1;
}

#endif // PEJIT_PE_RELATIVETERMGRAD_TD

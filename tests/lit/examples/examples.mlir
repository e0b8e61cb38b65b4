// The shipped examples parse and verify.
// RUN: pejit-opt %S/../../../examples/llama_rope_gqa.mlir | FileCheck %s --check-prefix=LLAMA
// RUN: pejit-opt %S/../../../examples/alibi_12_heads.mlir | FileCheck %s --check-prefix=ALIBI

// LLAMA-LABEL: func.func @llama_prefill
// LLAMA-COUNT-2: pe.rope {{.*}}scaling = #pe.llama3
// LLAMA: attn.attention {{.*}} causal

// ALIBI-LABEL: func.func @alibi_attention
// ALIBI: pe.alibi <num_heads = 12, form = causal>
// ALIBI: attn.attention {{.*}} bias(

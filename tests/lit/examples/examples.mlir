// The shipped examples parse and verify.
// RUN: pejit-opt %S/../../../examples/llama_rope_gqa.mlir | FileCheck %s --check-prefix=LLAMA
// RUN: pejit-opt %S/../../../examples/alibi_12_heads.mlir | FileCheck %s --check-prefix=ALIBI

// LLAMA-LABEL: func.func @llama_prefill
// LLAMA-COUNT-2: pe.rope {{.*}}scaling = #pe.llama3
// LLAMA: attn.attention {{.*}} causal

// ALIBI-LABEL: func.func @alibi_attention
// ALIBI: pe.alibi <num_heads = 12, form = causal>
// ALIBI: attn.attention {{.*}} bias(
// RUN: pejit-opt %S/../../../examples/paged_decode.mlir | FileCheck %s --check-prefix=PAGED
// RUN: pejit-opt %S/../../../examples/varlen_prefill.mlir | FileCheck %s --check-prefix=VARLEN

// PAGED-LABEL: func.func @paged_decode
// PAGED-COUNT-2: attn.paged_kv
// PAGED: attn.attention {{.*}} key_lengths

// VARLEN-LABEL: func.func @varlen_prefill
// VARLEN: attn.attention {{.*}} segments(
// RUN: pejit-opt %S/../../../examples/kv_append.mlir | FileCheck %s --check-prefix=APPEND

// APPEND-LABEL: func.func @kv_append
// APPEND: pe.rope {{.*}}scaling = #pe.llama3

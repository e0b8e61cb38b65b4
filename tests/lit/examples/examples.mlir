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

// The embedding examples parse, verify and compile to one standalone kernel each.
// RUN: pejit-opt %S/../../../examples/bert_embeddings.mlir --attn-instantiate-x86-template | FileCheck %s --check-prefix=BERT
// RUN: pejit-opt %S/../../../examples/transformer_embeddings.mlir --attn-instantiate-x86-template | FileCheck %s --check-prefix=VASWANI

// BERT: arguments = "tokens:i64:?x? token_table:f32:30522x768 transform_positions:i64:? encoding_operand=learned_table:f32:512x768"
// BERT-SAME: position_limit = 512
// BERT: func.func @pejit_embed_item

// VASWANI: arguments = "tokens:i64:?x? token_table:f32:37000x512 transform_positions:i64:?"
// VASWANI: func.func @pejit_embed_item
// VASWANI: arith.constant 22.6274166 : f32

// RUN: pejit-opt %S/../../../examples/linear_attention_rope.mlir --attn-instantiate-x86-template | FileCheck %s --check-prefix=LINEAR
// LINEAR: arguments = "query:f32:1x8x?x64 key:f32:1x8x?x64 value:f32:1x8x?x64"
// LINEAR: func.func @pejit_item

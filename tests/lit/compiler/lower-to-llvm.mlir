// pejit-lower-to-llvm: the tiled stage in the LLVM dialect only, with the
// C interface wrappers the runtime calls.
// RUN: pejit-opt %s --attn-instantiate-x86-template --pejit-lower-to-llvm | FileCheck %s

// The template's once-per-call functions stay marked pejit.cold (their
// wrappers too): the runtime compiles them without loop strength reduction.
// CHECK-LABEL: llvm.func @pejit_prologue
// CHECK-SAME: pejit.cold
// CHECK-LABEL: llvm.func @_mlir_ciface_pejit_prologue
// CHECK-SAME: pejit.cold
// CHECK-LABEL: llvm.func @pejit_item
// CHECK-SAME: attributes {llvm.emit_c_interface} {
// CHECK: llvm.call @pejit_s_tile(
// CHECK-LABEL: llvm.func @_mlir_ciface_pejit_item
// CHECK-LABEL: llvm.func @pejit_s_tile
// CHECK: llvm.intr.fmuladd{{.*}}vector<8xf32>
// CHECK-NOT: {{ memref\.}}
// CHECK-NOT: {{ scf\.}}
// CHECK-NOT: {{ vector\.}}
func.func @attn(%q: tensor<1x2x16x64xf32>, %k: tensor<1x2x16x64xf32>, %v: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = attn.attention %q, %k, %v causal : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
  return %o : tensor<1x2x16x64xf32>
}

// ptxas -v on the standalone kernels (docs/standalone-kernels.md): a
// Llama 3 KV-append RoPE (a shape class, f32), its adjoint (a standalone
// RoPE's backward, bf16) and a BERT embedding with its learned positions
// (bf16) assemble for sm_80 and sm_90 with no stack frame
// and no spills in the row kernels. The prologues spill nothing either
// (their constant frequency tables sit in a stack frame).
// REQUIRES: ptxas, libdevice
// RUN: split-file %s %t
// RUN: %pejit compile %t/rope.mlir --target=nvidia:sm_80 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefixes=ROPE,SM80
// RUN: %pejit compile %t/rope.mlir --target=nvidia:sm_90 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefixes=ROPE,SM90
// RUN: %pejit compile %t/embed.mlir --target=nvidia:sm_80 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefixes=EMBED,SM80
// RUN: %pejit compile %t/embed.mlir --target=nvidia:sm_90 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefixes=EMBED,SM90
// RUN: %pejit compile %t/adjoint.mlir --target=nvidia:sm_80 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefixes=ROPE,SM80
// RUN: %pejit compile %t/adjoint.mlir --target=nvidia:sm_90 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefixes=ROPE,SM90

// ROPE: Compiling entry function 'pejit_transform' for
// EMBED: Compiling entry function 'pejit_embed' for
// SM80-SAME: 'sm_80'
// SM90-SAME: 'sm_90'
// ROPE-NEXT: Function properties for pejit_transform
// EMBED-NEXT: Function properties for pejit_embed
// ROPE-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// EMBED-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// ROPE: Function properties for pejit_prologue
// EMBED: Function properties for pejit_prologue
// ROPE-NEXT: bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// EMBED-NEXT: bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

//--- rope.mlir
func.func @kv_append(%k_new: tensor<?x8x?x128xf32>, %positions: tensor<?xi64>)
    -> tensor<?x8x?x128xf32> {
  %k_rot = pe.rope %k_new, %positions <layout = half, theta = 500000.0,
      scaling = #pe.llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0,
                           original_max_position = 8192>>
      : tensor<?x8x?x128xf32>, tensor<?xi64>
  return %k_rot : tensor<?x8x?x128xf32>
}

//--- embed.mlir
func.func @bert(%tokens: tensor<?x?xi64>, %words: tensor<30522x768xbf16>,
                %positions: tensor<?xi64>, %position_table: tensor<512x768xbf16>)
    -> tensor<?x?x768xbf16> {
  %t = pe.embed %tokens, %words : tensor<?x?xi64>, tensor<30522x768xbf16> -> tensor<?x?x768xbf16>
  %x = pe.learned %t, %positions, %position_table <max_positions = 512>
      : tensor<?x?x768xbf16>, tensor<?xi64>, tensor<512x768xbf16>
  return %x : tensor<?x?x768xbf16>
}

//--- adjoint.mlir
func.func @rope_backward(%dy: tensor<?x8x?x128xbf16>, %positions: tensor<?xi64>)
    -> tensor<?x8x?x128xbf16> {
  %dx = pe.rope adjoint %dy, %positions <layout = half, theta = 500000.0>
      : tensor<?x8x?x128xbf16>, tensor<?xi64>
  return %dx : tensor<?x8x?x128xbf16>
}

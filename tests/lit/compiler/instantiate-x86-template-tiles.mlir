// Tile configs attn-instantiate-x86-template refuses: a work item's tiles live
// in a worker's stack frame, bounded at 4 MiB. Before the bound,
// --tile=48x99999996 put a 70 GB frame on the stack and crashed.
// Frame = 4 (BM (2 D + DV + 3) + BN (D + DV) + BN BM) bytes.
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template="tile-m=48 tile-n=99999996" --verify-diagnostics
// RUN: not pejit-opt %s --attn-instantiate-x86-template="tile-m=9216 tile-n=96" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TALL

func.func @huge_key_tile(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>) -> tensor<1x2x8x64xf32> {
  // expected-error @+1 {{tile config (48, 99999996) is invalid: a work item's tiles at d = 64, dv = 64 need 70400034624 bytes of stack, beyond pejit's limit of 4194304 (4 MiB)}}
  %o = attn.attention %q, %k, %v : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}

// 9216 x 96 at d = dv = 64: 4 (9216 * 195 + 96 * 128 + 96 * 9216) = 10776576 bytes.
// TALL: tile config (9216, 96) is invalid: a work item's tiles at d = 64, dv = 64 need 10776576 bytes of stack

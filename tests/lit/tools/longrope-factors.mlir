// A LongRoPE factor list of 64 entries (Phi-3 at d = 128) compiles, also in
// the sanitizer build with no ASAN_OPTIONS: there, LLVM's allocator
// poisoning used to be reported as a use-after-poison while parsing the
// attribute (cmake/AsanDefaults.cpp). In the plain build this is a plain
// compile.
// RUN: env -u ASAN_OPTIONS %pejit compile %s --emit=fused | FileCheck %s
// CHECK: attn.attention
// CHECK-SAME: #pe.longrope<short_factor = [1.0,
func.func @phi3(%q: tensor<1x2x8x128xf32>, %k: tensor<1x2x8x128xf32>, %v: tensor<1x2x8x128xf32>, %p: tensor<8xi64>) -> tensor<1x2x8x128xf32> {
  %qr = pe.rope %q, %p <layout = half, theta = 10000.0, scaling = #pe.longrope<short_factor = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], long_factor = [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0], original_max_position = 4096>> : tensor<1x2x8x128xf32>, tensor<8xi64>
  %kr = pe.rope %k, %p <layout = half, theta = 10000.0, scaling = #pe.longrope<short_factor = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], long_factor = [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0], original_max_position = 4096>> : tensor<1x2x8x128xf32>, tensor<8xi64>
  %o = attn.attention %qr, %kr, %v : tensor<1x2x8x128xf32>, tensor<1x2x8x128xf32>, tensor<1x2x8x128xf32> -> tensor<1x2x8x128xf32>
  return %o : tensor<1x2x8x128xf32>
}

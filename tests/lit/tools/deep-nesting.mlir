// Brackets nested 100,000 deep overflowed MLIR's recursive parser (SIGSEGV;
// `pejit compile` died with empty stderr). Both tools refuse such input
// with the line and column where nesting passes 256; 256 itself parses.
// RUN: python3 -c "print('// attn.attention\nfunc.func @f() { %%0 = arith.constant dense<' + '['*100000 + '1' + ']'*100000 + '> : tensor<1xi32> return }')" > %t.deep.mlir
// RUN: not pejit-opt %t.deep.mlir 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not pejit-opt < %t.deep.mlir 2>&1 | FileCheck %s --check-prefix=STDIN
// RUN: not %pejit compile %t.deep.mlir 2>&1 | FileCheck %s --check-prefix=CLI
// RUN: python3 -c "print('func.func @f() { %%0 = arith.constant dense<' + '['*254 + '1' + ']'*254 + '> : tensor<' + '1x'*254 + 'i32> return }')" > %t.limit.mlir
// RUN: pejit-opt %t.limit.mlir | FileCheck %s --check-prefix=LIMIT
// Brackets in comments and strings, and the '>' of '->', are not nesting.
// RUN: python3 -c "print('// ' + '['*300 + '\nfunc.func @g(%%a: i32) -> i32 attributes {note = \"' + '('*300 + '\"} {\n' + '  return %%a : i32\n}')" > %t.text.mlir
// RUN: pejit-opt %t.text.mlir | FileCheck %s --check-prefix=TEXT
// TEXT: func.func @g(%arg0: i32) -> i32 attributes {note = "(((
// OPT: deep.mlir:2:298: error: brackets nest deeper than 256 levels, pejit's limit for its (recursive) parser
// STDIN: <stdin>:2:298: error: brackets nest deeper than 256 levels
// CLI: pejit: {{.*}}deep.mlir:2:298: error: brackets nest deeper than 256 levels
// LIMIT: arith.constant dense<1> : tensor<1x1x1x

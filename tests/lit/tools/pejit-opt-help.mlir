// pejit-opt registers pejit's dialects and named pipelines.
// RUN: pejit-opt --help | FileCheck %s
// CHECK: Available Dialects:{{.*}} attn,{{.*}} pe
// CHECK: --pejit-simplify

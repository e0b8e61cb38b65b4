# Embeds a kernel template into a C++ header as a raw string literal, so the
# binary carries its templates (PEJIT_TEMPLATE_DIR can still override them).
# Usage: cmake -DINPUT=<file.mlir> -DOUTPUT=<file.inc> -DNAME=<symbol> -P embed.cmake
file(READ "${INPUT}" content)
file(WRITE "${OUTPUT}"
  "// Generated from ${INPUT} by templates/embed.cmake; do not edit.\n"
  "static const char ${NAME}[] = R\"pejit_template(${content})pejit_template\";\n")

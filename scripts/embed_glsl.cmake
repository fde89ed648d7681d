# Turns every .glsl file of shaders/ into a C string, so the library carries the
# hand-written GLSL without copies of it in C sources.
#   cmake -DDIR=<shaders dir> -DOUT=<dir> -P embed_glsl.cmake
# writes <dir>/tvk_glsl_shaders.c and .h: shaders/foo.glsl becomes
# `const char tvk_glsl_foo[]`.
file(GLOB files "${DIR}/*.glsl")
list(SORT files)
set(note "/* Generated from the .glsl files of shaders/ by scripts/embed_glsl.cmake; do not edit. */\n")
set(c "${note}#include \"tvk_glsl_shaders.h\"\n")
set(h "${note}#ifndef TVK_GLSL_SHADERS_H\n#define TVK_GLSL_SHADERS_H\n")
foreach(f IN LISTS files)
  get_filename_component(name "${f}" NAME_WE)
  file(READ "${f}" body)
  string(REPLACE "\\" "\\\\" body "${body}")
  string(REPLACE "\"" "\\\"" body "${body}")
  string(REPLACE "\n" "\\n\"\n    \"" body "${body}")
  string(APPEND c "\nconst char tvk_glsl_${name}[] =\n    \"${body}\";\n")
  string(APPEND h "extern const char tvk_glsl_${name}[];\n")
endforeach()
string(APPEND h "#endif\n")
file(WRITE "${OUT}/tvk_glsl_shaders.c" "${c}")
file(WRITE "${OUT}/tvk_glsl_shaders.h" "${h}")

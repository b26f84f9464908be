# cmake -DINPUT=FILE -DOUTPUT=FILE.cc -DNAME=kName -P embed_asset.cmake
# Writes FILE.cc defining partq::console::assets::NAME as FILE's text, in a
# raw string literal (the file must not contain its delimiter).
file(READ ${INPUT} content)
string(FIND "${content}" ")partq_asset\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw string delimiter )partq_asset\"")
endif()
file(WRITE ${OUTPUT}.tmp
  "// Generated from ${INPUT} by cmake/embed_asset.cmake; do not edit.\n"
  "namespace partq::console::assets {\n"
  "extern const char ${NAME}[];\n"
  "const char ${NAME}[] = R\"partq_asset(${content})partq_asset\";\n"
  "}  // namespace partq::console::assets\n")
# Only a changed file is rewritten, so an unchanged asset recompiles nothing.
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)

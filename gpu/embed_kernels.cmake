# SPDX-License-Identifier: GPL-3.0-or-later
# Build step: writes OUT, a C++ file holding every kernel file of DIR (NAMES: ;-list) as a raw string.
set(body "// Generated from gpu/kernels/*.cl by gpu/embed_kernels.cmake; do not edit.\n")
string(APPEND body "#include \"gpu/kernel_sources.h\"\n\nnamespace kvlens::gpu {\n\n")
string(APPEND body "const std::vector<EmbeddedKernel>& embeddedKernels()\n{\n    static const std::vector<EmbeddedKernel> kernels = {\n")
foreach(name IN LISTS NAMES)
  file(READ "${DIR}/${name}.cl" source)
  string(APPEND body "        {\"${name}\", R\"KVLENS_CL(${source})KVLENS_CL\"},\n")
endforeach()
string(APPEND body "    };\n    return kernels;\n}\n\n} // namespace kvlens::gpu\n")
file(WRITE "${OUT}.tmp" "${body}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)

# SPDX-License-Identifier: GPL-3.0-or-later
# Tensor file readers of core/io (.npy, .npz, .safetensors, GGUF) and ggml's types, added to kvlens_core.
target_sources(kvlens_core PRIVATE
  io/ggml_dequant.cpp
  io/ggml_dot.cpp
  io/ggml_dot.h
  io/ggml_kernels.h
  io/ggml_kernels_x86.cpp
  io/ggml_quantize.cpp
  io/ggml_types.cpp
  io/ggml_types.h
  io/gguf.cpp
  io/gguf.h
  io/fault.cpp
  io/fault.h
  io/file_read.cpp
  io/file_read.h
  io/json_text.cpp
  io/json_text.h
  io/mapped_file.cpp
  io/mapped_file.h
  io/staged_dir.cpp
  io/staged_dir.h
  io/npy.cpp
  io/npy.h
  io/npz.cpp
  io/npz.h
  io/safetensors.cpp
  io/safetensors.h
  io/tensor_file.cpp
  io/tensor_file.h
  io/tensor_file_cache.cpp
  io/tensor_file_cache.h
)
# ggml's block quantizers and its x86 score product round every float operation on its own; an FMA
# (GCC fuses across statements under -march=native) changes some of their codes or sums, so these files
# are built without contraction (the FMAs ggml does execute are written as std::fma). The scalar
# dequantizers too: fused, a NaN scale and a NaN minimum would propagate in another operand order than
# the vector kernels' multiply-then-subtract.
set_source_files_properties(io/ggml_types.cpp io/ggml_dot.cpp io/ggml_dequant.cpp PROPERTIES COMPILE_OPTIONS -ffp-contract=off)
# .npz members are zip entries (stored, deflated, Zip64), read through Debian's libzip-dev.
# Found through pkg-config, not find_package(libzip): Debian 12's libzip-config.cmake declares
# libzip::zipcmp, ::zipmerge and ::ziptool and fails with FATAL_ERROR unless the separate zipcmp,
# zipmerge and ziptool packages are installed. GLOBAL so that targets outside core/ that link
# kvlens_core (tests, fuzz) can resolve the imported target.
find_package(PkgConfig REQUIRED)
pkg_check_modules(libzip REQUIRED IMPORTED_TARGET GLOBAL libzip>=1.7)
target_link_libraries(kvlens_core PUBLIC PkgConfig::libzip)

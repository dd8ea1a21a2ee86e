# SPDX-License-Identifier: GPL-3.0-or-later
# Tests of ggml's types (core/io/ggml_types.h, ggml_dot.h) and the GGUF reader (core/io/gguf.h, mapped_file.h).
kvlens_add_test(tst_ggml_types SOURCES tst_ggml_types.cpp LIBS kvlens_core LABELS core)
kvlens_add_test(tst_gguf SOURCES tst_gguf.cpp LIBS kvlens_core LABELS core)
target_compile_definitions(tst_gguf PRIVATE KVLENS_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")

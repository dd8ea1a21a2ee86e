# SPDX-License-Identifier: GPL-3.0-or-later
# Tests of the tensor file readers, run against the hand-made corpus in tests/data.
kvlens_add_test(tst_tensor_io SOURCES tst_tensor_io.cpp LIBS kvlens_core LABELS core)
target_compile_definitions(tst_tensor_io PRIVATE KVLENS_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
kvlens_add_test(tst_imported SOURCES tst_imported.cpp LIBS kvlens_core LABELS core)
target_compile_definitions(tst_imported PRIVATE KVLENS_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
kvlens_add_test(tst_model_dump SOURCES tst_model_dump.cpp LIBS kvlens_core LABELS core)
kvlens_add_test(tst_model_lens SOURCES tst_model_lens.cpp LIBS kvlens_core LABELS core)

# SPDX-License-Identifier: GPL-3.0-or-later
# Tests of the transformer engine (core/lm), run against the model folders in tests/data/models
# (scripts/make_test_models.py) and the shipped model in resources/models.
kvlens_add_test(tst_hf_config SOURCES tst_hf_config.cpp LIBS kvlens_core LABELS core)
kvlens_add_test(tst_lm_weights SOURCES tst_lm_weights.cpp LIBS kvlens_core LABELS core)
target_compile_definitions(tst_lm_weights PRIVATE KVLENS_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
kvlens_add_test(tst_lm_forward SOURCES tst_lm_forward.cpp LIBS kvlens_core LABELS core)
target_compile_definitions(tst_lm_forward PRIVATE KVLENS_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data"
                                                  KVLENS_MODELS_DIR="${PROJECT_SOURCE_DIR}/resources/models")
kvlens_add_test(tst_next_token_stats SOURCES tst_next_token_stats.cpp LIBS kvlens_core LABELS core)
kvlens_add_test(tst_capture SOURCES tst_capture.cpp LIBS kvlens_core LABELS core)
target_compile_definitions(tst_capture PRIVATE KVLENS_MODELS_DIR="${PROJECT_SOURCE_DIR}/resources/models")
kvlens_add_test(tst_lm_products SOURCES tst_lm_products.cpp LIBS kvlens_core LABELS core)

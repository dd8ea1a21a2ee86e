# SPDX-License-Identifier: GPL-3.0-or-later
# Tests of the model runner's tokenizers (core/lm/tokenizer*, token_ids), on the fixtures in tests/data/tokenizers.
foreach(unit tokenizer tokenizer_bpe tokenizer_sentencepiece token_ids)
  kvlens_add_test(tst_${unit} SOURCES tst_${unit}.cpp LIBS kvlens_core LABELS core)
  target_compile_definitions(tst_${unit} PRIVATE KVLENS_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
endforeach()

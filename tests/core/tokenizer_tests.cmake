# SPDX-License-Identifier: GPL-3.0-or-later
# Tests of the model runner's tokenizers (core/lm/tokenizer*, token_ids), on the fixtures in tests/data/tokenizers.
foreach(unit tokenizer tokenizer_bpe tokenizer_sentencepiece tokenizer_vocab token_ids)
  kvlens_add_test(tst_${unit} SOURCES tst_${unit}.cpp LIBS kvlens_core LABELS core)
  target_compile_definitions(tst_${unit} PRIVATE KVLENS_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
endforeach()
# libsentencepiece (Debian's libsentencepiece-dev, with its trainer) is the oracle KVLens's own
# SentencePiece encoder is compared with; nothing outside these tests links it.
find_package(PkgConfig REQUIRED)
pkg_check_modules(sentencepiece REQUIRED IMPORTED_TARGET sentencepiece>=0.1.95)
target_link_libraries(tst_tokenizer_sentencepiece PRIVATE PkgConfig::sentencepiece)
target_link_libraries(tst_tokenizer_vocab PRIVATE PkgConfig::sentencepiece)

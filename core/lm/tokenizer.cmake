# SPDX-License-Identifier: GPL-3.0-or-later
# The model runner's tokenizers (core/lm/tokenizer*, token_ids), added to kvlens_core.
target_sources(kvlens_core PRIVATE
  lm/token_ids.cpp
  lm/token_ids.h
  lm/tokenizer.cpp
  lm/tokenizer.h
  lm/tokenizer_bpe.cpp
  lm/tokenizer_bpe.h
  lm/tokenizer_bpe_impl.h
  lm/tokenizer_bpe_json.cpp
  lm/tokenizer_normalizer.cpp
  lm/tokenizer_normalizer.h
  lm/tokenizer_regex.cpp
  lm/tokenizer_regex.h
  lm/tokenizer_sentencepiece.cpp
  lm/tokenizer_sentencepiece.h
  lm/tokenizer_sentencepiece_model.cpp
  lm/tokenizer_sentencepiece_model.h
  lm/tokenizer_unicode.cpp
  lm/tokenizer_unicode.h
  lm/tokenizer_vocab.cpp
  lm/tokenizer_vocab.h
)
# The pre-tokenizer regexes (Unicode classes, lookahead, partial matching) and NFC: Debian's
# libpcre2-dev and libicu-dev, found through pkg-config. GLOBAL so that targets outside core/ that
# link kvlens_core (tests, fuzz) can resolve the imported targets. SentencePiece models are read and
# encoded by KVLens's own code; libsentencepiece is only the tests' oracle (tests/core/tokenizer_tests.cmake).
find_package(PkgConfig REQUIRED)
pkg_check_modules(pcre2 REQUIRED IMPORTED_TARGET GLOBAL libpcre2-8>=10.34)
pkg_check_modules(icu_uc REQUIRED IMPORTED_TARGET GLOBAL icu-uc>=60)
target_link_libraries(kvlens_core PUBLIC PkgConfig::pcre2 PkgConfig::icu_uc)

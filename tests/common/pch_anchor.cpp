// SPDX-License-Identifier: GPL-3.0-or-later
// The object that carries a test folder's precompiled header (tests/CMakeLists.txt, kvlens_test_pch).

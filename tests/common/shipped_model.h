// SPDX-License-Identifier: GPL-3.0-or-later
// The shipped tiny Llama (resources/models/tiny-llama), loaded once per test binary (KVLENS_MODELS_DIR).
#pragma once

#include "core/lm/transformer.h"

#include <QtGlobal>

#include <string>

namespace kvlens::testing {

inline const std::string& shippedModelDir()
{
    static const std::string dir = std::string(KVLENS_MODELS_DIR) + "/tiny-llama";
    return dir;
}

inline const lm::Transformer& shippedModel()
{
    static const lm::Transformer m = [] {
        auto loaded = lm::Transformer::load(shippedModelDir(), [] {
            lm::LoadOptions o;
            o.memoryLimitMiB = 2048;
            o.contextTokens = 128;
            o.forwardsInFlight = 2;
            o.threads = 2;
            return o;
        }());
        if (!loaded)
            qFatal("%s", loaded.error().text().c_str());
        return std::move(loaded).value();
    }();
    return m;
}

} // namespace kvlens::testing

// SPDX-License-Identifier: GPL-3.0-or-later
// Q_INIT_RESOURCE for the resources compiled into kvlens_app.
#include "app/resources.h"

#include <QtGlobal>

void initKvlensResources()
{
    Q_INIT_RESOURCE(kvlens);
}

std::string presetDataDirectory()
{
    return KVLENS_EXAMPLES_DIR;
}

std::string shippedModelDirectory()
{
    return KVLENS_MODELS_DIR "/tiny-llama";
}

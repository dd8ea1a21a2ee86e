// SPDX-License-Identifier: GPL-3.0-or-later
// The trial cache: a content key per trial and an LRU map bounded in bytes.
#include "core/experiment/trial_cache.h"

#include "core/common/hash.h"
#include "core/model/spec_json.h"

#include <algorithm>

namespace kvlens {

std::uint64_t trialCacheKey(const ExperimentSpec& pointSpec, std::uint64_t pointDataHash, const SchemeConfig& scheme,
                            int budget, std::uint64_t seed, std::string_view backend)
{
    ExperimentSpec neutral = pointSpec;
    neutral.name.clear();
    neutral.sweep.clear();
    neutral.backend = BackendKind::Cpu;
    neutral.fallback.clear();
    neutral.device.clear();
    neutral.memoryLimitMb = 0.0;
    neutral.comparisons = ComparisonOptions{};
    // Calibration rows are drawn when any scheme of the point needs them: part of the draw.
    neutral.calibrationTokens = pointSpec.calibrationRows();
    SchemeConfig paths = scheme;
    paths.name = "trial";
    paths.description.clear();
    paths.builtin = false; // written by its paths, so two names of one scheme share entries
    neutral.schemes = {paths};
    neutral.budgets = {budget};
    neutral.firstSeed = seed;
    neutral.seedCount = 1;
    std::uint64_t hash = fnv1a64(specToJson(neutral, -1));
    const std::uint64_t data[1] = {pointDataHash};
    hash = fnv1a64(std::string_view(reinterpret_cast<const char*>(data), sizeof data), hash);
    return fnv1a64(backend, hash);
}

double trialBytes(const TrialResult& t)
{
    double bytes = sizeof(TrialResult);
    for (const std::vector<float>* v : {&t.kl, &t.recall, &t.fisher, &t.a2, &t.snrT, &t.phiT, &t.relMseT, &t.d2,
                                        &t.samplesK.snrDb, &t.samplesK.phi, &t.samplesV.snrDb, &t.samplesV.phi,
                                        &t.samplesT.snrDb, &t.samplesT.phi})
        bytes += static_cast<double>(v->capacity()) * sizeof(float);
    bytes += static_cast<double>(t.argmaxShift.capacity());
    return bytes;
}

TrialCache::TrialCache(double limitMb) : m_limitBytes(std::max(0.0, limitMb) * 1e6) {}

std::optional<TrialCache::Entry> TrialCache::find(std::uint64_t key)
{
    const std::lock_guard lock(m_mutex);
    const auto it = m_index.find(key);
    if (it == m_index.end())
        return std::nullopt;
    m_order.splice(m_order.begin(), m_order, it->second);
    return it->second->entry;
}

void TrialCache::insert(std::uint64_t key, const TrialResult& trial, const std::string& regimeNote)
{
    const double bytes = trialBytes(trial) + static_cast<double>(regimeNote.size()) + 64.0;
    const std::lock_guard lock(m_mutex);
    if (m_readOnly)
        return;
    if (const auto it = m_index.find(key); it != m_index.end()) {
        m_bytes -= it->second->bytes;
        m_order.erase(it->second);
        m_index.erase(it);
    }
    if (bytes > m_limitBytes)
        return; // larger than the whole cache: not kept
    m_order.push_front(Node{key, Entry{trial, regimeNote}, bytes});
    m_index.emplace(key, m_order.begin());
    m_bytes += bytes;
    evict();
}

void TrialCache::evict()
{
    while (m_bytes > m_limitBytes && !m_order.empty()) {
        m_bytes -= m_order.back().bytes;
        m_index.erase(m_order.back().key);
        m_order.pop_back();
    }
}

void TrialCache::setReadOnly(bool readOnly)
{
    const std::lock_guard lock(m_mutex);
    m_readOnly = readOnly;
}

void TrialCache::setLimitMb(double limitMb)
{
    const std::lock_guard lock(m_mutex);
    m_limitBytes = std::max(0.0, limitMb) * 1e6;
    evict();
}

double TrialCache::limitMb() const
{
    const std::lock_guard lock(m_mutex);
    return m_limitBytes / 1e6;
}

double TrialCache::bytes() const
{
    const std::lock_guard lock(m_mutex);
    return m_bytes;
}

std::size_t TrialCache::size() const
{
    const std::lock_guard lock(m_mutex);
    return m_order.size();
}

void TrialCache::clear()
{
    const std::lock_guard lock(m_mutex);
    m_order.clear();
    m_index.clear();
    m_bytes = 0.0;
}

} // namespace kvlens

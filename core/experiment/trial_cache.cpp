// SPDX-License-Identifier: GPL-3.0-or-later
// The trial cache: a content key per trial and an LRU map bounded in bytes.
#include "core/experiment/trial_cache.h"

#include "core/common/hash.h"

#include <algorithm>
#include <type_traits>

namespace kvlens {

namespace {

void add(Fnv1a& h, const CodecPart& part)
{
    h.text(part.kind);
    h.u64(part.options.size());
    for (const auto& [name, value] : part.options) { // a std::map: sorted by name
        h.text(name);
        hashFieldValue(h, value);
    }
}

void add(Fnv1a& h, const PathConfig& path)
{
    h.u64(path.transforms.size());
    for (const CodecPart& t : path.transforms)
        add(h, t);
    add(h, path.quantizer);
    h.u64(path.residuals.size());
    for (const CodecPart& r : path.residuals)
        add(h, r);
    add(h, path.tokenPolicy);
    h.u64(path.bits.relative ? 1 : 0);
    h.i64(path.bits.value);
}

/// Adds the spec fields that define a trial's numbers (forEachSpecField's DefinesNumbers).
struct DefiningFields {
    Fnv1a& h;
    template <class Role, class T>
    void operator()(const char* name, Role, const T& field) const
    {
        if constexpr (std::is_same_v<Role, DefinesNumbers>) {
            h.text(name);
            hashFieldValue(h, field);
        }
    }
};

} // namespace

std::uint64_t trialCacheKey(const ExperimentSpec& pointSpec, std::uint64_t pointDataHash, const SchemeConfig& scheme,
                            int budget, std::uint64_t seed, std::string_view backend)
{
    Fnv1a h;
    h.text("kvlens trial v2");
    forEachSpecField(pointSpec, DefiningFields{h});
    // Calibration rows are drawn when any scheme of the point needs them: part of the draw.
    h.i64(pointSpec.calibrationRows());
    // The scheme's paths, not its name: two names of one composition share entries.
    add(h, scheme.key);
    add(h, scheme.value);
    h.i64(budget);
    h.u64(seed);
    h.u64(pointDataHash);
    h.text(backend);
    return h.value();
}

double trialBytes(const TrialResult& t)
{
    double bytes = sizeof(TrialResult);
    forEachTrialField(t, [&](const char*, auto, const auto& field) {
        using Field = std::decay_t<decltype(field)>;
        if constexpr (!std::is_arithmetic_v<Field>) // an array: what it holds on the heap
            bytes += static_cast<double>(field.capacity()) * sizeof(typename Field::value_type);
    });
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

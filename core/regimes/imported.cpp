// SPDX-License-Identifier: GPL-3.0-or-later
// The imported regime: slices of K, V, Q tensors from a file, validated before anything is read.
#include "core/regimes/imported.h"

#include "core/common/format.h"
#include "core/io/tensor_file.h"
#include "core/io/tensor_file_cache.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cfloat>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>

#include <sys/stat.h>

namespace kvlens {

namespace {

namespace fs = std::filesystem;

bool endsWith(const std::string& s, std::string_view suffix)
{
    if (s.size() < suffix.size())
        return false;
    return std::equal(suffix.begin(), suffix.end(), s.end() - static_cast<std::ptrdiff_t>(suffix.size()),
                      [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

bool isTensorFileName(const std::string& s)
{
    return endsWith(s, ".npy") || endsWith(s, ".npz") || endsWith(s, ".safetensors");
}

using io::shapeText;

/// One of K, V, Q with its header and the slice the regime takes from it.
struct Resolved {
    ImportSource source;
    io::TensorInfo info;
    SliceIndex slice;
    std::int64_t rows = 0; ///< tokens in the slice
    std::int64_t d = 0;
};

std::int64_t index(const RegimeParams& params, std::string_view key)
{
    return static_cast<std::int64_t>(paramNumber(params, key));
}

Result<Resolved> resolveOne(const ImportSource& source, const RegimeParams& params, std::int64_t head)
{
    // Devices, FIFOs and folders are refused before opening: reading /dev/stdin would block.
    std::error_code ec;
    if (!fs::is_regular_file(source.path, ec))
        return Error{source.path == paramText(params, "file") ? "regime.file" : source.field,
                     source.path + (fs::exists(source.path, ec) ? ": not a regular file" : ": no such file")};
    auto cached = io::inspectTensorFileCached(source.path);
    if (!cached)
        return Error{source.path == paramText(params, "file") ? "regime.file" : source.field, cached.error().text()};
    const io::TensorFileInfo* file = &(*cached)->info;
    const auto& tensors = file->tensors;
    // By name through the index: a dump of 10^5 layers is not searched linearly per cell.
    const io::TensorInfo* info = file->format == "npy" ? (tensors.empty() ? nullptr : &tensors.front())
                                                        : (*cached)->find(source.name);
    if (!info)
        return Error{source.field, "no tensor " + io::quoteName(source.name) + " in " + source.path + " (it has: "
                                       + io::tensorNameList(tensors) + ")"};
    auto slice = sliceFor(info->shape, head, index(params, "batch"), index(params, "layer"),
                          source.field == "regime.q" && index(params, "q_head") >= 0 ? "regime.q_head" : "regime.head");
    if (!slice)
        return Error{slice.error().field,
                     "tensor " + io::quoteName(info->name) + " of shape " + shapeText(info->shape) + ": " + slice.error().message};
    Resolved r;
    r.source = source;
    r.info = *info;
    r.slice = std::move(slice).value();
    r.rows = info->shape[info->shape.size() - 2];
    r.d = info->shape.back();
    // Only the chosen head's [rows x d] block is read: refuse what the budget cannot hold before reading.
    const double mb = static_cast<double>(r.rows) * static_cast<double>(r.d) * 4.0 / (1024.0 * 1024.0);
    if (mb > paramNumber(params, "max_mb"))
        return Error{"regime.max_mb", "the selected slice of tensor " + io::quoteName(info->name) + " of shape "
                                          + shapeText(info->shape) + " needs " + formatNumber(mb)
                                          + " MiB as float32, over the budget of "
                                          + formatNumber(paramNumber(params, "max_mb")) + " MiB"};
    return r;
}

/// K, V, Q resolved and checked against each other and the run's sizes.
Result<std::array<Resolved, 3>> resolveAll(const RegimeParams& params, const DataShape& shape)
{
    if (paramText(params, "file").empty()) {
        for (const char* key : {"k", "v", "q"})
            if (!isTensorFileName(paramText(params, key)))
                return Error{"regime.file", "the imported regime needs a .npy, .npz or .safetensors file"};
    }
    const auto sources = importSources(params);
    const std::int64_t head = index(params, "head");
    const std::int64_t qHead = index(params, "q_head") >= 0 ? index(params, "q_head") : head;
    std::array<Resolved, 3> out;
    for (std::size_t i = 0; i < 3; ++i) {
        auto r = resolveOne(sources[i], params, i == 2 ? qHead : head);
        if (!r)
            return r.error();
        out[i] = std::move(r).value();
    }
    const Resolved &k = out[0], &v = out[1], &q = out[2];
    for (const Resolved* r : {&k, &v, &q})
        if (r->d != shape.d)
            return Error{"d", "must equal the head dimension (last axis) of " + r->source.field + " "
                                  + io::quoteName(r->info.name) + " of shape " + shapeText(r->info.shape) + ", "
                                  + std::to_string(r->d) + "; got " + std::to_string(shape.d)};
    if (v.rows != k.rows)
        return Error{"regime.v", "has " + std::to_string(v.rows) + " tokens but regime.k has " + std::to_string(k.rows)};
    const std::int64_t tokenStart = index(params, "token_start"), queryStart = index(params, "query_start");
    if (tokenStart >= k.rows)
        return Error{"regime.token_start", "must be in [0, " + std::to_string(k.rows - 1) + "] for "
                                               + std::to_string(k.rows) + " tokens, got " + std::to_string(tokenStart)};
    if (tokenStart + shape.tokens > k.rows)
        return Error{"tokens", "must be in [1, " + std::to_string(k.rows - tokenStart) + "]: regime.k has "
                                   + std::to_string(k.rows) + " tokens from token_start " + std::to_string(tokenStart)
                                   + ", got " + std::to_string(shape.tokens)};
    if (queryStart >= q.rows)
        return Error{"regime.query_start", "must be in [0, " + std::to_string(q.rows - 1) + "] for "
                                               + std::to_string(q.rows) + " query rows, got " + std::to_string(queryStart)};
    if (queryStart + shape.queries > q.rows)
        return Error{"queries", "must be in [1, " + std::to_string(q.rows - queryStart) + "]: regime.q has "
                                    + std::to_string(q.rows) + " rows from query_start " + std::to_string(queryStart)
                                    + ", got " + std::to_string(shape.queries)};
    // Calibrated schemes calibrate on the rows the run does not score.
    if (shape.calibration > 0) {
        if (k.rows - shape.tokens < 2)
            return Error{"tokens", "calibrated schemes need at least 2 key rows outside the scored ones: use at most "
                                       + std::to_string(k.rows - 2) + " of regime.k's " + std::to_string(k.rows) + " tokens"};
        if (q.rows - shape.queries < 2)
            return Error{"queries", "calibrated schemes need at least 2 query rows outside the scored ones: use at most "
                                        + std::to_string(q.rows - 2) + " of regime.q's " + std::to_string(q.rows) + " rows"};
    }
    return out;
}

/// The last slices read, keyed by the file's identity (inode, size, modification time), so that a
/// window that reruns on every edit does not read the file again; a changed file is read anew.
/// Only the [rows x d] block of the chosen head is read (io::readTensorSlice), never the whole tensor.
class SliceCache {
public:
    Result<std::shared_ptr<const io::Tensor>> get(const Resolved& r, double maxMb)
    {
        std::string key = io::fileIdentity(r.source.path) + '\n' + r.info.name;
        for (const std::int64_t i : r.slice.leading)
            key += ',' + std::to_string(i);
        {
            const std::lock_guard lock(m_mutex);
            if (auto it = m_entries.find(key); it != m_entries.end())
                return it->second;
        }
        io::ReadLimits limits;
        limits.maxTensorBytes = static_cast<std::uint64_t>(maxMb * 1024.0 * 1024.0);
        io::SliceRequest request;
        request.leading = r.slice.leading;
        request.rowStart = 0;
        request.rowCount = r.rows;
        auto tensor = io::readTensorSlice(r.source.path, r.info, request, limits);
        if (!tensor)
            return Error{r.source.field, tensor.error().text()};
        auto shared = std::make_shared<const io::Tensor>(std::move(tensor).value());
        const std::lock_guard lock(m_mutex);
        if (m_entries.size() >= 6)
            m_entries.clear();
        m_entries.emplace(std::move(key), shared);
        return shared;
    }
    void clear()
    {
        const std::lock_guard lock(m_mutex);
        m_entries.clear();
    }

private:
    std::mutex m_mutex;
    std::map<std::string, std::shared_ptr<const io::Tensor>> m_entries;
};

SliceCache& cache()
{
    static SliceCache instance;
    return instance;
}

/// fp16's largest finite value: a key or value norm (or entry) above it is stored as Inf by the
/// codecs that keep norms or values in fp16, and the trial's KL turns NaN.
constexpr double kFp16Max = 65504.0;

/// The [rows x d] slice as read, refused when any value in it is NaN or Inf, a row's squared
/// norm overflows float32, or (keys and values, which the cache stores) a row's norm exceeds fp16.
Result<RowMatrixXf> sliceRows(const io::Tensor& t, const Resolved& r)
{
    const float* data = t.data.data();
    const Eigen::Index rows = r.rows, d = r.d;
    long long bad = 0, first = -1;
    for (Eigen::Index i = 0; i < rows * d; ++i)
        if (!std::isfinite(data[i])) {
            if (bad++ == 0)
                first = i;
        }
    if (bad == 0) {
        // Finite values whose squared norms overflow float32 (|x| near 1e19 and up) would give
        // infinite scores and NaN attention: refused like NaN, naming the first row.
        long long overflowing = 0, firstRow = -1;
        for (Eigen::Index i = 0; i < rows; ++i) {
            double norm2 = 0.0;
            for (Eigen::Index c = 0; c < d; ++c)
                norm2 += static_cast<double>(data[i * d + c]) * data[i * d + c];
            if (!(norm2 <= static_cast<double>(FLT_MAX)) && overflowing++ == 0)
                firstRow = i;
        }
        if (overflowing > 0) {
            std::vector<std::int64_t> at = r.slice.leading;
            at.push_back(firstRow);
            return Error{r.source.field, r.source.path + ": tensor " + io::quoteName(t.name) + " has "
                                             + std::to_string(overflowing) + " row" + (overflowing == 1 ? "" : "s")
                                             + " whose squared norm overflows float32 (above 3.4e38) in the selected "
                                               "slice, the first at row "
                                             + shapeText(at) + "; import refused (rescale the tensor)"};
        }
        if (r.source.field != "regime.q") {
            long long beyond = 0, firstBeyond = -1;
            for (Eigen::Index i = 0; i < rows; ++i) {
                double norm2 = 0.0;
                for (Eigen::Index c = 0; c < d; ++c)
                    norm2 += static_cast<double>(data[i * d + c]) * data[i * d + c];
                if (norm2 > kFp16Max * kFp16Max && beyond++ == 0)
                    firstBeyond = i;
            }
            if (beyond > 0) {
                std::vector<std::int64_t> at = r.slice.leading;
                at.push_back(firstBeyond);
                return Error{r.source.field, r.source.path + ": tensor " + io::quoteName(t.name) + " has "
                                                 + std::to_string(beyond) + " row" + (beyond == 1 ? "" : "s")
                                                 + " whose norm exceeds fp16's largest value 65504 in the selected "
                                                   "slice, the first at row "
                                                 + shapeText(at) + ": the cache's fp16 norms and values would store "
                                                   "it as Inf; import refused (rescale the tensor)"};
            }
        }
    }
    if (bad > 0) {
        std::vector<std::int64_t> at = r.slice.leading;
        at.push_back(first / d);
        at.push_back(first % d);
        return Error{r.source.field, r.source.path + ": tensor " + io::quoteName(t.name) + " has " + std::to_string(bad)
                                         + " non-finite value" + (bad == 1 ? "" : "s") + " (NaN or Inf) in the selected slice, the first at "
                                         + shapeText(at) + "; import refused"};
    }
    return RowMatrixXf(Eigen::Map<const RowMatrixXf>(data, rows, d));
}

/// `count` rows of `all` outside [start, start + used): after the range first, then before it.
RowMatrixXf rowsOutside(const RowMatrixXf& all, Eigen::Index start, Eigen::Index used, Eigen::Index count)
{
    std::vector<Eigen::Index> picked;
    for (Eigen::Index i = start + used; i < all.rows() && static_cast<Eigen::Index>(picked.size()) < count; ++i)
        picked.push_back(i);
    for (Eigen::Index i = 0; i < start && static_cast<Eigen::Index>(picked.size()) < count; ++i)
        picked.push_back(i);
    RowMatrixXf out(static_cast<Eigen::Index>(picked.size()), all.cols());
    for (std::size_t i = 0; i < picked.size(); ++i)
        out.row(static_cast<Eigen::Index>(i)) = all.row(picked[i]);
    return out;
}

class ImportedRegime final : public Regime {
public:
    std::string_view name() const override { return "imported"; }
    std::string_view description() const override
    {
        return "K, V and Q read from a .npy, .npz or .safetensors file (tensors laid out [..., heads, tokens, "
               "head_dim]); one head's slice, the scored tokens from token_start, queries from query_start. "
               "Calibrated schemes calibrate on the other rows. The data is the same for every seed.";
    }
    const std::vector<ParamDesc>& params() const override
    {
        using K = ParamDesc::Kind;
        static const std::vector<ParamDesc> descs = {
            {"file", "file", "The .npy, .npz or .safetensors file holding K, V and Q.", K::Text, 0, 0, 0, false, {}, ""},
            {"k", "K tensor", "Name of the key tensor in the file (or a file of its own).", K::Text, 0, 0, 0, false, {}, "k"},
            {"v", "V tensor", "Name of the value tensor in the file (or a file of its own).", K::Text, 0, 0, 0, false, {}, "v"},
            {"q", "Q tensor", "Name of the query tensor in the file (or a file of its own).", K::Text, 0, 0, 0, false, {}, "q"},
            {"head", "head", "Index on the head axis (third from last) of K and V, and of Q unless q_head is set.",
             K::Integer, 0, 0, 1 << 20, false, {}, {}},
            {"q_head", "query head", "Head index for Q when it differs (grouped-query attention); -1: the same as head.",
             K::Integer, -1, -1, 1 << 20, false, {}, {}},
            {"batch", "batch", "Index on the batch axis (fourth from last), for rank >= 4 tensors.", K::Integer, 0, 0,
             1 << 20, false, {}, {}},
            {"layer", "layer", "Index on the layer axis (fifth from last), for rank >= 5 tensors.", K::Integer, 0, 0,
             1 << 20, false, {}, {}},
            {"token_start", "first token", "First key/value token scored; the run takes N tokens from here.",
             K::Integer, 0, 0, 1 << 30, false, {}, {}},
            {"query_start", "first query", "First query row used; the run takes Q queries from here.", K::Integer, 0, 0,
             1 << 30, false, {}, {}},
            {"max_mb", "memory budget (MiB)", "Largest float32 copy of the selected [tokens x head_dim] slice of one tensor that may be read.", K::Real, 2048, 0.01,
             1 << 20, true, {}, {}},
        };
        return descs;
    }

    Result<Dataset> generate(const RegimeParams& params, const DataShape& shape, EngineKind, std::uint64_t) const override
    {
        auto resolved = resolveAll(params, shape);
        if (!resolved)
            return resolved.error();
        std::array<RowMatrixXf, 3> full;
        for (std::size_t i = 0; i < 3; ++i) {
            auto tensor = cache().get((*resolved)[i], paramNumber(params, "max_mb"));
            if (!tensor)
                return tensor.error();
            auto rows = sliceRows(**tensor, (*resolved)[i]);
            if (!rows)
                return rows.error();
            full[i] = std::move(rows).value();
        }
        const Eigen::Index tokenStart = index(params, "token_start"), queryStart = index(params, "query_start");
        Dataset data;
        data.keys = full[0].middleRows(tokenStart, shape.tokens);
        data.values = full[1].middleRows(tokenStart, shape.tokens);
        data.queries = full[2].middleRows(queryStart, shape.queries);
        if (shape.calibration > 0) {
            data.calibrationKeys = rowsOutside(full[0], tokenStart, shape.tokens, shape.calibration);
            data.calibrationValues = rowsOutside(full[1], tokenStart, shape.tokens, shape.calibration);
            data.calibrationQueries = rowsOutside(full[2], queryStart, shape.queries, shape.calibration);
        }
        const Resolved& k = (*resolved)[0];
        data.note = fs::path(k.source.path).filename().string() + ": K " + io::quoteName(k.info.name) + " "
                    + shapeText(k.info.shape) + " " + std::string(io::dtypeName(k.info.dtype)) + ", slice "
                    + shapeText(k.slice.leading) + ", tokens " + std::to_string(tokenStart) + ".."
                    + std::to_string(tokenStart + shape.tokens - 1) + ", queries " + std::to_string(queryStart) + ".."
                    + std::to_string(queryStart + shape.queries - 1)
                    + (shape.calibration > 0 ? ", calibration " + std::to_string(data.calibrationKeys.rows()) + " rows" : "");
        return data;
    }

    bool seedIndependent() const override { return true; }

    double inputBytes(const RegimeParams& params, const DataShape& shape) const override
    {
        // The [rows x d] slices of K, V and Q as float32, plus the scored copies.
        auto resolved = resolveAll(params, shape);
        if (!resolved)
            return 0.0;
        double bytes = 0.0;
        for (const Resolved& r : *resolved)
            bytes += 2.0 * static_cast<double>(r.rows) * static_cast<double>(r.d) * sizeof(float);
        return bytes;
    }

protected:
    Status checkRules(const RegimeParams& params, const DataShape& shape) const override
    {
        auto resolved = resolveAll(params, shape);
        if (!resolved)
            return resolved.error();
        return Ok{};
    }
};

} // namespace

const Regime& importedRegime()
{
    static const ImportedRegime regime;
    return regime;
}

std::vector<ImportSource> importSources(const RegimeParams& params)
{
    std::vector<ImportSource> out;
    const std::string& file = paramText(params, "file");
    for (const char* key : {"k", "v", "q"}) {
        const std::string& value = paramText(params, key);
        if (isTensorFileName(value))
            out.push_back({std::string("regime.") + key, value, ""});
        else
            out.push_back({std::string("regime.") + key, file, value});
    }
    return out;
}

void resolveImportPaths(const std::string& regime, RegimeParams& params, const std::string& baseDirectory)
{
    // Only regimes that read their data from files have file fields to resolve.
    const Regime* reads = findRegime(regime);
    if (!reads || !reads->seedIndependent())
        return;
    for (const char* key : {"file", "k", "v", "q"}) {
        auto it = params.find(key);
        if (it == params.end() || !std::holds_alternative<std::string>(it->second))
            continue;
        std::string& value = std::get<std::string>(it->second);
        if (value.empty() || (std::string_view(key) != "file" && !isTensorFileName(value)))
            continue;
        fs::path p(value);
        if (p.is_absolute())
            continue;
        std::error_code ec;
        const fs::path besideSpec = fs::path(baseDirectory) / p;
        const fs::path chosen = !baseDirectory.empty() && fs::exists(besideSpec, ec) ? besideSpec : p;
        value = fs::absolute(chosen, ec).lexically_normal().string();
    }
}

Result<SliceIndex> sliceFor(const std::vector<std::int64_t>& shape, std::int64_t head, std::int64_t batch,
                            std::int64_t layer, const std::string& field)
{
    const std::size_t rank = shape.size();
    if (rank < 2)
        return Error{field, "needs rank >= 2, laid out [..., tokens, head_dim]"};
    SliceIndex s;
    s.leading.assign(rank - 2, 0);
    struct Axis {
        std::int64_t value;
        const char* name;
        std::string field;
    };
    const Axis axes[] = {{head, "head", field}, {batch, "batch", "regime.batch"}, {layer, "layer", "regime.layer"}};
    for (std::size_t a = 0; a < 3; ++a) {
        const Axis& axis = axes[a];
        if (a + 2 < rank) {
            const std::size_t dim = rank - 3 - a;
            if (axis.value < 0 || axis.value >= shape[dim])
                return Error{axis.field, std::string("the ") + axis.name + " index must be in [0, "
                                             + std::to_string(shape[dim] - 1) + "], got " + std::to_string(axis.value)};
            s.leading[dim] = axis.value;
        } else if (axis.value != 0) {
            return Error{axis.field, std::string("has no ") + axis.name + " axis (rank " + std::to_string(rank)
                                         + "); the index must be 0, got " + std::to_string(axis.value)};
        }
    }
    for (std::size_t dim = 0; dim + 5 < rank; ++dim)
        if (shape[dim] != 1)
            return Error{field, "axes before the layer axis must have size 1 (rank " + std::to_string(rank)
                                    + " > 5), axis " + std::to_string(dim) + " has " + std::to_string(shape[dim])};
    return s;
}

void clearImportCache()
{
    cache().clear();
    io::clearTensorFileCache();
}

long long importHeaderParses()
{
    return io::tensorHeaderParses();
}

} // namespace kvlens

// SPDX-License-Identifier: GPL-3.0-or-later
// The Output tab: a model run's damage per configuration, on the text, and down to one head's attention.
#include "widgets/output_view.h"

#include "core/common/memory.h"
#include "core/eval/eval_files.h"
#include "core/eval/evaluator.h"
#include "core/eval/model_input.h"
#include "core/lm/gguf_model.h"
#include "core/experiment/runner.h"
#include "core/spec/eval_spec.h"
#include "widgets/eval_views.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QImage>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHelpEvent>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QToolTip>
#include <QVBoxLayout>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace kvlens::widgets {

namespace {

constexpr int kPad = 3;       // pixels around a token's text inside its box
constexpr int kChunkGap = 10; // pixels between chunks

QString html(const QString& s)
{
    return s.toHtmlEscaped();
}

QString tokenOf(const ModelRun& run, std::int32_t id)
{
    if (!run.vocab || id < 0 || static_cast<std::size_t>(id) >= run.vocab->size())
        return QStringLiteral("#%1").arg(id);
    return displayToken((*run.vocab)[static_cast<std::size_t>(id)]);
}

QString fixed(double v, int decimals = 3)
{
    return QString::number(v, 'f', decimals);
}

QString meanError(const lm::MeanError& m, double scale = 1.0, int decimals = 4)
{
    return QStringLiteral("%1 ± %2").arg(m.mean * scale, 0, 'f', decimals).arg(m.error * scale, 0, 'f', decimals);
}

} // namespace

QString displayToken(const std::string& bytes)
{
    QString out;
    std::size_t i = 0;
    while (i < bytes.size()) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (c == '\n') {
            out += QStringLiteral("↵");
            ++i;
            continue;
        }
        if (c == '\t') {
            out += QStringLiteral("→");
            ++i;
            continue;
        }
        if (c < 0x20 || c == 0x7f) {
            out += QStringLiteral("<0x%1>").arg(c, 2, 16, QLatin1Char('0')).toUpper().replace(QStringLiteral("0X"), QStringLiteral("0x"));
            ++i;
            continue;
        }
        // One UTF-8 sequence, checked; anything else is shown byte by byte.
        int length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        bool valid = length > 0 && i + static_cast<std::size_t>(length) <= bytes.size();
        for (int k = 1; valid && k < length; ++k)
            valid = (static_cast<unsigned char>(bytes[i + static_cast<std::size_t>(k)]) & 0xc0) == 0x80;
        if (!valid) {
            out += QStringLiteral("<0x%1>").arg(c, 2, 16, QLatin1Char('0'));
            ++i;
            continue;
        }
        out += QString::fromUtf8(bytes.data() + i, length);
        i += static_cast<std::size_t>(length);
    }
    return out;
}

QColor kldColour(double kld, double floor, double top)
{
    if (!(kld > floor) || !(top > floor))
        return QColor(255, 255, 255);
    const double f = std::clamp(std::log10(kld / floor) / std::log10(top / floor), 0.0, 1.0);
    // White -> yellow -> orange -> dark red (a sequential scale that prints in grey as light -> dark).
    struct Stop {
        double at;
        int r, g, b;
    };
    static constexpr Stop stops[] = {{0.0, 255, 255, 255}, {0.35, 254, 224, 139}, {0.7, 244, 109, 67}, {1.0, 165, 0, 38}};
    for (std::size_t k = 1; k < std::size(stops); ++k)
        if (f <= stops[k].at) {
            const Stop& a = stops[k - 1];
            const Stop& b = stops[k];
            const double t = (f - a.at) / (b.at - a.at);
            return QColor(static_cast<int>(std::lround(a.r + t * (b.r - a.r))), static_cast<int>(std::lround(a.g + t * (b.g - a.g))),
                          static_cast<int>(std::lround(a.b + t * (b.b - a.b))));
        }
    return QColor(165, 0, 38);
}

// ---------------------------------------------------------------------------------------------
// ShadedTextWidget

ShadedTextWidget::ShadedTextWidget(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    // QScrollArea asks the size policy, not hasHeightForWidth(), whether the height follows the width:
    // without the flag it squeezed the whole text into its viewport, and nothing scrolled.
    QSizePolicy policy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    policy.setHeightForWidth(true);
    setSizePolicy(policy);
    setToolTip(QStringLiteral("Each predicted token shaded by the KL divergence of its next-token distribution "
                              "(exact cache against the quantized one); click a token to drill down."));
}

void ShadedTextWidget::setRun(const ModelRun& run, int configuration)
{
    m_run = run;
    m_configuration = configuration;
    m_floor = 1e-6;
    m_top = 1.0;
    const eval::EvalResult* r = m_run.result.get();
    if (r) {
        // One scale for every configuration of the run (a scale per configuration drew q8_0's worst
        // token, 0.04 nats, as red as TQ-KV n = 2's 15): one KLD, one colour, whichever shades the text.
        std::vector<double> v;
        for (const eval::ConfigurationResult& c : r->configurations)
            for (const lm::TokenStat& t : c.tokens)
                if (t.kld > 0.0 && std::isfinite(t.kld))
                    v.push_back(t.kld);
        std::sort(v.begin(), v.end());
        if (!v.empty()) {
            // The scale spans the 5th percentile's decade to the worst token: the bulk stays visible.
            m_top = v.back();
            m_floor = std::pow(10.0, std::floor(std::log10(lm::percentileOfSorted(v, 0.05))));
            if (!(m_top > m_floor))
                m_top = m_floor * 10.0;
        }
    }
    if (m_selected >= 0 && (!r || m_selected >= static_cast<int>(r->scored.size())))
        m_selected = -1;
    relayout();
}

int ShadedTextWidget::legendHeight() const
{
    return fontMetrics().height() * 2 + 10;
}

std::vector<ShadedTextWidget::Box> ShadedTextWidget::layout(int width, const QFontMetrics& metrics, int top, int firstChunk,
                                                            int chunks) const
{
    std::vector<Box> boxes;
    const eval::EvalResult* r = m_run.result.get();
    if (!r || r->spec.ctx <= 0)
        return boxes;
    const int ctx = r->spec.ctx;
    const int first = ctx / 2;
    const int perChunk = ctx - 1 - first;
    const int lineHeight = metrics.height() + 2 * kPad;
    int x = 0, y = top;
    const int last = std::min(r->chunksScored, firstChunk + chunks);
    for (int c = std::max(0, firstChunk); c < last; ++c) {
        if (c > firstChunk) {
            x = 0;
            y += lineHeight + kChunkGap;
        }
        const long long begin = r->calibrationTokens + static_cast<long long>(c) * ctx;
        for (int q = 1; q < ctx; ++q) {
            const auto index = static_cast<std::size_t>(begin + q);
            if (index >= r->tokens.size())
                break;
            Box b;
            b.chunk = c;
            const std::int32_t id = r->tokens[index];
            b.text = tokenOf(m_run, id);
            b.scored = q - 1 >= first ? c * perChunk + (q - 1 - first) : -1;
            if (b.scored >= static_cast<int>(r->scored.size()))
                b.scored = -1;
            const int w = metrics.horizontalAdvance(b.text) + 2 * kPad;
            if (x > 0 && x + w > width) {
                x = 0;
                y += lineHeight;
            }
            b.rect = QRect(x, y, w, lineHeight);
            x += w;
            const bool newline = b.text.endsWith(QStringLiteral("↵"));
            boxes.push_back(std::move(b));
            if (newline) {
                x = 0;
                y += lineHeight;
            }
        }
    }
    return boxes;
}

void ShadedTextWidget::relayout()
{
    m_boxes = layout(std::max(100, width()), fontMetrics(), legendHeight(), 0, m_run.result ? m_run.result->chunksScored : 0);
    holdEveryToken();
    updateGeometry();
    update();
}

void ShadedTextWidget::holdEveryToken()
{
    // At least as tall as the text at this width: the scroll area then scrolls over every token
    // (a resize to a taller minimum reaches the scroll area, which updates its scroll bars).
    setMinimumHeight(m_boxes.empty() ? 0 : m_boxes.back().rect.bottom() + 4);
}

int ShadedTextWidget::heightForWidth(int width) const
{
    const auto boxes = layout(std::max(100, width), fontMetrics(), legendHeight(), 0, m_run.result ? m_run.result->chunksScored : 0);
    return boxes.empty() ? legendHeight() + 40 : boxes.back().rect.bottom() + 4;
}

QSize ShadedTextWidget::sizeHint() const
{
    return {600, heightForWidth(600)};
}

void ShadedTextWidget::resizeEvent(QResizeEvent*)
{
    m_boxes = layout(std::max(100, width()), fontMetrics(), legendHeight(), 0, m_run.result ? m_run.result->chunksScored : 0);
    holdEveryToken();
}

void ShadedTextWidget::paintLegend(QPainter& painter, QRect area) const
{
    // "KLD (nats)" then a colour bar with the floor, the middle decade and the top labelled.
    const QFontMetrics fm = painter.fontMetrics();
    const eval::EvalResult* r = m_run.result.get();
    const int configurations = r ? static_cast<int>(r->configurations.size()) : 0;
    const QString label = configurations > 1
                              ? QStringLiteral("KLD per token, nats, one scale for all %1 configurations (context grey):").arg(configurations)
                              : QStringLiteral("KLD per token, nats (context tokens grey, unscored):");
    painter.setPen(palette().color(QPalette::WindowText));
    painter.drawText(QPoint(area.left(), area.top() + fm.ascent()), label);
    const int barLeft = area.left() + fm.horizontalAdvance(label) + 8;
    const int barWidth = std::max(80, std::min(260, area.right() - barLeft - 8));
    const int barTop = area.top() + 1;
    const int barHeight = fm.height() - 2;
    for (int i = 0; i < barWidth; ++i) {
        const double f = static_cast<double>(i) / std::max(1, barWidth - 1);
        const double kld = m_floor * std::pow(m_top / m_floor, f);
        painter.setPen(kldColour(kld * 1.000001, m_floor, m_top));
        painter.drawLine(barLeft + i, barTop, barLeft + i, barTop + barHeight);
    }
    painter.setPen(palette().color(QPalette::WindowText));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(barLeft, barTop, barWidth, barHeight);
    const int textY = barTop + barHeight + fm.ascent() + 1;
    const QString lo = QString::number(m_floor, 'g', 2), hi = QString::number(m_top, 'g', 2);
    painter.drawText(QPoint(barLeft, textY), QStringLiteral("≤ ") + lo);
    painter.drawText(QPoint(barLeft + barWidth - fm.horizontalAdvance(hi), textY), hi);
}

void ShadedTextWidget::paintBoxes(QPainter& painter, const std::vector<Box>& boxes) const
{
    const eval::EvalResult* r = m_run.result.get();
    const auto* conf = r && m_configuration >= 0 && m_configuration < static_cast<int>(r->configurations.size())
                           ? &r->configurations[static_cast<std::size_t>(m_configuration)]
                           : nullptr;
    const QFontMetrics fm = painter.fontMetrics();
    int chunk = -1;
    for (const Box& b : boxes) {
        if (b.chunk != chunk && chunk >= 0) {
            painter.setPen(QPen(QColor(150, 150, 150), 1, Qt::DotLine));
            painter.drawLine(0, b.rect.top() - kChunkGap / 2, painter.device()->width(), b.rect.top() - kChunkGap / 2);
        }
        chunk = b.chunk;
        QColor fill(255, 255, 255, 0);
        QColor ink(140, 140, 140);
        if (b.scored >= 0) {
            ink = QColor(0, 0, 0);
            if (conf && static_cast<std::size_t>(b.scored) < conf->tokens.size()) {
                fill = kldColour(conf->tokens[static_cast<std::size_t>(b.scored)].kld, m_floor, m_top);
                if (fill.lightnessF() < 0.45)
                    ink = QColor(255, 255, 255);
            }
        }
        if (fill.alpha() > 0)
            painter.fillRect(b.rect, fill);
        if (b.scored >= 0 && b.scored == m_selected) {
            painter.setPen(QPen(QColor(30, 90, 200), 2));
            painter.setBrush(Qt::NoBrush);
            painter.drawRect(b.rect.adjusted(1, 1, -1, -1));
        }
        painter.setPen(ink);
        painter.drawText(QPoint(b.rect.left() + kPad, b.rect.top() + kPad + fm.ascent()), b.text);
    }
}

void ShadedTextWidget::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    painter.fillRect(rect(), palette().color(QPalette::Base));
    if (!m_run.result || m_run.result->configurations.empty()) {
        painter.setPen(palette().color(QPalette::PlaceholderText));
        painter.drawText(rect().adjusted(8, 8, -8, -8), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
                         QStringLiteral("No model run yet. Choose a model and a text above (the shipped tiny Llama "
                                        "and its held-out text by default) and press Run: each token of the text is "
                                        "shaded here by how much the quantized cache changed its prediction."));
        return;
    }
    paintLegend(painter, QRect(0, 2, width(), legendHeight()));
    paintBoxes(painter, m_boxes);
}

int ShadedTextWidget::paintText(QPainter& painter, int width, int firstChunk, int chunks, bool legend) const
{
    const QFontMetrics fm = painter.fontMetrics();
    const int top = legend ? fm.height() * 2 + 10 : 0;
    const auto boxes = layout(width, fm, top, firstChunk, chunks);
    if (legend)
        paintLegend(painter, QRect(0, 0, width, top));
    paintBoxes(painter, boxes);
    return boxes.empty() ? top : boxes.back().rect.bottom() + 1;
}

int ShadedTextWidget::scoredAt(QPoint p) const
{
    for (const Box& b : m_boxes)
        if (b.scored >= 0 && b.rect.contains(p))
            return b.scored;
    return -1;
}

QRect ShadedTextWidget::scoredRect(int scored) const
{
    for (const Box& b : m_boxes)
        if (b.scored == scored)
            return b.rect;
    return {};
}

QString ShadedTextWidget::hoverText(int scored) const
{
    const eval::EvalResult* r = m_run.result.get();
    if (!r || scored < 0 || scored >= static_cast<int>(r->scored.size()) || m_configuration < 0
        || m_configuration >= static_cast<int>(r->configurations.size()))
        return {};
    const auto s = static_cast<std::size_t>(scored);
    const eval::ConfigurationResult& c = r->configurations[static_cast<std::size_t>(m_configuration)];
    const eval::ScoredToken& st = r->scored[s];
    const QString label = evalConfigurationLabel(*r, m_configuration);
    QString t = QStringLiteral("<b>%1</b> &nbsp;chunk %2, position %3 (predicted from '%4')<br>")
                    .arg(html(tokenOf(m_run, st.next)))
                    .arg(st.chunk + 1)
                    .arg(st.position + 1)
                    .arg(html(tokenOf(m_run, st.token)));
    if (s < c.tokens.size()) {
        const lm::TokenStat& ts = c.tokens[s];
        t += QStringLiteral("NLL: exact %1, %2 %3 &nbsp;·&nbsp; KLD %4 nats<br>")
                 .arg(fixed(ts.nllBase))
                 .arg(html(label))
                 .arg(fixed(ts.nllQ))
                 .arg(QString::number(ts.kld, 'g', 3));
    }
    t += QStringLiteral("<table cellspacing=0 cellpadding=1><tr><th align=left>top 5, exact</th><th>&nbsp;</th>"
                        "<th align=left>top 5, %1</th><th>&nbsp;</th></tr>")
             .arg(html(label));
    for (std::size_t k = 0; k < eval::kTopTokens; ++k) {
        auto cell = [&](const eval::TopTokens* top) {
            if (!top || (*top)[k].token < 0)
                return QStringLiteral("<td></td><td></td>");
            return QStringLiteral("<td>'%1'</td><td align=right>%2</td>")
                .arg(html(tokenOf(m_run, (*top)[k].token)))
                .arg(fixed((*top)[k].probability));
        };
        t += QStringLiteral("<tr>") + cell(s < r->topBase.size() ? &r->topBase[s] : nullptr)
             + cell(s < c.top.size() ? &c.top[s] : nullptr) + QStringLiteral("</tr>");
    }
    t += QStringLiteral("</table>");
    if (s < c.proxies.size()) {
        const eval::TokenProxies& p = c.proxies[s];
        if (std::any_of(p.begin(), p.end(), [](float x) { return x != 0.0f; })) {
            // Paper C's proxies of this token (eval_tokens.csv has them all): the oracle ones, then the deployable.
            QStringList oracle, deployable;
            for (std::size_t k = 0; k < p.size(); ++k)
                if (std::isfinite(p[k]))
                    (eval::kTokenProxyDeployable[k] ? deployable : oracle)
                        << QStringLiteral("%1 %2").arg(QLatin1String(eval::kTokenProxyColumns[k]), QString::number(p[k], 'g', 3));
            t += QStringLiteral("<br>its attention, mean over layers × heads: ") + oracle.join(QStringLiteral(", "))
                 + QStringLiteral("<br>the cache of its context: ") + deployable.join(QStringLiteral(", "));
        }
    }
    return t;
}

void ShadedTextWidget::setSelected(int scored)
{
    m_selected = scored;
    update();
}

void ShadedTextWidget::mousePressEvent(QMouseEvent* event)
{
    const int scored = scoredAt(event->position().toPoint());
    if (scored >= 0) {
        setSelected(scored);
        emit tokenClicked(scored);
    }
}

bool ShadedTextWidget::event(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const int scored = scoredAt(help->pos());
        if (scored >= 0)
            QToolTip::showText(help->globalPos(), hoverText(scored), this, scoredRect(scored));
        else
            QToolTip::showText(help->globalPos(), toolTip(), this);
        return true;
    }
    return QWidget::event(event);
}

// ---------------------------------------------------------------------------------------------
// AttentionStripWidget

AttentionStripWidget::AttentionStripWidget(QWidget* parent) : QWidget(parent)
{
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    setToolTip(QStringLiteral("The clicked token's attention over its context in one head: exact weights grey, "
                              "quantized orange; below, the change (gained green, lost red)."));
}

void AttentionStripWidget::setAttention(std::optional<eval::TokenAttention> attention,
                                        std::shared_ptr<const std::vector<std::string>> vocab)
{
    m_attention = std::move(attention);
    m_vocab = std::move(vocab);
    update();
}

std::vector<int> AttentionStripWidget::labelledKeys() const
{
    std::vector<int> keys;
    if (!m_attention)
        return keys;
    const auto& a = *m_attention;
    std::vector<int> order(a.exact.size());
    for (std::size_t j = 0; j < order.size(); ++j)
        order[j] = static_cast<int>(j);
    auto weight = [&](int j) {
        const auto k = static_cast<std::size_t>(j);
        return std::max(a.exact[k], k < a.quantized.size() ? a.quantized[k] : 0.0);
    };
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return weight(x) > weight(y); });
    for (std::size_t k = 0; k < order.size() && keys.size() < static_cast<std::size_t>(kLabels); ++k)
        keys.push_back(order[k]);
    return keys;
}

void AttentionStripWidget::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    painter.fillRect(rect(), palette().color(QPalette::Base));
    const QFontMetrics fm = fontMetrics();
    if (!m_attention || m_attention->exact.empty()) {
        painter.setPen(palette().color(QPalette::PlaceholderText));
        painter.drawText(rect().adjusted(8, 8, -8, -8), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
                         QStringLiteral("Click a shaded token: its attention in the chosen head (or the head whose "
                                        "attention the cache changed most) is drawn here, exact against quantized."));
        return;
    }
    const eval::TokenAttention& a = *m_attention;
    ModelRun names;
    names.vocab = m_vocab;
    const QString title = QStringLiteral("query '%1' at position %2 · layer %3, head %4 (KV head %5) · KL(exact ‖ quantized) = %6 nats")
                              .arg(tokenOf(names, a.keys.empty() ? -1 : a.keys.back()))
                              .arg(a.position + 1)
                              .arg(a.layer)
                              .arg(a.head)
                              .arg(a.kvHead)
                              .arg(QString::number(a.kl, 'g', 3));
    painter.setPen(palette().color(QPalette::WindowText));
    painter.drawText(QPoint(6, fm.ascent() + 2), fm.elidedText(title, Qt::ElideRight, width() - 12));
    const int n = static_cast<int>(a.exact.size());
    const int left = 6, right = width() - 6;
    const int labelBand = fm.height() + 4;
    const int top = fm.height() + 6 + labelBand;
    const int changeBand = std::max(24, (height() - top) / 4);
    const int bottom = height() - changeBand - 4;
    if (bottom - top < 10 || n == 0)
        return;
    double maxW = 0.0, maxD = 0.0;
    for (int j = 0; j < n; ++j) {
        const double e = a.exact[static_cast<std::size_t>(j)];
        const double q = j < static_cast<int>(a.quantized.size()) ? a.quantized[static_cast<std::size_t>(j)] : 0.0;
        maxW = std::max({maxW, e, q});
        maxD = std::max(maxD, std::abs(q - e));
    }
    if (!(maxW > 0.0))
        maxW = 1.0;
    const double slot = static_cast<double>(right - left) / n;
    auto xAt = [&](int j) { return left + slot * j; };
    const double barW = std::max(1.0, slot * 0.42);
    painter.setPen(Qt::NoPen);
    for (int j = 0; j < n; ++j) {
        const double e = a.exact[static_cast<std::size_t>(j)];
        const double q = j < static_cast<int>(a.quantized.size()) ? a.quantized[static_cast<std::size_t>(j)] : 0.0;
        const double he = (bottom - top) * e / maxW, hq = (bottom - top) * q / maxW;
        painter.setBrush(QColor(120, 120, 120));
        painter.drawRect(QRectF(xAt(j), bottom - he, barW, he));
        painter.setBrush(QColor(230, 120, 20));
        painter.drawRect(QRectF(xAt(j) + barW, bottom - hq, barW, hq));
        if (maxD > 0.0) {
            const double d = q - e;
            const double hd = (changeBand / 2.0 - 2) * std::abs(d) / maxD;
            const double mid = bottom + 2 + changeBand / 2.0;
            painter.setBrush(d >= 0 ? QColor(40, 150, 60) : QColor(200, 40, 40));
            painter.drawRect(QRectF(xAt(j), d >= 0 ? mid - hd : mid, std::max(1.0, slot * 0.84), hd));
        }
    }
    painter.setPen(QColor(160, 160, 160));
    painter.drawLine(left, bottom, right, bottom);
    painter.drawLine(left, bottom + 2 + changeBand / 2, right, bottom + 2 + changeBand / 2);
    // Labels of the largest weights, above their bars (shifted right when they would overlap).
    painter.setPen(palette().color(QPalette::WindowText));
    std::vector<std::pair<int, int>> used; // [x0, x1) of labels drawn
    for (const int j : labelledKeys()) {
        const double w = std::max(a.exact[static_cast<std::size_t>(j)],
                                  j < static_cast<int>(a.quantized.size()) ? a.quantized[static_cast<std::size_t>(j)] : 0.0);
        const QString label = QStringLiteral("'%1'").arg(tokenOf(names, a.keys[static_cast<std::size_t>(j)]));
        const int tw = fm.horizontalAdvance(label);
        int x = std::clamp(static_cast<int>(xAt(j) + barW - tw / 2.0), left, right - tw);
        int y = static_cast<int>(bottom - (bottom - top) * w / maxW) - 3;
        for (const auto& [x0, x1] : used)
            if (x < x1 && x + tw > x0)
                y = std::min(y, top - 2), x = std::min(right - tw, x1 + 2);
        used.emplace_back(x, x + tw);
        painter.drawText(QPoint(x, std::max(y, fm.height() + 4 + fm.ascent())), label);
    }
    painter.setPen(palette().color(QPalette::PlaceholderText));
    painter.drawText(QPoint(left, height() - 3), QStringLiteral("keys 1 … %1 of the chunk; below: quantized − exact (max |Δ| %2)")
                                                     .arg(n)
                                                     .arg(QString::number(maxD, 'g', 2)));
}

// ---------------------------------------------------------------------------------------------
// OutputView

OutputView::OutputView(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->setSpacing(4);
    layout->addLayout(buildForm());
    m_status = new QLabel(this);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_status->setWordWrap(false);
    // One line, clipped, the whole text in its tooltip: a long status never widens the window.
    m_status->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    layout->addWidget(m_status);

    auto* split = new QSplitter(Qt::Vertical, this);
    buildPlots(split);
    buildTextPane(split);
    buildDrillPane(split);
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 3);
    split->setStretchFactor(2, 2);
    split->setSizes({260, 300, 200});
    layout->addWidget(split, 1);
    connectControls();
    updateStatus();
}

QGridLayout* OutputView::buildForm()
{
    auto* form = new QGridLayout();
    form->setHorizontalSpacing(6);
    form->setVerticalSpacing(2);
    auto browse = [this](QLineEdit* edit, bool folder) {
        auto* b = new QPushButton(QStringLiteral("…"), this);
        b->setFixedWidth(28);
        connect(b, &QPushButton::clicked, this, [this, edit, folder] {
            const QString p = folder ? QFileDialog::getExistingDirectory(this, QStringLiteral("Model folder"), edit->text())
                                     : QFileDialog::getOpenFileName(this, QStringLiteral("Text"), edit->text());
            if (!p.isEmpty())
                edit->setText(p);
        });
        return b;
    };
    m_model = new QLineEdit(this);
    m_model->setToolTip(QStringLiteral("A Hugging Face model folder (config.json, safetensors weights, tokenizer)."));
    m_textFile = new QLineEdit(this);
    m_textFile->setToolTip(QStringLiteral("UTF-8 text the model reads; its first chunk calibrates, the rest is scored."));
    m_schemes = new QLineEdit(QStringLiteral("KV, KQV, TQ-KV, KIVI"), this);
    m_schemes->setToolTip(QStringLiteral("Schemes, comma-separated (the names of the Schemes list, or llama.cpp types like q4_0)."));
    m_budgets = new QLineEdit(QStringLiteral("2, 3"), this);
    m_budgets->setToolTip(QStringLiteral("Bit budgets n, comma-separated (schemes of fixed width run once)."));
    m_ctx = new QSpinBox(this);
    m_ctx->setRange(EvalLimits::kMinCtx, EvalLimits::kMaxCtx);
    m_ctx->setValue(256);
    m_ctx->setToolTip(QStringLiteral("Tokens per chunk: one causal pass; its second half is scored (llama.cpp's convention)."));
    m_chunks = new QSpinBox(this);
    m_chunks->setRange(1, 10000);
    m_chunks->setValue(4);
    m_chunks->setToolTip(QStringLiteral("Chunks scored after the calibration chunk."));
    m_runButton = new QPushButton(QStringLiteral("Run"), this);
    m_cancelButton = new QPushButton(QStringLiteral("Cancel"), this);
    m_cancelButton->setEnabled(false);
    form->addWidget(new QLabel(QStringLiteral("Model"), this), 0, 0);
    form->addWidget(m_model, 0, 1);
    form->addWidget(browse(m_model, true), 0, 2);
    form->addWidget(new QLabel(QStringLiteral("Text"), this), 0, 3);
    form->addWidget(m_textFile, 0, 4);
    form->addWidget(browse(m_textFile, false), 0, 5);
    form->addWidget(new QLabel(QStringLiteral("Schemes"), this), 1, 0);
    form->addWidget(m_schemes, 1, 1);
    auto* row = new QHBoxLayout();
    row->addWidget(new QLabel(QStringLiteral("Budgets"), this));
    row->addWidget(m_budgets, 1);
    row->addWidget(new QLabel(QStringLiteral("ctx"), this));
    row->addWidget(m_ctx);
    row->addWidget(new QLabel(QStringLiteral("chunks"), this));
    row->addWidget(m_chunks);
    row->addWidget(m_runButton);
    row->addWidget(m_cancelButton);
    form->addLayout(row, 1, 3, 1, 3);
    form->setColumnStretch(1, 3);
    form->setColumnStretch(4, 3);
    return form;
}

void OutputView::buildPlots(QSplitter* split)
{
    auto* topSplit = new QSplitter(Qt::Horizontal, split);
    m_table = new QTableWidget(topSplit);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->verticalHeader()->setVisible(false);
    auto* plots = new QTabWidget(topSplit);
    m_kld = new EvalKldView(plots);
    m_layers = new EvalLayersView(plots);
    // Smaller than a view tab's plot: the text below needs the height.
    m_kld->plot()->setMinimumSize(200, 140);
    m_layers->plot()->setMinimumSize(200, 140);
    plots->addTab(m_kld, QStringLiteral("KLD distribution"));
    plots->addTab(m_layers, QStringLiteral("Per-layer attribution"));
    topSplit->setStretchFactor(0, 3);
    topSplit->setStretchFactor(1, 2);
}

void OutputView::buildTextPane(QSplitter* split)
{
    auto* textPane = new QWidget(split);
    auto* textLayout = new QVBoxLayout(textPane);
    textLayout->setContentsMargins(0, 0, 0, 0);
    textLayout->setSpacing(2);
    auto* textRow = new QHBoxLayout();
    textRow->addWidget(new QLabel(QStringLiteral("Text shaded by"), textPane));
    m_configurationBox = new QComboBox(textPane);
    m_configurationBox->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_configurationBox->setToolTip(QStringLiteral("The configuration whose per-token KLD shades the text and whose cache the drill-down probes."));
    textRow->addWidget(m_configurationBox);
    m_legend = new QLabel(QStringLiteral("hover a token for its top-5 next tokens under both caches; click it to drill down"), textPane);
    m_legend->setStyleSheet(QStringLiteral("color: gray"));
    m_legend->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    textRow->addWidget(m_legend, 1);
    textLayout->addLayout(textRow);
    m_scroll = new QScrollArea(textPane);
    m_scroll->setWidgetResizable(true);
    m_text = new ShadedTextWidget();
    m_scroll->setWidget(m_text);
    textLayout->addWidget(m_scroll, 1);
}

void OutputView::buildDrillPane(QSplitter* split)
{
    auto* drill = new QWidget(split);
    auto* drillLayout = new QVBoxLayout(drill);
    drillLayout->setContentsMargins(0, 0, 0, 0);
    drillLayout->setSpacing(2);
    auto* drillRow = new QHBoxLayout();
    drillRow->addWidget(new QLabel(QStringLiteral("Drill down: layer"), drill));
    m_layer = new QSpinBox(drill);
    m_layer->setRange(0, 0);
    drillRow->addWidget(m_layer);
    drillRow->addWidget(new QLabel(QStringLiteral("head"), drill));
    m_head = new QSpinBox(drill);
    m_head->setRange(0, 0);
    drillRow->addWidget(m_head);
    m_mostChanged = new QCheckBox(QStringLiteral("the head that changed most"), drill);
    m_mostChanged->setChecked(true);
    m_mostChanged->setToolTip(QStringLiteral("Find the (layer, head) whose attention for this token the cache changed most (KL of the weights)."));
    drillRow->addWidget(m_mostChanged);
    m_drillStatus = new QLabel(drill);
    m_drillStatus->setStyleSheet(QStringLiteral("color: gray"));
    m_drillStatus->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    drillRow->addWidget(m_drillStatus, 1);
    drillLayout->addLayout(drillRow);
    m_strip = new AttentionStripWidget(drill);
    drillLayout->addWidget(m_strip, 1);
}

void OutputView::connectControls()
{
    connect(m_runButton, &QPushButton::clicked, this, &OutputView::startRun);
    connect(m_cancelButton, &QPushButton::clicked, this, &OutputView::cancelRun);
    connect(m_text, &ShadedTextWidget::tokenClicked, this, &OutputView::selectToken);
    connect(m_configurationBox, &QComboBox::currentIndexChanged, this, [this](int index) {
        if (index < 0 || !m_run.result)
            return;
        m_text->setRun(m_run, index);
        if (m_table->currentRow() != index)
            m_table->selectRow(index);
        if (m_text->selected() >= 0)
            probe();
    });
    connect(m_table, &QTableWidget::currentCellChanged, this, [this](int row) {
        if (row >= 0 && row < m_configurationBox->count())
            m_configurationBox->setCurrentIndex(row);
    });
    auto headChanged = [this] {
        if (!m_mostChanged->isChecked() && m_text->selected() >= 0)
            probe();
    };
    connect(m_layer, &QSpinBox::valueChanged, this, headChanged);
    connect(m_head, &QSpinBox::valueChanged, this, headChanged);
    connect(m_mostChanged, &QCheckBox::toggled, this, [this] {
        if (m_text->selected() >= 0)
            probe();
    });
    m_jobs.onProgress(200, [this](Progress& progress) { pollProgress(progress); });
    connect(m_model, &QLineEdit::textChanged, this, &OutputView::sourceChanged);
    connect(m_textFile, &QLineEdit::textChanged, this, &OutputView::sourceChanged);
}

OutputView::~OutputView() = default; // running jobs own copies of their inputs; their flags stop them early

void OutputView::setDefaults(const QString& modelDir, const QString& textFile)
{
    m_model->setText(modelDir);
    m_textFile->setText(textFile);
}

QString OutputView::modelDir() const
{
    return m_model->text().trimmed();
}

QString OutputView::textFile() const
{
    return m_textFile->text().trimmed();
}

void OutputView::setModelDir(const QString& dir)
{
    m_model->setText(dir);
}

void OutputView::setTextFile(const QString& file)
{
    m_textFile->setText(file);
}

void OutputView::setSchemes(const QString& commaSeparated)
{
    m_schemes->setText(commaSeparated);
}

void OutputView::setBudgets(const QString& commaSeparated)
{
    m_budgets->setText(commaSeparated);
}

void OutputView::setChunks(int chunks)
{
    m_chunks->setValue(chunks);
}

void OutputView::setContext(int ctx)
{
    m_ctx->setValue(ctx);
}

QString OutputView::specJson(QString* error) const
{
    nlohmann::json j;
    j["kvlens_eval"] = 1;
    j["name"] = "window";
    j["model"] = m_model->text().trimmed().toStdString();
    j["text"] = m_textFile->text().trimmed().toStdString();
    j["ctx"] = m_ctx->value();
    j["chunks"] = m_chunks->value();
    // One chunk always calibrates, whichever schemes are chosen: every run of this view scores the
    // same tokens, so configurations cached from one run combine with another's.
    j["calibration_tokens"] = m_ctx->value();
    j["attribution"] = "layers";
    nlohmann::json schemes = nlohmann::json::array();
    for (const QString& s : m_schemes->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
        if (!s.trimmed().isEmpty())
            schemes.push_back(s.trimmed().toStdString());
    j["schemes"] = schemes;
    nlohmann::json budgets = nlohmann::json::array();
    for (const QString& s : m_budgets->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        bool ok = false;
        const int b = s.trimmed().toInt(&ok);
        if (!ok) {
            if (error)
                *error = QStringLiteral("budgets: '%1' is not an integer").arg(s.trimmed());
            return {};
        }
        budgets.push_back(b);
    }
    j["budgets"] = budgets;
    return QString::fromStdString(j.dump(2));
}

std::string OutputView::cachePrefix(const EvalSpec& spec) const
{
    return spec.modelDir + '\n' + spec.textFile + '\n' + std::to_string(spec.ctx) + '\n' + std::to_string(spec.chunks) + '\n'
           + std::to_string(spec.calibrationTokens) + '\n' + std::to_string(static_cast<int>(spec.attribution)) + '\n'
           + std::to_string(spec.residual) + '\n' + std::to_string(spec.firstSeed) + '\n'
           + std::to_string(spec.seedCount) + '\n';
}

namespace {

std::string configurationKey(const std::string& prefix, const std::string& name, int budget, int seedIndex)
{
    return prefix + name + '\n' + std::to_string(budget) + '\n' + std::to_string(seedIndex);
}

} // namespace

void OutputView::store(const eval::EvalResult& computed)
{
    const std::string prefix = cachePrefix(computed.spec);
    auto base = std::make_shared<eval::EvalResult>(computed);
    base->configurations.clear();
    base->attribution.clear();
    m_bases[prefix] = base;
    for (std::size_t c = 0; c < computed.configurations.size(); ++c) {
        const eval::ConfigurationResult& conf = computed.configurations[c];
        CachedConfiguration entry;
        entry.scheme = computed.spec.schemes[static_cast<std::size_t>(conf.scheme)];
        entry.result = conf;
        for (const eval::AttributionRow& row : computed.attribution)
            if (row.configuration == static_cast<int>(c))
                entry.rows.push_back(row);
        m_cache[configurationKey(prefix, conf.name, conf.budget, conf.seedIndex)] = std::move(entry);
    }
}

std::shared_ptr<const eval::EvalResult> OutputView::assemble(const EvalSpec& spec, const eval::EvalResult* extra) const
{
    const std::string prefix = cachePrefix(spec);
    // Configurations of `extra` (a run in progress or just finished) first, then the cache.
    std::map<std::string, CachedConfiguration> fresh;
    std::shared_ptr<const eval::EvalResult> base;
    if (extra) {
        auto b = std::make_shared<eval::EvalResult>(*extra);
        b->configurations.clear();
        b->attribution.clear();
        base = b;
        for (std::size_t c = 0; c < extra->configurations.size(); ++c) {
            const eval::ConfigurationResult& conf = extra->configurations[c];
            CachedConfiguration entry;
            entry.scheme = extra->spec.schemes[static_cast<std::size_t>(conf.scheme)];
            entry.result = conf;
            for (const eval::AttributionRow& row : extra->attribution)
                if (row.configuration == static_cast<int>(c))
                    entry.rows.push_back(row);
            fresh[configurationKey(prefix, conf.name, conf.budget, conf.seedIndex)] = std::move(entry);
        }
    } else if (auto it = m_bases.find(prefix); it != m_bases.end()) {
        base = it->second;
    }
    if (!base)
        return nullptr;
    auto out = std::make_shared<eval::EvalResult>(*base);
    out->spec = spec;
    const bool partial = extra && extra->cancelled;
    for (std::size_t s = 0; s < spec.schemes.size(); ++s) {
        const EvalScheme& scheme = spec.schemes[s];
        std::set<int> seen;
        for (int seed = 0; seed < spec.seedCount; ++seed)
            for (const int budget : spec.budgets) {
                const CachedConfiguration* found = nullptr;
                for (const int b : {budget, 0}) {
                    const std::string key = configurationKey(prefix, scheme.scheme.name, b, seed);
                    if (auto f = fresh.find(key); f != fresh.end() && f->second.scheme == scheme)
                        found = &f->second;
                    else if (auto c = m_cache.find(key); !found && c != m_cache.end() && c->second.scheme == scheme
                                                         && (!extra || c->second.result.tokens.size() >= extra->scored.size()))
                        found = &c->second;
                    if (found)
                        break;
                }
                if (!found) {
                    if (extra)
                        continue; // a run in progress: what is there so far
                    return nullptr;
                }
                if (!seen.insert(found->result.budget * 100000 + seed).second)
                    continue; // a fixed-width scheme: once
                eval::ConfigurationResult conf = found->result;
                conf.scheme = static_cast<int>(s);
                // A configuration from the cache holds every chunk; during a run show as many as scored so far.
                if (extra && conf.tokens.size() > extra->scored.size()) {
                    conf.tokens.resize(extra->scored.size());
                    conf.top.resize(extra->scored.size());
                    if (conf.proxies.size() > extra->scored.size())
                        conf.proxies.resize(extra->scored.size());
                    if (conf.tokens.size() >= 2)
                        if (auto summary = lm::summarizeNextTokens(conf.tokens))
                            conf.summary = *summary;
                }
                const int index = static_cast<int>(out->configurations.size());
                out->configurations.push_back(std::move(conf));
                for (eval::AttributionRow row : found->rows) {
                    row.configuration = index;
                    out->attribution.push_back(row);
                }
            }
    }
    out->cancelled = partial;
    return out;
}

void OutputView::startRun()
{
    QString error;
    const QString json = specJson(&error);
    if (json.isEmpty()) {
        m_error = error;
        updateStatus();
        return;
    }
    auto spec = evalSpecFromJson(json.toStdString());
    if (!spec) {
        m_error = QString::fromStdString(spec.error().text());
        updateStatus();
        return;
    }
    m_error.clear();
    m_runningSpec = *spec;
    // What the cache already holds is shown at once; only the rest is computed.
    EvalSpec missing = *spec;
    missing.schemes.clear();
    std::set<int> missingBudgets;
    const std::string prefix = cachePrefix(*spec);
    const bool haveBase = m_bases.count(prefix) > 0;
    for (const EvalScheme& s : spec->schemes) {
        bool any = false;
        for (int seed = 0; seed < spec->seedCount; ++seed)
            for (const int b : spec->budgets) {
                const auto exact = m_cache.find(configurationKey(prefix, s.scheme.name, b, seed));
                const auto fixedWidth = m_cache.find(configurationKey(prefix, s.scheme.name, 0, seed));
                const bool cached = (exact != m_cache.end() && exact->second.scheme == s)
                                    || (fixedWidth != m_cache.end() && fixedWidth->second.scheme == s);
                if (!cached) {
                    any = true;
                    missingBudgets.insert(b);
                }
            }
        if (any)
            missing.schemes.push_back(s);
    }
    missing.budgets.assign(missingBudgets.begin(), missingBudgets.end());
    if (missing.schemes.empty() && haveBase) {
        m_lastComputed = 0;
        m_jobs.supersede(); // whatever still runs is stale now
        display(assemble(*spec, nullptr));
        m_stage = QStringLiteral("every configuration from the cache");
        updateStatus();
        emit runFinished(QString(), false);
        return;
    }
    if (missing.schemes.empty()) { // the base is gone (another text): run the first scheme again for it
        missing.schemes.push_back(spec->schemes.front());
        missing.budgets = {spec->budgets.front()};
    }
    m_running = true;
    m_runButton->setEnabled(false);
    m_cancelButton->setEnabled(true);
    m_stage = QStringLiteral("starting");
    const LoadedModel loaded{m_loadedDir, m_loadedModel, m_loadedVocab};
    m_jobs.start([missing, loaded](const JobContext<Progress>& job) { return runModel(missing, loaded, job); },
                 [this](const Outcome& outcome) { accept(outcome); });
    updateStatus();
}

OutputView::Outcome OutputView::runModel(const EvalSpec& missing, const LoadedModel& loaded, const JobContext<Progress>& job)
{
    const std::string& loadedDir = loaded.dir;
    const std::shared_ptr<const lm::Transformer>& loadedModel = loaded.model;
    const std::shared_ptr<const std::vector<std::string>>& loadedVocab = loaded.vocab;
    Outcome out;
    out.modelDir = missing.modelDir;
    std::shared_ptr<const lm::Transformer> model = loadedModel;
    std::shared_ptr<const std::vector<std::string>> vocab = loadedVocab;
    auto set = [&](const std::string& stage) { job.progress->setStage(stage); };
    if (!model || loadedDir != missing.modelDir) {
        set("loading " + missing.modelDir);
        auto source = lm::openModelSource(missing.modelDir); // a Hugging Face folder or a GGUF file
        if (!source) {
            out.error = QString::fromStdString(source.error().text());
            return out;
        }
        lm::LoadOptions load;
        load.memoryLimitMiB = eval::memoryLimitMiB(missing.memoryLimitMb);
        load.contextTokens = missing.ctx;
        load.forwardsInFlight = 2;
        auto loaded = lm::Transformer::load(*source, load);
        if (!loaded) {
            out.error = QString::fromStdString(loaded.error().text());
            return out;
        }
        model = std::make_shared<const lm::Transformer>(std::move(*loaded));
        vocab.reset();
    }
    set("reading " + missing.textFile);
    auto input = eval::readModelInput(missing.modelDir, missing.textFile, missing.tokensFile, missing.parseSpecialTokens,
                                      model->config().vocab, eval::evalTokensNeeded(missing), [&job] { return job.cancelled(); });
    if (!input) {
        out.error = QString::fromStdString(input.error().text());
        return out;
    }
    if (!vocab) {
        auto v = std::make_shared<std::vector<std::string>>();
        v->reserve(static_cast<std::size_t>(model->config().vocab));
        for (int t = 0; t < model->config().vocab; ++t)
            v->push_back(input->tokenizer->tokenBytes(t));
        vocab = v;
    }
    out.model = model;
    out.vocab = vocab;
    eval::EvalCallbacks callbacks;
    callbacks.cancelled = [&job] { return job.cancelled(); };
    callbacks.progress = [&job](double done, double total, const std::string& stage) { job.progress->set(done, total, stage); };
    callbacks.partial = [&job](const eval::EvalResult& sofar) {
        job.progress->setPartial(std::make_shared<const eval::EvalResult>(sofar));
    };
    const lm::Tokenizer& tokenizer = *input->tokenizer;
    auto r = eval::runEval(missing, *model, input->tokens, tokenizer.bos(), callbacks,
                           [&tokenizer](std::int32_t id) { return tokenizer.tokenBytes(id); });
    retainFreedMemory();
    if (!r) {
        out.error = QString::fromStdString(r.error().text());
        return out;
    }
    r->tokenizer = tokenizer.kind();
    out.cancelled = r->cancelled;
    out.result = std::make_shared<const eval::EvalResult>(std::move(*r));
    return out;
}

void OutputView::cancelRun()
{
    if (!m_running)
        return;
    m_jobs.cancel();
    m_stage = QStringLiteral("cancelling…");
    updateStatus();
}

void OutputView::pollProgress(Progress& progress)
{
    const JobProgress::Snapshot now = progress.snapshot();
    m_stage = QString::fromStdString(now.stage);
    if (now.total > 0.0)
        m_stage = QStringLiteral("%1 % · %2").arg(100.0 * now.done / now.total, 0, 'f', 0).arg(m_stage);
    const std::shared_ptr<const eval::EvalResult> partial = progress.takePartial();
    if (partial && m_running) {
        eval::EvalResult copy = *partial;
        copy.cancelled = true; // shown as partial
        if (auto shown = assemble(m_runningSpec, &copy))
            display(shown);
    }
    updateStatus();
}

void OutputView::accept(const Outcome& outcome)
{
    m_running = false;
    m_runButton->setEnabled(true);
    m_cancelButton->setEnabled(false);
    if (outcome.model) {
        m_loadedDir = outcome.modelDir;
        m_loadedModel = outcome.model;
        m_loadedVocab = outcome.vocab;
    }
    m_error = outcome.error;
    if (outcome.result) {
        m_lastComputed = static_cast<int>(outcome.result->configurations.size());
        if (!outcome.cancelled)
            store(*outcome.result);
        display(outcome.cancelled ? assemble(m_runningSpec, outcome.result.get()) : assemble(m_runningSpec, nullptr));
        m_stage = outcome.cancelled ? QStringLiteral("cancelled: %1 of %2 chunks shown (partial)")
                                          .arg(outcome.result->chunksScored)
                                          .arg(m_runningSpec.chunks)
                                    : QStringLiteral("done in %1 s (%2 configurations computed, the rest from the cache)")
                                          .arg(outcome.result->elapsedMs / 1000.0, 0, 'f', 1)
                                          .arg(m_lastComputed);
    } else {
        m_stage.clear();
    }
    updateStatus();
    emit runFinished(m_error, outcome.cancelled);
}

void OutputView::setModelRun(const ModelRun& run)
{
    if (run.model) {
        m_loadedModel = run.model;
        m_loadedVocab = run.vocab;
        m_loadedDir = run.result ? run.result->spec.modelDir : std::string();
    }
    m_run = run;
    display(run.result);
}

void OutputView::display(std::shared_ptr<const eval::EvalResult> result)
{
    const int previous = m_configurationBox->currentIndex();
    m_run.result = std::move(result);
    if (m_loadedModel)
        m_run.model = m_loadedModel;
    if (m_loadedVocab)
        m_run.vocab = m_loadedVocab;
    const eval::EvalResult* r = m_run.result.get();
    if (r) {
        m_layer->setRange(0, std::max(0, r->layers - 1));
        const int heads = m_run.model ? m_run.model->config().heads : 1;
        m_head->setRange(0, std::max(0, heads - 1));
        m_kld->setEvalResult(m_run.result);
        m_layers->setEvalResult(m_run.result);
    }
    fillConfigurations();
    const int index = std::clamp(previous, 0, std::max(0, m_configurationBox->count() - 1));
    {
        const QSignalBlocker block(m_configurationBox);
        m_configurationBox->setCurrentIndex(index);
    }
    m_text->setRun(m_run, index);
    fillTable();
    updateStatus();
}

void OutputView::fillConfigurations()
{
    const QSignalBlocker block(m_configurationBox);
    m_configurationBox->clear();
    if (!m_run.result)
        return;
    for (int c = 0; c < static_cast<int>(m_run.result->configurations.size()); ++c)
        m_configurationBox->addItem(evalConfigurationLabel(*m_run.result, c));
}

void OutputView::fillTable()
{
    const QStringList headers = {QStringLiteral("Configuration"), QStringLiteral("bits K / V"), QStringLiteral("PPL ratio"),
                                 QStringLiteral("Mean KLD"),      QStringLiteral("KLD p99"),    QStringLiteral("Max KLD"),
                                 QStringLiteral("Same top"),      QStringLiteral("RMS Δp")};
    const QStringList tips = {
        QStringLiteral("The scheme and its budget, the same on every layer."),
        QStringLiteral("Exact bits per coordinate of keys and values, mean over layers and KV heads."),
        QStringLiteral("Mean PPL(Q)/PPL(base) ± its standard error: the perplexity cost of the quantized cache."),
        QStringLiteral("Mean KL(p_exact ‖ p_quantized) of the next-token distributions, nats ± standard error."),
        QStringLiteral("The 99th percentile of the per-token KLD: the rare badly damaged predictions."),
        QStringLiteral("The worst token's KLD."),
        QStringLiteral("Share of tokens whose most likely next token is the same under both caches, ± standard error."),
        QStringLiteral("Root mean square change of the correct token's probability, in percentage points."),
    };
    m_table->clear();
    m_table->setColumnCount(static_cast<int>(headers.size()));
    for (int c = 0; c < headers.size(); ++c) {
        auto* item = new QTableWidgetItem(headers[c]);
        item->setToolTip(tips[c]);
        m_table->setHorizontalHeaderItem(c, item);
    }
    const eval::EvalResult* r = m_run.result.get();
    const int rows = r ? static_cast<int>(r->configurations.size()) : 0;
    m_table->setRowCount(rows);
    for (int i = 0; i < rows; ++i) {
        const eval::ConfigurationResult& c = r->configurations[static_cast<std::size_t>(i)];
        const lm::NextTokenSummary& s = c.summary;
        const QStringList cells = {evalConfigurationLabel(*r, i),
                                   QStringLiteral("%1 / %2").arg(c.bitsK, 0, 'f', 2).arg(c.bitsV, 0, 'f', 2),
                                   meanError(s.pplRatio),
                                   meanError(s.kld, 1.0, 5),
                                   QString::number(s.kldPercentiles.p99, 'g', 3),
                                   QString::number(s.kldPercentiles.maximum, 'g', 3),
                                   QStringLiteral("%1 ± %2 %").arg(100.0 * s.sameTop.mean, 0, 'f', 1).arg(100.0 * s.sameTop.error, 0, 'f', 1),
                                   QStringLiteral("%1 %").arg(100.0 * s.deltaPRms.mean, 0, 'f', 2)};
        for (int k = 0; k < cells.size(); ++k) {
            auto* item = new QTableWidgetItem(cells[k]);
            if (k > 0)
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            m_table->setItem(i, k, item);
        }
    }
    m_table->resizeColumnsToContents();
    if (rows > 0) {
        const QSignalBlocker block(m_table);
        m_table->selectRow(std::clamp(m_configurationBox->currentIndex(), 0, rows - 1));
    }
}

void OutputView::setConfiguration(int configuration)
{
    m_configurationBox->setCurrentIndex(configuration);
}

int OutputView::configuration() const
{
    return m_configurationBox->currentIndex();
}

void OutputView::selectToken(int scored)
{
    m_text->setSelected(scored);
    const QRect box = m_text->scoredRect(scored);
    if (!box.isEmpty())
        m_scroll->ensureVisible(box.center().x(), box.center().y(), 20, box.height() * 3);
    probe();
}

void OutputView::setDrillHead(int layer, int head)
{
    const QSignalBlocker b1(m_layer), b2(m_head), b3(m_mostChanged);
    m_mostChanged->setChecked(layer < 0);
    if (layer >= 0) {
        m_layer->setValue(layer);
        m_head->setValue(head);
    }
    if (m_text->selected() >= 0)
        probe();
}

void OutputView::probe()
{
    const int scored = m_text->selected();
    const int configuration = m_configurationBox->currentIndex();
    if (scored < 0 || configuration < 0 || !m_run.result || !m_run.model) {
        m_drillStatus->setText(m_run.model ? QString() : QStringLiteral("the drill-down needs the model: run it from this tab"));
        return;
    }
    const bool most = m_mostChanged->isChecked();
    const int layer = m_layer->value(), head = m_head->value();
    auto result = m_run.result;
    auto model = m_run.model;
    m_drillStatus->setText(most ? QStringLiteral("finding the head whose attention changed most…") : QStringLiteral("probing…"));
    m_probes.start(
        [most, layer, head, result, model, configuration, scored](const JobContext<>& job) {
            ProbeOutcome out;
            auto cancelled = [&job] { return job.cancelled(); };
            if (most) {
                auto ranked = eval::headChanges(*model, *result, configuration, scored, cancelled);
                if (!ranked)
                    out.error = QString::fromStdString(ranked.error().text());
                else if (!ranked->empty())
                    out.attention = ranked->front();
            } else {
                auto a = eval::probeToken(*model, *result, configuration, scored, layer, head, cancelled);
                if (!a)
                    out.error = QString::fromStdString(a.error().text());
                else
                    out.attention = *a;
            }
            return out;
        },
        [this](const ProbeOutcome& outcome) { acceptProbe(outcome); });
}

void OutputView::acceptProbe(const ProbeOutcome& outcome)
{
    if (!outcome.error.isEmpty()) {
        m_drillStatus->setText(outcome.error);
    } else if (outcome.attention) {
        const QSignalBlocker b1(m_layer), b2(m_head);
        m_layer->setValue(outcome.attention->layer);
        m_head->setValue(outcome.attention->head);
        m_drillStatus->setText(m_mostChanged->isChecked() ? QStringLiteral("the head whose attention changed most for this token")
                                                          : QString());
    }
    m_strip->setAttention(outcome.attention, m_run.vocab);
    emit probed(outcome.error);
}

bool OutputView::waitUntilIdle(int timeoutMs)
{
    QElapsedTimer clock;
    clock.start();
    // A finished run may start a drill-down (and a drill-down ends nothing): wait for each in turn.
    while (m_jobs.running() || m_probes.running()) {
        const int left = timeoutMs - static_cast<int>(clock.elapsed());
        if (left <= 0)
            return false;
        if (m_jobs.running())
            m_jobs.wait(left);
        else
            m_probes.wait(left);
    }
    return true;
}

QString OutputView::statusText() const
{
    return m_status->text();
}

void OutputView::updateStatus()
{
    QString t;
    if (!m_error.isEmpty())
        t = QStringLiteral("<span style='color:#b00'>%1</span>").arg(m_error.toHtmlEscaped());
    else if (m_running)
        t = QStringLiteral("running: %1").arg(m_stage.toHtmlEscaped());
    else if (m_run.result)
        t = QStringLiteral("%1 · %2 chunks of %3 tokens scored · reference PPL %4 · %5")
                .arg(QString::fromStdString(m_run.result->modelSummary).toHtmlEscaped())
                .arg(m_run.result->chunksScored)
                .arg(m_run.result->spec.ctx)
                .arg(std::exp(m_run.result->referenceNllMean), 0, 'f', 3)
                .arg(m_stage.toHtmlEscaped());
    else
        t = QStringLiteral("What a quantized KV cache does to the model's next-token predictions: press Run.");
    m_status->setText(t);
    m_status->setToolTip(t);
}

bool OutputView::exportShadedText(const QString& pdfPath, double widthInches, int firstChunk, int chunks, QString* error) const
{
    if (!m_run.result || m_run.result->configurations.empty()) {
        if (error)
            *error = QStringLiteral("no model run to export");
        return false;
    }
    // Lay the text out at the page width in points (1/72 in), 8 pt text, then size the page to it.
    QFont font = m_text->font();
    font.setPointSizeF(8.0);
    QImage probe(1, 1, QImage::Format_ARGB32);
    probe.setDotsPerMeterX(2835);
    probe.setDotsPerMeterY(2835);
    int height = 0;
    const int widthPx = static_cast<int>(std::lround(widthInches * 72.0));
    {
        QPainter p(&probe);
        p.setFont(font);
        ShadedTextWidget measure;
        measure.setRun(m_run, m_text->configuration());
        height = measure.paintText(p, widthPx, firstChunk, chunks, true) + 4;
    }
    QPdfWriter pdf(pdfPath);
    pdf.setResolution(72);
    pdf.setPageSize(QPageSize(QSizeF(widthInches * 25.4, (height + 2) * 25.4 / 72.0), QPageSize::Millimeter));
    pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
    QPainter painter;
    if (!painter.begin(&pdf)) {
        if (error)
            *error = QStringLiteral("cannot write %1").arg(pdfPath);
        return false;
    }
    painter.setFont(font);
    ShadedTextWidget draw;
    draw.setRun(m_run, m_text->configuration());
    draw.paintText(painter, widthPx, firstChunk, chunks, true);
    painter.end();
    return true;
}

ExportOutcome OutputView::exportRun(const QString& dir, const ExportOptions& options) const
{
    ExportOutcome out;
    if (!m_run.result || m_run.result->configurations.empty()) {
        out.error = QStringLiteral("no model run to export: run one in the Output tab first");
        return out;
    }
    if (m_run.result->cancelled) {
        out.error = QStringLiteral("the model run was cancelled: an export would not hold the run its spec describes; run it to the end first");
        return out;
    }
    const QByteArray spec = QByteArray::fromStdString(evalSpecToJson(m_run.result->spec));
    out = exportEvalFigures(*m_run.result, dir, options, spec);
    if (!out.ok())
        return out;
    const QString path = QDir(dir).filePath(QStringLiteral("eval_text_shaded.pdf"));
    QString error;
    if (!exportShadedText(path, options.widthInches, 0, std::min(2, m_run.result->chunksScored), &error))
        out.error = error;
    else
        out.written << path;
    return out;
}

} // namespace kvlens::widgets

// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/formula_label.h"

#include <QFontMetricsF>
#include <QPainter>

#include <algorithm>

namespace kvlens::widgets {

namespace {

constexpr QChar kCombiningHat(0x0302);
constexpr double kScriptScale = 0.75;

/// The script after `_` or `^` at `i` (which points past the marker): `{...}` or a run of letters and digits.
QString scriptAt(const QString& s, int& i)
{
    if (i < s.size() && s[i] == QLatin1Char('{')) {
        const int end = s.indexOf(QLatin1Char('}'), i + 1);
        const QString out = s.mid(i + 1, (end < 0 ? s.size() : end) - i - 1);
        i = end < 0 ? s.size() : end + 1;
        return out;
    }
    const int start = i;
    while (i < s.size() && s[i].isLetterOrNumber())
        ++i;
    return s.mid(start, i - start);
}

/// Whether `_` or `^` at `i` starts a script. A `_` after a digit does not: it is part of a name
/// (llama.cpp's q8_0, q4_1, iq4_nl), which is set as written, never as "q8₀".
bool scriptMarkerAt(const QString& s, int i)
{
    const QChar c = s[i];
    if ((c != QLatin1Char('_') && c != QLatin1Char('^')) || i + 1 >= s.size())
        return false;
    if (c == QLatin1Char('_') && i > 0 && s[i - 1].isDigit())
        return false;
    return s[i + 1].isLetterOrNumber() || s[i + 1] == QLatin1Char('{');
}

} // namespace

bool isFormula(const QString& label)
{
    for (int i = 0; i + 1 < label.size(); ++i) {
        const QChar c = label[i], next = label[i + 1];
        if (scriptMarkerAt(label, i))
            return true;
        if (next == kCombiningHat && c.isLetter())
            return true;
    }
    return false;
}

QString formulaPlainText(const QString& label)
{
    QString out;
    for (int i = 0; i < label.size();) {
        const QChar c = label[i];
        if (scriptMarkerAt(label, i)) {
            ++i;
            out += scriptAt(label, i);
        } else {
            if (c != kCombiningHat)
                out += c;
            ++i;
        }
    }
    return out;
}

FormulaLayout layoutFormula(const QString& label, const QFont& font, double minimumPointSize, QPaintDevice* device)
{
    FormulaLayout out;
    QFont script = font;
    script.setPointSizeF(std::max(font.pointSizeF() * kScriptScale, minimumPointSize));
    const QFontMetricsF fm = device ? QFontMetricsF(font, device) : QFontMetricsF(font);
    const QFontMetricsF fs = device ? QFontMetricsF(script, device) : QFontMetricsF(script);
    out.ascent = fm.ascent();
    out.descent = fm.descent();
    double x = 0.0;
    double subStart = -1.0, subEnd = -1.0; // the last subscript, for a superscript stacked over it
    QString run;
    auto flush = [&] {
        if (run.isEmpty())
            return;
        const double w = fm.horizontalAdvance(run);
        out.pieces.push_back({run, font, QPointF(x, 0.0), QRectF(x, -fm.ascent(), w, fm.height())});
        x += w;
        run.clear();
        subStart = subEnd = -1.0;
    };
    for (int i = 0; i < label.size();) {
        const QChar c = label[i];
        const bool marker = scriptMarkerAt(label, i);
        if (marker) {
            flush();
            ++i;
            const QString text = scriptAt(label, i);
            const bool sub = c == QLatin1Char('_');
            // Subscripts drop by a fifth of the x-height below the baseline; superscripts sit their
            // baseline at the x-height's top, as TeX's defaults do for text sizes.
            const double shift = sub ? 0.25 * fm.xHeight() + 0.1 * fs.ascent() : -(fm.xHeight() + 0.05 * fm.ascent());
            const double start = !sub && subStart >= 0.0 ? subStart : x;
            const double w = fs.horizontalAdvance(text);
            out.pieces.push_back({text, script, QPointF(start, shift), QRectF(start, shift - fs.ascent(), w, fs.height())});
            out.ascent = std::max(out.ascent, fs.ascent() - shift);
            out.descent = std::max(out.descent, fs.descent() + shift);
            if (sub) {
                subStart = x;
                subEnd = x + w;
                x += w;
            } else {
                x = std::max(subEnd, start + w);
                subStart = subEnd = -1.0;
            }
            continue;
        }
        if (i + 1 < label.size() && label[i + 1] == kCombiningHat && c.isLetter()) {
            flush();
            const QString letter(c);
            const double w = fm.horizontalAdvance(letter);
            const QRectF ink = fm.tightBoundingRect(letter).translated(x, 0.0);
            out.pieces.push_back({letter, font, QPointF(x, 0.0), QRectF(x, -fm.ascent(), w, fm.height())});
            // The hat: a chevron over the letter's ink (its x-height top for p), about half its width.
            const double centre = ink.center().x(), half = std::max(0.3 * w, 0.5 * ink.width() * 0.8);
            const double bottom = ink.top() - 0.12 * fm.xHeight(), top = bottom - 0.32 * fm.xHeight();
            FormulaLayout::Hat hat;
            hat.path.moveTo(centre - half, bottom);
            hat.path.lineTo(centre, top);
            hat.path.lineTo(centre + half, bottom);
            hat.letter = ink;
            hat.penWidth = std::max(0.5, 0.07 * fm.height());
            out.hats.push_back(hat);
            out.ascent = std::max(out.ascent, -top + hat.penWidth);
            x += w;
            i += 2;
            continue;
        }
        run += c;
        ++i;
    }
    flush();
    out.width = x;
    return out;
}

void paintFormula(QPainter& painter, const FormulaLayout& layout, QPointF origin, const QColor& color)
{
    painter.save();
    painter.setPen(QPen(color));
    for (const FormulaLayout::Piece& p : layout.pieces) {
        painter.setFont(p.font);
        painter.drawText(origin + p.origin, p.text);
    }
    for (const FormulaLayout::Hat& h : layout.hats) {
        painter.setPen(QPen(color, h.penWidth, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
        painter.setBrush(Qt::NoBrush);
        painter.drawPath(h.path.translated(origin));
    }
    painter.restore();
}

} // namespace kvlens::widgets
